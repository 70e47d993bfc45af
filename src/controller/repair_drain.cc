// The drain rung: ask each evictable pod to checkpoint (gpuheal.io/checkpoint-requested), wait
// until each says done or the window ends, then evict through the Eviction API so that
// PodDisruptionBudgets decide. The pods are listed in the record before the API is called.

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "controller/repair.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/parallel.h"
#include "core/time.h"
#include "kube/selector.h"

namespace gpuheal::controller {

using std::chrono::milliseconds;

std::vector<Repairer::EvictionGroup> Repairer::BudgetGroups(
    const std::vector<const kube::Pod*>& pods) const {
  std::vector<EvictionGroup> groups;
  std::map<std::string, std::vector<std::pair<std::string, nlohmann::json>>> by_ns;
  std::map<std::string, size_t> group_of;  // budget key -> index in groups
  for (size_t i = 0; i < pods.size(); ++i) {
    const auto& p = *pods[i];
    std::string budget;
    if (world_.budgets) {
      auto [it, fresh] = by_ns.try_emplace(p.meta.namespace_);
      if (fresh) {
        for (const auto& b : world_.budgets(p.meta.namespace_)) {
          if (b.selector.empty()) continue;
          auto sel = nlohmann::json::parse(b.selector, nullptr, /*allow_exceptions=*/false);
          if (!sel.is_discarded()) it->second.emplace_back(b.meta.name, std::move(sel));
        }
      }
      for (const auto& [name, sel] : it->second) {
        auto m = kube::SelectorMatches(sel, p.meta.labels);
        if (m && *m) {
          budget = p.meta.namespace_ + "/" + name;
          break;
        }
      }
    }
    if (budget.empty()) {
      groups.push_back({"", {i}});
      continue;
    }
    auto [g, fresh] = group_of.try_emplace(budget, groups.size());
    if (fresh) groups.push_back({budget, {}});
    groups[g->second].pods.push_back(i);
  }
  return groups;
}

bool Repairer::ApplyEvictions(const std::string& node, RepairRecord& r, SysTime now,
                              const std::function<void(const std::string&)>& hold) {
  auto chains = evictions_->Take(node);
  evictions_pending_->Set(static_cast<double>(evictions_->PendingPods()));
  if (chains.empty()) return false;
  auto& evictions = *evictions_total_;
  auto& refused = *evictions_refused_;
  bool any_refused = false;
  for (const auto& chain : chains) {
    std::optional<std::string> budget;  // set once the chain was refused
    for (const auto& o : chain) {
      const std::string key = o.pod.Key();
      if (o.sent && o.result && o.result->ok()) {
        evictions.Inc();
        budgets_.Evicted(key);
        std::lock_guard<std::mutex> lock(evicted_mu_);
        evicted_uids_[node].insert(o.pod.uid);
        continue;
      }
      if (o.sent && o.result && o.result->status == 404) continue;  // gone already
      if (o.sent && o.result && o.result->status == 429) {
        any_refused = true;
        refused.Inc();
        budget = budgets_.Refused(key, o.result->api_status(), now);
        if (!budget->empty()) hold(key);
      } else if (!o.sent && budget) {
        // Not asked after its chain's refusal: under the same budget, it waits as well.
        budgets_.Join(key, *budget);
        hold(key);
      } else if (o.sent) {
        Log("warn", "eviction failed; retrying",
            {{"node", node},
             {"pod", key},
             {"error", o.result ? o.result->Describe() : o.result.error().message}});
      }
      // Not evicted: it leaves the record's list until it is asked again.
      r.cr.evicted_pods.erase(std::remove(r.cr.evicted_pods.begin(), r.cr.evicted_pods.end(), key),
                              r.cr.evicted_pods.end());
      r.dirty = true;
    }
  }
  return any_refused;
}

bool Repairer::EvictedBefore(const std::string& node, const kube::Pod& p) {
  std::lock_guard<std::mutex> lock(evicted_mu_);
  auto it = evicted_uids_.find(node);
  return it != evicted_uids_.end() && it->second.count(p.meta.uid) > 0;
}

void Repairer::ForgetEvicted(const std::string& node, const std::vector<kube::Pod>& pods) {
  std::lock_guard<std::mutex> lock(evicted_mu_);
  auto it = evicted_uids_.find(node);
  if (it == evicted_uids_.end()) return;
  // A pod the cache shows terminating or gone needs no memory of its eviction.
  std::set<std::string> still;
  for (const auto& p : pods) {
    if (!p.meta.deleting && it->second.count(p.meta.uid)) still.insert(p.meta.uid);
  }
  if (still.empty()) {
    evicted_uids_.erase(it);
  } else {
    it->second.swap(still);
  }
}

std::optional<Repairer::EvictionPass> Repairer::Evict(const kube::Node& node,
                                                      const std::vector<kube::Pod>& pods,
                                                      RepairRecord& r, SysTime now) {
  // The record lists the pods before the Eviction API is called: a controller killed between
  // the two then finds them listed (and evicts those not yet terminating) instead of finding
  // them terminating and unlisted. A pod whose eviction is refused leaves the list again.
  auto listed = [&](const std::string& key) {
    return std::find(r.cr.evicted_pods.begin(), r.cr.evicted_pods.end(), key) !=
           r.cr.evicted_pods.end();
  };
  // Pods under a PodDisruptionBudget that refused them wait for that budget's next probe
  // (budget_backoff.h): neither listed nor asked again until then.
  EvictionPass pass;
  auto hold = [&](const std::string& key) {
    const auto until = budgets_.HeldUntil(key);
    if (!until) return;
    pass.held.insert(key);
    if (!pass.held_until || *until < *pass.held_until) pass.held_until = until;
    if (pass.held_budget.empty()) pass.held_budget = budgets_.BudgetOf(key);
  };
  // What the pool evicted since the last look (refusals put their budget on hold).
  pass.pdb_held |= ApplyEvictions(node.meta.name, r, now, hold);
  if (!dry_run_) {
    for (const auto& p : pods) {
      const std::string key = p.meta.namespace_ + "/" + p.meta.name;
      if (!p.meta.deleting && !listed(key) && budgets_.Wait(key, now)) hold(key);
    }
    for (const auto& p : pods) {
      const std::string key = p.meta.namespace_ + "/" + p.meta.name;
      if (p.meta.deleting || listed(key) || pass.held.count(key)) continue;
      r.cr.evicted_pods.push_back(key);
      r.dirty = true;
    }
    if (r.dirty) r.Message("draining");
    if (!WriteStatus(r)) return std::nullopt;
  }
  // The evictions run in the pool beside the workers (eviction_pool.h): pods of one
  // PodDisruptionBudget one after another (each eviction rewrites the budget's status, so
  // evictions of one budget at once conflict, and the API server retries a conflict only
  // after 500 ms), different budgets and pods of none side by side, eviction.parallel of this
  // node's and eviction.concurrency of all nodes' at once. A chain stops at its first
  // refusal. The results come back at this node's next reconcile, woken when they end.
  ForgetEvicted(node.meta.name, pods);
  std::vector<const kube::Pod*> to_evict;
  for (const auto& p : pods) {
    if (p.meta.deleting) continue;
    if (dry_run_) {
      r.Action("would evict " + p.meta.namespace_ + "/" + p.meta.name + " (dry-run)");
      continue;
    }
    const std::string key = p.meta.namespace_ + "/" + p.meta.name;
    if (pass.held.count(key) || evictions_->Pending(key) || EvictedBefore(node.meta.name, p))
      continue;
    to_evict.push_back(&p);
  }
  std::vector<std::vector<EvictionTarget>> chains;
  for (const auto& g : BudgetGroups(to_evict)) {
    auto& c = chains.emplace_back();
    for (const size_t i : g.pods) {
      const auto& m = to_evict[i]->meta;
      c.push_back({m.namespace_, m.name, m.uid});
    }
  }
  evictions_->Submit(node.meta.name, std::move(chains), policy_.eviction_parallel);
  // Without a wake-up the pool evicted them before it returned: their results are here now
  // (and the pending gauge counts what was just queued).
  pass.pdb_held |= ApplyEvictions(node.meta.name, r, now, hold);
  return pass;
}

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
      std::vector<const kube::Pod*> ask;
      for (const auto& p : pods) {
        if (p.meta.annotations.count(std::string(keys::kCheckpointRequested)) || dry_run_ ||
            p.meta.deleting)
          continue;
        ask.push_back(&p);
      }
      // eviction.parallel at a time: one after another, a node of 8 pods waited for 8 round trips
      // before its checkpoint window began.
      ParallelFor(ask.size(), policy_.eviction_parallel, [&](size_t i) {
        (void)api_.Patch(
            kube::PodPath(ask[i]->meta.namespace_, ask[i]->meta.name), kube::PatchType::kMerge,
            {{"metadata", {{"annotations", {{std::string(keys::kCheckpointRequested), stamp}}}}}});
      });
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
    if (!pods.empty()) {
      r.Phase("Draining", now);
      const auto pass = Evict(node, pods, r, now);
      if (!pass) return Next(milliseconds(2000));
      const bool pdb_held = pass->pdb_held;
      const auto& held = pass->held;
      const auto& held_until = pass->held_until;
      const auto& held_budget = pass->held_budget;
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
      } else if (held_until) {
        r.Message(
            fmt::format("eviction held by PodDisruptionBudget {}: {} pod(s) wait for its "
                        "next try",
                        held_budget, held.size()));
      } else {
        r.Message(pdb_held ? "eviction held by a PodDisruptionBudget: retrying" : "draining");
      }
      // Look again when the earliest held budget may be tried (and at least every 500 ms while
      // pods terminate); a refusal that named no budget retries in 2 s.
      auto next = milliseconds(pdb_held && !held_until ? 2000 : 500);
      if (held_until && held.size() == pods.size()) {
        next = std::max(next, std::chrono::duration_cast<milliseconds>(*held_until - now));
      }
      return Next(next);
    }
    // The last chains' results (their pods are gone now): counted, nothing left to hold.
    ApplyEvictions(node.meta.name, r, now, [](const std::string&) {});
    ForgetEvicted(node.meta.name, pods);
    r.Phase("Drained", now);
    fault_to_drained_->Observe(std::chrono::duration<double>(now - f.since).count());
  }
  return std::nullopt;  // drained: go on
}

}  // namespace gpuheal::controller
