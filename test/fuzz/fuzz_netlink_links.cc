// Fuzzes the rtnetlink link message parser (the network monitor's datagrams): any bytes are
// parsed or rejected without reading outside the datagram; every link reported has a name.

#include <cstdint>
#include <string_view>

#include "sources/netlink_links.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view d(reinterpret_cast<const char*>(data), size);
  gpuheal::ParseLinkMessages(d, [size](const gpuheal::LinkState& s) {
    if (s.name.empty() || s.name.size() > size) __builtin_trap();
  });
  return 0;
}
