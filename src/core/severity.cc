#include "core/severity.h"

#include <array>
#include <utility>

namespace gpuheal {
namespace {

template <typename E, size_t N>
std::optional<E> Lookup(const std::array<std::pair<E, std::string_view>, N>& table,
                        std::string_view s) {
  for (const auto& [e, name] : table) {
    if (name == s) return e;
  }
  return std::nullopt;
}

template <typename E, size_t N>
std::string_view Name(const std::array<std::pair<E, std::string_view>, N>& table, E e) {
  for (const auto& [v, name] : table) {
    if (v == e) return name;
  }
  return "unknown";
}

constexpr std::array<std::pair<Severity, std::string_view>, 5> kSeverities{{
    {Severity::kInfo, "info"},
    {Severity::kWarn, "warn"},
    {Severity::kCritical, "critical"},
    {Severity::kFatal, "fatal"},
    {Severity::kCatastrophic, "catastrophic"},
}};

constexpr std::array<std::pair<Action, std::string_view>, 5> kActions{{
    {Action::kLog, "log"},
    {Action::kEvent, "event"},
    {Action::kResetGpu, "reset-gpu"},
    {Action::kQuarantine, "quarantine"},
    {Action::kIsolate, "isolate"},
}};

constexpr std::array<std::pair<Condition, std::string_view>, 5> kConditions{{
    {Condition::kAcceleratedHardwareReady, "AcceleratedHardwareReady"},
    {Condition::kKernelReady, "KernelReady"},
    {Condition::kNetworkingReady, "NetworkingReady"},
    {Condition::kStorageReady, "StorageReady"},
    {Condition::kContainerRuntimeReady, "ContainerRuntimeReady"},
}};

constexpr std::array<std::pair<Bucket, std::string_view>, 15> kBuckets{{
    {Bucket::kNone, "NONE"},
    {Bucket::kContactSupport, "CONTACT_SUPPORT"},
    {Bucket::kIgnore, "IGNORE"},
    {Bucket::kRestartApp, "RESTART_APP"},
    {Bucket::kResetGpu, "RESET_GPU"},
    {Bucket::kRestartBm, "RESTART_BM"},
    {Bucket::kRestartVm, "RESTART_VM"},
    {Bucket::kUpdateSwFw, "UPDATE_SWFW"},
    {Bucket::kCheckMechanicals, "CHECK_MECHANICALS"},
    {Bucket::kCheckUvm, "CHECK_UVM"},
    {Bucket::kWorkflowXid45, "WORKFLOW_XID_45"},
    {Bucket::kWorkflowXid48, "WORKFLOW_XID_48"},
    {Bucket::kWorkflowNvlinkErr, "WORKFLOW_NVLINK_ERR"},
    {Bucket::kWorkflowNvlink5Err, "WORKFLOW_NVLINK5_ERR"},
    {Bucket::kXid154, "XID_154"},
}};

}  // namespace

std::string_view ToString(Severity s) { return Name(kSeverities, s); }
std::string_view ToString(Action a) { return Name(kActions, a); }
std::string_view ToString(Condition c) { return Name(kConditions, c); }
std::string_view ToString(Bucket b) { return Name(kBuckets, b); }
std::optional<Severity> ParseSeverity(std::string_view s) { return Lookup(kSeverities, s); }
std::optional<Action> ParseAction(std::string_view s) { return Lookup(kActions, s); }
std::optional<Condition> ParseCondition(std::string_view s) { return Lookup(kConditions, s); }
bool IsDomain(std::string_view condition_type) {
  return ParseCondition(condition_type).has_value();
}

Action DefaultAction(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return Action::kLog;
    case Severity::kWarn:
      return Action::kEvent;
    case Severity::kCritical:
      return Action::kResetGpu;
    case Severity::kFatal:
      return Action::kQuarantine;
    case Severity::kCatastrophic:
      return Action::kIsolate;
  }
  return Action::kLog;
}

}  // namespace gpuheal
