// Predictive drain (policy predictive): a node without a fault whose GPUs the agent reports at
// risk (gpuheal.io/gpu-at-risk: a pending row remap, contained ECC errors, rising error rates).
// Draining at a job's boundary costs nothing; draining after the Xid 48 that often follows costs
// the job. So nothing is killed for a risk: the node is cordoned (a GPU alone cannot be isolated
// without DRA), its GPU pods finish (cordon-at-boundary) or checkpoint and are evicted once they
// say so (drain-at-boundary), then the node's agent drains and resets the GPUs at risk (the
// GPU-level request; a reset applies pending remaps) and the node is uncordoned.
//
//   Detected (cordoned) -> Draining (waiting for the boundary) -> Drained -> Remediating (reset
//   requested) -> Recovered (the agent cleared the risk; uncordoned) | Failed (left cordoned)

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <set>

#include "controller/repair.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/reasons.h"
#include "core/time.h"

namespace gpuheal::controller {

using std::chrono::milliseconds;

Next Repairer::Predict(const kube::Node& node, const AtRiskGpus& gpus,
                       std::optional<RepairRecord>& open, const kube::NodeRepair* last, int recent,
                       SysTime now) {
  NodeFault f;
  f.condition = "AcceleratedHardwareReady";
  f.reason = std::string(reason::kNvidiaGPUAtRisk);
  f.severity = Severity::kWarn;
  f.action = Action::kResetGpu;
  f.gpu_level = true;
  f.since = now;
  for (const auto& [pci, g] : gpus) {
    f.gpus.push_back(pci);
    f.since = std::min(f.since, g.since);
    std::string signals;
    for (const auto& [s, n] : g.signals)
      signals += fmt::format("{}{} x{}", signals.empty() ? "" : ", ", s, n);
    f.message += fmt::format("{}GPU {} at risk since {}: {}", f.message.empty() ? "" : "; ", pci,
                             kube::RfcTime(g.since), signals);
  }
  const std::string list = fmt::format("{}", fmt::join(f.gpus, ", "));
  if (!open) {
    // A prediction whose reset failed is not retried for the same risk: the node stays
    // cordoned for an operator (or a new risk, a fault or a reboot decides).
    if (last && IsPrediction(*last) && last->phase == "Failed") {
      auto detected = last->phase_times.count("Detected")
                          ? kube::ParseTime(last->phase_times.at("Detected"))
                          : std::nullopt;
      if (detected && f.since <= *detected) return std::nullopt;
    }
    std::optional<SysTime> unused;
    Next next;
    open = Open(node, f, recent, now, &unused, &next);
    if (!open) return next;
  }
  RepairRecord& r = *open;
  if (const GateResult held = Gate(node, static_cast<int>(r.cr.attempts), true)) {
    Held(node, r, held);
    return held.kind == GateResult::Kind::kAttemptCap ? std::nullopt
                                                      : std::optional(milliseconds(10000));
  }
  // The predictive cordon's own pool count below may hold it again.
  r.Gate("");
  // No new work on the GPUs at risk: a DeviceTaintRule each where the cluster's DRA driver names
  // them (the node and its other GPUs keep serving); else a cordon of ours (the release lifts
  // only that), and cordoned nodes count against the pool's share out of service as faulty ones.
  const auto devices = TaintDevices(node, f, r, "at-risk", "NoSchedule");
  if (!devices) return milliseconds(2000);
  const bool isolated = !devices->empty();
  if (!isolated && !node.unschedulable && !r.Done(Step::kCordoned)) {
    const std::string pool = PoolOf(node, policy_);
    size_t size = 0, out = 0;
    world_.EachPoolNode(policy_, pool, [&](const kube::Node& n) {
      ++size;
      if (n.meta.name != node.meta.name &&
          (FaultOf(n, false) || n.meta.annotations.count(std::string(keys::kCordonedAnnotation))))
        ++out;
    });
    const size_t allowed = policy_.PoolAllowance(size);
    if (out + 1 > allowed) {
      Held(node, r,
           {GateResult::Kind::kPool,
            fmt::format("{}: {} of {} nodes in pool \"{}\" out of service, at most {} at once",
                        ToString(GateResult::Kind::kPool), out, size, pool, allowed),
            ""});
      return milliseconds(10000);
    }
    if (!dry_run_) {
      auto res = api_.Update(kube::NodePath(node.meta.name), [&](nlohmann::json& n) {
        auto& spec = n["spec"];
        if (spec.value("unschedulable", false)) return false;
        spec["unschedulable"] = true;
        n["metadata"]["annotations"][std::string(keys::kCordonedAnnotation)] = "true";
        return true;
      });
      if (!res || !res->ok()) return milliseconds(2000);
    }
    r.Record(Step::kCordoned, now, list);
    r.Action(fmt::format("cordoned{}: GPU {} at risk", dry_run_ ? " (dry-run)" : "", list));
  }
  // The boundary: the GPUs' pods finish, or checkpoint and go. Isolated: the pods holding claims
  // allocated to those devices, and no other; else every GPU pod of the node.
  std::set<std::string> holders;
  if (isolated) {
    auto held = device_taints_.PodsUsing(*devices);
    if (!held) {
      Log("warn", "cannot list the ResourceClaims of the GPUs at risk; retrying",
          {{"node", node.meta.name}, {"error", held.error().message}});
      return milliseconds(2000);
    }
    holders.insert(held->begin(), held->end());
  }
  std::vector<kube::Pod> pods;
  for (auto& p : world_.pods(node.meta.name)) {
    if (!Evictable(p, policy_) || p.meta.deleting) continue;
    if (isolated ? holders.count(p.meta.namespace_ + "/" + p.meta.name) > 0 : p.gpu_requests > 0)
      pods.push_back(std::move(p));
  }
  if (!pods.empty() && !r.At("Drained")) {
    const bool drain = policy_.predictive == Policy::Predictive::kDrainAtBoundary;
    size_t evicted = 0;
    for (const auto& p : pods) {
      if (!drain || dry_run_) continue;
      if (!p.meta.annotations.count(std::string(keys::kCheckpointRequested))) {
        (void)api_.Patch(
            kube::PodPath(p.meta.namespace_, p.meta.name), kube::PatchType::kMerge,
            {{"metadata",
              {{"annotations", {{std::string(keys::kCheckpointRequested), kube::RfcTime(now)}}}}}});
        if (!r.At("CheckpointRequested")) r.Phase("CheckpointRequested", now);
      } else if (p.meta.annotations.count(std::string(keys::kCheckpointDone))) {
        auto res = api_.Evict(p.meta.namespace_, p.meta.name);
        if (res && (res->ok() || res->status == 404)) {
          ++evicted;
          r.cr.evicted_pods.push_back(p.meta.namespace_ + "/" + p.meta.name);
          r.dirty = true;
        }
      }
    }
    if (!r.At("Draining")) r.Phase("Draining", now);
    r.Message(drain ? fmt::format("GPU {} at risk: waiting for {} GPU pod(s) to checkpoint and go",
                                  list, pods.size() - evicted)
                    : fmt::format("GPU {} at risk: waiting for {} GPU pod(s) to finish", list,
                                  pods.size()));
    if (evicted < pods.size()) return milliseconds(5000);
  }
  if (!r.At("Drained")) r.Phase("Drained", now, "no GPU pod left on the node");
  // The reset: pending remaps are applied, the agent's counts start again.
  const std::string id = r.cr.meta.name;
  if (!r.Done(Step::kGpuRecoveryRequested)) {
    if (dry_run_) {
      r.Action("would request GPU recovery of " + list + " (dry-run)");
      return std::nullopt;
    }
    if (!RequestGpuRecovery(node, f.gpus, r)) return milliseconds(2000);
    r.Phase("Remediating", now,
            fmt::format("{}: asked the node's agent to drain and reset GPU {} (request {})",
                        f.reason, list, id));
    r.Message(fmt::format("waiting for the agent to reset GPU {}", list));
    return policy_.critical_request_timeout;
  }
  const auto answer = AnswerTo(node, id);
  const auto asked = r.At("Remediating").value_or(now);
  if (answer && answer->state == "succeeded") {
    r.Message("GPU reset by the node's agent; waiting for it to clear the risk");
    return milliseconds(2000);
  }
  const std::string failure = RecoveryFailure(answer, asked, now);
  if (failure.empty()) return Until(now, asked + policy_.critical_request_timeout);
  r.Phase("Failed", now, failure + "; the node stays cordoned");
  r.Message(failure + "; the node stays cordoned");
  return std::nullopt;
}

bool Repairer::LiftOurCordon(const kube::Node& node) {
  if (dry_run_) return true;
  auto res = api_.Update(kube::NodePath(node.meta.name), [&](nlohmann::json& n) {
    auto& ann = n["metadata"]["annotations"];
    if (!ann.is_object() || !ann.contains(std::string(keys::kCordonedAnnotation))) return false;
    ann.erase(std::string(keys::kCordonedAnnotation));
    n["spec"]["unschedulable"] = false;  // only a cordon we set is lifted
    return true;
  });
  return res && res->ok();
}

Next Repairer::LiftFailedPrediction(const kube::Node& node, RepairRecord& last, SysTime now) {
  if (dry_run_) return std::nullopt;
  if (!UntaintDevices(last) || !LiftOurCordon(node)) return milliseconds(2000);
  // The record as stored now (the cache may be a write behind): its actions are rewritten whole.
  if (auto res = api_.Get(kNodeRepairs + "/" + last.cr.meta.name); res && res->ok()) {
    if (auto fresh = kube::DecodeNodeRepair(res->body)) last = RepairRecord::Read(*fresh);
  }
  const std::string how = "the GPUs are no longer at risk";
  last.Action(fmt::format("{} at {}: gpuheal's cordon lifted", how, kube::MicroTime(now)));
  if (!WriteStatus(last)) return milliseconds(2000);
  Event(node, "Normal", std::string(reason::kReleased),
        fmt::format("NodeRepair {} ended Failed; {}: gpuheal's cordon removed", last.cr.meta.name,
                    how));
  return std::nullopt;
}

Next Repairer::EndPrediction(const kube::Node& node, RepairRecord& r, SysTime now) {
  if (!UntaintDevices(r) || !LiftOurCordon(node)) return milliseconds(2000);
  const auto answer = AnswerTo(node, r.cr.meta.name);
  const std::string how = answer && answer->state == "succeeded"
                              ? "GPU reset by the node's agent (pending remaps applied)"
                              : "the GPUs are no longer at risk";
  Event(node, "Normal", std::string(reason::kReleased), how + "; gpuheal's cordon removed");
  r.Phase("Recovered", now, how);
  r.Message(how + "; uncordoned");
  return std::nullopt;
}

}  // namespace gpuheal::controller
