// Fuzzes the gpuheal.io/gpu-at-risk annotation the controller reads from every Node the agent
// wrote: any bytes give a map of GPUs at risk or an error naming the annotation, and a parsed map
// survives a round trip through the agent's encoder unchanged.

#include <cstdint>
#include <string_view>

#include "core/gpu_at_risk.h"
#include "core/pci.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = gpuheal::ParseAtRisk(text);
  if (!r.ok()) {
    if (r.error().message.find("gpuheal.io/gpu-at-risk") == std::string::npos) __builtin_trap();
    return 0;
  }
  if (r->size() > 64) __builtin_trap();
  for (const auto& [pci, g] : *r) {
    if (gpuheal::NormalisePci(pci) != pci) __builtin_trap();
    for (const auto& [s, n] : g.signals) {
      if (s.empty() || n < 1) __builtin_trap();
    }
  }
  auto again = gpuheal::ParseAtRisk(gpuheal::AtRiskToJson(*r));
  if (!again.ok() || *again != *r) __builtin_trap();
  return 0;
}
