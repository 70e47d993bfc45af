// GPUs out of service without their node: a DeviceTaintRule per GPU (controller/device_taints.h),
// made by the GPU-level and predictive rungs and removed when their episode ends. The rules'
// names are the record's actions, so a restarted controller removes what its predecessor made.
// The pods holding a GPU (its DRA claims, or the kubelet's PodResources as the agent read them)
// checkpoint and are evicted before the GPU's reset; the node's other pods stay.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "controller/repair.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/parallel.h"
#include "core/time.h"

namespace gpuheal::controller {
std::optional<std::vector<DeviceRef>> Repairer::TaintDevices(const kube::Node& node,
                                                             const NodeFault& f, RepairRecord& r,
                                                             const std::string& value,
                                                             const std::string& effect) {
  const bool tainted = r.Done(Step::kDeviceTaintRuleCreated);
  if (dry_run_ || (!tainted && !device_taints_.Served())) return std::vector<DeviceRef>{};
  auto devices = device_taints_.DevicesOf(node.meta.name, f.gpus);
  if (!devices) {
    // Rules made earlier in this episode stay the way: the lookup failed for now.
    if (tainted) return std::nullopt;
    return std::vector<DeviceRef>{};
  }
  if (tainted) return devices;
  for (const auto& d : *devices) {
    auto name = device_taints_.Taint(r.cr.meta.name, node.meta.name, d, value, effect);
    if (!name) {
      Log("warn", "cannot create a DeviceTaintRule; retrying",
          {{"node", node.meta.name}, {"gpu", d.pci}, {"error", name.error().message}});
      return std::nullopt;
    }
    r.Record(Step::kDeviceTaintRuleCreated, clock_.Now(), *name);
    r.Action(fmt::format("DeviceTaintRule {}: GPU {} ({}/{}/{}) {}", *name, d.pci, d.driver, d.pool,
                         d.device, effect));
  }
  return devices;
}

bool Repairer::UntaintDevices(RepairRecord& r) {
  std::vector<std::string> names;
  for (const auto* s : r.All(Step::kDeviceTaintRuleCreated)) names.push_back(s->detail);
  if (names.empty() || r.Done(Step::kDeviceTaintRulesRemoved)) return true;
  if (dry_run_) return true;
  if (auto s = device_taints_.Untaint(names); !s) {
    Log("warn", "cannot delete the DeviceTaintRules; retrying",
        {{"record", r.cr.meta.name}, {"error", s.error().message}});
    return false;
  }
  r.Record(Step::kDeviceTaintRulesRemoved, clock_.Now());
  r.Action(fmt::format("removed DeviceTaintRule(s) {}", fmt::join(names, ", ")));
  return true;
}

std::optional<Next> Repairer::DrainDeviceHolders(const kube::Node& node,
                                                 const std::vector<DeviceRef>& devices,
                                                 RepairRecord& r, SysTime now) {
  if (r.At("Drained") || dry_run_) return std::nullopt;
  auto held = device_taints_.PodsUsing(devices);
  if (!held) {
    Log("warn", "cannot list the ResourceClaims of the faulty GPUs; retrying",
        {{"node", node.meta.name}, {"error", held.error().message}});
    return Next(std::chrono::milliseconds(2000));
  }
  return DrainGpuHolders(node, std::set<std::string>(held->begin(), held->end()), r, now);
}

std::optional<Next> Repairer::DrainGpuHolders(const kube::Node& node,
                                              const std::set<std::string>& holders, RepairRecord& r,
                                              SysTime now) {
  if (r.At("Drained") || dry_run_) return std::nullopt;
  // The holders not terminating. A pod the pool evicted may still show running in the cache: it
  // stays in `pods` (Evict neither asks for it again nor forgets it) but counts as gone.
  std::vector<kube::Pod> pods;
  for (auto& p : world_.pods(node.meta.name)) {
    if (Evictable(p, policy_) && !p.meta.deleting &&
        holders.count(p.meta.namespace_ + "/" + p.meta.name))
      pods.push_back(std::move(p));
  }
  if (std::all_of(pods.begin(), pods.end(),
                  [&](const kube::Pod& p) { return EvictedBefore(node.meta.name, p); })) {
    // The pool's last results for these pods, counted; nothing is left to hold.
    ApplyEvictions(node.meta.name, r, now, [](const std::string&) {});
    ForgetEvicted(node.meta.name, {});
    r.Phase("Drained", now,
            r.At("Draining")
                ? fmt::format("evicted the {} pod(s) holding the GPU", r.cr.evicted_pods.size())
                : std::string("no pod holds the GPU"));
    return std::nullopt;
  }
  // Checkpoint: ask, then wait for each to say done or for the window.
  if (!r.At("CheckpointRequested")) {
    std::vector<const kube::Pod*> ask;
    for (const auto& p : pods) {
      if (!p.meta.annotations.count(std::string(keys::kCheckpointRequested))) ask.push_back(&p);
    }
    ParallelFor(ask.size(), policy_.eviction_parallel, [&](size_t i) {
      (void)api_.Patch(
          kube::PodPath(ask[i]->meta.namespace_, ask[i]->meta.name), kube::PatchType::kMerge,
          {{"metadata",
            {{"annotations", {{std::string(keys::kCheckpointRequested), kube::RfcTime(now)}}}}}});
    });
    r.Phase("CheckpointRequested", now);
  }
  const auto deadline = *r.At("CheckpointRequested") + policy_.checkpoint_window;
  const bool all_done = std::all_of(pods.begin(), pods.end(), [](const kube::Pod& p) {
    return p.meta.annotations.count(std::string(keys::kCheckpointDone)) > 0;
  });
  if (!all_done && now < deadline && !r.At("Draining")) {
    r.Message(fmt::format("waiting for {} pod(s) of the GPU to checkpoint", pods.size()));
    return Next(Until(now, deadline));
  }
  // Evict just those, as a node's drain does (repair_drain.cc): through the eviction pool, a
  // PodDisruptionBudget that refused one asked again at its own backoff, shared with every
  // other node's pods under it, not at this node's.
  if (!r.At("Draining")) r.Phase("Draining", now);
  const auto pass = Evict(node, pods, r, now);
  if (!pass) return Next(std::chrono::milliseconds(2000));
  size_t left = 0;  // not evicted yet: in flight, refused, or held by their budget
  for (const auto& p : pods) left += EvictedBefore(node.meta.name, p) ? 0 : 1;
  if (left == 0) {
    ForgetEvicted(node.meta.name, {});
    r.Phase("Drained", now, fmt::format("evicted the {} pod(s) holding the GPU", pods.size()));
    return std::nullopt;
  }
  if (pass->held_until) {
    r.Message(fmt::format("{} pod(s) of the GPU wait for PodDisruptionBudget {}'s next try", left,
                          pass->held_budget));
  } else {
    r.Message(fmt::format("evicting the {} pod(s) holding the GPU", left));
  }
  // As a node's drain: look again at the earliest held budget's probe when every pod left waits
  // for one, else in 500 ms (2 s after a refusal that named no budget); the pool wakes the node
  // when its evictions end.
  auto next = std::chrono::milliseconds(pass->pdb_held && !pass->held_until ? 2000 : 500);
  if (pass->held_until && pass->held.size() >= left) {
    next = std::max(next,
                    std::chrono::duration_cast<std::chrono::milliseconds>(*pass->held_until - now));
  }
  return Next(next);
}

}  // namespace gpuheal::controller
