#pragma once
// Label, annotation and taint keys under gpuheal.io/: public contracts (golden-tested through
// reason::ContractListing). Adding one is a feature; renaming one breaks users.

#include <string_view>

namespace gpuheal::keys {

// The controller's GPU-level request to a node's agent, and the agent's answer (docs/nvml.md).
inline constexpr std::string_view kGpuRecoveryRequest = "gpuheal.io/gpu-recovery-request";
inline constexpr std::string_view kGpuRecoveryStatus = "gpuheal.io/gpu-recovery-status";
// The agent's active GPU-level faults, per GPU (core/gpu_faults.h).
inline constexpr std::string_view kGpuFaults = "gpuheal.io/gpu-faults";
// The agent's GPUs at risk: precursor signals per GPU (core/gpu_at_risk.h).
inline constexpr std::string_view kGpuAtRisk = "gpuheal.io/gpu-at-risk";

}  // namespace gpuheal::keys

namespace gpuheal::keys {

// The repair controller (docs/controller.md).
inline constexpr std::string_view kFaultTaint = "gpuheal.io/gpu-fault";  // value: severity
inline constexpr std::string_view kStandbyTaint = "gpuheal.io/standby";  // value: true, NoSchedule
inline constexpr std::string_view kManagedLabel = "gpuheal.io/managed";  // "false" opts a node out
inline constexpr std::string_view kPausedLabel =
    "gpuheal.io/paused";  // "true" holds disruptive actions
inline constexpr std::string_view kDefaultPoolLabel = "gpuheal.io/pool";
inline constexpr std::string_view kKarpenterPoolLabel = "karpenter.sh/nodepool";
inline constexpr std::string_view kCordonedAnnotation =
    "gpuheal.io/cordoned";  // the controller cordoned it
inline constexpr std::string_view kCheckpointRequested = "gpuheal.io/checkpoint-requested";
inline constexpr std::string_view kCheckpointDone = "gpuheal.io/checkpoint-done";
inline constexpr std::string_view kRepairNodeLabel = "gpuheal.io/node";  // on NodeRepair records
// On the controller's Lease: an RFC 3339 time at or after the circuit breaker opened closes it by
// hand; faults that began before that time no longer count towards it.
inline constexpr std::string_view kBreakerReset = "gpuheal.io/breaker-reset";
// On a Node: its BMC's Redfish endpoint, https://HOST[:PORT][/redfish/v1/Systems/ID] (the
// redfish provider; docs/controller.md). Its kubelet can write it, so it is read only when
// provider.redfish.endpoint_sources names node-annotation, and only within allowed_endpoints.
inline constexpr std::string_view kBmcEndpoint = "gpuheal.io/bmc-endpoint";
// On a Node that joined its pool as the replacement of a node the delete-node provider deleted:
// the NodeRepair record of that repair. Set once; a node replaces at most one.
inline constexpr std::string_view kReplaces = "gpuheal.io/replaces";
// On a Node: an RFC 3339 time. The node's fault, if it began at or before that time, no longer
// counts towards an infrastructure incident of its failure domains (policy failure_domains), and
// the node's remediation is no longer held by one (docs/controller.md).
inline constexpr std::string_view kIncidentRelease = "gpuheal.io/incident-release";

}  // namespace gpuheal::keys
