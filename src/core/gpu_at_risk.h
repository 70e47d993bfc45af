#pragma once
// GPUs at risk: the precursor signals that come before many fatal GPU faults (a pending row remap,
// contained ECC errors, high single-bit error rates, NVLink error rates), counted by the node's
// agent per GPU. Published on the Node for the controller's predictive drain. Public contract
// (docs/nvml.md), written by the agent through nodes/status:
//   gpuheal.io/gpu-at-risk  {"0000:3b:00": {"since": "2026-11-30T10:00:00Z",
//                                           "signals": {"row_remap": 1, "sbe_rate": 2}}}
// One entry per GPU at risk; "{}" when none. An entry leaves after a verified GPU reset, a reboot,
// or once its signals fall below their thresholds (each counts within the agent's window).

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/fault.h"
#include "core/keys.h"
#include "core/result.h"

namespace gpuheal {

// The precursor signals and why each is one (NVIDIA's GPU memory error management and Xid
// catalog; docs/config.md, "predictive").
inline constexpr std::string_view kSignalRowRemap = "row_remap";          // Xid 63
inline constexpr std::string_view kSignalContainedEcc = "contained_ecc";  // Xid 94
inline constexpr std::string_view kSignalSbeRate = "sbe_rate";  // Xid 92, corrected-ECC storms
inline constexpr std::string_view kSignalNvlinkErrors = "nvlink_errors";  // NVLink error rates
inline constexpr std::string_view kSignalPcieDegraded = "pcie_degraded";  // link speed/width down
const std::vector<std::string_view>& PrecursorSignals();
// The precursor signal a fault is, "" when it is none. Only faults naming a GPU are.
std::string_view PrecursorSignalOf(const Fault& f);

struct AtRiskGpu {
  std::chrono::system_clock::time_point since;  // when it became at risk; whole seconds
  std::map<std::string, int64_t> signals;       // signal -> incidents within the window
  bool operator==(const AtRiskGpu&) const = default;
};
using AtRiskGpus = std::map<std::string, AtRiskGpu>;  // by normalised PCI bus id "dddd:bb:dd"

std::string AtRiskToJson(const AtRiskGpus& gpus);
// Errors say what is wrong and name the annotation.
Result<AtRiskGpus> ParseAtRisk(std::string_view json);

}  // namespace gpuheal
