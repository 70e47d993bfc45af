#pragma once
// The repair's state as one reconcile sees and updates it: the open NodeRepair record, and the
// cluster as the controller's caches show it (World). Every rung reads and writes these.

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "controller/steps.h"
#include "core/time.h"
#include "kube/objects.h"

namespace gpuheal::controller {

struct Policy;

// The cluster as the controller's informers show it (tests: a fake API's objects).
struct World {
  std::function<std::optional<kube::Node>(const std::string&)> node;
  std::function<std::vector<kube::Node>()> nodes;
  // Each node of the cache without copying it (null: `nodes` is used). The gates count the whole
  // cluster at every reconcile of a faulty node; copying 1,500 nodes each time was most of the
  // controller's CPU during a drain.
  std::function<void(const std::function<void(const kube::Node&)>&)> each_node;
  // The cache's indexes (each null: the nodes are filtered one by one, as a test's world does):
  // the nodes of one pool (PoolOf under the Repairer's policy), the nodes with a fault (FaultOf,
  // GPU-level faults included), and how many nodes have GPUs. With them a reconcile visits its
  // pool and the faulty nodes, not every node of a 5,000-node cluster.
  std::function<void(const std::string& pool, const std::function<void(const kube::Node&)>&)>
      each_pool_node;
  std::function<void(const std::function<void(const kube::Node&)>&)> each_faulty_node;
  std::function<size_t()> gpu_nodes;
  std::function<std::vector<kube::Pod>(const std::string& node)> pods;
  std::function<std::vector<kube::NodeRepair>(const std::string& node)> repairs;
  // The PodDisruptionBudgets of a namespace (null: none known; every pod is its own budget).
  std::function<std::vector<kube::PodDisruptionBudget>(const std::string& ns)> budgets;
  // Whether other nodes wait in the work queue (null: never). In a burst every faulty node is
  // quarantined before any node's record and drain.
  std::function<bool()> backlog;
  // Reconciles `node` soon (the work queue's Add; null: nothing does). With it, evictions run
  // beside the workers and wake the node when they end; without it, a drain waits for them.
  std::function<void(const std::string& node)> wake;

  // The passes the gates and remediators make, through the indexes where the world has them
  // (node_fault.cc). `fn` must not call back into the world.
  using NodeFn = std::function<void(const kube::Node&)>;
  void EachNode(const NodeFn& fn) const;
  void EachPoolNode(const Policy& policy, const std::string& pool, const NodeFn& fn) const;
  void EachFaultyNode(const NodeFn& fn) const;
  size_t GpuNodes() const;
  std::vector<kube::Node> PoolNodes(const Policy& policy, const std::string& pool) const;
};

// When to look at the node again: nullopt only when something changes.
using Next = std::optional<std::chrono::milliseconds>;

inline std::chrono::milliseconds Until(std::chrono::system_clock::time_point now,
                                       std::chrono::system_clock::time_point at) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(at - now));
}

inline bool Terminal(const std::string& phase) {
  return phase == "Recovered" || phase == "Replaced" || phase == "Failed";
}

// A finished episode's record older than `keep` (policy records.keep), counted from the time of
// its last phase: the controller deletes those.
inline bool RecordExpired(const kube::NodeRepair& r, std::chrono::system_clock::time_point now,
                          std::chrono::milliseconds keep) {
  if (!Terminal(r.phase)) return false;
  auto it = r.phase_times.find(r.phase);
  if (it == r.phase_times.end()) return false;
  auto ended = kube::ParseTime(it->second);
  return ended && now - *ended > keep;
}

// The open NodeRepair as a reconcile sees and updates it; `dirty` until its status is written.
// The controller decides from its phases and typed steps (status.steps, controller/steps.h);
// actions and the message are words for people.
struct RepairRecord {
  kube::NodeRepair cr;
  bool dirty = false;
  // Phases recorded by this reconcile and not yet written: each gets an Event once written.
  std::vector<std::pair<std::string, std::string>>
      new_phases;                        // phase, event message ("" = the record's)
  std::vector<std::string> new_actions;  // actions recorded by this reconcile, not yet written
  std::vector<Step> new_steps;           // steps recorded by this reconcile, not yet written

  // The record as stored, read through the migration of a record written before status.steps
  // (MigrateActions): dirty when migrated, so the next status write stores its steps.
  static RepairRecord Read(kube::NodeRepair stored) {
    RepairRecord r;
    r.cr = std::move(stored);
    r.dirty = MigrateActions(r.cr);
    return r;
  }

  // When the repair began: its earliest phase time (Detected, or Quarantined for a record
  // opened at quarantine); nullopt before any phase.
  std::optional<std::chrono::system_clock::time_point> Began() const {
    std::optional<std::chrono::system_clock::time_point> began;
    for (const auto& [phase, at] : cr.phase_times) {
      if (auto t = kube::ParseTime(at); t && (!began || *t < *began)) began = t;
    }
    return began;
  }

  void Phase(const std::string& phase, std::chrono::system_clock::time_point now,
             std::string event_message = "") {
    if (cr.phase == phase && cr.phase_times.count(phase)) return;
    cr.phase = phase;
    if (!cr.phase_times.count(phase)) {
      // With microseconds: the checkpoint window and the drain timeout count from these times,
      // and whole seconds cut a 1 s window to anything between 0 and 1 s.
      cr.phase_times[phase] = kube::MicroTime(now);
      new_phases.emplace_back(phase, std::move(event_message));
    }
    dirty = true;
  }
  void Message(const std::string& m) {
    if (cr.message != m) {
      cr.message = m;
      dirty = true;
    }
  }
  // Words for people: never read back by the controller.
  void Action(const std::string& a) {
    if (std::find(cr.actions.begin(), cr.actions.end(), a) == cr.actions.end()) {
      cr.actions.push_back(a);
      new_actions.push_back(a);
      dirty = true;
    }
  }
  // A step done now (at most once per kind, rung and detail).
  void Record(Step kind, std::chrono::system_clock::time_point now, std::string detail = "",
              int64_t rung = 0, std::string uid = "") {
    const std::string name(ToString(kind));
    for (const auto& s : cr.steps) {
      if (s.kind == name && s.rung == rung && s.detail == detail) return;
    }
    cr.steps.push_back({name, kube::MicroTime(now), rung, std::move(detail), std::move(uid)});
    new_steps.push_back(kind);
    dirty = true;
  }
  // The last step of `kind` (of rung `rung`, where given), or null.
  const kube::RepairStep* Last(Step kind, std::optional<int64_t> rung = std::nullopt) const {
    const std::string_view name = ToString(kind);
    for (auto it = cr.steps.rbegin(); it != cr.steps.rend(); ++it) {
      if (it->kind == name && (!rung || it->rung == *rung)) return &*it;
    }
    return nullptr;
  }
  bool Done(Step kind, std::optional<int64_t> rung = std::nullopt) const {
    return Last(kind, rung) != nullptr;
  }
  std::vector<const kube::RepairStep*> All(Step kind) const {
    std::vector<const kube::RepairStep*> out;
    for (const auto& s : cr.steps) {
      if (s.kind == ToString(kind)) out.push_back(&s);
    }
    return out;
  }
  std::optional<std::chrono::system_clock::time_point> StartedAt(
      Step kind, std::optional<int64_t> rung = std::nullopt) const {
    const auto* s = Last(kind, rung);
    return s ? kube::ParseTime(s->at) : std::nullopt;
  }
  // status.gate: the gate that holds the repair now (GateName), "" once none does.
  void Gate(std::string_view gate) {
    if (cr.gate != gate) {
      cr.gate = std::string(gate);
      dirty = true;
    }
  }
  std::optional<std::chrono::system_clock::time_point> At(const std::string& phase) const {
    auto it = cr.phase_times.find(phase);
    if (it == cr.phase_times.end()) return std::nullopt;
    return kube::ParseTime(it->second);
  }

  // The current rung of the repair ladder (cr.rung_index, cr.rung) and whether its provider
  // started its disruptive act: the step RungStarted of rung index+1, written before the act.
  int64_t RungNumber() const { return cr.rung_index + 1; }
  void MarkRungStarted(std::chrono::system_clock::time_point now) {
    if (RungStarted()) return;
    Record(Step::kRungStarted, now, cr.rung, RungNumber());
    Action(fmt::format("rung {} {} started at {}", RungNumber(), cr.rung, kube::MicroTime(now)));
  }
  bool RungStarted() const { return Done(Step::kRungStarted, RungNumber()); }
  // When the current rung started (its step), else when the repair reached Remediating.
  std::optional<std::chrono::system_clock::time_point> RungSince() const {
    if (auto t = StartedAt(Step::kRungStarted, RungNumber())) return t;
    return At("Remediating");
  }
};

}  // namespace gpuheal::controller
