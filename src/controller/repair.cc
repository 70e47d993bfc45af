#include "controller/repair.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/condition_decision.h"
#include "core/gpu_faults.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/reasons.h"
#include "core/recovery_request.h"
#include "core/subprocess.h"
#include "core/time.h"
#include "core/xid_catalog.h"

namespace gpuheal::controller {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using SysTime = std::chrono::system_clock::time_point;

// The record's action saying a standby took this node's place: the NodeRepair record is the
// repair's state, so a restarted controller reads the promotion from it.
constexpr std::string_view kPromotedStandby = "promoted standby";

const std::vector<double> kLatencyBuckets = {0.001, 0.0025, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1,
                                             0.25,  0.5,    1,     5,    30,    120,   600};

// The node's agent's answer to request `id` (gpuheal.io/gpu-recovery-status), if it has given one.
std::optional<RecoveryAnswer> AnswerTo(const kube::Node& node, const std::string& id) {
  auto st = node.meta.annotations.find(std::string(keys::kGpuRecoveryStatus));
  if (st == node.meta.annotations.end()) return std::nullopt;
  auto a = ParseRecoveryStatus(st->second);
  if (!a || a->id != id) return std::nullopt;
  return *a;
}

bool Terminal(const std::string& phase) {
  return phase == "Recovered" || phase == "Replaced" || phase == "Failed";
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

// The effect of gpuheal's taint for fault `f` on `node` (see Repairer::Quarantine).
std::string EffectFor(const kube::Node& node, const NodeFault& f, bool may_disrupt) {
  if (f.action != Action::kIsolate) return "NoSchedule";
  const bool have =
      HasTaint(node, keys::kFaultTaint, std::string(ToString(f.severity)), "NoExecute");
  return may_disrupt || have ? "NoExecute" : "NoSchedule";
}

milliseconds Until(SysTime now, SysTime at) {
  return std::max(milliseconds(0), duration_cast<milliseconds>(at - now));
}

}  // namespace

Severity SeverityOfReason(const std::string& reason) {
  if (reason == reason::kNvidiaGPUFallenOffBus || reason == reason::kNvidiaGPULost)
    return Severity::kCatastrophic;
  std::string_view r = reason;
  if (r.starts_with("NvidiaXID") && (r.ends_with("Error") || r.ends_with("Warning"))) {
    r.remove_prefix(9);
    int xid = 0;
    auto [p, ec] = std::from_chars(r.data(), r.data() + r.size(), xid);
    const std::string_view rest(p, static_cast<size_t>(r.data() + r.size() - p));
    if (ec == std::errc() && (rest == "Error" || rest == "Warning")) {
      if (const XidInfo* info = FindXid(xid)) return std::max(info->severity, Severity::kFatal);
    }
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
      worst = NodeFault{"AcceleratedHardwareReady", g.reason, "",   Severity::kCritical,
                        Action::kResetGpu,          g.since,  true, {}};
    } else if (g.since < worst->since) {
      worst->reason = g.reason;
      worst->since = g.since;
    }
    worst->gpus.push_back(pci);
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

struct Repairer::Record {
  kube::NodeRepair cr;
  bool dirty = false;
  // Phases recorded by this reconcile and not yet written: each gets an Event once written.
  std::vector<std::pair<std::string, std::string>>
      new_phases;  // phase, event message ("" = the record's)
  void Phase(const std::string& phase, SysTime now, std::string event_message = "") {
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
  void Action(const std::string& a) {
    if (std::find(cr.actions.begin(), cr.actions.end(), a) == cr.actions.end()) {
      cr.actions.push_back(a);
      dirty = true;
    }
  }
  std::optional<SysTime> At(const std::string& phase) const {
    auto it = cr.phase_times.find(phase);
    if (it == cr.phase_times.end()) return std::nullopt;
    return kube::ParseTime(it->second);
  }
};

Repairer::Repairer(kube::Client& client, World world, Policy policy, bool dry_run, Metrics& metrics)
    : client_(client),
      world_(std::move(world)),
      policy_(std::move(policy)),
      dry_run_(dry_run),
      metrics_(metrics) {
  kube::EventRecorderOptions eo;
  eo.component = "gpuheal-controller";
  events_ = std::make_unique<kube::EventRecorder>(client_, eo);
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
  fault_to_drained_ = &metrics.GetHistogram("gpuheal_controller_fault_to_drained_seconds",
                                            "Condition False to the node's last evictable pod gone",
                                            kLatencyBuckets);
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
      metrics_
          .GetCounter("gpuheal_controller_events_dropped_total",
                      "Events dropped: the API server was too slow for them")
          .Inc();
      return;
    }
    ev_queue_.push_back(std::move(e));
  }
  ev_cv_.notify_one();
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
    lock.unlock();
    for (const auto& e : batch) (void)events_->Record(e.ref, e.type, e.reason, e.message);
    events_->Flush(stopping);
    lock.lock();
    if (stopping && ev_queue_.empty()) break;
  }
}

Repairer::~Repairer() {
  {
    std::lock_guard<std::mutex> lock(ev_mu_);
    ev_stop_ = true;
  }
  ev_cv_.notify_one();
  if (ev_thread_.joinable()) ev_thread_.join();
}

std::string Repairer::PoolOf(const kube::Node& n) const {
  for (std::string_view key : {std::string_view(policy_.pool_label), keys::kKarpenterPoolLabel}) {
    auto it = n.meta.labels.find(std::string(key));
    if (it != n.meta.labels.end()) return it->second;
  }
  return "";
}

bool Repairer::WriteStatus(Record& r) {
  if (!r.dirty) return true;
  nlohmann::json status = {
      {"phase", r.cr.phase},     {"phases", r.cr.phase_times}, {"evictedPods", r.cr.evicted_pods},
      {"actions", r.cr.actions}, {"attempts", r.cr.attempts},  {"message", r.cr.message}};
  auto res = client_.Patch(kNodeRepairs + "/" + r.cr.meta.name + "/status", kube::PatchType::kMerge,
                           {{"status", status}});
  if (!res || !res->ok()) {
    Log("warn", "cannot write the NodeRepair status; retrying",
        {{"record", r.cr.meta.name}, {"error", res ? res->Describe() : res.error().message}});
    return false;
  }
  r.dirty = false;
  metrics_
      .GetCounter("gpuheal_controller_repair_phases_total",
                  "NodeRepair phase transitions written, by phase", {{"phase", r.cr.phase}})
      .Inc();
  if (!r.new_phases.empty() && !dry_run_) {
    // One Event on the Node per phase: `kubectl describe node` tells the repair's story.
    kube::Node ref;
    ref.meta.name = r.cr.node;
    if (auto n = world_.node(r.cr.node)) ref.meta.uid = n->meta.uid;
    for (const auto& [phase, msg] : r.new_phases) {
      const bool bad = phase == "Failed" || phase == "Blocked";
      Event(ref, bad ? "Warning" : "Normal", phase,
            fmt::format("NodeRepair {}: {}", r.cr.meta.name, msg.empty() ? r.cr.message : msg));
    }
  }
  r.new_phases.clear();
  return true;
}

namespace {

// `taints` (a Node's spec.taints) with gpuheal's fault taint at value:effect: every other writer's
// taint stays as it is, ours at another severity goes. Returns whether ours was there already.
bool SetFaultTaint(nlohmann::json& taints, const std::string& value, const std::string& effect) {
  auto field = [](const nlohmann::json& t, const char* k) {
    auto it = t.find(k);
    return it != t.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  nlohmann::json out = nlohmann::json::array();
  bool have = false;
  if (taints.is_array()) {
    for (auto& t : taints) {
      if (!t.is_object() || field(t, "key") != keys::kFaultTaint) {
        out.push_back(std::move(t));
      } else if (field(t, "value") == value && field(t, "effect") == effect) {
        out.push_back(std::move(t));
        have = true;
      }
    }
  }
  if (!have) {
    out.push_back({{"key", keys::kFaultTaint},
                   {"value", value},
                   {"effect", effect},
                   {"timeAdded", kube::RfcTime(std::chrono::system_clock::now())}});
  }
  taints = std::move(out);
  return have;
}

}  // namespace

void Repairer::Undefer(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  deferred_.erase(node);
}

bool Repairer::Quarantine(const kube::Node& node, const NodeFault& f, bool may_disrupt) {
  const std::string value(ToString(f.severity));
  const std::string effect = EffectFor(node, f, may_disrupt);
  if (HasTaint(node, keys::kFaultTaint, value, effect) && node.unschedulable) return true;
  if (dry_run_) return true;
  // One write, from the cached Node: its taints are whole in the projection (key, value, effect,
  // timeAdded), and the resourceVersion in the patch makes the API server refuse it (409) if the
  // Node changed since. Quarantine is the latency-critical step; the GET of a read-modify-write
  // would cost a second round trip. On a conflict (or any refusal: a ClusterRole from before
  // gpuheal patched Nodes has no `patch`), the read-modify-write below.
  if (!node.meta.resource_version.empty()) {
    nlohmann::json taints = nlohmann::json::array();
    for (const auto& t : node.taints) {
      nlohmann::json j = {{"key", t.key}, {"effect", t.effect}};
      if (!t.value.empty()) j["value"] = t.value;
      if (!t.time_added.empty()) j["timeAdded"] = t.time_added;
      taints.push_back(std::move(j));
    }
    SetFaultTaint(taints, value, effect);
    nlohmann::json patch = {{"metadata", {{"resourceVersion", node.meta.resource_version}}},
                            {"spec", {{"taints", taints}}}};
    if (!node.unschedulable) {
      patch["spec"]["unschedulable"] = true;
      patch["metadata"]["annotations"] = {
          {std::string(keys::kCordonedAnnotation), "true"}};  // ours to undo
    }
    auto res = client_.Patch(kube::NodePath(node.meta.name), kube::PatchType::kMerge, patch);
    if (res && res->ok()) return true;
    if (res && res->status != 409) {
      Log("warn",
          "quarantine: the one-write patch was refused; reading and updating the Node instead",
          {{"node", node.meta.name}, {"status", res->status}});
    }
  }
  auto res = client_.Update(kube::NodePath(node.meta.name), [&](nlohmann::json& n) {
    auto& spec = n["spec"];
    nlohmann::json taints = spec.contains("taints") ? spec["taints"] : nlohmann::json::array();
    const bool have = SetFaultTaint(taints, value, effect);
    const bool cordoned = spec.contains("unschedulable") && spec["unschedulable"].is_boolean() &&
                          spec["unschedulable"].get<bool>();
    if (have && cordoned) return false;
    spec["taints"] = std::move(taints);
    if (!cordoned) {
      spec["unschedulable"] = true;
      n["metadata"]["annotations"][std::string(keys::kCordonedAnnotation)] =
          "true";  // ours to undo
    }
    return true;
  });
  return res && res->ok();
}

namespace {

// A Node's owner, proven from the owner's side: the Node's own annotations are written by an
// identity the agent shares, so they only say where to look, never what to delete.
struct Owner {
  std::string path, uid, what;  // path "": no owner; the Node object itself is deleted
  std::string unproven;         // set: the Node names an owner that does not name it back
  bool gone = false;            // unproven because the named owner does not exist (404)
};

// nullopt: the API server could not tell (ask again).
std::optional<Owner> OwnerOf(kube::Client& client, const kube::Node& node) {
  Owner o;
  auto field = [](const nlohmann::json& j, std::initializer_list<const char*> path) {
    const nlohmann::json* cur = &j;
    for (const char* k : path) {
      if (!cur->is_object() || !cur->contains(k)) return std::string();
      cur = &(*cur)[k];
    }
    return cur->is_string() ? cur->get<std::string>() : std::string();
  };
  auto machine = node.meta.annotations.find(std::string(kube::kCapiMachineAnnotation));
  auto ns = node.meta.annotations.find(std::string(kube::kCapiNamespaceAnnotation));
  if (machine != node.meta.annotations.end() && ns != node.meta.annotations.end()) {
    o.path = fmt::format("/apis/cluster.x-k8s.io/v1beta1/namespaces/{}/machines/{}", ns->second,
                         machine->second);
    o.what = fmt::format("Cluster API Machine {}/{}", ns->second, machine->second);
    auto res = client.Get(o.path);
    if (!res || res->status == 429 || res->status >= 500) return std::nullopt;
    if (!res->ok()) {
      o.gone = res->status == 404;
      o.unproven = o.gone ? "it does not exist" : "it cannot be read: " + res->Describe();
      return o;
    }
    const auto j = nlohmann::json::parse(res->body, nullptr, false);
    const std::string ref = field(j, {"status", "nodeRef", "name"});
    if (ref != node.meta.name) {
      o.unproven =
          ref.empty() ? "its status.nodeRef names no node" : "its status.nodeRef names node " + ref;
      return o;
    }
    o.uid = field(j, {"metadata", "uid"});
    return o;
  }
  auto list = client.Get("/apis/karpenter.sh/v1/nodeclaims");
  if (!list || (!list->ok() && list->status != 404))
    return std::nullopt;  // cannot tell whether Karpenter owns it
  const auto j = list->ok() ? nlohmann::json::parse(list->body, nullptr, false) : nlohmann::json();
  if (!j.is_object() || !j.contains("items") || !j["items"].is_array()) return o;
  for (const auto& item : j["items"]) {
    const std::string name = field(item, {"metadata", "name"});
    const std::string provider_id = field(item, {"status", "providerID"});
    if (name.empty()) continue;
    if (field(item, {"status", "nodeName"}) == node.meta.name ||
        (!provider_id.empty() && provider_id == node.provider_id)) {
      o.path = "/apis/karpenter.sh/v1/nodeclaims/" + name;
      o.what = "Karpenter NodeClaim " + name;
      o.uid = field(item, {"metadata", "uid"});
      return o;
    }
  }
  return o;
}

}  // namespace

std::optional<milliseconds> Repairer::DeleteNode(const kube::Node& node, Record& r) {
  const auto now = world_.now();
  r.Phase("Remediating", now);
  // The owner, when there is one, so that its controller replaces the machine; else the Node
  // object itself. Deleted at most once (uid precondition; 404 is done).
  const bool deleted_before = HasAction(r, "deleted ");
  auto owner = OwnerOf(client_, node);
  if (!owner) return milliseconds(2000);
  if (!owner->unproven.empty() && !(owner->gone && deleted_before)) {
    // A Node that names an owner which does not name it back: deleting that owner could replace
    // another node's machine, and deleting just the Node object would not replace this one.
    const std::string why = fmt::format("the Node names {} ({}), but {}", owner->what,
                                        kube::kCapiMachineAnnotation, owner->unproven);
    r.Action("did not delete " + owner->what + ": ownership not proven");
    r.Phase("Failed", now, "owner not proven: " + why);
    r.Message("owner not proven: " + why + "; the node stays quarantined until an operator looks");
    Event(node, "Warning", std::string(reason::kRemediationFailed), r.cr.message);
    return std::nullopt;
  }
  if (owner->path.empty()) {
    owner->path = kube::NodePath(node.meta.name);
    owner->uid = node.meta.uid;
    owner->what = "the Node object";
  }
  r.Action("deleted " + owner->what);
  WriteStatus(r);
  if (!owner->gone) {
    auto res = client_.Delete(owner->path, owner->uid);
    if (!res || (!res->ok() && res->status != 404)) return milliseconds(2000);
  }
  r.Phase("Replaced", now);
  r.Message("deleted " + owner->what + ": its provisioner replaces the node");
  return std::nullopt;
}

std::optional<milliseconds> Repairer::RepairGpu(const kube::Node& node, const NodeFault& f,
                                                Record& r) {
  const auto now = world_.now();
  // Gates: pause, the attempt cap and the breaker hold a GPU reset too; the pool gate does not
  // (the node stays in service). A GPU past the attempt cap is bad hardware: quarantine the node.
  if (const GateResult held = Gate(node, static_cast<int>(r.cr.attempts), false)) {
    Held(node, r, held);
    if (held.kind == GateResult::Kind::kAttemptCap) {
      Quarantine(node, f);
      return std::nullopt;
    }
    return milliseconds(10000);
  }
  const std::string id = r.cr.meta.name;
  const bool requested =
      std::any_of(r.cr.actions.begin(), r.cr.actions.end(),
                  [](const std::string& a) { return a.rfind("requested GPU recovery", 0) == 0; });
  if (!requested) {
    const std::string gpus = fmt::format("{}", fmt::join(f.gpus, ", "));
    if (dry_run_) {
      r.Action("would request GPU recovery of " + gpus + " (dry-run)");
      r.Message("dry-run: would ask the agent to drain and reset GPU " + gpus);
      return std::nullopt;
    }
    const std::string request = nlohmann::json{{"id", id}, {"gpus", f.gpus}}.dump();
    auto res = client_.Update(kube::NodePath(node.meta.name), [&](nlohmann::json& n) {
      auto& ann = n["metadata"]["annotations"];
      if (ann.is_object() && ann.value(std::string(keys::kGpuRecoveryRequest), "") == request)
        return false;
      ann[std::string(keys::kGpuRecoveryRequest)] = request;
      return true;
    });
    if (!res || !res->ok()) return milliseconds(2000);
    r.Action("requested GPU recovery of " + gpus + " from the node's agent");
    r.Phase("Remediating", now,
            fmt::format("{}: asked the node's agent to drain and reset GPU {} (request {})",
                        f.reason, gpus, id));
    r.Message(fmt::format("waiting for the agent to drain and reset GPU {}", gpus));
    Event(node, "Normal", std::string(reason::kGPURecoveryRequested),
          fmt::format("request {} for GPU {}", id, gpus));
    return policy_.critical_request_timeout;
  }
  const std::optional<RecoveryAnswer> answer = AnswerTo(node, id);
  const auto asked = r.At("Remediating").value_or(now);
  std::string failure;
  if (answer && answer->state == "succeeded") {
    r.Phase(
        "Recovered", now,
        "the agent drained, reset and verified GPU " + fmt::format("{}", fmt::join(f.gpus, ", ")));
    r.Message("GPU reset and verified by the node's agent; the node stayed in service");
    return std::nullopt;
  }
  if (answer && (answer->state == "failed" || answer->state == "rejected")) {
    failure = fmt::format("the agent's GPU recovery {}: {}", answer->state, answer->detail);
  } else if (now - asked >= policy_.critical_request_timeout) {
    failure =
        fmt::format("no answer from the node's agent within {} s",
                    duration_cast<std::chrono::seconds>(policy_.critical_request_timeout).count());
  }
  if (failure.empty()) {
    if (answer) r.Message("the agent is recovering the GPU (" + answer->state + ")");
    return Until(now, asked + policy_.critical_request_timeout);
  }
  // The GPU could not be recovered in place: the node is quarantined (an operator, a reboot or a
  // node-level fault decides what comes next; the node is released when the fault clears).
  if (!Quarantine(node, f)) return milliseconds(500);
  r.Action(fmt::format("tainted {}={}, cordoned", keys::kFaultTaint, ToString(f.severity)));
  r.Phase("Failed", now, failure + "; node quarantined");
  r.Message(failure + "; node quarantined");
  return std::nullopt;
}

bool Repairer::HasAction(const Record& r, std::string_view prefix) {
  return std::any_of(r.cr.actions.begin(), r.cr.actions.end(),
                     [&](const std::string& a) { return a.starts_with(prefix); });
}

// The standby provider: remove gpuheal.io/standby from a healthy standby node of the same pool.
// Done at quarantine, not after the toleration window: it only adds capacity, so the pods evicted
// from the faulty node have somewhere to run at once. No gate holds it (it disrupts nothing).
std::optional<milliseconds> Repairer::PromoteStandby(const kube::Node& node, Record& r) {
  if (dry_run_ || HasAction(r, kPromotedStandby)) return std::nullopt;
  const std::string pool = PoolOf(node);
  for (const auto& n : world_.nodes()) {
    if (n.meta.name == node.meta.name || PoolOf(n) != pool || FaultOf(n) ||
        !HasTaint(n, keys::kStandbyTaint, "", ""))
      continue;
    bool released = false;
    auto res = client_.Update(kube::NodePath(n.meta.name), [&](nlohmann::json& j) {
      nlohmann::json taints = nlohmann::json::array();
      for (const auto& t : j["spec"].value("taints", nlohmann::json::array())) {
        if (t.value("key", "") != keys::kStandbyTaint) taints.push_back(t);
      }
      // Another faulty node of the pool may have taken it meanwhile (read fresh on a conflict).
      released = taints.size() != j["spec"].value("taints", nlohmann::json::array()).size();
      j["spec"]["taints"] = taints;
      return released;
    });
    if (!res || !res->ok()) return milliseconds(2000);
    if (!released) continue;
    r.Action(std::string(kPromotedStandby) + " " + n.meta.name);
    Event(node, "Normal", std::string(reason::kStandbyPromoted),
          "standby " + n.meta.name + " promoted; this node becomes the standby once it recovers");
    return std::nullopt;
  }
  r.Message("no ready standby node in pool \"" + pool + "\"");
  return std::nullopt;
}

std::optional<milliseconds> Repairer::Release(const kube::Node& node, Record* r) {
  const bool standby_promoted = r && HasAction(*r, kPromotedStandby);
  if (!dry_run_) {
    auto res = client_.Update(kube::NodePath(node.meta.name), [&](nlohmann::json& n) {
      bool changed = false;
      auto& spec = n["spec"];
      nlohmann::json taints = nlohmann::json::array();
      for (const auto& t : spec.value("taints", nlohmann::json::array())) {
        if (t.value("key", "") == keys::kFaultTaint)
          changed = true;
        else
          taints.push_back(t);
      }
      if (standby_promoted &&
          std::none_of(taints.begin(), taints.end(), [](const nlohmann::json& t) {
            return t.value("key", "") == keys::kStandbyTaint;
          })) {
        // The standby took this node's place: after repair, this node is the pool's standby.
        taints.push_back(
            {{"key", keys::kStandbyTaint}, {"value", "true"}, {"effect", "NoSchedule"}});
        changed = true;
      }
      spec["taints"] = taints;
      auto& ann = n["metadata"]["annotations"];
      if (ann.is_object() && ann.contains(std::string(keys::kCordonedAnnotation))) {
        ann.erase(std::string(keys::kCordonedAnnotation));
        spec["unschedulable"] = false;  // only a cordon we set is lifted
        changed = true;
      }
      return changed;
    });
    if (!res || !res->ok()) return milliseconds(2000);
  }
  Event(node, "Normal", std::string(reason::kReleased),
        "all domains healthy for the probation period: gpuheal's taint and cordon removed");
  if (r) {
    r->Phase("Recovered", world_.now());
    r->Message("recovered");
    if (!WriteStatus(*r)) return milliseconds(2000);
  }
  return std::nullopt;
}

void Repairer::CheckBreakerKey(SysTime now) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!breaker_open_ || lease_name_.empty() || now - breaker_key_checked_ < std::chrono::seconds(2))
    return;
  breaker_key_checked_ = now;
  lock.unlock();
  auto res = client_.Get(kube::LeasePath(lease_namespace_, lease_name_));
  if (!res || !res->ok()) return;
  auto lease = kube::DecodeLease(res->body);
  if (!lease) return;
  auto it = lease->meta.annotations.find(std::string(keys::kBreakerReset));
  if (it == lease->meta.annotations.end()) return;
  auto at = kube::ParseTime(it->second);
  if (!at) {
    Log("warn", "ignoring an unreadable circuit breaker key: it must be an RFC 3339 UTC time",
        {{"annotation", keys::kBreakerReset}, {"value", it->second.substr(0, 64)}});
    return;
  }
  lock.lock();
  breaker_reset_at_ = std::max(breaker_reset_at_, *at);
}

void Repairer::BreakerEvent(const std::string& type, const std::string& reason,
                            const std::string& msg) {
  if (lease_name_.empty()) return;
  Enqueue(
      {{"Lease", "coordination.k8s.io/v1", lease_namespace_, lease_name_, ""}, type, reason, msg});
}

std::string_view ToString(GateResult::Kind k) {
  switch (k) {
    case GateResult::Kind::kNone:
      return "";
    case GateResult::Kind::kPaused:
      return "paused";
    case GateResult::Kind::kAttemptCap:
      return "HardwareInspection";
    case GateResult::Kind::kBreaker:
      return "circuit breaker open";
    case GateResult::Kind::kPool:
      return "pool gate";
  }
  return "";
}

void Repairer::Held(const kube::Node& node, Record& r, const GateResult& held) {
  if (r.cr.message != held.why) {
    metrics_
        .GetCounter("gpuheal_controller_blocked_total", "Repairs held by a gate, by gate",
                    {{"gate", std::string(ToString(held.kind))}})
        .Inc();
    Event(node, "Warning", std::string(reason::kRepairBlocked), held.why);
  }
  r.Message(held.why);
  if (held.kind == GateResult::Kind::kAttemptCap) r.Phase("Blocked", world_.now());
}

GateResult Repairer::Gate(const kube::Node& node, int attempts, bool pool_gate) {
  using K = GateResult::Kind;
  const auto held = [](K kind, std::string detail) {
    return GateResult{kind, fmt::format("{}: {}", ToString(kind), detail)};
  };
  const auto now = world_.now();
  auto paused = node.meta.labels.find(std::string(keys::kPausedLabel));
  if (policy_.paused || (paused != node.meta.labels.end() && paused->second == "true")) {
    return held(K::kPaused, "disruptive actions are held (gpuheal.io/paused)");
  }
  if (attempts > policy_.max_repairs) {
    return held(
        K::kAttemptCap,
        fmt::format("{} repairs within {} h exceed the cap of {}; left quarantined", attempts,
                    duration_cast<std::chrono::hours>(policy_.repairs_window).count(),
                    policy_.max_repairs));
  }
  const std::vector<kube::Node> all = world_.nodes();
  // Circuit breaker: a correlated event (many GPU nodes unhealthy within the window) is more
  // likely a shared cause (driver rollout, fabric, power) than bad hardware.
  CheckBreakerKey(now);
  std::unique_lock<std::mutex> lock(mu_);
  const SysTime acknowledged = breaker_reset_at_;
  lock.unlock();
  size_t gpu_nodes = 0, recent = 0;
  for (const auto& n : all) {
    if (n.gpu_capacity <= 0) continue;
    ++gpu_nodes;
    auto nf = FaultOf(n);
    if (nf && now - nf->since <= policy_.breaker_window && nf->since > acknowledged) ++recent;
  }
  const std::string why =
      fmt::format("{} of {} GPU nodes turned unhealthy within {} s (limit {:.0f}%)", recent,
                  gpu_nodes, duration_cast<std::chrono::seconds>(policy_.breaker_window).count(),
                  policy_.breaker_share * 100);
  lock.lock();
  const bool was_open = breaker_open_;
  bool by_hand = false;
  if (gpu_nodes > 0 &&
      static_cast<double>(recent) > policy_.breaker_share * static_cast<double>(gpu_nodes)) {
    breaker_last_over_ = now;
    if (!breaker_open_) {
      breaker_opened_at_ = now;
      metrics_
          .GetCounter("gpuheal_controller_breaker_trips_total",
                      "Times the cluster circuit breaker opened")
          .Inc();
    }
    breaker_open_ = true;
  } else if (breaker_open_ && (now - breaker_last_over_ >= policy_.breaker_quiet ||
                               acknowledged >= breaker_opened_at_)) {
    by_hand = acknowledged >= breaker_opened_at_;
    breaker_open_ = false;
  }
  metrics_
      .GetGauge("gpuheal_controller_breaker_open",
                "1 while the cluster circuit breaker holds evictions and remediation")
      .Set(breaker_open_ ? 1 : 0);
  const bool open = breaker_open_;
  lock.unlock();
  if (open != was_open) {
    Log(open ? "warn" : "info", open ? "circuit breaker opened" : "circuit breaker closed",
        {{"why", why}});
    BreakerEvent(open ? "Warning" : "Normal",
                 std::string(open ? reason::kBreakerOpened : reason::kBreakerClosed),
                 open      ? "evictions and remediation held: " + why
                 : by_hand ? "closed by hand (" + std::string(keys::kBreakerReset) + ")"
                           : "closed after a quiet period: " + why);
  }
  if (open) return held(K::kBreaker, why);
  if (!pool_gate) return {};
  // Pool gate: count as Karpenter does, every unhealthy node of the pool (out of service: a
  // node-level fault; a GPU-level one leaves the node in service).
  const std::string pool = PoolOf(node);
  size_t size = 0, unhealthy = 0;
  for (const auto& n : all) {
    if (PoolOf(n) != pool) continue;
    ++size;
    if (FaultOf(n, false)) ++unhealthy;
  }
  const size_t allowed =
      std::max<size_t>(1, static_cast<size_t>(std::ceil(static_cast<double>(size) *
                                                        policy_.max_unavailable_percent / 100.0)));
  if (unhealthy > allowed) {
    return held(K::kPool,
                fmt::format("{} of {} nodes in pool \"{}\" unhealthy, at most {} repaired at once",
                            unhealthy, size, pool, allowed));
  }
  return {};
}

std::optional<milliseconds> Repairer::Reconcile(const std::string& name) {
  const auto now = world_.now();
  std::vector<kube::NodeRepair> records = world_.repairs(name);
  std::sort(records.begin(), records.end(),
            [](const kube::NodeRepair& a, const kube::NodeRepair& b) {
              return a.meta.name < b.meta.name;
            });
  Record rec;
  Record* open = nullptr;
  int recent_repairs = 0;
  for (const auto& r : records) {
    auto detected = r.phase_times.count("Detected") ? kube::ParseTime(r.phase_times.at("Detected"))
                                                    : std::nullopt;
    if (detected && now - *detected <= policy_.repairs_window) ++recent_repairs;
    if (!Terminal(r.phase) && !open) {
      rec.cr = r;
      open = &rec;
    }
  }
  if (!open) {
    // The informer may not have seen a record this controller created a moment ago.
    std::string created;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = created_.find(name); it != created_.end()) created = it->second;
    }
    if (!created.empty()) {
      auto res = client_.Get(kNodeRepairs + "/" + created);
      if (res && res->ok()) {
        if (auto r = kube::DecodeNodeRepair(res->body); r && !Terminal(r->phase)) {
          rec.cr = *r;
          open = &rec;
        }
      }
    }
  }
  if (open) {
    // The record itself is read fresh: a cached copy a moment behind this controller's own last
    // write would lose what that write added (the evicted pods, an action).
    auto res = client_.Get(kNodeRepairs + "/" + open->cr.meta.name);
    if (res && res->ok()) {
      if (auto fresh = kube::DecodeNodeRepair(res->body)) open->cr = *fresh;
    } else if (res && res->status == 404) {
      open = nullptr;
    }
  }
  if (open && Terminal(open->cr.phase)) open = nullptr;
  if (open && open->cr.attempts == 0) open->cr.attempts = std::max(1, recent_repairs);
  auto node = world_.node(name);
  if (!node) {
    Undefer(name);
    if (open) {
      open->Phase(open->cr.phase == "Remediating" ? "Replaced" : "Failed", now);
      open->Message("the Node object is gone");
      if (!WriteStatus(*open)) return milliseconds(2000);
    }
    return std::nullopt;
  }
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
  std::optional<SysTime> quarantined_at;
  if (!fault) {
    Undefer(name);  // a fault that cleared before its record was written
    if (!open && !HasTaint(*node, keys::kFaultTaint, "", "")) return std::nullopt;
    if (open && open->cr.severity == "critical" && !open->At("Quarantined")) {
      // A GPU-level episode whose fault cleared (the agent's verified reset, or a reboot): the
      // node never left service, so there is nothing to release and no probation to sit out.
      const auto answer = AnswerTo(*node, open->cr.meta.name);
      const std::string how = answer && answer->state == "succeeded"
                                  ? "GPU reset and verified by the node's agent"
                                  : "the GPU fault cleared";
      open->Phase("Recovered", now, how);
      open->Message(how + "; the node stayed in service");
      if (!WriteStatus(*open)) return milliseconds(2000);
      return std::nullopt;
    }
    // Healthy since the last of our domains returned to True.
    SysTime healthy_since{};
    for (const auto& c : node->conditions) {
      if (!IsDomain(c.type)) continue;
      if (auto t = kube::ParseTime(c.last_transition_time))
        healthy_since = std::max(healthy_since, *t);
    }
    if (now - healthy_since < policy_.probation)
      return Until(now, healthy_since + policy_.probation);
    return Release(*node, open);
  }
  const bool gpu_rung = fault->gpu_level && !policy_.critical_node_level;
  if (!open && !records.empty()) {
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
  if (!open) {
    // Quarantine first: it is the urgent, cheap and reversible step; the record follows. A
    // GPU-level fault leaves the node in service: the agent drains just that GPU.
    if (!gpu_rung) {
      std::optional<SysTime> deferred;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = deferred_.find(name); it != deferred_.end()) deferred = it->second;
      }
      if (!Quarantine(*node, *fault)) return milliseconds(500);
      quarantined_at = deferred.value_or(now);
      // In a burst (other nodes waiting in the queue), every faulty node's quarantine goes before
      // any node's record, checkpoint and drain: those take several API writes each, and
      // meanwhile the scheduler could still place pods on the untainted nodes further back. Once
      // per episode; the record keeps the quarantine's time.
      if (!deferred && world_.backlog && world_.backlog()) {
        std::lock_guard<std::mutex> lock(mu_);
        deferred_[name] = now;
        return milliseconds(0);
      }
    }
    // <node>-<unix ms>: one per episode, in time order by name (a superseded GPU-level episode and
    // the node-level one after it may start within the same second).
    rec.cr.meta.name =
        fmt::format("{}-{}", name, duration_cast<milliseconds>(now.time_since_epoch()).count());
    rec.cr.node = name;
    rec.cr.condition = fault->condition;
    rec.cr.reason = fault->reason;
    rec.cr.severity = std::string(ToString(fault->severity));
    rec.cr.attempts = recent_repairs + 1;
    nlohmann::json obj = {
        {"apiVersion", "gpuheal.io/v1alpha1"},
        {"kind", "NodeRepair"},
        {"metadata",
         {{"name", rec.cr.meta.name}, {"labels", {{std::string(keys::kRepairNodeLabel), name}}}}},
        {"spec",
         {{"node", name},
          {"trigger",
           {{"condition", fault->condition},
            {"reason", fault->reason},
            {"severity", rec.cr.severity},
            {"message", fault->message.substr(0, 1024)}}}}}};
    if (!fault->gpus.empty()) obj["spec"]["trigger"]["gpus"] = fault->gpus;
    auto res = client_.Create(kNodeRepairs, obj);
    if (!res || (!res->ok() && res->status != 409)) {
      Log("warn", "cannot create the NodeRepair record; retrying in 2 s",
          {{"node", name}, {"error", res ? res->Describe() : res.error().message}});
      return milliseconds(2000);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      created_[name] = rec.cr.meta.name;
      deferred_.erase(name);
    }
    open = &rec;
    rec.Phase(
        "Detected", quarantined_at.value_or(now),
        fmt::format("{} {}: {}", fault->condition, fault->reason, fault->message.substr(0, 512)));
    rec.dirty = true;
  }
  const bool open_gpu_episode = open->cr.severity == "critical" && !open->At("Quarantined");
  if (open_gpu_episode && !gpu_rung) {
    // A node-level fault arrived while a GPU-level repair was open: that episode ends here and
    // the node-level one starts at the next reconcile.
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

std::optional<milliseconds> Repairer::Repair(const kube::Node& node, const NodeFault& f, Record& r,
                                             std::optional<SysTime> quarantined_at) {
  const auto now = world_.now();
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
                        keys::kFaultTaint, ToString(f.severity), EffectFor(node, f, false)));
  }
  if (r.cr.phase == "Detected" || r.cr.phase.empty()) r.Phase("Quarantined", now);
  if (policy_.provider == Provider::kStandby) {
    if (auto retry = PromoteStandby(node, r)) return retry;
  }

  // 2. Gates for everything disruptive.
  if (const GateResult held = Gate(node, static_cast<int>(r.cr.attempts), true)) {
    Held(node, r, held);
    return held.kind == GateResult::Kind::kAttemptCap ? std::nullopt
                                                      : std::optional(milliseconds(10000));
  }

  // An isolating fault's NoExecute only now: the taint manager would evict past every gate.
  if (EffectFor(node, f, true) != EffectFor(node, f, false)) {
    if (!Quarantine(node, f, true)) return milliseconds(500);
    r.Action(dry_run_ ? "would taint NoExecute (dry-run)"
                      : fmt::format("tainted {}={}:NoExecute once the gates allowed it",
                                    keys::kFaultTaint, ToString(f.severity)));
  }

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
        (void)client_.Patch(
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
        return Until(now, deadline);
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
        if (!WriteStatus(r)) return milliseconds(2000);
      }
      for (const auto& p : pods) {
        if (p.meta.deleting) continue;
        const std::string key = p.meta.namespace_ + "/" + p.meta.name;
        if (dry_run_) {
          r.Action("would evict " + key + " (dry-run)");
          continue;
        }
        auto res = client_.Evict(p.meta.namespace_, p.meta.name);
        if (res && res->ok()) {
          metrics_
              .GetCounter("gpuheal_controller_evictions_total",
                          "Pods evicted through the Eviction API")
              .Inc();
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
        return std::nullopt;
      }
      const auto drain_started = *r.At("Draining");
      if (now - drain_started > policy_.drain_timeout) {
        if (policy_.force_delete_after_drain_timeout) {
          for (const auto& p : pods) {
            (void)client_.Delete(kube::PodPath(p.meta.namespace_, p.meta.name), p.meta.uid, "", 0);
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
      return milliseconds(pdb_held ? 2000 : 500);
    }
    r.Phase("Drained", now);
    fault_to_drained_->Observe(std::chrono::duration<double>(now - f.since).count());
  }

  // 5. Remediate after the toleration window: the condition may still recover on its own.
  const auto deadline = f.since + policy_.TolerationFor(f.condition);
  if (now < deadline) {
    r.Message(fmt::format("drained; remediation with provider {} after the toleration window",
                          ToString(policy_.provider)));
    return Until(now, deadline);
  }
  switch (policy_.provider) {
    case Provider::kNone:
      r.Message("quarantined and drained; provider none: waiting for recovery or an operator");
      return std::nullopt;
    case Provider::kDeleteNode:
      return DeleteNode(node, r);
    case Provider::kExec: {
      // At most once: the command may reboot or reimage the node. Remediating is written before
      // it runs, so a record found in Remediating is one whose command this replica ran (its
      // outcome kept until written) or one a predecessor started and died in: that outcome is
      // unknown, and the repair ends Failed instead of waiting for ever or running it again.
      ExecOutcome outcome;
      if (r.At("Remediating")) {
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = exec_outcomes_.find(r.cr.meta.name); it != exec_outcomes_.end()) {
          outcome = it->second;
        } else {
          outcome.action = fmt::format(
              "did not run {} again: a controller stopped while it ran (Remediating since {}), its "
              "outcome unknown",
              policy_.exec_command[0],
              r.cr.phase_times.count("Remediating") ? r.cr.phase_times.at("Remediating") : "?");
          outcome.message =
              "remediation outcome unknown: check the node, then clear the fault or delete this "
              "record";
        }
      } else {
        r.Phase("Remediating", now);
        if (!WriteStatus(r))
          return milliseconds(
              2000);  // before the command: a crash afterwards must not run it twice
        auto run = RunArgv(policy_.exec_command, policy_.exec_timeout,
                           {{"NODE_NAME", node.meta.name}, {"REASON", f.reason}});
        outcome.ok = run && !run->timed_out && run->exit_code == 0;
        outcome.action = fmt::format("ran {}: {}", policy_.exec_command[0],
                                     !run             ? run.error().message
                                     : run->timed_out ? "timed out"
                                                      : fmt::format("exit {}", run->exit_code));
        outcome.message =
            outcome.ok ? "remediation command succeeded" : "remediation command failed";
        std::lock_guard<std::mutex> lock(mu_);
        exec_outcomes_[r.cr.meta.name] = outcome;
      }
      r.Action(outcome.action);
      r.Phase(outcome.ok ? "Replaced" : "Failed", now);
      r.Message(outcome.message);
      if (!WriteStatus(r)) return milliseconds(2000);
      {
        std::lock_guard<std::mutex> lock(mu_);
        exec_outcomes_.erase(r.cr.meta.name);
      }
      Event(node, outcome.ok ? "Normal" : "Warning",
            std::string(outcome.ok ? reason::kRemediated : reason::kRemediationFailed),
            r.cr.message);
      return std::nullopt;
    }
    case Provider::kStandby: {
      // Usually promoted at quarantine already (PromoteStandby); here the remediation is that
      // the standby has the node's place until the node recovers.
      if (!HasAction(r, kPromotedStandby)) {
        if (auto retry = PromoteStandby(node, r)) return retry;
        if (!HasAction(r, kPromotedStandby)) return milliseconds(30000);
      }
      if (!r.At("Remediating")) r.Phase("Remediating", now);
      r.Message(
          "drained; a standby node has this node's place, and this node becomes the pool's standby "
          "once it recovers");
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace gpuheal::controller
