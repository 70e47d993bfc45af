#pragma once
// Label, annotation and taint keys under gpuheal.io/: public contracts (golden-tested through
// reason::ContractListing). Adding one is a feature; renaming one breaks users.

#include <string_view>

namespace gpuheal::keys {

// The controller's GPU-level request to a node's agent, and the agent's answer (docs/nvml.md).
inline constexpr std::string_view kGpuRecoveryRequest = "gpuheal.io/gpu-recovery-request";
inline constexpr std::string_view kGpuRecoveryStatus = "gpuheal.io/gpu-recovery-status";

}  // namespace gpuheal::keys

namespace gpuheal::keys {

// The repair controller (docs/controller.md).
inline constexpr std::string_view kFaultTaint = "gpuheal.io/gpu-fault";         // value: severity
inline constexpr std::string_view kStandbyTaint = "gpuheal.io/standby";          // value: true, NoSchedule
inline constexpr std::string_view kManagedLabel = "gpuheal.io/managed";          // "false" opts a node out
inline constexpr std::string_view kPausedLabel = "gpuheal.io/paused";            // "true" holds disruptive actions
inline constexpr std::string_view kDefaultPoolLabel = "gpuheal.io/pool";
inline constexpr std::string_view kKarpenterPoolLabel = "karpenter.sh/nodepool";
inline constexpr std::string_view kCordonedAnnotation = "gpuheal.io/cordoned";   // the controller cordoned it
inline constexpr std::string_view kCheckpointRequested = "gpuheal.io/checkpoint-requested";
inline constexpr std::string_view kCheckpointDone = "gpuheal.io/checkpoint-done";
inline constexpr std::string_view kRepairNodeLabel = "gpuheal.io/node";          // on NodeRepair records

}  // namespace gpuheal::keys
