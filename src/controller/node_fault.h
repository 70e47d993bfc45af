#pragma once
// What the controller reads off a Node: its worst fault, the pods a drain evicts, its pool, the
// agent's answer to a GPU recovery request. Pure functions of the objects: no API calls.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "controller/policy.h"
#include "core/gpu_at_risk.h"
#include "core/recovery_request.h"
#include "core/severity.h"
#include "kube/objects.h"

namespace gpuheal::controller {

// The worst False domain of a node; without one (and include_gpu_level), its critical GPU faults
// from the agent's gpuheal.io/gpu-faults annotation (gpu_level: the GPU-level rung).
struct NodeFault {
  std::string condition, reason, message;
  Severity severity = Severity::kFatal;
  Action action = Action::kQuarantine;  // kIsolate: NoExecute once the gates allow the disruption
  std::chrono::system_clock::time_point
      since;  // the condition's lastTransitionTime (GPU level: first seen)
  bool gpu_level = false;
  std::vector<std::string> gpus;  // GPU level: the GPUs to drain and reset
  // GPU level: the pods ("namespace/name") holding those GPUs through a device plugin, as the
  // agent read them from the kubelet's PodResources; nullopt where it could not tell for one.
  std::optional<std::vector<std::string>> gpu_holders;
};
std::optional<NodeFault> FaultOf(const kube::Node& n, bool include_gpu_level = true);
// Severity of a reason code on a False condition whose message carries no agent decision
// (core/condition_decision.h): the catalog's for NvidiaXID<N>Error (at least fatal: repetition
// may have raised it), catastrophic for a lost GPU, fatal otherwise.
Severity SeverityOfReason(const std::string& reason);

// Pods the drain evicts: not DaemonSet-owned, not mirror pods, not finished, not in a skipped
// namespace or the controller's own, not matching the skip labels, and (gpu_pods_only)
// requesting GPUs.
bool Evictable(const kube::Pod& p, const Policy& policy);

// Whether `n` has a taint `key` (and `value`, `effect` where not empty).
bool HasTaint(const kube::Node& n, std::string_view key, const std::string& value,
              const std::string& effect);
// The effect of gpuheal's fault taint for `f` on `node`: NoSchedule, or NoExecute for an
// isolating fault once the gates allow the disruption (`may_disrupt`) or where ours already is.
std::string TaintEffectFor(const kube::Node& node, const NodeFault& f, bool may_disrupt);
// Whether the node has condition `type` with `status` (Ready True, say).
bool ConditionIs(const kube::Node& n, const std::string& type, const std::string& status);
// The node's pool: the policy's pool label, else Karpenter's NodePool label.
std::string PoolOf(const kube::Node& n, const Policy& policy);
// Whether `n` is a healthy standby of `pool` (gpuheal.io/standby, no fault).
bool IsStandbyOf(const kube::Node& n, const Policy& policy, const std::string& pool);
// The healthy standby nodes of `pool` among `nodes`, `except` one.
int StandbysOf(const std::vector<kube::Node>& nodes, const Policy& policy, const std::string& pool,
               const std::string& except = "");
// The node's GPUs at risk (the agent's gpuheal.io/gpu-at-risk; an unreadable one is logged and
// read as none).
AtRiskGpus AtRiskOf(const kube::Node& node);
// A predictive repair's record (its trigger reason NvidiaGPUAtRisk).
bool IsPrediction(const kube::NodeRepair& r);
// The node's agent's answer to request `id` (gpuheal.io/gpu-recovery-status), if it has given one.
std::optional<RecoveryAnswer> AnswerTo(const kube::Node& node, const std::string& id);

}  // namespace gpuheal::controller
