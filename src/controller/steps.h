#pragma once
// The repair's steps: what the controller did to a node, typed (NodeRepair status.steps). The
// controller decides from these alone (has the rung's disruptive act started, which standby took
// the node's place, which DeviceTaintRules to remove); status.actions and status.message are
// words for people and may be reworded freely.
//
// Each step is {kind, at, rung?, detail?, uid?}; `detail` by kind (docs/controller.md):
//   Cordoned                  the predictive cordon of gpuheal's own (detail: the GPUs at risk)
//   StandbyPromoted           detail: the standby node that took this node's place
//   DeviceTaintRuleCreated    detail: the DeviceTaintRule's name (one step per rule)
//   DeviceTaintRulesRemoved   every rule of the repair deleted
//   GPURecoveryRequested      the agent asked to drain and reset GPUs (detail: their PCI ids)
//   DiagnosticRequested       detail: the NodeDiagnostic's name
//   DiagnosticEnded           detail: how (Succeeded, Failed, TimedOut, NotRequested)
//   RungStarted               rung N's disruptive act began (written before it); detail: provider
//   RungFailed                rung N failed; the ladder moved on (detail: its provider)
//   BMCResetSent              rung N's BMC accepted the reset (detail: the ResetType)
//   ReplacementSource         detail: "NodeClaim" or "Machine NAMESPACE LABEL=VALUE": the
//                             provisioner object whose node alone may replace this one
//   HeldByMachineHealthCheck  detail: NAMESPACE/NAME of the MachineHealthCheck that decides
//   OwnerDeleted              the node's owner (or the Node) deleted (detail: which)
//   AwaitingReplacement       the wait for a replacement began (detail: the pool; uid: the
//                             replaced Node's uid)

#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kube/objects.h"

namespace gpuheal::controller {

enum class Step {
  kCordoned,
  kStandbyPromoted,
  kDeviceTaintRuleCreated,
  kDeviceTaintRulesRemoved,
  kGpuRecoveryRequested,
  kDiagnosticRequested,
  kDiagnosticEnded,
  kRungStarted,
  kRungFailed,
  kBmcResetSent,
  kReplacementSource,
  kHeldByMachineHealthCheck,
  kOwnerDeleted,
  kAwaitingReplacement,
};

// Every kind in the CRD's order (its enum; steps_test compares the two).
inline constexpr std::array kAllSteps = {
    Step::kCordoned,
    Step::kStandbyPromoted,
    Step::kDeviceTaintRuleCreated,
    Step::kDeviceTaintRulesRemoved,
    Step::kGpuRecoveryRequested,
    Step::kDiagnosticRequested,
    Step::kDiagnosticEnded,
    Step::kRungStarted,
    Step::kRungFailed,
    Step::kBmcResetSent,
    Step::kReplacementSource,
    Step::kHeldByMachineHealthCheck,
    Step::kOwnerDeleted,
    Step::kAwaitingReplacement,
};

std::string_view ToString(Step s);
std::optional<Step> ParseStep(std::string_view kind);

// The migration of a record written before status.steps: its steps read from the actions that
// version wrote (their wording then), once; true when it added any. A record with steps is left
// alone. Where an older CRD prunes status.steps, every read migrates again from the actions.
// Each step keeps the time its action names; one without a time gets the repair's start.
bool MigrateActions(kube::NodeRepair& r);

// status.steps as written: {kind, at, rung?, detail?, uid?} each.
nlohmann::json StepsJson(const std::vector<kube::RepairStep>& steps);

}  // namespace gpuheal::controller
