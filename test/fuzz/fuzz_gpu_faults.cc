// Fuzzes the parser of the agent's gpuheal.io/gpu-faults annotation, which the controller reads
// from every Node: any bytes give a fault map or an error naming the annotation, and a parsed map
// survives a round trip through the agent's encoder unchanged.

#include <cstdint>
#include <string_view>

#include "core/gpu_faults.h"
#include "core/pci.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = gpuheal::ParseGpuFaults(text);
  if (!r.ok()) {
    if (r.error().message.find("gpuheal.io/gpu-faults") == std::string::npos) __builtin_trap();
    return 0;
  }
  if (r->size() > 64) __builtin_trap();
  for (const auto& [pci, f] : *r) {
    if (gpuheal::NormalisePci(pci) != pci || f.count < 1 || f.reason.empty()) __builtin_trap();
  }
  auto again = gpuheal::ParseGpuFaults(gpuheal::GpuFaultsToJson(*r));
  if (!again.ok() || *again != *r) __builtin_trap();
  return 0;
}
