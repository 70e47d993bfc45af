#include "controller/repair.h"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <set>

#include "core/gpu_faults.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/object_names.h"
#include "core/reasons.h"
#include "core/time.h"

namespace gpuheal::controller {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

const std::vector<double> kLatencyBuckets = {0.001, 0.0025, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1,
                                             0.25,  0.5,    1,     5,    30,    120,   600};
// Repairs take seconds (a GPU reset) to an hour (a replacement node that must boot and join).
const std::vector<double> kRepairBuckets = {1,   5,   15,   30,   60,   120,
                                            300, 600, 1200, 1800, 3600, 7200};

}  // namespace

Repairer::Repairer(kube::Api& api, const Clock& clock, World world, Policy policy, bool dry_run,
                   Metrics& metrics)
    : api_(api),
      clock_(clock),
      world_(std::move(world)),
      policy_(std::move(policy)),
      dry_run_(dry_run),
      metrics_(metrics),
      device_taints_(api_, clock_) {
  evictions_ = std::make_unique<EvictionPool>(
      [this](const std::string& ns, const std::string& pod) { return api_.Evict(ns, pod); },
      world_.wake, policy_.eviction_concurrency);
  kube::EventRecorderOptions eo;
  eo.component = "gpuheal-controller";
  events_ = std::make_unique<kube::EventRecorder>(api_, eo);
  remediator_ = MakeRemediator(policy_, *this);
  // The thread starts with every signal blocked: SIGTERM must reach the thread that waits for it
  // (Controller::Run), never end the process here before the Lease is released.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  ev_thread_ = std::thread([this] { EventLoop(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  fault_to_quarantine_ = &metrics.GetHistogram(
      "gpuheal_controller_fault_to_quarantine_seconds",
      "Condition False (lastTransitionTime) to quarantine taint written", kLatencyBuckets);
  evictions_pending_ = &metrics.GetGauge(
      "gpuheal_controller_evictions_pending",
      "Pods whose eviction is queued or in flight in the eviction pool, all nodes");
  fault_to_drained_ = &metrics.GetHistogram("gpuheal_controller_fault_to_drained_seconds",
                                            "Condition False to the node's last evictable pod gone",
                                            kLatencyBuckets);
  evictions_total_ = &metrics.GetCounter("gpuheal_controller_evictions_total",
                                         "Pods evicted through the Eviction API");
  evictions_refused_ = &metrics.GetCounter(
      "gpuheal_controller_evictions_refused_total",
      "Evictions a PodDisruptionBudget refused (429); each budget is asked again after its own "
      "backoff");
  events_dropped_ = &metrics.GetCounter("gpuheal_controller_events_dropped_total",
                                        "Events dropped: the API server was too slow for them");
  breaker_trips_ = &metrics.GetCounter("gpuheal_controller_breaker_trips_total",
                                       "Times the cluster circuit breaker opened");
  incidents_open_ = &metrics.GetGauge(
      "gpuheal_controller_incidents_open",
      "Failure domains whose infrastructure incident holds node-level remediation");
  incidents_total_ = &metrics.GetCounter(
      "gpuheal_controller_incidents_total",
      "Infrastructure incidents: failure domains with several nodes faulting at once");
  // Every phase's and gate's series exists from the start, at 0: a series born at 1 has no
  // increase(), so an alert or a panel over the first quarantine after a start would see nothing.
  for (auto phase : reason::kRepairPhases) {
    metrics.GetCounter("gpuheal_controller_repair_phases_total", kPhasesHelp,
                       {{"phase", std::string(phase)}});
  }
  std::set<std::string> rungs{"none"};
  for (const char* severity : {"critical", "fatal", "catastrophic"}) {
    for (Provider p : policy_.LadderFor(severity)) rungs.insert(std::string(ToString(p)));
  }
  for (const auto& rung : rungs) {
    metrics.GetHistogram("gpuheal_controller_time_to_repair_seconds", kTimeToRepairHelp,
                         kRepairBuckets, {{"rung", rung}});
  }
  if (policy_.provider == Provider::kStandby) rungs.insert("standby");
  for (Condition c : kAllConditions) {
    for (const auto& rung : rungs) {
      metrics.GetHistogram("gpuheal_controller_mttr_seconds", kMttrHelp, kRepairBuckets,
                           {{"domain", std::string(ToString(c))}, {"rung", rung}});
    }
  }
  using K = GateResult::Kind;
  for (K k : {K::kPaused, K::kAttemptCap, K::kBreaker, K::kPool, K::kIncident}) {
    metrics.GetCounter("gpuheal_controller_blocked_total", kBlockedHelp,
                       {{"gate", std::string(ToString(k))}});
  }
}

void Repairer::ObserveTimeToRepair(const RepairRecord& r, const std::string& phase) {
  // From the first phase recorded (Detected, or Quarantined for a record opened at quarantine)
  // to the repair's end: the node (or its replacement) back in service.
  auto end = r.cr.phase_times.find(phase);
  if (end == r.cr.phase_times.end()) return;
  auto to = kube::ParseTime(end->second);
  auto from = r.Began();
  if (!to || !from) return;
  metrics_
      .GetHistogram("gpuheal_controller_time_to_repair_seconds", kTimeToRepairHelp, kRepairBuckets,
                    {{"rung", r.cr.rung.empty() ? "none" : r.cr.rung}})
      .Observe(std::chrono::duration<double>(*to - *from).count());
}

void Repairer::Event(const kube::Node& node, const std::string& type, const std::string& reason,
                     const std::string& msg) {
  Enqueue({{"Node", "v1", "", node.meta.name, node.meta.uid}, type, reason, msg});
}

void Repairer::Enqueue(PendingEvent e) {
  if (dry_run_) return;
  {
    std::lock_guard<std::mutex> lock(ev_mu_);
    if (ev_queue_.size() >= 4096) {
      events_dropped_->Inc();
      return;
    }
    ev_queue_.push_back(std::move(e));
  }
  ev_cv_.notify_all();
}

// Events are written off the reconcile path: a slow API server delays an Event, never a taint.
void Repairer::EventLoop() {
  std::unique_lock<std::mutex> lock(ev_mu_);
  for (;;) {
    ev_cv_.wait_for(lock, std::chrono::seconds(5),
                    [this] { return ev_stop_ || !ev_queue_.empty(); });
    // Read under the lock (TSan: the destructor sets it while a batch is being written).
    const bool stopping = ev_stop_;
    std::deque<PendingEvent> batch;
    batch.swap(ev_queue_);
    ev_in_flight_ = batch.size();
    lock.unlock();
    for (const auto& e : batch) (void)events_->Record(e.ref, e.type, e.reason, e.message);
    events_->Flush(stopping);
    lock.lock();
    ev_in_flight_ = 0;
    ev_cv_.notify_all();
    if (stopping && ev_queue_.empty()) break;
  }
}

void Repairer::FlushEvents() {
  std::unique_lock<std::mutex> lock(ev_mu_);
  ev_cv_.notify_all();
  ev_cv_.wait(lock, [this] { return ev_queue_.empty() && ev_in_flight_ == 0; });
}

Repairer::~Repairer() {
  evictions_.reset();  // the evictions in flight end first
  {
    std::lock_guard<std::mutex> lock(ev_mu_);
    ev_stop_ = true;
  }
  ev_cv_.notify_all();
  if (ev_thread_.joinable()) ev_thread_.join();
}

bool Repairer::WriteStatus(RepairRecord& r) {
  if (!r.dirty) return true;
  nlohmann::json status = {
      {"phase", r.cr.phase},     {"phases", r.cr.phase_times},  {"evictedPods", r.cr.evicted_pods},
      {"actions", r.cr.actions}, {"attempts", r.cr.attempts},   {"message", r.cr.message},
      {"rung", r.cr.rung},       {"rungIndex", r.cr.rung_index}};
  if (r.cr.rung_attempt > 0) status["rungAttempt"] = r.cr.rung_attempt;
  status["steps"] = StepsJson(r.cr.steps);
  if (!r.cr.replacement.empty()) status["replacement"] = r.cr.replacement;
  status["incident"] = r.cr.incident.empty() ? nlohmann::json() : nlohmann::json(r.cr.incident);
  // A gate holds an open repair only: a record that ended says none.
  if (Terminal(r.cr.phase)) r.cr.gate.clear();
  status["gate"] = r.cr.gate.empty() ? nlohmann::json() : nlohmann::json(r.cr.gate);
  auto res = api_.Patch(kNodeRepairs + "/" + r.cr.meta.name + "/status", kube::PatchType::kMerge,
                        {{"status", status}});
  if (!res || !res->ok()) {
    Log("warn", "cannot write the NodeRepair status; retrying",
        {{"record", r.cr.meta.name}, {"error", res ? res->Describe() : res.error().message}});
    return false;
  }
  r.dirty = false;
  {
    // The version written is the one the informer will show: no need to read it back then.
    auto written = kube::DecodeNodeRepair(res->body);
    if (written && !r.cr.steps.empty() && written->steps.empty() && !steps_pruned_.exchange(true)) {
      // A CRD from before status.steps (Helm installs crds/ once and never upgrades them): each
      // read migrates the steps from the actions again, which holds only for the wording of the
      // release before. Said once.
      Log("error",
          "the NodeRepair CRD drops status.steps: apply deploy/crds/noderepairs.yaml of this "
          "release (kubectl apply -f)",
          {{"record", r.cr.meta.name}});
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (written && !written->meta.resource_version.empty() && !Terminal(r.cr.phase)) {
      r.cr.meta.resource_version = written->meta.resource_version;
      known_rv_[r.cr.meta.name] = written->meta.resource_version;
    } else {
      known_rv_.erase(r.cr.meta.name);
    }
  }
  // Each phase the write records, not just the last: a reconcile that quarantines and starts the
  // drain writes Quarantined and Draining at once.
  for (const auto& [phase, msg] : r.new_phases) {
    metrics_.GetCounter("gpuheal_controller_repair_phases_total", kPhasesHelp, {{"phase", phase}})
        .Inc();
  }
  if (!r.new_phases.empty() && !dry_run_) {
    // One Event on the Node per phase: `kubectl describe node` tells the repair's story.
    kube::Node ref;
    ref.meta.name = r.cr.node;
    if (auto n = world_.node(r.cr.node)) ref.meta.uid = n->meta.uid;
    for (const auto& [phase, msg] : r.new_phases) {
      if (phase == "Recovered" || phase == "Replaced") ObserveTimeToRepair(r, phase);
      const bool bad = phase == "Failed" || phase == "Blocked";
      Event(ref, bad ? "Warning" : "Normal", phase,
            fmt::format("NodeRepair {}: {}", r.cr.meta.name, msg.empty() ? r.cr.message : msg));
    }
  }
  if (!dry_run_) ObserveCapacityRestored(r);
  r.new_phases.clear();
  r.new_actions.clear();
  r.new_steps.clear();
  if (Terminal(r.cr.phase)) remediator_->Ended(r);
  return true;
}

void Repairer::ObserveCapacityRestored(const RepairRecord& r) {
  // The first of: a standby promoted in the node's place (this write recorded it), the node back
  // (Recovered) or its replacement joined (Replaced) without a standby having taken its place.
  std::string rung;
  std::optional<SysTime> at;
  if (std::count(r.new_steps.begin(), r.new_steps.end(), Step::kStandbyPromoted)) {
    rung = "standby";
    at = clock_.Now();
  } else if (!r.Done(Step::kStandbyPromoted)) {
    for (const auto& [phase, msg] : r.new_phases) {
      if (phase != "Recovered" && phase != "Replaced") continue;
      rung = r.cr.rung.empty() ? "none" : r.cr.rung;
      at = r.At(phase);
    }
  }
  const auto from = r.Began();
  if (!at || !from) return;
  metrics_
      .GetHistogram(
          "gpuheal_controller_mttr_seconds", kMttrHelp, kRepairBuckets,
          {{"domain", r.cr.condition.empty() ? "unknown" : r.cr.condition}, {"rung", rung}})
      .Observe(std::max(0.0, std::chrono::duration<double>(*at - *from).count()));
}

void Repairer::Undefer(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  deferred_.erase(node);
}

std::optional<RepairRecord> Repairer::OpenRecord(const std::string& name,
                                                 const std::vector<kube::NodeRepair>& records,
                                                 SysTime now, int* recent) {
  std::optional<RepairRecord> open;
  *recent = 0;
  for (const auto& r : records) {
    auto detected = r.phase_times.count("Detected") ? kube::ParseTime(r.phase_times.at("Detected"))
                                                    : std::nullopt;
    if (detected && now - *detected <= policy_.repairs_window) ++*recent;
    if (!Terminal(r.phase) && !open) open = RepairRecord::Read(r);
  }
  if (!open) {
    // The informer may not have seen a record this controller created a moment ago.
    std::string created;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = created_.find(name); it != created_.end()) created = it->second;
    }
    if (!created.empty()) {
      auto res = api_.Get(kNodeRepairs + "/" + created);
      if (res && res->ok()) {
        if (auto r = kube::DecodeNodeRepair(res->body); r && !Terminal(r->phase))
          open = RepairRecord::Read(*r);
      }
    }
  }
  if (open) {
    // A cached copy a moment behind this controller's own last write would lose what that write
    // added (the evicted pods, an action): the record is read fresh unless the cache holds the
    // very version this controller last wrote or read. A drain reconciles its node at each pod's
    // deletion, and a GET each time was a fifth of the API server's requests during a burst.
    std::string known;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = known_rv_.find(open->cr.meta.name); it != known_rv_.end()) known = it->second;
    }
    if (known.empty() || known != open->cr.meta.resource_version) {
      auto res = api_.Get(kNodeRepairs + "/" + open->cr.meta.name);
      if (res && res->ok()) {
        if (auto fresh = kube::DecodeNodeRepair(res->body)) {
          *open = RepairRecord::Read(*fresh);
          std::lock_guard<std::mutex> lock(mu_);
          known_rv_[open->cr.meta.name] = open->cr.meta.resource_version;
        }
      } else if (res && res->status == 404) {
        std::lock_guard<std::mutex> lock(mu_);
        known_rv_.erase(open->cr.meta.name);
        open.reset();
      }
    }
  }
  if (open && Terminal(open->cr.phase)) open.reset();
  if (open && open->cr.attempts == 0) open->cr.attempts = std::max(1, *recent);
  return open;
}

Next Repairer::Healthy(const kube::Node& node, RepairRecord* open, SysTime now) {
  if (!open && !HasTaint(node, keys::kFaultTaint, "", "")) return std::nullopt;
  if (open && open->cr.severity == "critical" && !open->At("Quarantined")) {
    // A GPU-level episode whose fault cleared (the agent's verified reset, or a reboot): the
    // node never left service, so there is nothing to release and no probation to sit out.
    const auto answer = AnswerTo(node, open->cr.meta.name);
    const std::string how = answer && answer->state == "succeeded"
                                ? "GPU reset and verified by the node's agent"
                                : "the GPU fault cleared";
    if (!UntaintDevices(*open)) return milliseconds(2000);
    open->Phase("Recovered", now, how);
    open->Message(how + "; the node stayed in service");
    if (!WriteStatus(*open)) return milliseconds(2000);
    return std::nullopt;
  }
  // Healthy since the last of our domains returned to True.
  SysTime healthy_since{};
  for (const auto& c : node.conditions) {
    if (!IsDomain(c.type)) continue;
    if (auto t = kube::ParseTime(c.last_transition_time))
      healthy_since = std::max(healthy_since, *t);
  }
  if (now - healthy_since < policy_.probation) return Until(now, healthy_since + policy_.probation);
  // A node a rung acted on (a power cycle, a command) is back only once its kubelet says Ready
  // too: a domain True from an agent whose kubelet is not up yet is not a working node.
  const bool acted = open && open->At("Remediating");
  for (const auto& c : node.conditions) {
    if (acted && c.type == "Ready" && c.status != "True") {
      open->Message("fault cleared; waiting for the kubelet to report Ready before the release");
      if (!WriteStatus(*open)) return milliseconds(2000);
      return milliseconds(5000);
    }
  }
  return Release(node, open);
}

std::optional<RepairRecord> Repairer::Open(const kube::Node& node, const NodeFault& fault,
                                           int recent, SysTime now,
                                           std::optional<SysTime>* quarantined_at, Next* next) {
  const std::string& name = node.meta.name;
  // A GPU-level fault, or a prediction (below critical), leaves the node in service.
  const bool gpu_rung =
      (fault.gpu_level && !policy_.critical_node_level) || fault.severity < Severity::kCritical;
  // Quarantine first: it is the urgent, cheap and reversible step; the record follows. A
  // GPU-level fault leaves the node in service: the agent drains just that GPU.
  if (!gpu_rung) {
    std::optional<SysTime> deferred;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = deferred_.find(name); it != deferred_.end()) deferred = it->second;
    }
    if (!Quarantine(node, fault)) {
      *next = milliseconds(500);
      return std::nullopt;
    }
    *quarantined_at = deferred.value_or(now);
    // In a burst (other nodes waiting in the queue), every faulty node's quarantine goes before
    // any node's record, checkpoint and drain: those take several API writes each, and
    // meanwhile the scheduler could still place pods on the untainted nodes further back. Once
    // per episode; the record keeps the quarantine's time.
    if (!deferred && world_.backlog && world_.backlog()) {
      std::lock_guard<std::mutex> lock(mu_);
      deferred_[name] = now;
      *next = milliseconds(0);
      return std::nullopt;
    }
  }
  RepairRecord rec;
  // <node>-<unix ms>: one per episode, in time order by name (a superseded GPU-level episode and
  // the node-level one after it may start within the same second). A node name too long for
  // that is cut and hashed, the same way each time; the label value likewise (63 at most).
  rec.cr.meta.name = NameWithSuffix(
      name, std::to_string(duration_cast<milliseconds>(now.time_since_epoch()).count()));
  rec.cr.node = name;
  rec.cr.condition = fault.condition;
  rec.cr.reason = fault.reason;
  rec.cr.severity = std::string(ToString(fault.severity));
  rec.cr.attempts = recent + 1;
  nlohmann::json obj = {
      {"apiVersion", "gpuheal.io/v1alpha1"},
      {"kind", "NodeRepair"},
      {"metadata",
       {{"name", rec.cr.meta.name},
        {"labels", {{std::string(keys::kRepairNodeLabel), NodeLabelValue(name)}}}}},
      {"spec",
       {{"node", name},
        {"trigger",
         {{"condition", fault.condition},
          {"reason", fault.reason},
          {"severity", rec.cr.severity},
          {"message", fault.message.substr(0, 1024)}}}}}};
  if (!fault.gpus.empty()) obj["spec"]["trigger"]["gpus"] = fault.gpus;
  auto res = api_.Create(kNodeRepairs, obj);
  if (!res || (!res->ok() && res->status != 409)) {
    Log("warn", "cannot create the NodeRepair record; retrying in 2 s",
        {{"node", name}, {"error", res ? res->Describe() : res.error().message}});
    *next = milliseconds(2000);
    return std::nullopt;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    created_[name] = rec.cr.meta.name;
    deferred_.erase(name);
  }
  rec.Phase("Detected", quarantined_at->value_or(now),
            fmt::format("{} {}: {}", fault.condition, fault.reason, fault.message.substr(0, 512)));
  rec.dirty = true;
  return rec;
}

// The node's object is gone: a delete-node repair waits for its replacement; any other open
// repair ends (Replaced once remediating, else Failed).
Next Repairer::NodeGone(const std::string& name, std::optional<RepairRecord>& open, SysTime now) {
  Undefer(name);
  if (open && AwaitingReplacement(*open)) {
    // delete-node deleted it: the repair ends when its replacement joins the pool.
    auto next = AwaitReplacement(*this, *open, now);
    if (!WriteStatus(*open)) return milliseconds(2000);
    return next;
  }
  if (open) {
    open->Phase(open->cr.phase == "Remediating" ? "Replaced" : "Failed", now);
    open->Message("the Node object is gone");
    if (!WriteStatus(*open)) return milliseconds(2000);
  }
  return std::nullopt;
}

// The node has no fault: a prediction for GPUs at risk, the end of one, gpuheal's cordon lifted
// after a failed one, or the probation and release of a healthy node.
Next Repairer::NoFault(const kube::Node& node, std::optional<RepairRecord>& open,
                       const std::vector<kube::NodeRepair>& records, int recent_repairs,
                       SysTime now) {
  Undefer(node.meta.name);  // a fault that cleared before its record was written
  const bool predicting = open && IsPrediction(open->cr);
  if (policy_.predictive != Policy::Predictive::kNone) {
    if (const AtRiskGpus at_risk = AtRiskOf(node); !at_risk.empty()) {
      auto next = Predict(node, at_risk, open, records.empty() ? nullptr : &records.back(),
                          recent_repairs, now);
      if (open && !WriteStatus(*open)) return milliseconds(2000);
      return next;
    }
  }
  if (predicting) {
    auto next = EndPrediction(node, *open, now);
    if (!WriteStatus(*open)) return milliseconds(2000);
    return next;
  }
  if (!open && !records.empty() && IsPrediction(records.back()) &&
      records.back().phase == "Failed" && AtRiskOf(node).empty() &&
      node.meta.annotations.count(std::string(keys::kCordonedAnnotation))) {
    // The risk aged out after the prediction failed: the node was left cordoned for that risk
    // alone, and nothing else would ever lift gpuheal's cordon.
    RepairRecord last = RepairRecord::Read(records.back());
    return LiftFailedPrediction(node, last, now);
  }
  // No fault: evictions queued for its drain are not started (those in flight end).
  evictions_->Cancel(node.meta.name);
  return Healthy(node, open ? &*open : nullptr, now);
}

Next Repairer::Reconcile(const std::string& name) {
  const auto now = clock_.Now();
  std::vector<kube::NodeRepair> records = world_.repairs(name);
  std::sort(records.begin(), records.end(),
            [](const kube::NodeRepair& a, const kube::NodeRepair& b) {
              return a.meta.name < b.meta.name;
            });
  int recent_repairs = 0;
  std::optional<RepairRecord> open = OpenRecord(name, records, now, &recent_repairs);
  auto node = world_.node(name);
  if (!node) return NodeGone(name, open, now);
  auto managed = node->meta.labels.find(std::string(keys::kManagedLabel));
  if (managed != node->meta.labels.end() && managed->second == "false") return std::nullopt;

  if (auto ann = node->meta.annotations.find(std::string(keys::kGpuFaults));
      ann != node->meta.annotations.end()) {
    if (auto g = ParseGpuFaults(ann->second); !g) {
      Log("warn", "ignoring an unreadable GPU fault annotation",
          {{"node", name}, {"error", g.error().message}});
    }
  }
  auto fault = FaultOf(*node);
  if (!fault) return NoFault(*node, open, records, recent_repairs, now);
  if (open && IsPrediction(open->cr)) {
    // A fault arrived while the node was being drained for a risk: that episode ends here and the
    // fault's starts at the next reconcile (its cordon stays until the fault's release).
    if (!UntaintDevices(*open)) return milliseconds(2000);
    open->Phase("Failed", now);
    open->Message(fmt::format("superseded by a fault: {} {}", fault->condition, fault->reason));
    if (!WriteStatus(*open)) return milliseconds(2000);
    return milliseconds(0);
  }
  const bool gpu_rung = fault->gpu_level && !policy_.critical_node_level;
  if (open && open->At("Quarantined") && gpu_rung) {
    // A node-level episode is open but its fault has cleared; what is left is a critical fault of
    // single GPUs. That episode ends as a healthy node's does (probation, then the release); the
    // GPUs' own episode opens at the reconcile after it, under its own name, so the agent never
    // gets a recovery request named after another episode.
    auto next = Healthy(*node, &*open, now);
    if (next) return next;
    return milliseconds(0);
  }
  if (!open && !records.empty() && !IsPrediction(records.back())) {
    // The last episode ended but the fault has not changed since: the same fault, not a new one.
    // After Replaced or Failed the node stays quarantined; never open a second episode for it.
    // (A GPU-level episode that Recovered may see the agent's annotation a moment late.)
    const auto& last = records.back();
    auto detected = last.phase_times.count("Detected")
                        ? kube::ParseTime(last.phase_times.at("Detected"))
                        : std::nullopt;
    if (detected && fault->since <= *detected) {
      if (last.phase != "Recovered") {
        if (!Quarantine(*node, *fault)) return milliseconds(500);
        return std::nullopt;
      }
      if (fault->gpu_level) return std::nullopt;
    }
  }
  std::optional<SysTime> quarantined_at;
  if (!open) {
    Next next;
    open = Open(*node, *fault, recent_repairs, now, &quarantined_at, &next);
    if (!open) return next;
  }
  const bool open_gpu_episode = open->cr.severity == "critical" && !open->At("Quarantined");
  if (open_gpu_episode && !gpu_rung) {
    // A node-level fault arrived while a GPU-level repair was open: that episode ends here and
    // the node-level one starts at the next reconcile.
    if (!UntaintDevices(*open)) return milliseconds(2000);
    open->Phase("Failed", now);
    open->Message(
        fmt::format("superseded by a node-level fault: {} {}", fault->condition, fault->reason));
    if (!WriteStatus(*open)) return milliseconds(2000);
    return milliseconds(0);
  }
  auto next =
      gpu_rung ? RepairGpu(*node, *fault, *open) : Repair(*node, *fault, *open, quarantined_at);
  if (!WriteStatus(*open)) return milliseconds(2000);
  return next;
}

Next Repairer::Repair(const kube::Node& node, const NodeFault& f, RepairRecord& r,
                      std::optional<SysTime> quarantined_at) {
  const auto now = clock_.Now();
  // 1. Quarantine at once: cheap and reversible. The pause and the gates do not hold it.
  if (!quarantined_at && !Quarantine(node, f)) return milliseconds(500);
  if (!r.At("Quarantined")) {
    const SysTime at = quarantined_at.value_or(now);
    fault_to_quarantine_->Observe(std::chrono::duration<double>(at - f.since).count());
    r.Action(dry_run_
                 ? "would taint and cordon (dry-run)"
                 : fmt::format("tainted {}={}, cordoned", keys::kFaultTaint, ToString(f.severity)));
    // Detected and Quarantined are one step here: one Event says both.
    r.new_phases.erase(std::remove_if(r.new_phases.begin(), r.new_phases.end(),
                                      [](const auto& p) { return p.first == "Detected"; }),
                       r.new_phases.end());
    r.Phase("Quarantined", at,
            fmt::format("{} {}: tainted {}={}:{} and cordoned", f.condition, f.reason,
                        keys::kFaultTaint, ToString(f.severity), TaintEffectFor(node, f, false)));
  }
  if (r.cr.phase == "Detected" || r.cr.phase.empty()) r.Phase("Quarantined", now);
  if (auto retry = remediator_->AtQuarantine(node, f, r, now)) return retry;

  // 2. Gates for everything disruptive.
  if (const GateResult held = Gate(node, static_cast<int>(r.cr.attempts), true)) {
    Held(node, r, held);
    return held.kind == GateResult::Kind::kAttemptCap ? std::nullopt
                                                      : std::optional(milliseconds(10000));
  }
  r.Gate("");

  // An isolating fault's NoExecute only now: the taint manager would evict past every gate.
  if (TaintEffectFor(node, f, true) != TaintEffectFor(node, f, false)) {
    if (!Quarantine(node, f, true)) return milliseconds(500);
    r.Action(dry_run_ ? "would taint NoExecute (dry-run)"
                      : fmt::format("tainted {}={}:NoExecute once the gates allowed it",
                                    keys::kFaultTaint, ToString(f.severity)));
  }

  // 3, 4. Checkpoint, then evict through the Eviction API.
  if (auto wait = Drain(node, f, r, now)) return *wait;

  // 5. Node-level remediation waits while the node's failure domain has an infrastructure
  // incident: rebooting or replacing the nodes of a rack that lost power one by one does harm.
  // A rung already under way goes on.
  if (!r.At("Remediating")) {
    const GateResult incident = IncidentGate(node);
    if (r.cr.incident != incident.domain) {
      r.cr.incident = incident.domain;
      r.dirty = true;
    }
    if (incident) {
      Held(node, r, incident);
      return milliseconds(5000);
    }
    r.Gate("");
  }

  // 6. Remediate after the toleration window: the condition may still recover on its own.
  const auto deadline = f.since + policy_.TolerationFor(f.condition);
  if (now < deadline) {
    r.Message(fmt::format("drained; remediation with provider {} after the toleration window",
                          ToString(policy_.LadderFor(r.cr.severity).front())));
    return Until(now, deadline);
  }
  // 7. The evidence first, when the policy names where it goes.
  if (auto wait = AttachDiagnostic(node, r, now)) return *wait;
  return remediator_->Remediate(node, f, r, now);
}

}  // namespace gpuheal::controller
