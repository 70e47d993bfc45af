#pragma once
// Precursor signals per GPU (core/gpu_at_risk.h): the agent counts each GPU's precursor incidents
// within a window, and a GPU whose count of a signal reaches that signal's threshold is at risk
// until a verified GPU reset, a reboot (the tracker is not persisted: a new boot starts clean, and
// a restarted agent re-reads the kernel ring buffer), or its counts falling below the thresholds.
// Owned by the agent's event loop; no clock of its own (the caller passes the time).

#include <chrono>
#include <deque>
#include <map>
#include <string>

#include "core/fault.h"
#include "core/gpu_at_risk.h"

namespace gpuheal {

struct PrecursorConfig {
  bool enabled = true;
  std::chrono::seconds window = std::chrono::hours(24);
  // Incidents of a signal within the window that make a GPU at risk (docs/config.md argues each
  // default from NVIDIA's documentation). A signal missing here is not counted.
  std::map<std::string, int> thresholds = {{"row_remap", 1},
                                           {"contained_ecc", 1},
                                           {"sbe_rate", 2},
                                           {"nvlink_errors", 3},
                                           {"pcie_degraded", 1}};
};

class PrecursorTracker {
 public:
  using SysTime = std::chrono::system_clock::time_point;
  explicit PrecursorTracker(PrecursorConfig config) : config_(std::move(config)) {}

  // A fault the agent reported with an action of its own (not a repeat or a consequence). True
  // when the GPUs at risk changed (a GPU became at risk, or its counts grew).
  bool Observe(const Fault& f, SysTime now);
  // Drops incidents older than the window. True when the GPUs at risk changed.
  bool Expire(SysTime now);
  // After a verified reset of `pci`: its pending remaps applied, its counts start again.
  bool ClearGpu(const std::string& pci);

  const AtRiskGpus& at_risk() const { return at_risk_; }

 private:
  // Recomputes at_risk_[pci] from its incidents; true when it changed.
  bool Update(const std::string& pci, SysTime now);

  PrecursorConfig config_;
  std::map<std::string, std::map<std::string, std::deque<SysTime>>> seen_;  // pci -> signal
  AtRiskGpus at_risk_;
};

}  // namespace gpuheal
