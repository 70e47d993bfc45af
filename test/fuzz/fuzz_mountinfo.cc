// Fuzzes the mount table parser (/proc/self/mountinfo, read by the storage monitor): any bytes
// give entries or an error naming the line; MountOf never returns a mount that does not cover
// the path.

#include <cstdint>
#include <string_view>

#include "sources/mountinfo.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = gpuheal::ParseMountInfo(text);
  if (!r.ok()) {
    if (r.error().message.find("mountinfo line ") != 0) __builtin_trap();
    return 0;
  }
  for (const auto& m : *r) {
    const std::string path = m.mount_point + "/x";
    auto c = gpuheal::MountOf(*r, path);
    if (!c) {
      if (!m.mount_point.empty()) __builtin_trap();
      continue;
    }
    if (c->mount_point.size() < m.mount_point.size() && c->mount_point != "/") __builtin_trap();
  }
  return 0;
}
