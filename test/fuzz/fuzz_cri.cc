// Fuzzes the CRI answer decoders (the runtime monitor's gRPC frame and protobuf messages, read
// from the container runtime's socket): any bytes give conditions, a version or an error, never a
// read past the input; decoded strings stay within their bounds.

#include <cstdint>
#include <string_view>

#include "sources/cri_client.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  for (std::string_view m :
       {body, gpuheal::UnframeGrpc(body).ok() ? *gpuheal::UnframeGrpc(body) : std::string_view()}) {
    if (auto s = gpuheal::ParseCriStatus(m)) {
      if (s->size() > 64) __builtin_trap();
      for (const auto& c : *s) {
        if (c.type.size() > 256 || c.reason.size() > 256 || c.message.size() > 1024)
          __builtin_trap();
      }
    } else if (s.error().message.find("CRI: malformed") != 0) {
      __builtin_trap();
    }
    if (auto v = gpuheal::ParseCriVersion(m)) {
      if (v->runtime_name.size() > 128 || v->runtime_version.size() > 128) __builtin_trap();
    }
  }
  return 0;
}
