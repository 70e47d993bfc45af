// Fuzzes what the controller reads from every Node that the agent wrote: the gpuheal.io/gpu-faults
// annotation (any bytes give a fault map or an error naming the annotation, and a parsed map
// survives a round trip through the agent's encoder unchanged) and the "[severity/action] "
// decision that leads a condition's message (a parsed decision round-trips too).

#include <cstdint>
#include <string_view>

#include "core/condition_decision.h"
#include "core/gpu_faults.h"
#include "core/pci.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto d = gpuheal::ParseDecisionPrefix(text)) {
    if (gpuheal::ParseDecisionPrefix(gpuheal::DecisionPrefix(*d) + "x") != d) __builtin_trap();
  }
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
