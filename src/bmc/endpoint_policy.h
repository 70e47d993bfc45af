#pragma once
// Where BMC credentials may be sent. A BMC's user and password can power-cycle the machines it
// manages, so the endpoint a request goes to is checked before any connection is made:
// - plain http only when the policy allows it (the password would cross the network in clear);
// - with an allow-list (CIDRs and host-name suffixes), only to an address inside it. A host name
//   that no suffix rule names is resolved once here, and the connection is pinned to the resolved
//   addresses inside the CIDRs (libcurl's CURLOPT_RESOLVE), so a DNS answer that changes between
//   the check and the request cannot move it elsewhere.

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "bmc/redfish.h"
#include "core/result.h"

namespace gpuheal::bmc {

// One rule of provider.redfish.allowed_endpoints: a CIDR (10.20.0.0/16, fd00::/8, a bare address
// is /32 or /128) or a host-name suffix (bmc.example.com: that host and every name under it).
struct EndpointRule {
  enum class Kind { kCidr, kHostSuffix } kind = Kind::kCidr;
  int family = 0;                  // AF_INET or AF_INET6 (kCidr)
  std::array<uint8_t, 16> addr{};  // network address (kCidr)
  int prefix = 0;                  // prefix length (kCidr)
  std::string suffix;              // lower case, no leading dot (kHostSuffix)
  std::string text;                // as configured, for messages
};

// Parses the rules; the error names the rule and says what is accepted (ErrorCode::kUsage).
Result<std::vector<EndpointRule>> ParseEndpointRules(const std::vector<std::string>& rules);

// Whether an address (numeric text, IPv4 or IPv6) lies in one of the CIDR rules.
bool AddressAllowed(std::string_view address, const std::vector<EndpointRule>& rules);

// host (without brackets or port) and port of an endpoint's scheme://host[:port].
struct HostPort {
  std::string host;
  int port = 0;
  bool literal = false;  // an IP address rather than a name
};
Result<HostPort> SplitHostPort(const Endpoint& e);

// Resolves a host name to numeric addresses (getaddrinfo; tests pass their own).
using Resolver = std::function<Result<std::vector<std::string>>(const std::string& host)>;
Result<std::vector<std::string>> SystemResolve(const std::string& host);

struct EndpointCheck {
  bool http = false;                 // plain http, allowed by the policy: the caller logs it
  std::vector<std::string> resolve;  // CURLOPT_RESOLVE entries ("host:port:addr,..."), or none
};

// Checks `e` against the rules (empty: no allow-list) and the http setting. The error says why
// the endpoint is refused and which policy key would change that; nothing has been sent.
Result<EndpointCheck> CheckEndpoint(const Endpoint& e, const std::vector<EndpointRule>& rules,
                                    bool allow_http, const Resolver& resolve = SystemResolve);

}  // namespace gpuheal::bmc
