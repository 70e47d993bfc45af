#include "core/listen_address.h"

#include <fmt/format.h>

#include <charconv>

namespace gpuheal {

Result<ListenAddress> ParseListenAddress(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Error{fmt::format(
        "listen address \"{}\" must be host:port (e.g. 127.0.0.1:9464, [::1]:9464, or \"\" "
        "to serve nothing)",
        listen)};
  }
  ListenAddress a;
  a.host = listen.substr(0, colon);
  if (a.host.size() > 2 && a.host.front() == '[' && a.host.back() == ']')
    a.host = a.host.substr(1, a.host.size() - 2);
  const std::string p = listen.substr(colon + 1);
  auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), a.port);
  if (p.empty() || ec != std::errc() || ptr != p.data() + p.size() || a.port < 0 ||
      a.port > 65535) {
    return Error{
        fmt::format("listen address \"{}\": port must be 0-65535 (0 picks a free one)", listen)};
  }
  return a;
}

}  // namespace gpuheal
