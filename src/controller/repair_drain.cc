// The drain rung: ask each evictable pod to checkpoint (gpuheal.io/checkpoint-requested), wait
// until each says done or the window ends, then evict through the Eviction API so that
// PodDisruptionBudgets decide. The pods are listed in the record before the API is called.

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "controller/repair.h"
#include "core/keys.h"
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
      // Pods under a PodDisruptionBudget that refused them wait for that budget's next probe
      // (budget_backoff.h): neither listed nor asked again until then.
      std::set<std::string> held;
      std::optional<SysTime> held_until;
      std::string held_budget;
      auto hold = [&](const std::string& key) {
        const auto until = budgets_.HeldUntil(key);
        if (!until) return;
        held.insert(key);
        if (!held_until || *until < *held_until) held_until = until;
        if (held_budget.empty()) held_budget = budgets_.BudgetOf(key);
      };
      if (!dry_run_) {
        for (const auto& p : pods) {
          const std::string key = p.meta.namespace_ + "/" + p.meta.name;
          if (!p.meta.deleting && !listed(key) && budgets_.Wait(key, now)) hold(key);
        }
        for (const auto& p : pods) {
          const std::string key = p.meta.namespace_ + "/" + p.meta.name;
          if (p.meta.deleting || listed(key) || held.count(key)) continue;
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
        if (held.count(p.meta.namespace_ + "/" + p.meta.name)) continue;
        to_evict.push_back(&p);
      }
      // Pods under one PodDisruptionBudget are evicted one after another: each eviction rewrites
      // the budget's status, so evictions of one budget at once conflict, and the API server
      // retries a conflict only after 500 ms. Pods of different budgets, and pods of none, go
      // side by side, eviction.parallel at a time. A group stops at its first refusal.
      const auto groups = BudgetGroups(to_evict);
      std::vector<size_t> group_of(to_evict.size());  // pod -> its group
      for (size_t g = 0; g < groups.size(); ++g)
        for (const size_t i : groups[g].pods) group_of[i] = g;
      std::vector<Result<kube::Response>> results(to_evict.size(), Error{"not sent"});
      std::atomic<size_t> next_group{0};
      auto run = [&] {
        for (size_t g; (g = next_group.fetch_add(1)) < groups.size();) {
          for (const size_t i : groups[g].pods) {
            results[i] = api_.Evict(to_evict[i]->meta.namespace_, to_evict[i]->meta.name);
            if (results[i] && results[i]->status == 429) break;
          }
        }
      };
      const size_t width =
          std::min(groups.size(), static_cast<size_t>(std::max(1, policy_.eviction_parallel)));
      if (width <= 1) {
        run();
      } else {
        std::vector<std::thread> threads;
        threads.reserve(width);
        for (size_t t = 0; t < width; ++t) threads.emplace_back(run);
        for (auto& t : threads) t.join();
      }
      auto& evictions = metrics_.GetCounter("gpuheal_controller_evictions_total",
                                            "Pods evicted through the Eviction API");
      auto& refused =
          metrics_.GetCounter("gpuheal_controller_evictions_refused_total",
                              "Evictions a PodDisruptionBudget refused (429); each budget is "
                              "asked again after its own backoff");
      for (size_t i = 0; i < to_evict.size(); ++i) {
        const auto& res = results[i];
        const std::string key = to_evict[i]->meta.namespace_ + "/" + to_evict[i]->meta.name;
        if (res && res->ok()) {
          evictions.Inc();
          budgets_.Evicted(key);
        } else if (!res || res->status != 404) {
          if (res && res->status == 429) {
            pdb_held = true;
            refused.Inc();
            const std::string budget = budgets_.Refused(key, res->api_status(), now);
            if (!budget.empty()) hold(key);
            // The rest of its group, under the same budget, was not asked: it waits as well.
            for (const size_t j : groups[group_of[i]].pods) {
              if (results[j] || results[j].error().message != "not sent") continue;
              const std::string other = to_evict[j]->meta.namespace_ + "/" + to_evict[j]->meta.name;
              budgets_.Join(other, budget);
              hold(other);
            }
          }
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
    r.Phase("Drained", now);
    fault_to_drained_->Observe(std::chrono::duration<double>(now - f.since).count());
  }
  return std::nullopt;  // drained: go on
}

}  // namespace gpuheal::controller
