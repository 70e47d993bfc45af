#pragma once
// One idempotent reconcile per node: it reads the world each time (the Node, its pods, its
// NodeRepair records) and takes the next step of the ladder, so a restarted or failed-over
// controller simply continues. State lives in the cluster: our taint and cordon annotation on the
// Node, checkpoint annotations on pods, phase times and evicted pods in the NodeRepair record.
//
//   fault (a domain False) -> Detected -> Quarantined (taint + cordon, at once) -> gates ->
//   CheckpointRequested -> Draining (Eviction API, PDBs honoured) -> Drained ->
//   [toleration window] -> Remediating (provider) -> Replaced | Failed
//   all domains True for the probation period -> release (our taint, our cordon) -> Recovered

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "controller/policy.h"
#include "core/severity.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/objects.h"
#include "serve/metrics.h"

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
};
std::optional<NodeFault> FaultOf(const kube::Node& n, bool include_gpu_level = true);
// Severity of a reason code on a False condition whose message carries no agent decision
// (core/condition_decision.h): the catalog's for NvidiaXID<N>Error (at least fatal: repetition
// may have raised it), catastrophic for a lost GPU, fatal otherwise.
Severity SeverityOfReason(const std::string& reason);

// Pods the drain evicts: not DaemonSet-owned, not mirror pods, not finished, not in a skipped
// namespace or matching the skip labels, and (gpu_pods_only) requesting GPUs.
bool Evictable(const kube::Pod& p, const Policy& policy);

// A gate's verdict. The names are the `gate` label of gpuheal_controller_blocked_total and the
// start of the NodeRepair message ("pool gate: 3 of 10 nodes ...").
struct GateResult {
  enum class Kind { kNone, kPaused, kAttemptCap, kBreaker, kPool };
  Kind kind = Kind::kNone;
  std::string why;  // the message written to the record and the Event
  explicit operator bool() const { return kind != Kind::kNone; }
};
std::string_view ToString(GateResult::Kind k);

struct World {
  std::function<std::optional<kube::Node>(const std::string&)> node;
  std::function<std::vector<kube::Node>()> nodes;
  std::function<std::vector<kube::Pod>(const std::string& node)> pods;
  std::function<std::vector<kube::NodeRepair>(const std::string& node)> repairs;
  std::function<std::chrono::system_clock::time_point()> now = [] {
    return std::chrono::system_clock::now();
  };
  // Whether other nodes wait in the work queue (null: never). In a burst every faulty node is
  // quarantined before any node's record and drain.
  std::function<bool()> backlog;
};

inline const std::string kNodeRepairs(kube::kNodeRepairsPath);

class Repairer {
 public:
  Repairer(kube::Client& client, World world, Policy policy, bool dry_run, Metrics& metrics);
  ~Repairer();  // writes the Events still queued

  // The next step for `node`; when to look again (nullopt: only when something changes).
  std::optional<std::chrono::milliseconds> Reconcile(const std::string& node);

  // The Lease whose gpuheal.io/breaker-reset annotation closes the breaker by hand, and where the
  // breaker's Events go.
  void SetBreakerKey(std::string lease_namespace, std::string lease_name) {
    lease_namespace_ = std::move(lease_namespace);
    lease_name_ = std::move(lease_name);
  }

 private:
  struct Record;  // the open NodeRepair as the reconcile sees and updates it
  // `quarantined_at`: when this reconcile (or the one that deferred the record) quarantined it.
  std::optional<std::chrono::milliseconds> Repair(
      const kube::Node& node, const NodeFault& f, Record& r,
      std::optional<std::chrono::system_clock::time_point> quarantined_at);
  std::optional<std::chrono::milliseconds> RepairGpu(const kube::Node& node, const NodeFault& f,
                                                     Record& r);
  std::optional<std::chrono::milliseconds> Release(const kube::Node& node, Record* r);
  std::optional<std::chrono::milliseconds> PromoteStandby(const kube::Node& node, Record& r);
  static bool HasAction(const Record& r, std::string_view prefix);
  std::optional<std::chrono::milliseconds> DeleteNode(const kube::Node& node, Record& r);
  // Taint and cordon. `may_disrupt`: the gates allow this node's disruption, so an isolating
  // fault gets NoExecute (which Kubernetes' taint manager enforces past every gate and budget);
  // otherwise NoSchedule, and an existing NoExecute of ours stays.
  bool Quarantine(const kube::Node& node, const NodeFault& f, bool may_disrupt = false);
  // Which gate holds disruptive actions (kind kNone: none) and why. The pool gate counts nodes
  // out of service, so it does not hold a GPU-level repair (the node stays in service).
  GateResult Gate(const kube::Node& node, int attempts, bool pool_gate);
  // Held-gate bookkeeping shared by both rungs: the message, a metric and an Event when it changes.
  void Held(const kube::Node& node, Record& r, const GateResult& held);
  bool WriteStatus(Record& r);  // and an Event on the Node for each phase it newly records
  struct PendingEvent {
    kube::ObjectReference ref;
    std::string type, reason, message;
  };
  void Enqueue(PendingEvent e);
  void EventLoop();
  void CheckBreakerKey(std::chrono::system_clock::time_point now);
  void BreakerEvent(const std::string& type, const std::string& reason, const std::string& msg);
  void Event(const kube::Node& node, const std::string& type, const std::string& reason,
             const std::string& msg);
  std::string PoolOf(const kube::Node& n) const;

  kube::Client& client_;
  World world_;
  Policy policy_;
  bool dry_run_;
  Metrics& metrics_;
  std::unique_ptr<kube::EventRecorder> events_;
  std::mutex mu_;  // the breaker, created_, deferred_ and exec_outcomes_: workers reconcile
                   // different nodes at once
  std::mutex ev_mu_;
  std::condition_variable ev_cv_;
  std::deque<PendingEvent> ev_queue_;
  bool ev_stop_ = false;
  std::thread ev_thread_;
  std::map<std::string, std::string> created_;  // node -> the last NodeRepair this replica created
  // node -> when it was quarantined, its record left for after the other nodes in the queue
  std::map<std::string, std::chrono::system_clock::time_point> deferred_;
  struct ExecOutcome {
    bool ok = false;
    std::string action, message;  // for the record
  };
  void Undefer(const std::string& node);  // drops deferred_[node]
  // NodeRepair -> how this replica's remediation command ended, kept until the record says so:
  // a failed status write must not turn a command that ran into one whose outcome is unknown.
  std::map<std::string, ExecOutcome> exec_outcomes_;
  bool breaker_open_ = false;
  std::chrono::system_clock::time_point breaker_last_over_{}, breaker_opened_at_{},
      breaker_reset_at_{}, breaker_key_checked_{};
  std::string lease_namespace_, lease_name_;
  Histogram* fault_to_quarantine_ = nullptr;
  Histogram* fault_to_drained_ = nullptr;
};

}  // namespace gpuheal::controller
