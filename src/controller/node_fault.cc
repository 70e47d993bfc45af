#include "controller/node_fault.h"

#include <fmt/format.h>

#include <algorithm>

#include "controller/record.h"
#include "core/condition_decision.h"
#include "core/gpu_faults.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/reasons.h"
#include "core/time.h"
#include "core/xid_catalog.h"

namespace gpuheal::controller {

Severity SeverityOfReason(const std::string& reason) {
  if (reason == reason::kNvidiaGPUFallenOffBus || reason == reason::kNvidiaGPULost)
    return Severity::kCatastrophic;
  if (auto r = reason::ParseReason(reason); r && !r->sxid) {
    if (const XidInfo* info = FindXid(r->number)) return std::max(info->severity, Severity::kFatal);
  }
  return Severity::kFatal;
}

std::optional<NodeFault> FaultOf(const kube::Node& n, bool include_gpu_level) {
  std::optional<NodeFault> worst;
  for (const auto& c : n.conditions) {
    if (c.status != "False" || !IsDomain(c.type)) continue;
    NodeFault f;
    f.condition = c.type;
    f.reason = c.reason;
    f.message = c.message;
    // The agent's decision when its message carries one; else (another tool's condition) the
    // reason code's. A False domain is a node-level fault: at least fatal.
    if (auto d = ParseDecisionPrefix(c.message)) {
      f.severity = std::max(d->severity, Severity::kFatal);
      f.action = d->action;
    } else {
      f.severity = SeverityOfReason(c.reason);
      f.action = DefaultAction(f.severity);
    }
    f.since = kube::ParseTime(c.last_transition_time).value_or(std::chrono::system_clock::now());
    if (!worst || f.severity > worst->severity ||
        (f.severity == worst->severity && f.since < worst->since))
      worst = f;
  }
  if (worst || !include_gpu_level) return worst;
  auto ann = n.meta.annotations.find(std::string(keys::kGpuFaults));
  if (ann == n.meta.annotations.end()) return worst;
  auto gpus = ParseGpuFaults(ann->second);
  if (!gpus)
    return worst;  // the node's own reconcile says so (FaultOf runs for every node in the gates)
  // Critical faults of single GPUs (worse ones hold a condition False and were handled above).
  for (const auto& [pci, g] : *gpus) {
    if (g.severity != Severity::kCritical) continue;
    if (!worst) {
      worst = NodeFault{"AcceleratedHardwareReady",
                        g.reason,
                        "",
                        Severity::kCritical,
                        Action::kResetGpu,
                        g.since,
                        true,
                        {},
                        std::nullopt};
    } else if (g.since < worst->since) {
      worst->reason = g.reason;
      worst->since = g.since;
    }
    if (worst->gpus.empty()) worst->gpu_holders.emplace();
    worst->gpus.push_back(pci);
    if (!g.pods) {
      worst->gpu_holders.reset();
    } else if (worst->gpu_holders) {
      for (const auto& p : *g.pods) worst->gpu_holders->push_back(p.namespace_ + "/" + p.name);
    }
    worst->message += fmt::format("{}GPU {}: {}{} x{} since {}", worst->message.empty() ? "" : "; ",
                                  pci, g.reason, g.xid ? fmt::format(" (Xid {})", g.xid) : "",
                                  g.count, kube::RfcTime(g.since));
  }
  return worst;
}

bool Evictable(const kube::Pod& p, const Policy& policy) {
  if (p.meta.controller_kind == "DaemonSet" || p.meta.controller_kind == "Node")
    return false;  // Node: mirror pod
  if (p.phase == "Succeeded" || p.phase == "Failed") return false;
  if (!policy.controller_namespace.empty() && p.meta.namespace_ == policy.controller_namespace)
    return false;
  if (std::find(policy.skip_namespaces.begin(), policy.skip_namespaces.end(), p.meta.namespace_) !=
      policy.skip_namespaces.end()) {
    return false;
  }
  if (!policy.skip_pod_labels.empty()) {
    bool all = true;
    for (const auto& [k, v] : policy.skip_pod_labels) {
      auto it = p.meta.labels.find(k);
      all &= it != p.meta.labels.end() && it->second == v;
    }
    if (all) return false;
  }
  return !policy.gpu_pods_only || p.gpu_requests > 0;
}

bool HasTaint(const kube::Node& n, std::string_view key, const std::string& value,
              const std::string& effect) {
  for (const auto& t : n.taints) {
    if (t.key == key && (value.empty() || t.value == value) &&
        (effect.empty() || t.effect == effect))
      return true;
  }
  return false;
}

std::string TaintEffectFor(const kube::Node& node, const NodeFault& f, bool may_disrupt) {
  if (f.action != Action::kIsolate) return "NoSchedule";
  const bool have =
      HasTaint(node, keys::kFaultTaint, std::string(ToString(f.severity)), "NoExecute");
  return may_disrupt || have ? "NoExecute" : "NoSchedule";
}

bool ConditionIs(const kube::Node& n, const std::string& type, const std::string& status) {
  return std::any_of(n.conditions.begin(), n.conditions.end(), [&](const kube::NodeCondition& c) {
    return c.type == type && c.status == status;
  });
}

std::string PoolOf(const kube::Node& n, const Policy& policy) {
  for (std::string_view key : {std::string_view(policy.pool_label), keys::kKarpenterPoolLabel}) {
    auto it = n.meta.labels.find(std::string(key));
    if (it != n.meta.labels.end()) return it->second;
  }
  return "";
}

bool IsStandbyOf(const kube::Node& n, const Policy& policy, const std::string& pool) {
  return HasTaint(n, keys::kStandbyTaint, "", "") && PoolOf(n, policy) == pool && !FaultOf(n);
}

int StandbysOf(const std::vector<kube::Node>& nodes, const Policy& policy, const std::string& pool,
               const std::string& except) {
  return static_cast<int>(std::count_if(nodes.begin(), nodes.end(), [&](const kube::Node& n) {
    return n.meta.name != except && IsStandbyOf(n, policy, pool);
  }));
}

std::optional<RecoveryAnswer> AnswerTo(const kube::Node& node, const std::string& id) {
  auto st = node.meta.annotations.find(std::string(keys::kGpuRecoveryStatus));
  if (st == node.meta.annotations.end()) return std::nullopt;
  auto a = ParseRecoveryStatus(st->second);
  if (!a || a->id != id) return std::nullopt;
  return *a;
}

AtRiskGpus AtRiskOf(const kube::Node& node) {
  auto it = node.meta.annotations.find(std::string(keys::kGpuAtRisk));
  if (it == node.meta.annotations.end()) return {};
  auto g = ParseAtRisk(it->second);
  if (!g) {
    Log("warn", "ignoring an unreadable GPU at-risk annotation",
        {{"node", node.meta.name}, {"error", g.error().message}});
    return {};
  }
  return *g;
}

bool IsPrediction(const kube::NodeRepair& r) { return r.reason == reason::kNvidiaGPUAtRisk; }

void World::EachNode(const NodeFn& fn) const {
  if (each_node) {
    each_node(fn);
    return;
  }
  for (const auto& n : nodes()) fn(n);
}

void World::EachPoolNode(const Policy& policy, const std::string& pool, const NodeFn& fn) const {
  if (each_pool_node) {
    each_pool_node(pool, fn);
    return;
  }
  EachNode([&](const kube::Node& n) {
    if (PoolOf(n, policy) == pool) fn(n);
  });
}

void World::EachFaultyNode(const NodeFn& fn) const {
  if (each_faulty_node) {
    each_faulty_node(fn);
    return;
  }
  EachNode([&](const kube::Node& n) {
    if (FaultOf(n)) fn(n);
  });
}

size_t World::GpuNodes() const {
  if (gpu_nodes) return gpu_nodes();
  size_t count = 0;
  EachNode([&](const kube::Node& n) { count += n.gpu_capacity > 0 ? 1 : 0; });
  return count;
}

std::vector<kube::Node> World::PoolNodes(const Policy& policy, const std::string& pool) const {
  std::vector<kube::Node> out;
  EachPoolNode(policy, pool, [&](const kube::Node& n) { out.push_back(n); });
  return out;
}

}  // namespace gpuheal::controller
