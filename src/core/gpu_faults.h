#pragma once
// The GPU-level faults a node's agent holds, published on its Node so the repair controller can act
// on the ones that do not flip a condition (critical: drain that GPU, reset, verify). Public
// contract (docs/nvml.md), written by the agent through nodes/status:
//   gpuheal.io/gpu-faults  {"0000:3b:00": {"severity": "critical", "reason": "NvidiaXID45Warning",
//                                          "xid": 45, "since": "2026-11-30T10:00:00Z", "count": 2,
//                                          "pods": [{"namespace": "ml", "name": "train-0",
//                                                    "container": "main"}]}}
// One entry per GPU (its worst active fault); "{}" when none. An entry leaves when the fault is
// cleared (a verified GPU reset, a reboot with the GPU present). "pods": the containers holding
// the GPU through a device plugin, from the kubelet's PodResources API ([] none); absent when the
// agent cannot tell (no PodResources socket, a device ID it cannot map to a GPU).

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/keys.h"
#include "core/result.h"
#include "core/severity.h"

namespace gpuheal {

// A container holding a GPU (the kubelet's PodResources).
struct GpuHolder {
  std::string namespace_, name, container;
  bool operator==(const GpuHolder&) const = default;
  auto operator<=>(const GpuHolder&) const = default;
};

struct GpuFaultEntry {
  Severity severity = Severity::kCritical;
  std::string reason;
  int xid = 0;                                  // 0: not an Xid
  std::chrono::system_clock::time_point since;  // first seen; whole seconds
  int64_t count = 1;
  std::optional<std::vector<GpuHolder>> pods;  // nullopt: not known
  bool operator==(const GpuFaultEntry&) const = default;
};
using GpuFaults = std::map<std::string, GpuFaultEntry>;  // by normalised PCI bus id "dddd:bb:dd"

std::string GpuFaultsToJson(const GpuFaults& faults);
// Errors say what is wrong and name the annotation.
Result<GpuFaults> ParseGpuFaults(std::string_view json);

}  // namespace gpuheal
