#pragma once
// The fault model's vocabularies: severity, default action, NodeCondition domain, NVIDIA bucket.
// Their string forms are public contracts (JSON output, config, conditions): golden-tested.

#include <optional>
#include <string_view>

namespace gpuheal {

enum class Severity { kInfo = 0, kWarn = 1, kCritical = 2, kFatal = 3, kCatastrophic = 4 };

// What the product does by default for a fault of a given severity.
enum class Action {
  kLog,         // metric + log line only
  kEvent,       // Kubernetes Event; counted for escalation
  kResetGpu,    // GPU-level: drain that GPU, let work finish within a bound, reset, verify
  kQuarantine,  // node: NoSchedule taint + cordon, checkpoint window, evict, reboot/replace
  kIsolate,     // node: NoExecute taint, short checkpoint window, out-of-band reboot/replace
};

// The NodeCondition types gpuheal owns (compatible with the EKS node monitoring agent).
enum class Condition {
  kAcceleratedHardwareReady,
  kKernelReady,
  kNetworkingReady,
  kStorageReady,
  kContainerRuntimeReady,
};
inline constexpr Condition kAllConditions[] = {
    Condition::kAcceleratedHardwareReady, Condition::kKernelReady, Condition::kNetworkingReady,
    Condition::kStorageReady, Condition::kContainerRuntimeReady};
// True for the type of one of gpuheal's conditions (a fault domain).
bool IsDomain(std::string_view condition_type);

// NVIDIA's "Resolution Bucket (Immediate Action)" from the Xid catalog (Ampere and newer).
enum class Bucket {
  kNone,  // the catalog names no bucket (newest Xids)
  kContactSupport,
  kIgnore,
  kRestartApp,
  kResetGpu,
  kRestartBm,
  kRestartVm,
  kUpdateSwFw,
  kCheckMechanicals,
  kCheckUvm,
  kWorkflowXid45,
  kWorkflowXid48,
  kWorkflowNvlinkErr,
  kWorkflowNvlink5Err,
  kXid154,
};

std::string_view ToString(Severity s);
std::string_view ToString(Action a);
std::string_view ToString(Condition c);
std::string_view ToString(Bucket b);
std::optional<Severity> ParseSeverity(std::string_view s);
std::optional<Action> ParseAction(std::string_view s);
std::optional<Condition> ParseCondition(std::string_view s);

// The default action for a severity (the ARCHITECTURE severity table).
Action DefaultAction(Severity s);

// Fatal and catastrophic faults flip their domain condition to False; lower ones are Events.
inline bool FlipsCondition(Severity s) { return s >= Severity::kFatal; }

}  // namespace gpuheal
