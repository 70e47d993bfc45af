// The drain rung: ask each evictable pod to checkpoint (gpuheal.io/checkpoint-requested), wait
// until each says done or the window ends, then evict through the Eviction API so that
// PodDisruptionBudgets decide. The pods are listed in the record before the API is called.

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "controller/repair.h"
#include "core/keys.h"
#include "core/time.h"

namespace gpuheal::controller {

using std::chrono::milliseconds;

std::optional<Next> Repairer::Drain(const kube::Node& node, const NodeFault& f, RepairRecord& r,
                                    SysTime now) {
  // 3. Checkpoint: ask the workloads, wait until each says done or the window ends.
  std::vector<kube::Pod> pods;
  for (auto& p : world_.pods(node.meta.name)) {
    if (Evictable(p, policy_)) pods.push_back(std::move(p));
  }
  if (!r.At("Drained")) {
    if (!pods.empty() && !r.At("Draining")) {
      const std::string stamp = kube::RfcTime(now);
      for (const auto& p : pods) {
        if (p.meta.annotations.count(std::string(keys::kCheckpointRequested)) || dry_run_ ||
            p.meta.deleting)
          continue;
        (void)api_.Patch(
            kube::PodPath(p.meta.namespace_, p.meta.name), kube::PatchType::kMerge,
            {{"metadata", {{"annotations", {{std::string(keys::kCheckpointRequested), stamp}}}}}});
      }
      r.Phase("CheckpointRequested", now);
      const auto window = f.severity >= Severity::kCatastrophic
                              ? policy_.catastrophic_checkpoint_window
                              : policy_.checkpoint_window;
      const auto deadline = *r.At("CheckpointRequested") + window;
      const bool all_done = std::all_of(pods.begin(), pods.end(), [](const kube::Pod& p) {
        return p.meta.annotations.count(std::string(keys::kCheckpointDone)) > 0;
      });
      if (!all_done && now < deadline) {
        r.Message(fmt::format("waiting for {} pod(s) to checkpoint", pods.size()));
        return Next(Until(now, deadline));
      }
    }
    // 4. Evict through the Eviction API: PodDisruptionBudgets decide.
    bool pdb_held = false;
    if (!pods.empty()) {
      r.Phase("Draining", now);
      // The record lists the pods before the Eviction API is called: a controller killed between
      // the two then finds them listed (and evicts those not yet terminating) instead of finding
      // them terminating and unlisted. A pod whose eviction is refused leaves the list again.
      auto listed = [&](const std::string& key) {
        return std::find(r.cr.evicted_pods.begin(), r.cr.evicted_pods.end(), key) !=
               r.cr.evicted_pods.end();
      };
      if (!dry_run_) {
        for (const auto& p : pods) {
          const std::string key = p.meta.namespace_ + "/" + p.meta.name;
          if (p.meta.deleting || listed(key)) continue;
          r.cr.evicted_pods.push_back(key);
          r.dirty = true;
        }
        if (r.dirty) r.Message("draining");
        if (!WriteStatus(r)) return Next(milliseconds(2000));
      }
      // A node's pods are evicted eviction.parallel at a time: each eviction is a round trip that
      // reads and updates the pod's budget, so one after another caps a node's drain at the API
      // server's latency. The results are applied to the record afterwards, on this thread.
      std::vector<const kube::Pod*> to_evict;
      for (const auto& p : pods) {
        if (p.meta.deleting) continue;
        if (dry_run_) {
          r.Action("would evict " + p.meta.namespace_ + "/" + p.meta.name + " (dry-run)");
          continue;
        }
        to_evict.push_back(&p);
      }
      std::vector<Result<kube::Response>> results(to_evict.size(), Error{"not sent"});
      const size_t width = std::max<size_t>(1, static_cast<size_t>(policy_.eviction_parallel));
      for (size_t begin = 0; begin < to_evict.size(); begin += width) {
        const size_t end = std::min(to_evict.size(), begin + width);
        if (end - begin == 1) {
          results[begin] = api_.Evict(to_evict[begin]->meta.namespace_, to_evict[begin]->meta.name);
          continue;
        }
        std::vector<std::thread> batch;
        batch.reserve(end - begin);
        for (size_t i = begin; i < end; ++i) {
          batch.emplace_back([this, &results, &to_evict, i] {
            results[i] = api_.Evict(to_evict[i]->meta.namespace_, to_evict[i]->meta.name);
          });
        }
        for (auto& t : batch) t.join();
      }
      auto& evictions = metrics_.GetCounter("gpuheal_controller_evictions_total",
                                            "Pods evicted through the Eviction API");
      for (size_t i = 0; i < to_evict.size(); ++i) {
        const auto& res = results[i];
        const std::string key = to_evict[i]->meta.namespace_ + "/" + to_evict[i]->meta.name;
        if (res && res->ok()) {
          evictions.Inc();
        } else if (!res || res->status != 404) {
          if (res && res->status == 429) pdb_held = true;
          r.cr.evicted_pods.erase(
              std::remove(r.cr.evicted_pods.begin(), r.cr.evicted_pods.end(), key),
              r.cr.evicted_pods.end());
          r.dirty = true;
        }
      }
      if (dry_run_) {
        r.Message("dry-run: would evict and remediate");
        return Next(std::nullopt);
      }
      const auto drain_started = *r.At("Draining");
      if (now - drain_started > policy_.drain_timeout) {
        if (policy_.force_delete_after_drain_timeout) {
          for (const auto& p : pods) {
            (void)api_.Delete(kube::PodPath(p.meta.namespace_, p.meta.name), p.meta.uid, "", 0);
          }
          r.Action("force-deleted the pods left after the drain timeout");
        } else {
          r.Message(
              fmt::format("drain timeout passed with {} pod(s) left: waiting "
                          "(eviction.after_drain_timeout: wait)",
                          pods.size()));
        }
      } else {
        r.Message(pdb_held ? "eviction held by a PodDisruptionBudget: retrying" : "draining");
      }
      return Next(milliseconds(pdb_held ? 2000 : 500));
    }
    r.Phase("Drained", now);
    fault_to_drained_->Observe(std::chrono::duration<double>(now - f.since).count());
  }
  return std::nullopt;  // drained: go on
}

}  // namespace gpuheal::controller
