// Fuzzes the GPU recovery request parser (the gpuheal.io/gpu-recovery-request annotation, written
// by the controller or by hand) and the controller's reader of the agent's answer
// (gpuheal.io/gpu-recovery-status): any bytes give a value or an error naming the annotation.

#include <cstdint>
#include <string_view>

#include "core/pci.h"
#include "core/recovery_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = gpuheal::ParseRecoveryRequest(text);
  if (r.ok()) {
    if (r->id.empty() || r->gpus.empty() || r->gpus.size() > 64) __builtin_trap();
    for (const auto& g : r->gpus) {
      if (gpuheal::NormalisePci(g) != g) __builtin_trap();  // normal form: stable
    }
  } else if (r.error().message.find("gpuheal.io/gpu-recovery-request") == std::string::npos) {
    __builtin_trap();
  }
  auto st = gpuheal::ParseRecoveryStatus(text);
  if (st.ok()) {
    if (st->state != "running" && st->state != "succeeded" && st->state != "failed" &&
        st->state != "rejected")
      __builtin_trap();
    if (st->id.size() > 253 || st->detail.size() > 1024) __builtin_trap();
  } else if (st.error().message.find("gpuheal.io/gpu-recovery-status") == std::string::npos) {
    __builtin_trap();
  }
  return 0;
}
