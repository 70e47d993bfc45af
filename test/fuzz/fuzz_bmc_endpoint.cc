// Fuzzes where BMC credentials may go: an entry of the endpoints ConfigMap
// (controller/bmc_target.h), its endpoint checked against an allow-list (bmc/endpoint_policy.h),
// and each line parsed as an allow-list rule. The ConfigMap is the administrator's, yet a
// mistyped entry must give an error, never a crash, and a checked endpoint never lies outside
// the list. No DNS: names resolve to fixed addresses.

#include <cstdint>
#include <string>
#include <string_view>

#include "bmc/endpoint_policy.h"
#include "controller/bmc_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuheal;
  const std::string text(reinterpret_cast<const char*>(data), size);
  static const auto rules =
      *bmc::ParseEndpointRules({"10.20.0.0/16", "fd00::/8", "bmc.example.com"});
  const bmc::Resolver dns = [](const std::string&) -> Result<std::vector<std::string>> {
    return std::vector<std::string>{"203.0.113.1", "10.20.0.7"};
  };
  if (auto entry = controller::ParseBmcEntry(text, "ops", "fuzz"); entry.ok()) {
    if (entry->endpoint.empty()) __builtin_trap();
    if (!entry->credentials_secret.empty() &&
        entry->credentials_secret.find('/') == std::string::npos)
      __builtin_trap();
    if (auto e = bmc::ParseEndpoint(entry->endpoint); e.ok()) {
      auto hp = bmc::SplitHostPort(*e);
      auto c = bmc::CheckEndpoint(*e, rules, false, dns);
      if (c.ok()) {
        if (c->http) __builtin_trap();  // http was not allowed
        if (hp.ok() && hp->literal && !bmc::AddressAllowed(hp->host, rules)) __builtin_trap();
        for (const auto& pin : c->resolve) {
          if (pin.find(":10.20.0.7") == std::string::npos ||
              pin.find("203.0.113.1") != std::string::npos)
            __builtin_trap();
        }
      }
    }
  }
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    (void)bmc::ParseEndpointRules({text.substr(start, end - start)});
    start = end + 1;
  }
  return 0;
}
