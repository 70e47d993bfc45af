#include "bmc/endpoint_policy.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace gpuheal::bmc {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// A numeric address into family + 16 bytes; false when `s` is not one.
bool ParseAddress(std::string_view s, int* family, std::array<uint8_t, 16>* out) {
  const std::string text(s);
  out->fill(0);
  if (inet_pton(AF_INET, text.c_str(), out->data()) == 1) {
    *family = AF_INET;
    return true;
  }
  if (inet_pton(AF_INET6, text.c_str(), out->data()) == 1) {
    *family = AF_INET6;
    return true;
  }
  return false;
}

bool InCidr(int family, const std::array<uint8_t, 16>& a, const EndpointRule& r) {
  if (r.kind != EndpointRule::Kind::kCidr || r.family != family) return false;
  int bits = r.prefix;
  for (size_t i = 0; bits > 0; ++i, bits -= 8) {
    const uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
    if ((a[i] & mask) != (r.addr[i] & mask)) return false;
  }
  return true;
}

bool ValidHostName(std::string_view s) {
  if (s.empty() || s.size() > 253 || s.front() == '.' || s.back() == '.' ||
      s.find("..") != std::string_view::npos)
    return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '.' || c == '_';
  });
}

std::string RulesText(const std::vector<EndpointRule>& rules) {
  std::string out;
  for (const auto& r : rules) out += (out.empty() ? "" : ", ") + r.text;
  return out;
}

}  // namespace

Result<std::vector<EndpointRule>> ParseEndpointRules(const std::vector<std::string>& rules) {
  std::vector<EndpointRule> out;
  for (const auto& text : rules) {
    EndpointRule r;
    r.text = text;
    const std::string_view t = text;
    const auto slash = t.find('/');
    const std::string_view addr = t.substr(0, slash);
    if (ParseAddress(addr, &r.family, &r.addr)) {
      r.kind = EndpointRule::Kind::kCidr;
      const int max = r.family == AF_INET ? 32 : 128;
      r.prefix = max;
      if (slash != std::string_view::npos) {
        const std::string_view bits = t.substr(slash + 1);
        int n = -1;
        auto [p, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), n);
        if (ec != std::errc() || p != bits.data() + bits.size() || n < 0 || n > max) {
          return Error{
              fmt::format("allowed endpoint \"{}\": the prefix length must be 0 to {}", text, max),
              ErrorCode::kUsage};
        }
        r.prefix = n;
      }
      out.push_back(std::move(r));
      continue;
    }
    std::string suffix = Lower(t);
    if (!suffix.empty() && suffix.front() == '.') suffix.erase(0, 1);
    if (slash != std::string_view::npos || !ValidHostName(suffix) ||
        std::all_of(suffix.begin(), suffix.end(),
                    [](unsigned char c) { return std::isdigit(c) || c == '.'; })) {
      return Error{fmt::format("allowed endpoint \"{}\" is neither a CIDR (10.20.0.0/16, "
                               "fd00::/8, an address) nor a host-name suffix (bmc.example.com: "
                               "that host and every name under it; no wildcards)",
                               text),
                   ErrorCode::kUsage};
    }
    r.kind = EndpointRule::Kind::kHostSuffix;
    r.suffix = std::move(suffix);
    out.push_back(std::move(r));
  }
  return out;
}

bool AddressAllowed(std::string_view address, const std::vector<EndpointRule>& rules) {
  int family = 0;
  std::array<uint8_t, 16> a{};
  if (!ParseAddress(address, &family, &a)) return false;
  return std::any_of(rules.begin(), rules.end(),
                     [&](const EndpointRule& r) { return InCidr(family, a, r); });
}

Result<HostPort> SplitHostPort(const Endpoint& e) {
  HostPort hp;
  const auto scheme_end = e.base.find("://");
  if (scheme_end == std::string::npos) return Error{"BMC endpoint " + e.base + " has no scheme"};
  hp.port = e.base.compare(0, scheme_end, "https") == 0 ? 443 : 80;
  std::string_view rest = std::string_view(e.base).substr(scheme_end + 3);
  std::string_view port;
  if (rest.starts_with("[")) {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return Error{"BMC endpoint " + e.base + ": bad host"};
    hp.host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    if (rest.starts_with(":"))
      port = rest.substr(1);
    else if (!rest.empty())
      return Error{"BMC endpoint " + e.base + ": bad host"};
  } else {
    const auto colon = rest.rfind(':');
    hp.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) port = rest.substr(colon + 1);
  }
  if (!port.empty()) {
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), hp.port);
    if (ec != std::errc() || p != port.data() + port.size() || hp.port <= 0 || hp.port > 65535)
      return Error{"BMC endpoint " + e.base + ": bad port"};
  }
  if (hp.host.empty()) return Error{"BMC endpoint " + e.base + ": no host"};
  int family = 0;
  std::array<uint8_t, 16> a{};
  hp.literal = ParseAddress(hp.host, &family, &a);
  if (!hp.literal) {
    hp.host = Lower(hp.host);
    if (hp.host.back() == '.') hp.host.pop_back();
  }
  return hp;
}

Result<std::vector<std::string>> SystemResolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0) {
    return Error{fmt::format("cannot resolve {}: {}", host, gai_strerror(rc))};
  }
  std::vector<std::string> out;
  for (addrinfo* p = res; p; p = p->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {};
    const void* src =
        p->ai_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(p->ai_addr)->sin_addr)
            : static_cast<const void*>(
                  &reinterpret_cast<const sockaddr_in6*>(p->ai_addr)->sin6_addr);
    if ((p->ai_family == AF_INET || p->ai_family == AF_INET6) &&
        inet_ntop(p->ai_family, src, buf, sizeof buf)) {
      if (std::find(out.begin(), out.end(), buf) == out.end()) out.emplace_back(buf);
    }
  }
  freeaddrinfo(res);
  return out;
}

Result<EndpointCheck> CheckEndpoint(const Endpoint& e, const std::vector<EndpointRule>& rules,
                                    bool allow_http, const Resolver& resolve) {
  EndpointCheck out;
  out.http = e.base.starts_with("http://");
  if (out.http && !allow_http) {
    return Error{fmt::format(
        "BMC endpoint {} is plain http: the BMC's user and password would cross the network "
        "unencrypted; use https, or set provider.redfish.allow_insecure_http: true",
        e.base)};
  }
  if (rules.empty()) return out;
  GPUHEAL_TRY(hp, SplitHostPort(e));
  const std::string outside =
      fmt::format("outside provider.redfish.allowed_endpoints ({})", RulesText(rules));
  if (hp.literal) {
    if (AddressAllowed(hp.host, rules)) return out;
    return Error{fmt::format("BMC endpoint {}: {} is {}", e.base, hp.host, outside)};
  }
  for (const auto& r : rules) {
    if (r.kind == EndpointRule::Kind::kHostSuffix &&
        (hp.host == r.suffix || hp.host.ends_with("." + r.suffix)))
      return out;
  }
  const bool cidrs = std::any_of(rules.begin(), rules.end(), [](const EndpointRule& r) {
    return r.kind == EndpointRule::Kind::kCidr;
  });
  if (!cidrs) return Error{fmt::format("BMC endpoint {}: host {} is {}", e.base, hp.host, outside)};
  auto addrs = resolve(hp.host);
  if (!addrs) return Error{fmt::format("BMC endpoint {}: {}", e.base, addrs.error().message)};
  std::string pinned, all;
  for (const auto& a : *addrs) {
    all += (all.empty() ? "" : ", ") + a;
    if (!AddressAllowed(a, rules)) continue;
    const bool v6 = a.find(':') != std::string::npos;
    pinned += (pinned.empty() ? "" : ",") + (v6 ? "[" + a + "]" : a);
  }
  if (pinned.empty()) {
    return Error{fmt::format("BMC endpoint {}: host {} resolves to {}, {}", e.base, hp.host,
                             all.empty() ? "no address" : all, outside)};
  }
  out.resolve.push_back(fmt::format("{}:{}:{}", hp.host, hp.port, pinned));
  return out;
}

}  // namespace gpuheal::bmc
