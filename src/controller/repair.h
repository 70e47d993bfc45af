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
//
// The rungs, one file each: repair.cc (the episode: its record, the order of the rungs),
// repair_quarantine.cc (taint, cordon, release), repair_gates.cc (pause, attempt cap, breaker,
// pool gate), repair_drain.cc (checkpoint and eviction), repair_gpu.cc (the GPU-level rung), and
// the providers behind the Remediator port (remediator.h). Every call goes through kube::Api and
// every time through Clock, so each rung is unit-tested on a fake API and a stepped clock.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "controller/budget_backoff.h"
#include "controller/device_taints.h"
#include "controller/eviction_pool.h"
#include "controller/incidents.h"
#include "controller/node_fault.h"
#include "controller/policy.h"
#include "controller/record.h"
#include "controller/remediator.h"
#include "core/clock.h"
#include "core/severity.h"
#include "kube/api.h"
#include "kube/events.h"
#include "kube/objects.h"
#include "serve/metrics.h"

namespace gpuheal::controller {

// A gate's verdict. The names are the `gate` label of gpuheal_controller_blocked_total and the
// start of the NodeRepair message ("pool gate: 3 of 10 nodes ...").
struct GateResult {
  enum class Kind { kNone, kPaused, kAttemptCap, kBreaker, kPool, kIncident };
  Kind kind = Kind::kNone;
  std::string why;     // the message written to the record and the Event
  std::string domain;  // kIncident: the failure domain, "label=value" (status.incident)
  explicit operator bool() const { return kind != Kind::kNone; }
};
std::string_view ToString(GateResult::Kind k);
// The gate's name in NodeRepair status.gate (a public contract, an enum in the CRD): paused,
// attempt-cap, breaker, pool, incident; "" for kNone.
std::string_view GateName(GateResult::Kind k);

// Help of the labelled families the Repairer registers at start (every series at 0) and again
// where it counts them.
inline constexpr const char* kPhasesHelp = "NodeRepair phase transitions written, by phase";
inline constexpr const char* kBlockedHelp = "Repairs held by a gate, by gate";
inline constexpr const char* kTimeToRepairHelp =
    "A repair's first phase to Recovered or Replaced, by the rung that ended it";
inline constexpr const char* kMttrHelp =
    "A repair's first phase to the pool's capacity back: a standby promoted in the node's place "
    "(rung standby), the node Recovered or its replacement joined (Replaced), by the fault's "
    "domain (its condition) and the rung that restored it";

inline const std::string kNodeRepairs(kube::kNodeRepairsPath);

class Repairer final : private RepairContext {
 public:
  Repairer(kube::Api& api, const Clock& clock, World world, Policy policy, bool dry_run,
           Metrics& metrics);
  ~Repairer() override;  // writes the Events still queued

  // The next step for `node`; when to look again (nullopt: only when something changes).
  Next Reconcile(const std::string& node);

  // The Lease whose gpuheal.io/breaker-reset annotation closes the breaker by hand, and where the
  // breaker's Events go.
  void SetBreakerKey(std::string lease_namespace, std::string lease_name) {
    lease_namespace_ = std::move(lease_namespace);
    lease_name_ = std::move(lease_name);
  }

  // Waits until every Event queued so far is written (tests).
  void FlushEvents();

  // Drops the evictions queued and not started (leadership lost: another replica drains).
  void CancelEvictions() { evictions_->Cancel(""); }
  // Chains of evictions queued or in flight, all nodes (tests).
  size_t EvictionsBusy() const { return evictions_->Busy(); }

 private:
  using SysTime = std::chrono::system_clock::time_point;

  // RepairContext, for the providers.
  kube::Api& api() override { return api_; }
  const World& world() const override { return world_; }
  const Policy& policy() const override { return policy_; }
  bool dry_run() const override { return dry_run_; }
  void Event(const kube::Node& node, const std::string& type, const std::string& reason,
             const std::string& msg) override;
  bool WriteStatus(RepairRecord& r) override;  // and an Event on the Node per new phase
  bool ReserveStandby(const std::string& pool, const std::string& node, int size) override;
  void UnreserveStandby(const std::string& pool, const std::string& node) override;

  // repair.cc: the episode.
  // The open record of `name` (read fresh), if any; `recent` counts the episodes in the window.
  std::optional<RepairRecord> OpenRecord(const std::string& name,
                                         const std::vector<kube::NodeRepair>& records, SysTime now,
                                         int* recent);
  // No fault: a GPU-level episode ends, or the node is released after its probation.
  Next Healthy(const kube::Node& node, RepairRecord* open, SysTime now);
  // A new episode: quarantine (node level) and the record. nullopt in `*next`: go on.
  std::optional<RepairRecord> Open(const kube::Node& node, const NodeFault& f, int recent,
                                   SysTime now, std::optional<SysTime>* quarantined_at, Next* next);
  // The node-level ladder. `quarantined_at`: when this reconcile (or the one that deferred the
  // record) quarantined it.
  Next Repair(const kube::Node& node, const NodeFault& f, RepairRecord& r,
              std::optional<SysTime> quarantined_at);

  // repair_quarantine.cc. Taint and cordon. `may_disrupt`: the gates allow this node's
  // disruption, so an isolating fault gets NoExecute (which Kubernetes' taint manager enforces
  // past every gate and budget); otherwise NoSchedule, and an existing NoExecute of ours stays.
  bool Quarantine(const kube::Node& node, const NodeFault& f, bool may_disrupt = false);
  Next Release(const kube::Node& node, RepairRecord* r);

  // repair_gates.cc. Which gate holds disruptive actions (kind kNone: none) and why. The pool
  // gate counts nodes out of service, so it does not hold a GPU-level repair.
  GateResult Gate(const kube::Node& node, int attempts, bool pool_gate);
  // Each node of the cache (World::each_node, else a copy of World::nodes).
  // Held-gate bookkeeping shared by both rungs: the message, a metric and an Event when it changes.
  void Held(const kube::Node& node, RepairRecord& r, const GateResult& held);
  // gpuheal_controller_time_to_repair_seconds, once `phase` (Recovered or Replaced) is written.
  void ObserveTimeToRepair(const RepairRecord& r, const std::string& phase);
  // MTTR (gpuheal_controller_mttr_seconds), once per record, at the write that restores the
  // pool's capacity.
  void ObserveCapacityRestored(const RepairRecord& r);
  // The failure-domain incident that holds `node`'s node-level remediation (kind kNone: none).
  // Notes incidents that began or ended since the last look (a log line, Events, metrics).
  GateResult IncidentGate(const kube::Node& node);
  void CheckBreakerKey(SysTime now);
  // An Event on the controller's Lease (the breaker's and the incidents' story); none without one.
  void LeaseEvent(const std::string& type, const std::string& reason, const std::string& msg);

  // repair_drain.cc. Checkpoint, then evict. nullopt: drained, go on; else when to look again.
  std::optional<Next> Drain(const kube::Node& node, const NodeFault& f, RepairRecord& r,
                            SysTime now);

  // The pods to evict (indexes into `pods`) grouped by the PodDisruptionBudget that selects them
  // (`budget` "namespace/name"; "" and one pod per group for pods no budget selects).
  struct EvictionGroup {
    std::string budget;
    std::vector<size_t> pods;
  };
  std::vector<EvictionGroup> BudgetGroups(const std::vector<const kube::Pod*>& pods) const;
  // Applies what the eviction pool finished for `node`: counts evictions and refusals, takes
  // refused pods (and the rest of their chain) off the record's list and holds them with their
  // budget (`hold`). True when a PodDisruptionBudget refused one.
  bool ApplyEvictions(const std::string& node, RepairRecord& r, SysTime now,
                      const std::function<void(const std::string&)>& hold);
  // One eviction pass over `pods` of `node` (a node's drain, a GPU's holders): applies what the
  // pool finished, lists in the record (written before any Eviction API call) the pods it asks
  // for, and hands those not held by their budget's backoff, not in flight and not evicted
  // before to the eviction pool. nullopt: the record's status could not be written (nothing was
  // asked).
  struct EvictionPass {
    bool pdb_held = false;              // a PodDisruptionBudget refused one
    std::set<std::string> held;         // pods ("namespace/name") waiting for their budget's probe
    std::optional<SysTime> held_until;  // the earliest of those probes
    std::string held_budget;            // one held budget, for the record's message
  };
  std::optional<EvictionPass> Evict(const kube::Node& node, const std::vector<kube::Pod>& pods,
                                    RepairRecord& r, SysTime now);
  // Whether `p` (by uid) was evicted and the cache does not show it terminating yet.
  bool EvictedBefore(const std::string& node, const kube::Pod& p);
  // Keeps of that memory only the pods of `pods` still shown running.
  void ForgetEvicted(const std::string& node, const std::vector<kube::Pod>& pods);

  // repair_diagnostic.cc. Before the first remediation that destroys the evidence (policy
  // diagnostics): a NodeDiagnostic of the node, waited for at most diagnostics.timeout.
  // nullopt: go on; else when to look again.
  std::optional<Next> AttachDiagnostic(const kube::Node& node, RepairRecord& r, SysTime now);

  // repair_gpu.cc. The GPU-level rung: the node's agent drains and resets the GPUs.
  Next RepairGpu(const kube::Node& node, const NodeFault& f, RepairRecord& r);
  // Writes the request (id: the record's name) for the node's agent to drain and reset `gpus`,
  // and records it. False: the write failed, try again.
  bool RequestGpuRecovery(const kube::Node& node, const std::vector<std::string>& gpus,
                          RepairRecord& r);
  // Why the agent's GPU recovery asked at `asked` failed (its answer, or none within
  // critical.request_timeout); "" while it may still succeed.
  std::string RecoveryFailure(const std::optional<RecoveryAnswer>& answer, SysTime asked,
                              SysTime now) const;

  // repair_predictive.cc. Predictive drain (policy predictive) of a node without a fault whose
  // GPUs are at risk; `open` is created when there is none; `last`: the node's last record.
  Next Predict(const kube::Node& node, const AtRiskGpus& gpus, std::optional<RepairRecord>& open,
               const kube::NodeRepair* last, int recent, SysTime now);
  // A prediction whose GPUs are no longer at risk (reset, or the signals aged out): uncordoned.
  Next EndPrediction(const kube::Node& node, RepairRecord& r, SysTime now);
  // A prediction that ended Failed (the node left cordoned for an operator) whose GPUs are no
  // longer at risk: gpuheal's cordon and device taints go, never an operator's cordon.
  // Reconcile's cases: the Node object gone; the node without a fault.
  Next NodeGone(const std::string& name, std::optional<RepairRecord>& open, SysTime now);
  Next NoFault(const kube::Node& node, std::optional<RepairRecord>& open,
               const std::vector<kube::NodeRepair>& records, int recent_repairs, SysTime now);
  Next LiftFailedPrediction(const kube::Node& node, RepairRecord& last, SysTime now);
  // Lifts the cordon gpuheal set (its annotation says so); false: the write failed.
  bool LiftOurCordon(const kube::Node& node);
  // The GPUs `f.gpus` of `node` out of service alone: a DeviceTaintRule each (`effect`) where the
  // cluster serves them and the node's ResourceSlices name every one; recorded as actions. The
  // devices (empty: not isolated this way), or nullopt when a write failed (try again).
  std::optional<std::vector<DeviceRef>> TaintDevices(const kube::Node& node, const NodeFault& f,
                                                     RepairRecord& r, const std::string& value,
                                                     const std::string& effect);
  // Deletes the DeviceTaintRules the record names. False: try again.
  bool UntaintDevices(RepairRecord& r);
  // The GPU-level rung with DRA: the pods holding claims on `devices` checkpoint (the policy's
  // window) and are evicted; the node's other pods stay. nullopt: done, go on.
  std::optional<Next> DrainDeviceHolders(const kube::Node& node,
                                         const std::vector<DeviceRef>& devices, RepairRecord& r,
                                         SysTime now);
  // The same for the pods `holders` ("namespace/name"): those of a claim, or those the agent read
  // from the kubelet's PodResources (device plugins).
  std::optional<Next> DrainGpuHolders(const kube::Node& node, const std::set<std::string>& holders,
                                      RepairRecord& r, SysTime now);

  struct PendingEvent {
    kube::ObjectReference ref;
    std::string type, reason, message;
  };
  void Enqueue(PendingEvent e);
  void EventLoop();
  void Undefer(const std::string& node);  // drops deferred_[node]

  kube::Api& api_;
  const Clock& clock_;
  World world_;
  Policy policy_;
  bool dry_run_;
  Metrics& metrics_;
  std::unique_ptr<Remediator> remediator_;
  std::unique_ptr<kube::EventRecorder> events_;
  BudgetBackoff budgets_;  // 429s from PodDisruptionBudgets, retried per budget
  DeviceTaints device_taints_;
  std::mutex mu_;  // the breaker, created_, known_rv_, deferred_, quarantine_rv_ and
                   // standby_reserved_: workers reconcile different nodes at once
  std::mutex ev_mu_;
  std::condition_variable ev_cv_;
  std::deque<PendingEvent> ev_queue_;
  size_t ev_in_flight_ = 0;
  bool ev_stop_ = false;
  std::thread ev_thread_;
  std::map<std::string, std::string> created_;  // node -> the last NodeRepair this replica created
  // open record -> the resourceVersion this replica last wrote or read: a cached copy of that
  // version needs no fresh read
  std::map<std::string, std::string> known_rv_;
  std::atomic<bool> steps_pruned_{false};  // the CRD dropped status.steps (said once)
  // node -> when it was quarantined, its record left for after the other nodes in the queue
  std::map<std::string, SysTime> deferred_;
  // node -> {the cached Node's resourceVersion a quarantine patch was made from, the version it
  // wrote}: a second patch from the same cached Node (NoExecute once the gates allow it) goes on
  // from the version written, not into a 409 and a read-modify-write
  std::map<std::string, std::pair<std::string, std::string>> quarantine_rv_;
  // pool -> nodes this replica made standbys that the node cache did not show as such yet
  std::map<std::string, std::set<std::string>> standby_reserved_;
  bool breaker_open_ = false;
  SysTime breaker_last_over_{}, breaker_opened_at_{}, breaker_reset_at_{}, breaker_key_checked_{};
  std::string lease_namespace_, lease_name_;
  std::map<std::string, Incident> incidents_;  // open, by domain ("label=value"); under mu_
  Histogram* fault_to_quarantine_ = nullptr;
  Histogram* fault_to_drained_ = nullptr;
  Gauge* evictions_pending_ = nullptr;  // pods queued or in flight in the eviction pool
  // Created with the Repairer, at 0, so that increase() sees their first step after a start.
  Counter* evictions_total_ = nullptr;
  Counter* evictions_refused_ = nullptr;
  Counter* events_dropped_ = nullptr;
  Counter* breaker_trips_ = nullptr;
  Gauge* incidents_open_ = nullptr;
  Counter* incidents_total_ = nullptr;
  std::mutex evicted_mu_;
  // node -> uids of pods evicted whose deletion the cache has not shown yet: not evicted again
  std::map<std::string, std::set<std::string>> evicted_uids_;
  // Last: its threads stop before the members they use go.
  std::unique_ptr<EvictionPool> evictions_;
};

}  // namespace gpuheal::controller
