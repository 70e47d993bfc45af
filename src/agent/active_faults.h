#pragma once
// The faults that hold a NodeCondition False: every fatal-or-worse fault the agent has acted on
// and not yet seen cleared (and the critical faults of single GPUs, which flip no condition but
// wait for a GPU reset: published per GPU in gpuheal.io/gpu-faults), keyed like escalation (Xid and
// GPU, or reason and device). From them come the five domain conditions the agent owns. Persisted
// before they are reported, so a restarted agent re-asserts them; cleared by the recovery rules of
// docs/recovery.md.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/config.h"
#include "core/fault.h"
#include "core/gpu_faults.h"
#include "core/result.h"

namespace gpuheal {

struct ActiveFault {
  std::string key;
  Fault fault;  // the worst occurrence seen (its severity, reason and message)
  int64_t count = 0;
  int64_t first_seen_unix = 0;
  int64_t last_seen_unix = 0;
  std::string boot_id;               // the boot it was last seen in
  std::vector<std::string> sources;  // channels that reported it: kmsg, nvml, sysfs
};

// The order faults are named in: worst first; among equals, the earliest (then by key).
bool WorstFirst(const ActiveFault* a, const ActiveFault* b);

// How an active fault clears (docs/recovery.md).
enum class RecoveryRule {
  kRebootWithGpuPresent,  // a new boot id and the GPU back on the PCI bus, or a successful GPU
                          // reset
  kReboot,                // a new boot id
  kQuietPeriod,           // transient: no repeat for the quiet period (or a reboot)
  kWhileObserved,         // a state a domain monitor watches: clears when the monitor sees it
                          // healthy again (or a reboot)
};
RecoveryRule RecoveryRuleOf(const Fault& f);
std::string_view ToString(RecoveryRule r);

struct DesiredCondition {
  std::string type, status, reason, message;
  bool operator==(const DesiredCondition&) const = default;
};

class ActiveFaults {
 public:
  // Records a fatal-or-worse fault, or a critical fault of one GPU. False when it is neither.
  bool Observe(const Fault& f, int64_t now_unix, const std::string& boot_id);

  // Recovery. Each returns the faults it cleared.
  std::vector<ActiveFault> ClearAfterReboot(
      const std::string& boot_id, const std::function<bool(const std::string& pci)>& gpu_present);
  std::vector<ActiveFault> ClearQuiet(int64_t now_unix, std::chrono::seconds quiet_period);
  std::vector<ActiveFault> ClearGpu(const std::string& pci);  // after a successful GPU reset
  // A domain monitor's full report of what it observes now: clears its while-observed faults
  // (those first reported by `source`) whose keys are not in `current`.
  std::vector<ActiveFault> ClearObserved(const std::string& source,
                                         const std::vector<std::string>& current);

  // A second channel reported the fault `key`. True when that is news.
  bool AddSource(const std::string& key, const std::string& source);
  // What is known of a GPU's state beyond its faults (NVML's drain state): shown in condition
  // messages next to the GPU; "" removes it. True when the note changed. Not persisted (re-read).
  bool SetGpuNote(const std::string& pci, const std::string& note);

  // One condition per enabled domain: True with the healthy reason, or False with the worst
  // fault's reason and a message naming every active fault of the domain.
  std::vector<DesiredCondition> Conditions(const MonitorSwitches& enabled) const;

  // Each GPU's worst active fault (critical and worse), for gpuheal.io/gpu-faults.
  GpuFaults GpuLevel() const;
  size_t ConditionFaults() const;  // those holding a condition False

  const std::map<std::string, ActiveFault>& all() const { return faults_; }
  bool empty() const { return faults_.empty(); }

  nlohmann::json ToJson() const;
  static Result<ActiveFaults> FromJson(const nlohmann::json& j);
  // Written to a temporary file and renamed over `path`: the old or the new set, never a torn
  // one, and it survives the agent's own crash at once. Sync() then makes it survive a power
  // loss too (fsync of the file and its directory). The agent saves a group of batches at once,
  // on a thread of its own: Serialize() on its loop, Write() and Sync() on the saver.
  Status Save(const std::string& path) const { return Write(path, Serialize()); }
  std::string Serialize() const;
  static Status Write(const std::string& path, const std::string& text);
  static Status Sync(const std::string& path);
  // A missing file is an empty set; a corrupt one is an error (the caller warns and starts empty).
  static Result<ActiveFaults> Load(const std::string& path);

 private:
  std::map<std::string, ActiveFault> faults_;
  std::map<std::string, std::string> gpu_notes_;
};

// True when a PCI function of `pci` ("dddd:bb:dd") exists under `sysfs_pci_devices`.
bool GpuPresent(const std::string& pci,
                const std::string& sysfs_pci_devices = "/sys/bus/pci/devices");

}  // namespace gpuheal
