#include "drill/drill.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "bmc/redfish.h"
#include "core/child.h"
#include "core/file.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/severity.h"
#include "core/time.h"
#include "core/xid_catalog.h"
#include "drill/decoy.h"
#include "drill/inject.h"
#include "drill/workloads.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/kube_config.h"
#include "kube/manifest.h"
#include "kube/objects.h"
#include "sim/sim.h"

namespace gpuheal::drill {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using std::chrono::milliseconds;

constexpr std::string_view kRepairs = kube::kNodeRepairsPath;
constexpr const char* kSystemNs = "gpuheal-system";
constexpr const char* kBmcSecret = "gpuheal-drill-bmc";  // bmc: the emulator's credentials
constexpr const char* kBmcEndpoints = "gpuheal-drill-bmc-endpoints";  // bmc: node -> its BMC
constexpr const char* kLease = "gpuheal-drill";
// replace-karpenter: the kwok NodeClass control-plane.sh --with-karpenter creates, and the
// instance type of tools/peers/karpenter/instance-types.json (8 GPUs).
constexpr const char* kKarpenterNodeClass = "gpu";
constexpr const char* kKarpenterInstanceType = "gpu-8x-amd64-linux";
// gpu-scoped: NVIDIA's DRA driver name and the DeviceClass of its GPUs; the faulty GPU
// (0000:3b:00, the third of the NVML double's) is device gpu-2 of its node's pool.
constexpr const char* kDraDriver = "gpu.nvidia.com";
constexpr const char* kDraClass = "gpu.nvidia.com";
constexpr const char* kDraVictimDevice = "gpu-2";
constexpr int kAgentsOnEveryNodeUpTo = 64;
// rack: the simulated nodes' failure-domain label (a drill's own; clusters name theirs in the
// policy's failure_domains.labels), four nodes to a rack.
constexpr const char* kRackLabel = "drill.gpuheal.io/rack";
constexpr int kRackSize = 4;
// service: the clients' rate, how long they send before the fault (the baseline) and after the
// replacement pod runs.
constexpr int kServiceRate = 200;
constexpr std::chrono::seconds kServiceBaseline{2};
constexpr std::chrono::seconds kServiceAfter{1};

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool HasTaint(const kube::Node& n, std::string_view key) {
  return std::any_of(n.taints.begin(), n.taints.end(),
                     [&](const kube::Taint& t) { return t.key == key; });
}

// True once the agent whose state directory is `dir` has saved its cursor past the record of the
// last fault line it wrote (dir/faults.jsonl): from then on a restart never reports that record
// again; a kill before it reports the record again (at least once, docs/recovery.md).
bool CursorPastLastFault(const std::string& dir) {
  std::ifstream faults(dir + "/faults.jsonl");
  std::string line, last;
  while (std::getline(faults, line)) {
    if (!line.empty()) last = line;
  }
  const auto fault = nlohmann::json::parse(last, nullptr, false);
  std::ifstream state(dir + "/agent-state.json");
  const auto cursor = nlohmann::json::parse(state, nullptr, false);
  if (!fault.is_object() || !fault.value("kmsg_seq", nlohmann::json()).is_number() ||
      !cursor.is_object())
    return false;
  return cursor.value("last_seq", uint64_t{0}) >= fault["kmsg_seq"].get<uint64_t>();
}

// What one scenario does differently.
struct Plan {
  int xid = 79;
  // The processes the fault names, one driver message each (flap: three programs failing on one
  // GPU, raised to fatal by the distinct-workloads rule).
  std::vector<std::string> processes = {"trainer"};
  int pods_per_node = 1;
  int fault_nodes = 1;
  milliseconds checkpoint_delay{200};  // how long the simulated workloads take to checkpoint
  std::string policy;                  // the controller's policy for this scenario
  bool external_agent = false;         // the target's agent is a process the drill can kill
  milliseconds agent_quiet{0};
  // replace-*: the target node is owned by a Karpenter NodeClaim ("karpenter") or a Cluster API
  // Machine ("capi"), and the provisioner is the real controller: Karpenter with its kwok cloud
  // provider (control-plane.sh --with-karpenter), or Cluster API's core manager with the docker
  // provider's inMemory backend (control-plane.sh --with-capi). Each launches the target and its
  // replacement; the sim is their kubelet.
  std::string replace;
  // bmc: the target's BMC is a Redfish emulator; the ladder power-cycles the node through it and
  // the drill plays the machine (its agent stops at power off and starts on a new boot at on).
  bool bmc = false;
  // rack: the nodes carry kRackLabel; the first fault_nodes - 1 targets share a rack.
  bool racks = false;
  // predictive: `xid` is a precursor; the fatal fault it preceded is replayed on the same GPU
  // `fatal_after` after it, as the recorded incident had them (compressed).
  int fatal_xid = 0;
  milliseconds fatal_after{0};
  // gpu-scoped: the drill plays NVIDIA's DRA driver (a ResourceSlice naming the target's GPUs)
  // and the scheduler's allocation (a claim per pod of the target, one GPU each).
  bool dra = false;
  // service, training: the workload's containers are real processes (the sim's process runtime
  // running tools/workload), and the run measures what their users saw (drill/workloads.h).
  std::string workload;
};

std::string PolicyYaml(const std::string& toleration, const std::string& probation,
                       const std::string& provider = "{name: standby}",
                       const std::string& pools_extra = "") {
  // The shipped defaults (deploy/kubernetes/controller.yaml) with drill-sized windows: a repair is
  // rehearsed in seconds, not in the 10 minutes a real node gets to recover on its own. A GPU that
  // fell off the bus has no state to save: its pods are evicted without a checkpoint wait.
  return fmt::format(
      "# gpuheal drill: the shipped policy with drill-sized windows\n"
      "toleration: {{AcceleratedHardwareReady: {0}, default: {0}}}\n"
      "checkpoint: {{window: 30s, catastrophic_window: 0s}}\n"
      "eviction: {{drain_timeout: 10m, after_drain_timeout: wait, gpu_pods_only: false}}\n"
      "skip: {{namespaces: [kube-system]}}\n"
      "pools: {{label: gpuheal.io/pool, max_unavailable_percent: 20{3}}}\n"
      "breaker: {{share_percent: 30, window: 5m, quiet: 15m}}\n"
      "attempts: {{max: 3, window: 7d}}\n"
      "probation: {1}\n"
      "provider: {2}\n"
      "critical: {{action: gpu-reset, request_timeout: 1m}}\n",
      toleration, probation, provider, pools_extra);
}

Plan PlanFor(const DrillOptions& o) {
  Plan p;
  p.policy = PolicyYaml("2s", "2s");
  const int gpu_nodes = o.nodes + o.standby * o.pools;
  if (o.scenario == "pdb") {
    // Two pods per node and a budget of one: the second eviction waits for the first pod's
    // replacement to be Ready. Fatal (NoSchedule): a catastrophic fault's NoExecute taint would
    // have Kubernetes' taint manager delete the pods without asking the budget.
    p.xid = 48;
    p.pods_per_node = 2;
  } else if (o.scenario == "flap") {
    // Xid 13 from three programs on one GPU: raised to fatal by the distinct-workloads rule,
    // cleared after a quiet period (2 s here).
    p.xid = 13;
    p.processes = {"trainer", "evaluator", "profiler"};
    p.agent_quiet = 2s;
    p.policy = PolicyYaml("60s", "1s");
  } else if (o.scenario == "correlated") {
    p.xid = 48;
    p.fault_nodes = o.fault_nodes > 0 ? o.fault_nodes : gpu_nodes * 30 / 100 + 1;
  } else if (o.scenario == "controller-crash") {
    p.xid = 48;
    p.pods_per_node = 2;
    p.checkpoint_delay = 1500ms;  // the controller is killed inside the checkpoint window
  } else if (o.scenario == "agent-restart") {
    p.external_agent = true;
  } else if (o.scenario == "critical") {
    p.xid = 45;
    p.external_agent = true;
  } else if (o.scenario == "gpu-scoped") {
    // Xid 45 on one GPU of a node whose eight pods hold one GPU each through DRA claims: that
    // GPU's device is tainted, its pod alone checkpoints and goes, the agent resets the GPU.
    p.xid = 45;
    p.external_agent = true;
    p.dra = true;
    p.pods_per_node = 8;
  } else if (o.scenario == "replace-karpenter" || o.scenario == "replace-capi") {
    // The node is replaced, not repaired: delete-node deletes its NodeClaim or Machine, the
    // provisioner removes the machine and launches a new one in the pool, and the repair ends
    // when that node joins. The pool keeps its standby; the new node serves.
    p.replace = o.scenario == "replace-karpenter" ? "karpenter" : "capi";
    p.policy = PolicyYaml("2s", "2s", "{name: delete-node, replacement_timeout: 2m}",
                          fmt::format(", standby: {}", o.standby));
  } else if (o.scenario == "bmc") {
    // The standby takes the node's place at quarantine; the ladder power-cycles the node
    // through its BMC (delete-node would follow if it did not come back); the node, back with
    // its fault cleared, is released as the pool's standby.
    p.bmc = true;
    p.external_agent = true;
    p.policy =
        PolicyYaml("2s", "2s",
                   fmt::format("{{name: standby, replacement_timeout: 2m, redfish: "
                               "{{credentials_secret: {0}/{1}, endpoints_configmap: {0}/{2}, "
                               "allowed_endpoints: [127.0.0.1/32], allow_insecure_http: true, "
                               "reset_types: [PowerCycle, ForceRestart], request_timeout: 5s, "
                               "recovery_timeout: 60s}}}}",
                               kSystemNs, kBmcSecret, kBmcEndpoints)) +
        "ladder: {catastrophic: [redfish, delete-node]}\n";
  } else if (o.scenario == "rack") {
    // A rack's four nodes lose their GPUs at once (Xid 79) and a fifth node elsewhere does too:
    // one infrastructure incident holds the rack's remediation (its nodes are still quarantined
    // and drained); the fifth is repaired as usual. The breaker and the pool gate are widened so
    // that the failure domain alone holds what is held.
    p.racks = true;
    p.fault_nodes = kRackSize + 1;
    // The remediation is a command that succeeds (the record Replaced): the standby provider
    // would leave a third faulty node of a pool without a standby waiting, not remediating.
    p.policy = PolicyYaml("2s", "2s", "{name: exec, command: [/bin/true], timeout: 30s}");
    for (auto [from, to] :
         {std::pair<std::string, std::string>{"share_percent: 30", "share_percent: 60"},
          {"max_unavailable_percent: 20", "max_unavailable_percent: 60"}}) {
      p.policy.replace(p.policy.find(from), from.size(), to);
    }
    p.policy +=
        fmt::format("failure_domains: {{labels: [{}], nodes: 3, window: 5m}}\n", kRackLabel);
  } else if (o.scenario == "predictive") {
    // A recorded incident replayed: a row remap (Xid 63, a precursor) on one GPU, then 15 s later
    // (hours, in the fleet) an Xid 48 on the same GPU. The agent marks the GPU at risk; the
    // controller (drain-at-boundary) cordons the node, its pod checkpoints and goes, the agent
    // resets the GPU (the NVML double) and the node is uncordoned, all before the replayed fatal
    // fault.
    p.xid = 63;
    p.fatal_xid = 48;
    p.fatal_after = 15s;
    p.external_agent = true;
    p.checkpoint_delay = 500ms;
    p.policy = PolicyYaml("2s", "2s") + "predictive: {action: drain-at-boundary}\n";
  } else if (o.scenario == "service") {
    // Xid 79 under a service's load: each node's pod is an HTTP server, its clients a load
    // generator balancing over the Service's ready endpoints, from before the fault until after
    // the replacement serves.
    p.workload = "service";
  } else if (o.scenario == "training") {
    // Xid 48 (fatal: the checkpoint window applies) under a training job: each node runs a
    // trainer that checkpoints when gpuheal asks and one that checkpoints on its schedule only.
    // The window is cut to 3 s: the second never answers.
    p.xid = 48;
    p.workload = "training";
    p.pods_per_node = 2;
    p.policy = PolicyYaml("2s", "2s");
    const std::string from = "checkpoint: {window: 30s";
    p.policy.replace(p.policy.find(from), from.size(), "checkpoint: {window: 3s");
  } else if (o.scenario == "runtime") {
    // The node's container runtime (a real containerd the drill starts on its own socket) stops
    // answering CRI Status: ContainerRuntimeReady=False, then the same repair as a fatal Xid, the
    // domain's 30-minute toleration shortened like every other.
    p.external_agent = true;
  }
  if (!o.workload.empty() && p.workload.empty()) {
    // The scenario under a service's load or a training job (docs/drill.md): its own fault and
    // checks, and what the workload's users saw.
    // The checkpoint window is cut to 3 s, as in training: trainer-periodic and the HTTP
    // servers never answer a checkpoint request, and every pod waits the window out.
    p.workload = o.workload;
    if (o.workload == "training" && !p.dra) p.pods_per_node = 2;  // a trainer of each kind
    const std::string from = "checkpoint: {window: 30s";
    if (auto at = p.policy.find(from); at != std::string::npos)
      p.policy.replace(at, from.size(), "checkpoint: {window: 3s");
  }
  if (o.xid > 0) p.xid = o.xid;
  if (o.real_kmsg) p.external_agent = true;
  return p;
}

// A pod as the drill watches it: the typed pod and who is taking it away (its DisruptionTarget
// condition: EvictionByEvictionAPI for gpuheal's evictions, DeletionByTaintManager when
// Kubernetes' NoExecute taint manager deletes it first).
struct DrillPod {
  kube::ObjectMeta meta;
  kube::Pod pod;
  std::string disruption;
};

Result<DrillPod> DecodeDrillPod(std::string_view j) {
  auto p = kube::DecodePod(j);
  if (!p) return p.error();
  DrillPod d{p->meta, *p, ""};
  try {
    const json js = json::parse(j, nullptr, false);
    if (js.is_object() && js.contains("status") && js["status"].is_object()) {
      for (const auto& c : js["status"].value("conditions", json::array())) {
        if (c.is_object() && c.value("type", "") == "DisruptionTarget" &&
            c.value("status", "") == "True")
          d.disruption = c.value("reason", "");
      }
    }
  } catch (const json::exception& e) {
    return Error{std::string("Pod: status.conditions: ") + e.what()};
  }
  return d;
}

Result<kube::List<DrillPod>> DecodeDrillPodList(std::string_view j) {
  const json js = json::parse(j, nullptr, false);
  if (!js.is_object() || !js.contains("items") || !js["items"].is_array())
    return Error{"PodList: not a list"};
  kube::List<DrillPod> out;
  if (js.contains("metadata") && js["metadata"].is_object()) {
    out.resource_version = js["metadata"].value("resourceVersion", "");
    out.continue_token = js["metadata"].value("continue", "");
  }
  for (const auto& item : js["items"]) {
    auto d = DecodeDrillPod(item.dump());
    if (!d) return d.error();
    out.items.push_back(std::move(*d));
  }
  return out;
}

// One run's world: the simulated cluster's names and what the drill saw happen, timed.
struct PodTrack {
  std::string name, node;
  bool initial = false;  // existed when the fault was injected
  int64_t scheduled_us = 0, running_us = 0, deleting_us = 0;
  bool checkpoint_requested = false, checkpoint_done = false;
  std::string disruption;  // DisruptionTarget reason once it is going
};

struct NodeTrack {
  kube::Node node;
  int false_transitions = 0;  // a domain turned False (seen by the drill)
  bool was_false = false;
  std::string false_since;  // lastTransitionTime of the first False domain
};

class Observer {
 public:
  explicit Observer(const std::function<void(const std::string&)>& live) : live_(live) {}
  ~Observer() { Stop(); }

  Status Start(const kube::Config& cfg, const std::string& ns, const std::set<std::string>& nodes) {
    ns_ = ns;
    nodes_ = nodes;
    for (int i = 0; i < 3; ++i) {
      auto c = kube::Client::Create(cfg);
      if (!c) return c.error();
      clients_.push_back(std::move(*c));
    }
    node_inf_ = std::make_unique<kube::Informer<kube::Node>>(
        *clients_[0], kube::NodePath() + "?labelSelector=gpuheal.io%2Fsim%3Dtrue",
        kube::DecodeNodeList, kube::DecodeNode);
    pod_inf_ = std::make_unique<kube::Informer<DrillPod>>(*clients_[1], kube::PodPath(ns),
                                                          DecodeDrillPodList, DecodeDrillPod);
    rep_inf_ = std::make_unique<kube::Informer<kube::NodeRepair>>(
        *clients_[2], std::string(kRepairs), kube::DecodeNodeRepairList, kube::DecodeNodeRepair);
    node_inf_->SetHandlers({[this](const kube::Node& n) { OnNode(n); },
                            [this](const kube::Node&, const kube::Node& n) { OnNode(n); },
                            nullptr});
    pod_inf_->SetHandlers({[this](const DrillPod& p) { OnPod(p); },
                           [this](const DrillPod&, const DrillPod& p) { OnPod(p); }, nullptr});
    rep_inf_->SetHandlers(
        {[this](const kube::NodeRepair& r) { OnRepair(r); },
         [this](const kube::NodeRepair&, const kube::NodeRepair& r) { OnRepair(r); }, nullptr});
    node_inf_->Start();
    pod_inf_->Start();
    rep_inf_->Start();
    if (!node_inf_->WaitForSynced(30s) || !pod_inf_->WaitForSynced(30s) ||
        !rep_inf_->WaitForSynced(30s)) {
      return Error{"the drill's watches of Nodes, Pods and NodeRepairs did not sync within 30 s"};
    }
    return Status::Ok();
  }

  void Stop() {
    stop_ = true;
    if (file_thread_.joinable()) file_thread_.join();
    if (node_inf_) node_inf_->Stop();
    if (pod_inf_) pod_inf_->Stop();
    if (rep_inf_) rep_inf_->Stop();
  }

  // The fault is about to be written into these nodes' kernel logs: pods seen so far are the
  // workload's, later ones replacements; time runs from `t0`.
  void Arm(const std::vector<std::string>& targets,
           const std::map<std::string, std::string>& fault_files,
           std::set<std::string> standby_nodes, int replicas, int64_t t0) {
    std::lock_guard<std::mutex> lock(mu_);
    targets_ = std::set<std::string>(targets.begin(), targets.end());
    standby_ = std::move(standby_nodes);
    replicas_ = replicas;
    for (auto& [uid, p] : pods_) {
      p.initial = true;
      if (targets_.count(p.node)) ++target_pods_;
    }
    for (const auto& [node, path] : fault_files) {
      struct stat st {};
      file_size_[path] = stat(path.c_str(), &st) == 0 ? st.st_size : 0;
    }
    t0_ = armed_at_ = t0;
    file_thread_ = std::thread([this, fault_files] { WatchFaultFiles(fault_files); });
  }

  // The same-run baseline: a merge patch of one annotation on `node` until the watch delivers it.
  std::optional<double> ProbeApiWrite(kube::Client& c, const std::string& node,
                                      const std::atomic<bool>& interrupted) {
    std::string value;
    {
      std::lock_guard<std::mutex> lock(mu_);
      probe_value_ = value = std::to_string(++probes_);
      probe_seen_us_ = 0;
    }
    const int64_t start = NowUs();
    auto r = c.Patch(kube::NodePath(node), kube::PatchType::kMerge,
                     {{"metadata", {{"annotations", {{kProbe, value}}}}}});
    if (!r || !r->ok()) return std::nullopt;
    if (!WaitFor([&] { return probe_seen_us_ != 0; }, std::chrono::steady_clock::now() + 5s,
                 interrupted))
      return std::nullopt;
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<double>(probe_seen_us_ - start) / 1000.0;
  }

  // A node that joins during the run (a provisioner's replacement): watched from now on.
  void Watch(const std::string& node) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      nodes_.insert(node);
    }
    // A node that registered before it was watched (Karpenter's): its state as last seen.
    if (node_inf_) {
      if (auto n = node_inf_->Get(node)) OnNode(*n);
    }
  }

  // The run is over: what teardown does is not part of the timeline.
  void Disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    t0_ = 0;
  }

  // Records a step the drill itself caused (a kill, a restart).
  void Mark(const std::string& key, const std::string& detail) {
    std::lock_guard<std::mutex> lock(mu_);
    Record(key, NowUs(), detail);
  }
  // Records a step that happened at `us` (µs since the epoch), measured by the drill after the
  // fact (the service's last failed answer, the training run's resumption).
  void MarkAt(const std::string& key, int64_t us, const std::string& detail) {
    std::lock_guard<std::mutex> lock(mu_);
    Record(key, us, detail);
  }
  int64_t ArmedAt() const { return armed_at_; }  // under the lock
  // Records a step the drill saw, from a predicate passed to WaitFor (the lock is held there).
  void MarkLocked(const std::string& key, const std::string& detail) {
    Record(key, NowUs(), detail);
  }

  // Waits until `pred` holds (checked on every change and every 20 ms) or the deadline.
  bool WaitFor(const std::function<bool()>& pred, std::chrono::steady_clock::time_point deadline,
               const std::atomic<bool>& interrupted) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!pred()) {
      if (interrupted || std::chrono::steady_clock::now() >= deadline) return false;
      cv_.wait_for(lock, 20ms);
    }
    return true;
  }
  // Under the lock: for predicates passed to WaitFor and for the checks.
  bool Has(const std::string& step) const { return steps_.count(step) > 0; }
  int64_t At(const std::string& step) const { return steps_.count(step) ? steps_.at(step) : 0; }
  int RunningPods() const {
    int n = 0;
    for (const auto& [uid, p] : pods_) n += p.running_us > 0 && p.deleting_us == 0;
    return n;
  }
  bool AgentsReporting(const std::vector<std::string>& nodes) const {
    for (const auto& n : nodes) {
      auto it = nodes_seen_.find(n);
      if (it == nodes_seen_.end()) return false;
      const auto& c = it->second.node.conditions;
      if (std::none_of(c.begin(), c.end(), [](const kube::NodeCondition& x) {
            return x.type == "AcceleratedHardwareReady";
          })) {
        return false;
      }
    }
    return true;
  }
  std::mutex& mu() { return mu_; }
  const std::map<std::string, PodTrack>& pods() const { return pods_; }
  const std::map<std::string, NodeTrack>& nodes() const { return nodes_seen_; }
  const std::map<std::string, kube::NodeRepair>& repairs() const { return repairs_; }
  std::map<std::string, double> StepsMs() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, double> out;
    for (const auto& [k, us] : steps_) out[k] = static_cast<double>(us - armed_at_) / 1000.0;
    return out;
  }
  int target_pods() const { return target_pods_; }

 private:
  void Record(const std::string& key, int64_t us, const std::string& detail) {
    if (t0_ == 0 || steps_.count(key)) return;
    steps_[key] = us;
    if (live_)
      live_(fmt::format("  T+{:>9.1f} ms  {:<30} {}\n", static_cast<double>(us - t0_) / 1000.0,
                        StepLabel(key), detail));
    cv_.notify_all();
  }

  void WatchFaultFiles(std::map<std::string, std::string> files) {
    const int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd < 0) return;
    for (const auto& [node, path] : files) inotify_add_watch(fd, path.c_str(), IN_MODIFY);
    std::set<std::string> grown;
    // The sizes are looked at before the first wait too: a line written before the watch was in
    // place raises no event, and would be seen only at the poll's timeout.
    for (bool first = true; !stop_ && grown.size() < files.size(); first = false) {
      pollfd p{fd, POLLIN, 0};
      if (!first && poll(&p, 1, 50) > 0) {
        char buf[4096];
        while (read(fd, buf, sizeof buf) > 0) {
        }
      }
      const int64_t now = NowUs();
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [node, path] : files) {
        struct stat st {};
        if (!grown.count(node) && stat(path.c_str(), &st) == 0 && st.st_size > file_size_[path]) {
          grown.insert(node);
          if (grown.size() == files.size()) {
            Record("detected", now,
                   files.size() == 1 ? "fault line from the agent of " + node
                                     : fmt::format("by the agents of all {} nodes", files.size()));
          }
        }
      }
    }
    close(fd);
  }

  void OnNode(const kube::Node& n) {
    const int64_t now = NowUs();
    std::lock_guard<std::mutex> lock(mu_);
    if (!nodes_.count(n.meta.name)) return;
    if (auto p = n.meta.annotations.find(kProbe);
        p != n.meta.annotations.end() && p->second == probe_value_ && !probe_seen_us_) {
      probe_seen_us_ = now;
      cv_.notify_all();
    }
    NodeTrack& t = nodes_seen_[n.meta.name];
    t.node = n;
    bool any_false = false;
    for (const auto& c : n.conditions) {
      if (IsDomain(c.type) && c.status == "False") {
        any_false = true;
        if (t.false_since.empty()) t.false_since = c.last_transition_time;
      }
    }
    if (any_false && !t.was_false) ++t.false_transitions;
    t.was_false = any_false;
    Evaluate(now, n.meta.name);
    cv_.notify_all();
  }

  void OnPod(const DrillPod& dp) {
    const int64_t now = NowUs();
    const kube::Pod& p = dp.pod;
    std::lock_guard<std::mutex> lock(mu_);
    PodTrack& t = pods_[p.meta.uid];
    if (!dp.disruption.empty()) t.disruption = dp.disruption;
    t.name = p.meta.name;
    if (!p.node_name.empty()) {
      t.node = p.node_name;
      if (!t.scheduled_us) t.scheduled_us = now;
    }
    if (p.phase == "Running" && !t.running_us) t.running_us = now;
    if (p.meta.deleting && !t.deleting_us) t.deleting_us = now;
    t.checkpoint_requested = p.meta.annotations.count(std::string(keys::kCheckpointRequested)) > 0;
    t.checkpoint_done = p.meta.annotations.count(std::string(keys::kCheckpointDone)) > 0;
    Evaluate(now, "");
    cv_.notify_all();
  }

  void OnRepair(const kube::NodeRepair& r) {
    const int64_t now = NowUs();
    std::lock_guard<std::mutex> lock(mu_);
    if (!targets_.count(r.node)) {
      if (nodes_.count(r.node)) repairs_[r.meta.name] = r;
      return;
    }
    repairs_[r.meta.name] = r;
    std::set<std::string> phases;
    for (const auto& [ph, at] : r.phase_times) phases.insert(ph);
    if (!r.phase.empty()) phases.insert(r.phase);
    for (const auto& ph : phases) {
      // For several nodes at once: the step is when the last of them reached the phase.
      int reached = 0;
      for (const auto& [name, rec] : repairs_) {
        if (targets_.count(rec.node) && (rec.phase == ph || rec.phase_times.count(ph))) ++reached;
      }
      if (reached < static_cast<int>(targets_.size())) continue;
      std::string key = "repair_" + ph;
      std::transform(key.begin(), key.end(), key.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      Record(key, now,
             targets_.size() == 1
                 ? r.meta.name + (r.message.empty() ? "" : ": " + r.message.substr(0, 120))
                 : "");
    }
    cv_.notify_all();
  }

  // Derived steps, from the state of all nodes and pods.
  void Evaluate(int64_t now, const std::string& changed_node) {
    if (t0_ == 0) return;
    const size_t k = targets_.size();
    auto all_targets = [&](const std::function<bool(const NodeTrack&)>& f) {
      for (const auto& name : targets_) {
        auto it = nodes_seen_.find(name);
        if (it == nodes_seen_.end() || !f(it->second)) return false;
      }
      return true;
    };
    auto target_desc = [&](const std::string& what) {
      return k == 1 ? what + " on " + *targets_.begin()
                    : fmt::format("{} on all {} nodes", what, k);
    };
    if (!changed_node.empty()) {
      if (all_targets([](const NodeTrack& t) { return t.was_false; })) {
        std::string detail;
        for (const auto& c : nodes_seen_[*targets_.begin()].node.conditions) {
          if (c.status == "False" && IsDomain(c.type)) {
            detail = c.type + "=False " + c.reason;
          }
        }
        Record("condition", now,
               k == 1 ? detail + " on " + *targets_.begin() : target_desc("a domain False"));
      }
      if (all_targets([](const NodeTrack& t) { return HasTaint(t.node, keys::kFaultTaint); })) {
        std::string detail;
        for (const auto& t : nodes_seen_[*targets_.begin()].node.taints) {
          if (t.key == keys::kFaultTaint)
            detail = fmt::format("{}={}:{}", t.key, t.value, t.effect);
        }
        Record("taint", now, target_desc(detail));
      }
      if (Has("condition") && all_targets([](const NodeTrack& t) { return !t.was_false; })) {
        Record("condition_cleared", now, target_desc("every domain True"));
      }
      if (Has("taint") && all_targets([](const NodeTrack& t) {
            return !HasTaint(t.node, keys::kFaultTaint) && !t.node.unschedulable;
          })) {
        Record("released", now, target_desc("taint and cordon removed"));
      }
      if (all_targets([](const NodeTrack& t) {
            auto a = t.node.meta.annotations.find(std::string(keys::kGpuFaults));
            return a != t.node.meta.annotations.end() && a->second != "{}" && !a->second.empty();
          })) {
        Record("gpu_fault_published", now, target_desc(std::string(keys::kGpuFaults)));
      }
      if (all_targets([](const NodeTrack& t) {
            return t.node.meta.annotations.count(std::string(keys::kGpuRecoveryRequest)) > 0;
          })) {
        Record("gpu_recovery_requested", now, target_desc(std::string(keys::kGpuRecoveryRequest)));
      }
      if (all_targets([](const NodeTrack& t) {
            auto a = t.node.meta.annotations.find(std::string(keys::kGpuRecoveryStatus));
            return a != t.node.meta.annotations.end() &&
                   a->second.find("\"succeeded\"") != std::string::npos;
          })) {
        Record("gpu_recovered", now, target_desc("the agent's answer: succeeded"));
      }
      for (const auto& s : standby_) {
        auto it = nodes_seen_.find(s);
        if (it != nodes_seen_.end() && !HasTaint(it->second.node, keys::kStandbyTaint)) {
          Record("standby_released", now, s + ": " + std::string(keys::kStandbyTaint) + " removed");
        }
      }
    }
    // Pods.
    int on_targets = 0, requested = 0, done = 0, deleting = 0, new_created = 0, new_scheduled = 0,
        new_running = 0, serving = 0;
    bool new_on_target = false;
    std::string first_by;
    for (const auto& [uid, p] : pods_) {
      if (p.initial && targets_.count(p.node)) {
        ++on_targets;
        requested += p.checkpoint_requested;
        done += p.checkpoint_done && !p.deleting_us;
        deleting += p.deleting_us > 0;
        if (p.deleting_us && first_by.empty()) first_by = p.disruption;
      }
      if (!p.initial) {
        ++new_created;
        new_scheduled += p.scheduled_us > 0;
        new_running += p.running_us > 0;
        new_on_target |= targets_.count(p.node) > 0;
      }
      serving += p.running_us > 0 && !p.deleting_us && !targets_.count(p.node);
    }
    if (on_targets == 0) return;
    if (requested > 0)
      Record("checkpoint_requested", now,
             fmt::format("{} pod(s) annotated {}", requested, keys::kCheckpointRequested));
    if (done == on_targets)
      Record("checkpoint_done", now,
             fmt::format("{} pod(s) answered {}", done, keys::kCheckpointDone));
    if (deleting > 0) {
      Record("first_eviction", now,
             first_by == "EvictionByEvictionAPI"
                 ? "a pod of the faulty node evicted through the Eviction API"
             : first_by == "DeletionByTaintManager"
                 ? "a pod of the faulty node deleted by Kubernetes' NoExecute taint manager"
                 : "a pod of the faulty node is terminating");
    }
    if (deleting == on_targets)
      Record("last_eviction", now,
             fmt::format("all {} pod(s) of the faulty node(s) terminating", on_targets));
    // Created (by the ReplicaSet controller), then bound (by the scheduler): which of the two a
    // slow replacement waited for.
    if (deleting > 0 && new_created >= deleting && deleting == on_targets) {
      Record("replacement_created", now, fmt::format("{} replacement pod(s) created", new_created));
    }
    if (deleting > 0 && new_scheduled >= deleting && deleting == on_targets) {
      Record("replacement_scheduled", now,
             fmt::format("{} replacement pod(s) bound to a node", new_scheduled));
    }
    if (deleting > 0 && new_running >= deleting && deleting == on_targets) {
      Record("replacement_running", now, fmt::format("{} replacement pod(s) Running", new_running));
    }
    if (deleting > 0 && serving >= replicas_ && !new_on_target) {
      Record("capacity_restored", now,
             fmt::format("{}/{} replicas Running on healthy nodes", serving, replicas_));
    }
  }

  const std::function<void(const std::string&)>& live_;
  std::string ns_;
  std::set<std::string> nodes_;  // this run's nodes
  std::vector<std::unique_ptr<kube::Client>> clients_;
  std::unique_ptr<kube::Informer<kube::Node>> node_inf_;
  std::unique_ptr<kube::Informer<DrillPod>> pod_inf_;
  std::unique_ptr<kube::Informer<kube::NodeRepair>> rep_inf_;
  std::thread file_thread_;
  std::atomic<bool> stop_{false};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t t0_ = 0;        // 0 while the drill is not timing (before the fault, after the checks)
  int64_t armed_at_ = 0;  // the kernel line's time
  std::set<std::string> targets_, standby_;
  int replicas_ = 0, target_pods_ = 0;
  std::map<std::string, off_t> file_size_;
  std::map<std::string, int64_t> steps_;
  std::map<std::string, PodTrack> pods_;  // by uid
  std::map<std::string, NodeTrack> nodes_seen_;
  std::map<std::string, kube::NodeRepair> repairs_;
  static constexpr const char* kProbe = "gpuheal.io/drill-probe";
  std::string probe_value_;
  int probes_ = 0;
  int64_t probe_seen_us_ = 0;
};

class Drill {
 public:
  Drill(const DrillOptions& o, const std::atomic<bool>& interrupted)
      : o_(o), interrupted_(interrupted) {}
  ~Drill() { Cleanup(); }

  Result<Report> Run() {
    if (auto s = Setup(); !s) return s.error();
    const Plan plan = PlanFor(o_);
    std::vector<RunResult> runs;
    for (int i = 0; i < o_.repeat && !interrupted_; ++i) {
      if (o_.repeat > 1) Say(fmt::format("\nrun {}/{}\n", i + 1, o_.repeat));
      auto r = o_.real_node ? RunRealNode(plan) : RunOnce(plan, i);
      if (!r) return r.error();
      runs.push_back(std::move(*r));
    }
    Report report = Summarise(o_.scenario, runs, interrupted_.load());
    report.workload = o_.workload;
    report.peers = peers_;
    return report;
  }

  // --keep: everything stays up until Ctrl-C.
  void Hold() {
    {
      Say(
          fmt::format("\n--keep: everything is still running. Explore with\n  export "
                      "KUBECONFIG={}\n  kubectl get nodes,noderepairs\n"
                      "  kubectl -n {} get pods -o wide\nLogs: {}\nPress Ctrl-C to clean up.\n",
                      kubeconfig_, last_ns_, work_));
    }
    while (!interrupted_) std::this_thread::sleep_for(100ms);
  }

 private:
  void Say(const std::string& s) {
    if (o_.live) o_.live(s);
  }
  std::string bmc_dir_, bmc_url_, bmc_password_;  // bmc: the emulator's
  // bmc: where the target, playing a compromised node, points its own BMC annotation.
  std::unique_ptr<Decoy> bmc_decoy_;
  // gpu-scoped: the ResourceSlice the drill published, and the pod holding the faulty GPU.
  struct DraSeen {
    std::vector<std::string> slices;   // the ResourceSlices published, one per node
    std::string victim, victim_claim;  // the pod holding GPU 0000:3b:00 and its claim
    std::atomic<bool> rule_seen{false}, rule_gone{false};
    std::string allocated_while_tainted;  // a claim given the tainted device while ruled
    DraSeen& operator=(const DraSeen&) {  // reset
      slices.clear();
      victim.clear();
      victim_claim.clear();
      rule_seen = rule_gone = false;
      allocated_while_tainted.clear();
      return *this;
    }
  } dra_;
  // predictive: when the drill saw each step (NowUs; 0: never).
  struct PredictiveSeen {
    int64_t at_risk_us = 0, cordoned_us = 0, uncordoned_us = 0, fatal_us = 0;
  } predictive_;
  // rack: what the rack's repairs showed while the incident held them, before the release.
  struct RackSeen {
    int held = 0, remediated = 0;  // rack nodes with status.incident; that reached Remediating
    bool released = false;         // the release annotation was written
    std::string detail;
  } rack_;

  Status Setup() {
    if (o_.work_dir.empty()) {
      char tmpl[] = "/tmp/gpuheal-drill-XXXXXX";
      if (!mkdtemp(tmpl))
        return Error{
            fmt::format("cannot create a work directory in /tmp: {}", std::strerror(errno))};
      work_ = tmpl;
    } else {
      work_ = o_.work_dir;
      std::error_code ec;
      std::filesystem::create_directories(work_, ec);
      if (ec) return Error{fmt::format("--work-dir {}: {}", work_, ec.message())};
    }
    // The logs of everything the drill runs in its own process (the sim, its agents) and of the
    // processes it starts go to files in the work directory; the terminal gets the timeline.
    const int log =
        open((work_ + "/drill.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log >= 0) {
      saved_stderr_ = dup(STDERR_FILENO);
      dup2(log, STDERR_FILENO);
      close(log);
    }
    id_ = fmt::format("{:04x}", std::random_device{}() & 0xffff);
    kubeconfig_ = o_.kubeconfig;
    if (kubeconfig_.empty()) {
      if (auto s = StartControlPlane(); !s) return s;
    }
    auto cfg = kube::LoadKubeconfig(kubeconfig_);
    if (!cfg) return cfg.error();
    cfg->user_agent = "gpuheal-drill/" GPUHEAL_VERSION;
    cfg->qps = 0;
    cfg_ = *cfg;
    auto c = kube::Client::Create(*cfg);
    if (!c) return c.error();
    client_ = std::move(*c);
    // deploy/: the NodeRepair CRD, the controller's namespace, RBAC and policy ConfigMap (not its
    // Deployment: the simulated nodes run no containers, so the controller runs here as a process).
    Say("installing deploy/crds/noderepairs.yaml and deploy/kubernetes/controller.yaml (without "
        "its Deployment)\n");
    json system_ns = {{"apiVersion", "v1"}, {"kind", "Namespace"}};
    system_ns["metadata"]["name"] = kSystemNs;
    if (auto s = kube::CreateObjects(*client_, {system_ns}); !s) return s.error();
    for (const std::string file :
         {"/deploy/crds/noderepairs.yaml", "/deploy/kubernetes/controller.yaml"}) {
      auto objs = kube::ReadManifest(o_.source_dir + file);
      if (!objs) return objs.error();
      if (auto s = kube::CreateObjects(
              *client_, *objs, [](const json& j) { return j.value("kind", "") != "Deployment"; });
          !s) {
        return Error{o_.source_dir + file + ": " + s.error().message};
      }
    }
    if (o_.scenario == "replace-karpenter") {
      if (auto s = FindKarpenter(); !s) return s;
    } else if (o_.scenario == "replace-capi") {
      if (auto s = FindCapi(); !s) return s;
    }
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    for (;;) {
      auto r = client_->Get(std::string(kRepairs) + "?limit=1");
      if (r && r->ok()) break;
      if (std::chrono::steady_clock::now() > deadline)
        return Error{"the NodeRepair CRD was not served within 30 s"};
      std::this_thread::sleep_for(100ms);
    }
    // The API server's first write to a new CRD took 2 s (measured: the controller's first
    // NodeRepair create, in run 1 of every drill on a fresh control plane). A cluster's CRD has
    // served writes long before its first fault, so a dry-run create takes that cost here.
    const json probe = {{"apiVersion", "gpuheal.io/v1alpha1"},
                        {"kind", "NodeRepair"},
                        {"metadata", {{"name", "gpuheal-drill-warm-up"}}},
                        {"spec",
                         {{"node", "none"},
                          {"trigger",
                           {{"condition", "AcceleratedHardwareReady"},
                            {"reason", "NvidiaXID79Error"},
                            {"severity", "catastrophic"},
                            {"message", "drill warm-up (dry run)"}}}}}};
    for (;;) {
      auto r = client_->Create(std::string(kRepairs) + "?dryRun=All", probe);
      if (r && r->ok()) break;
      if (std::chrono::steady_clock::now() > deadline) {
        return Error{"the API server did not accept a NodeRepair (dry run) within 30 s: " +
                     (r ? r->Describe() : r.error().message)};
      }
      std::this_thread::sleep_for(100ms);
    }
    return Status::Ok();
  }

  // replace-karpenter: Karpenter's controller runs beside the cluster (control-plane.sh
  // --with-karpenter started it, or the cluster of --kubeconfig has one) with the kwok NodeClass
  // "gpu" that the drill's NodePools launch from.
  Status FindKarpenter() {
    auto r = client_->Get("/apis/karpenter.kwok.sh/v1alpha1/kwoknodeclasses/" +
                          std::string(kKarpenterNodeClass));
    if (!r || !r->ok()) {
      return Error{fmt::format(
          "the replace-karpenter scenario needs Karpenter running with its kwok cloud provider "
          "and the KWOKNodeClass \"{}\" (scripts/control-plane.sh up --with-karpenter sets both "
          "up; a drill without --kubeconfig starts it): {}",
          kKarpenterNodeClass, r ? r->Describe() : r.error().message)};
    }
    if (!peers_.count("karpenter")) {
      peers_["karpenter"] = {"sigs.k8s.io/karpenter",
                             NotedVersion("karpenter.version", "sigs.k8s.io/karpenter")};
    }
    Say(fmt::format("Karpenter {} with the KWOKNodeClass {}\n", peers_["karpenter"].version,
                    kKarpenterNodeClass));
    return Status::Ok();
  }

  // A test bed's control plane (control-plane.sh --with-karpenter, --with-capi) notes the
  // versions of the peers it started beside its kubeconfig, a line "<module> <version>" each;
  // another cluster's peers are not known by version.
  std::string NotedVersion(const std::string& file, const std::string& module) const {
    const std::string note = std::filesystem::path(kubeconfig_).parent_path().string() + "/" + file;
    if (auto text = ReadWholeFile(note)) {
      std::istringstream in(*text);
      std::string m, v;
      while (in >> m >> v)
        if (m == module) return v;
    }
    return "unknown";
  }

  // replace-capi: Cluster API's core manager and its docker infrastructure provider run beside
  // the cluster (control-plane.sh --with-capi started them, or the cluster of --kubeconfig has
  // them), with the provider's DevMachineTemplate served.
  Status FindCapi() {
    for (const char* probe : {"/apis/cluster.x-k8s.io/v1beta2/machinedeployments?limit=1",
                              "/apis/infrastructure.cluster.x-k8s.io/v1beta2/devmachinetemplates"
                              "?limit=1"}) {
      auto r = client_->Get(probe);
      if (!r || !r->ok()) {
        return Error{fmt::format(
            "the replace-capi scenario needs Cluster API's core manager and its docker "
            "infrastructure provider running (scripts/control-plane.sh up --with-capi starts "
            "both; a drill without --kubeconfig starts it): {}: {}",
            probe, r ? r->Describe() : r.error().message)};
      }
    }
    peers_["cluster-api"] = {"sigs.k8s.io/cluster-api",
                             NotedVersion("capi.version", "sigs.k8s.io/cluster-api")};
    peers_["cluster-api-provider-docker"] = {
        "sigs.k8s.io/cluster-api/test",
        NotedVersion("capi.version", "sigs.k8s.io/cluster-api/test")};
    Say(fmt::format("Cluster API {} with the docker provider's inMemory backend ({})\n",
                    peers_["cluster-api"].version, peers_["cluster-api-provider-docker"].version));
    return Status::Ok();
  }

  Status StartControlPlane() {
    const std::string script = o_.source_dir + "/scripts/control-plane.sh";
    if (access(script.c_str(), R_OK) != 0) {
      return Error{
          fmt::format("no {}: give --kubeconfig of a cluster to drill in, or --source-dir of a "
                      "gpuheal checkout",
                      script)};
    }
    cp_dir_ = work_ + "/control-plane";
    Say("starting a local control plane (etcd, kube-apiserver, kube-controller-manager, "
        "kube-scheduler) in " +
        cp_dir_ + "\n");
    const std::string log = work_ + "/control-plane.log";
    // Client limits of 200 requests/s for kube-controller-manager and the scheduler, as clusters of
    // thousands of nodes run them: at the defaults (20 and 50/s) a 1,500-node drill waits minutes
    // for the node lifecycle controller and the scheduler before its workload is Running.
    std::vector<std::string> argv = {"/bin/bash", script,  "up",           "--with-controllers",
                                     "--dir",     cp_dir_, "--client-qps", "200"};
    if (o_.real_node) {
      argv.push_back("--with-node");
      Say("with this machine as a real node (containerd, runc, CNI, a kubelet)\n");
    }
    if (o_.scenario == "replace-karpenter") {
      argv.push_back("--with-karpenter");
      Say("with Karpenter's controller and its kwok cloud provider (sigs.k8s.io/karpenter)\n");
    }
    if (o_.scenario == "replace-capi") {
      argv.push_back("--with-capi");
      Say("with Cluster API's core manager and its docker provider (sigs.k8s.io/cluster-api)\n");
    }
    auto child = Child::Spawn(argv, log, log);
    if (!child) return child.error();
    int rc = -1;
    while ((rc = (*child)->Wait(200ms)) < 0) {
      if (interrupted_) {
        (*child)->Stop(2s);
        return Error{"interrupted while the control plane was starting"};
      }
    }
    std::ifstream in(log);
    std::string line, kc;
    while (std::getline(in, line)) {
      if (line.starts_with("KUBECONFIG=")) kc = line.substr(11);
      if (line.starts_with("NODE=")) real_node_ = line.substr(5);
      if (line.starts_with("NODE_KUBECONFIG=")) real_node_kubeconfig_ = line.substr(16);
      if (line.starts_with("PAUSE_IMAGE=")) pause_image_ = line.substr(12);
      if (line.starts_with("KARPENTER_VERSION="))
        peers_["karpenter"] = {"sigs.k8s.io/karpenter", line.substr(18)};
    }
    if (o_.real_node && rc == 0 &&
        (real_node_.empty() || real_node_kubeconfig_.empty() || pause_image_.empty()))
      return Error{"the control plane started without its real node; its log: " + log};
    if (rc != 0 || kc.empty())
      return Error{fmt::format("the control plane did not start (exit {}); its log: {}", rc, log)};
    kubeconfig_ = kc;
    return Status::Ok();
  }

  Status StartController() {
    ++controllers_started_;
    controller_id_ = fmt::format("drill-{}-{}", getpid(), controllers_started_);
    auto c = Child::Spawn({o_.self,
                           "controller",
                           "--kubeconfig",
                           kubeconfig_,
                           "--policy",
                           policy_path_,
                           "--listen",
                           "",
                           "--lease-namespace",
                           kSystemNs,
                           "--lease-name",
                           kLease,
                           "--id",
                           controller_id_,
                           "--lease-duration",
                           "3s",
                           "--renew-deadline",
                           "2s",
                           "--retry-period",
                           "250ms"},
                          work_ + "/controller.log", work_ + "/controller.log");
    if (!c) return c.error();
    controller_ = std::move(*c);
    return Status::Ok();
  }

  bool ControllerLeads(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!interrupted_ && std::chrono::steady_clock::now() < deadline) {
      auto r = client_->Get(kube::LeasePath(kSystemNs, kLease));
      if (r && r->ok()) {
        auto l = kube::DecodeLease(r->body);
        if (l && l->holder == controller_id_) return true;
      }
      if (controller_ && !controller_->running()) return false;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  // --real-node: the single scenario with this machine as the faulty node. The workload's pod
  // runs in the node's containerd; the node's agent is `gpuheal agent` on the host with the
  // kubelet's credentials, reading /dev/kmsg; the replacement runs on a simulated node. Steps are
  // seen by polling the API every 10 ms (the real node is not one of the sim's).
  Result<RunResult> RunRealNode(const Plan& plan) {
    RunResult res;
    const std::string prefix = fmt::format("d{}0", id_);
    const std::string ns = "gpuheal-drill-" + prefix;
    last_ns_ = ns;
    const std::string state = work_ + "/" + prefix;
    std::filesystem::create_directories(state + "/" + real_node_);
    policy_path_ = work_ + "/policy.yaml";
    // Remediation is not rehearsed here: a real node is not replaced by a drill.
    std::ofstream(policy_path_) << PolicyYaml("10m", "1h");
    if (auto s = StartController(); !s) return s.error();
    if (!ControllerLeads(30s))
      return Error{"the controller did not take the lead within 30 s; its log: " + work_ +
                   "/controller.log"};
    const std::string adir = state + "/" + real_node_;
    std::ofstream(adir + "/agent.yaml") << "kmsg_start: end\naccept_injected: true\n";
    auto agent = Child::Spawn({o_.self, "agent", "--kmsg", "/dev/kmsg", "--node-name", real_node_,
                               "--kubeconfig", real_node_kubeconfig_, "--config",
                               adir + "/agent.yaml", "--state-dir", adir, "--listen", ""},
                              adir + "/faults.jsonl", adir + "/agent.log");
    if (!agent) return agent.error();
    Say(
        fmt::format("agent of {}: gpuheal agent on the host, as system:node:{} (the kubelet's "
                    "credentials), reading /dev/kmsg\n",
                    real_node_, real_node_));

    // The workload, on the real node: the only node until the simulated ones register.
    const json labels = {{"app", "trainer"}};
    json ns_obj = {{"apiVersion", "v1"}, {"kind", "Namespace"}};
    ns_obj["metadata"] = {{"name", ns}, {"labels", {{"gpuheal.io/drill", "true"}}}};
    json container = {{"name", "train"}, {"image", pause_image_}, {"imagePullPolicy", "Never"}};
    json prefer = {{"weight", 100}};
    prefer["preference"]["matchExpressions"] = json::array(
        {{{"key", "kubernetes.io/hostname"}, {"operator", "In"}, {"values", {real_node_}}}});
    json deploy = {{"apiVersion", "apps/v1"}, {"kind", "Deployment"}};
    deploy["metadata"] = {{"name", "trainer"}, {"namespace", ns}};
    deploy["spec"]["replicas"] = 1;
    deploy["spec"]["selector"]["matchLabels"] = labels;
    deploy["spec"]["template"]["metadata"]["labels"] = labels;
    deploy["spec"]["template"]["spec"] = {{"terminationGracePeriodSeconds", 5},
                                          {"containers", json::array({container})}};
    deploy["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
          ["preferredDuringSchedulingIgnoredDuringExecution"] = json::array({prefer});
    if (auto s = kube::CreateObjects(*client_, {ns_obj, deploy}); !s) return s.error();
    Say(fmt::format("workload: Deployment {}/trainer, 1 pod of {} in {}'s containerd\n", ns,
                    pause_image_, real_node_));
    auto pods = [&]() {
      auto r = client_->Get(kube::PodPath(ns) + "?labelSelector=app%3Dtrainer");
      return r && r->ok() ? json::parse(r->body, nullptr, false).value("items", json::array())
                          : json::array();
    };
    auto running = [](const json& p) {
      return p["status"].value("phase", "") == "Running" &&
             !p["metadata"].contains("deletionTimestamp");
    };
    auto node_json = [&]() {
      auto r = client_->Get(kube::NodePath(real_node_));
      return r && r->ok() ? json::parse(r->body, nullptr, false) : json();
    };
    auto condition = [](const json& n, const std::string& type) {
      for (const auto& c : n["status"].value("conditions", json::array()))
        if (c.value("type", "") == type) return c.value("status", "");
      return std::string();
    };
    auto poll_until = [&](const std::function<bool()>& f, std::chrono::milliseconds timeout) {
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      while (!interrupted_ && std::chrono::steady_clock::now() < deadline) {
        if (f()) return true;
        std::this_thread::sleep_for(10ms);
      }
      return false;
    };
    std::string pod_uid;
    if (!poll_until(
            [&] {
              for (const auto& p : pods())
                if (p["spec"].value("nodeName", "") == real_node_ && running(p)) {
                  pod_uid = p["metadata"].value("uid", "");
                  return true;
                }
              return false;
            },
            120s) ||
        !poll_until([&] { return !condition(node_json(), "AcceleratedHardwareReady").empty(); },
                    30s)) {
      if (!interrupted_)
        res.checks.push_back({"setup", false,
                              "the workload was not Running on " + real_node_ +
                                  " or its agent did not report in time (logs: " + work_ + ")"});
      (void)client_->Delete("/api/v1/namespaces/" + ns);
      return res;
    }

    // Where the replacement can run: simulated nodes (no agents: only the real node faults).
    sim::SimOptions so;
    so.nodes = o_.nodes;
    so.pools = o_.pools;
    so.standby_per_pool = 0;
    so.gpus_per_node = o_.gpus;
    so.prefix = prefix;
    so.max_termination = 500ms;
    auto wc = kube::Client::Create(cfg_);
    auto sc = kube::Client::Create(cfg_);
    if (!wc || !sc) return Error{"drill: " + (wc ? sc.error().message : wc.error().message)};
    auto simr = sim::Sim::Start(std::move(*sc), std::move(*wc), so);
    if (!simr) return Error{simr.error().message};
    sim_ = std::move(*simr);
    Say(fmt::format("simulated nodes for the replacement: {} in {} pool(s) ({}-*)\n", o_.nodes,
                    o_.pools, prefix));
    std::this_thread::sleep_for(1s);  // their Ready reaches the scheduler's cache

    // The fault, into the machine's kernel log.
    const auto lines = InjectMessages(InjectSpec{plan.xid, "0000:3b:00", "", ""});
    const int64_t t0 = NowUs();
    Say(fmt::format("\n  T+{:>9.1f} ms  {:<30} {}: {}\n", 0.0, "kernel line", real_node_,
                    lines.back()));
    if (auto s = WriteKmsg("/dev/kmsg", lines); !s)
      return Error{"injecting the fault: " + s.error().message};
    auto step = [&](const std::string& key, const std::string& detail) {
      if (res.steps_ms.count(key)) return;
      const double ms = static_cast<double>(NowUs() - t0) / 1000.0;
      res.steps_ms[key] = ms;
      Say(fmt::format("  T+{:>9.1f} ms  {:<30} {}\n", ms, StepLabel(key), detail));
    };
    std::string replacement_node;
    std::string taint;
    const bool done = poll_until(
        [&] {
          const json n = node_json();
          if (condition(n, "AcceleratedHardwareReady") == "False")
            step("condition", "AcceleratedHardwareReady False on " + real_node_);
          for (const auto& t : n["spec"].value("taints", json::array()))
            if (t.value("key", "") == keys::kFaultTaint && taint.empty()) {
              taint = t.value("value", "") + ":" + t.value("effect", "");
              step("taint", std::string(keys::kFaultTaint) + "=" + taint);
            }
          bool original = false;
          for (const auto& p : pods()) {
            if (p["metadata"].value("uid", "") == pod_uid) {
              original = true;
              if (p["metadata"].contains("deletionTimestamp"))
                step("first_eviction", "the workload's pod is terminating");
            } else if (running(p)) {
              replacement_node = p["spec"].value("nodeName", "");
              step("replacement_running", "on " + replacement_node);
            }
          }
          if (!original) {
            step("first_eviction", "the workload's pod is terminating");
            step("workload_stopped", "its containers stopped: the pod object is gone");
          }
          return res.steps_ms.count("taint") && res.steps_ms.count("workload_stopped") &&
                 res.steps_ms.count("replacement_running");
        },
        o_.run_timeout);
    if (!done && !interrupted_)
      res.checks.push_back({"finished in time", false,
                            "the timeline did not reach the replacement Running in time"});
    res.checks.push_back({"quarantined", !taint.empty(),
                          taint.empty() ? "no gpuheal taint on " + real_node_
                                        : std::string(keys::kFaultTaint) + "=" + taint});
    res.checks.push_back(
        {"kubelet stopped the workload", res.steps_ms.count("workload_stopped") > 0,
         res.steps_ms.count("workload_stopped") ? "the pod was deleted once its containers stopped"
                                                : "the workload's pod is still on " + real_node_});
    res.checks.push_back(
        {"replacement Running elsewhere",
         !replacement_node.empty() && replacement_node != real_node_,
         replacement_node.empty() ? "no replacement Running" : "on " + replacement_node});
    bool recorded = false;
    if (auto r = client_->Get(std::string(kRepairs)); r && r->ok()) {
      if (auto list = kube::DecodeNodeRepairList(r->body))
        for (const auto& rec : list->items) recorded |= rec.node == real_node_;
    }
    res.checks.push_back({"repair recorded", recorded,
                          recorded ? "a NodeRepair for " + real_node_ : "no NodeRepair"});
    if (o_.keep && !interrupted_) {
      kept_ns_ = ns;
      real_agent_ = std::move(*agent);
      return res;
    }
    (*agent)->Stop();
    DeleteNamespaceAndPods(ns);
    std::this_thread::sleep_for(600ms);  // the sim's capped grace period
    sim_.reset();
    return res;
  }

  Result<RunResult> RunOnce(const Plan& plan, int index) {
    RunResult res;
    const std::string prefix = fmt::format("d{}{}", id_, index);
    const std::string ns = "gpuheal-drill-" + prefix;
    last_ns_ = ns;
    const std::string state = work_ + "/" + prefix;
    auto fail = [&](const std::string& name, const std::string& why) {
      res.checks.push_back({name, false, why});
    };

    // The controller: once per drill (a crash scenario restarts it).
    if (!controller_) {
      policy_path_ = work_ + "/policy.yaml";
      std::ofstream(policy_path_) << plan.policy;
      Say(fmt::format("controller policy: {}\n", policy_path_));
      if (auto s = StartController(); !s) return s.error();
      if (!ControllerLeads(30s))
        return Error{"the controller did not take the lead within 30 s; its log: " + work_ +
                     "/controller.log"};
    }

    // The simulated cluster.
    sim::SimOptions so;
    so.nodes = o_.nodes;
    so.pools = o_.pools;
    so.standby_per_pool = o_.standby;
    so.gpus_per_node = o_.gpus;
    so.prefix = prefix;
    so.checkpoint_delay = plan.checkpoint_delay;
    so.max_termination = 500ms;
    so.agents = true;
    so.state_dir = state;
    so.agent_kube = cfg_;
    so.agent_kube.timeout = 10s;
    so.agent_quiet_period = plan.agent_quiet;
    so.process_runtime = !plan.workload.empty();
    if (plan.racks) {
      so.rack_label = kRackLabel;
      so.rack_size = kRackSize;
    }
    // Fault targets: the first nodes of each pool in turn, each running one of the workload's pods.
    std::vector<std::string> targets;
    for (int j = 0; j < plan.fault_nodes && j < o_.nodes; ++j)
      targets.push_back(fmt::format("{}-{}-{}", prefix, j % o_.pools, j / o_.pools));
    if (plan.external_agent) so.external_agents = {targets[0]};
    // An agent on every node of a drill-sized cluster; beyond that, on the faulty nodes only (an
    // agent is a few threads; the other nodes' conditions are simply never False).
    if (o_.nodes + o_.pools * o_.standby > kAgentsOnEveryNodeUpTo && plan.replace.empty())
      so.agent_nodes = std::set<std::string>(targets.begin(), targets.end());
    // replace-karpenter: the nodes Karpenter launches for this run's NodePool (named after the
    // run) have the sim as their kubelet.
    if (plan.replace == "karpenter") so.adopt_selector = "karpenter.sh/nodepool=" + prefix;
    auto wc = kube::Client::Create(cfg_);
    auto sc = kube::Client::Create(cfg_);
    if (!wc || !sc) return Error{"drill: " + (wc ? sc.error().message : wc.error().message)};
    std::set<std::string> node_names;
    for (int p = 0; p < o_.pools; ++p) {
      for (int i = 0; i < (o_.nodes + o_.pools - 1 - p) / o_.pools; ++i)
        node_names.insert(fmt::format("{}-{}-{}", prefix, p, i));
      for (int i = 0; i < o_.standby; ++i)
        node_names.insert(fmt::format("{}-{}-standby-{}", prefix, p, i));
    }
    Observer obs(o_.live);
    if (auto s = obs.Start(cfg_, ns, node_names); !s) return s.error();
    Say(fmt::format(
        "simulated cluster {}: {} pools x {} GPU nodes x {} GPUs + {} standby per pool, {}\n",
        prefix, o_.pools, o_.nodes / o_.pools, o_.gpus, o_.standby,
        so.agent_nodes.empty() ? "a gpuheal agent per node"
                               : "a gpuheal agent on each node the fault hits"));
    auto simr = sim::Sim::Start(std::move(*sc), std::move(*wc), so);
    if (!simr) return Error{simr.error().message};
    sim_ = std::move(*simr);
    std::unique_ptr<Child> agent;
    // runtime: the target node's container runtime, a real containerd on a socket of its own.
    std::unique_ptr<Child> containerd;
    const std::string cri_sock = state + "/" + targets[0] + "/containerd/containerd.sock";
    if (o_.scenario == "runtime") {
      auto c = StartContainerd(state + "/" + targets[0] + "/containerd", cri_sock);
      if (!c) return c.error();
      containerd = std::move(*c);
    }
    // `boot`: the state directory of a new boot of the node (bmc: after its power cycle), "" for
    // the node's own; the kernel log FIFO is the node's either way.
    auto start_agent = [&](const std::string& boot = "") -> Status {
      const std::string kmsg_dir = state + "/" + targets[0];
      const std::string dir = boot.empty() ? kmsg_dir : kmsg_dir + "/" + boot;
      std::error_code mk;
      std::filesystem::create_directories(dir, mk);
      // An agent process of the drill plays a simulated node: this host's interfaces, mounts,
      // runtime and previous boot are not that node's (runtime: the drill's containerd is).
      const std::string host_monitors = fmt::format(
          "network: {{interfaces: [], infiniband_sysfs: \"\"}}\nstorage: {{paths: []}}\n"
          "previous_boot: {{enabled: false}}\nruntime: {{endpoint: \"unix://{}\", period: 100ms, "
          "timeout: 500ms}}\n",
          o_.scenario == "runtime" ? cri_sock : dir + "/no-runtime.sock");
      std::vector<std::string> argv = {
          o_.self,       "agent",    "--kmsg",       kmsg_dir + "/kmsg", "--state-dir", dir,
          "--node-name", targets[0], "--kubeconfig", kubeconfig_,        "--listen",    ""};
      std::vector<std::pair<std::string, std::string>> env;
      if (o_.real_kmsg) {
        // The machine's kernel log, from its end (older records are not this drill's), trusting
        // the drill's records although they come from user space.
        std::ofstream(dir + "/agent.yaml") << "kmsg_start: end\naccept_injected: true\n"
                                           << host_monitors;
        argv[3] = "/dev/kmsg";
        argv.insert(argv.end(), {"--config", dir + "/agent.yaml"});
      } else if (o_.scenario == "critical" || o_.scenario == "predictive" ||
                 o_.scenario == "gpu-scoped") {
        // The node's GPUs: the NVML double (test/nvml_double, the real NVML ABI) with eight
        // healthy GPUs, and its control tool as the reset command, so the agent drains, resets
        // and verifies the faulty one through NVML as on a real node.
        auto files = WriteSimulatedGpus(dir);
        if (!files) return files.error();
        std::ofstream(files->first, std::ios::app) << host_monitors;
        argv.insert(argv.end(), {"--config", files->first, "--nvml-library", o_.nvml_double});
        env.push_back({"GPUHEAL_NVML_SCENARIO", files->second});
      } else {
        std::ofstream(dir + "/agent.yaml") << host_monitors;
        argv.insert(argv.end(), {"--config", dir + "/agent.yaml"});
      }
      auto a = Child::Spawn(argv, dir + "/faults.jsonl", dir + "/agent.log", env);
      if (!a) return a.error();
      agent = std::move(*a);
      return Status::Ok();
    };
    if (plan.external_agent) {
      if (auto s = start_agent(); !s) return s.error();
    }

    // The workload: every GPU of the nodes in service taken, behind a budget of one.
    const int gpus_per_pod = std::max(1, o_.gpus / plan.pods_per_node);
    int replicas = o_.nodes * (o_.gpus / gpus_per_pod);
    if (plan.dra) {
      if (auto s = PublishDra(node_names); !s) return s.error();
    }
    if (plan.replace == "karpenter") {
      // One node's worth of pods more than the simulated nodes hold: Karpenter launches the
      // machine they wait for, and that node is the one the fault hits.
      if (auto s = CreateNodePool(prefix); !s) return s.error();
      replicas += o_.gpus / gpus_per_pod;
    } else if (plan.replace == "capi") {
      // One machine of the run's MachineDeployment, and one node's worth of pods more than the
      // simulated nodes hold: they run on it, and that node is the one the fault hits.
      if (auto s = CreateCapiPool(ns, prefix); !s) return s.error();
      auto joined = AwaitCapiMachine(ns, prefix);
      if (!joined) return joined.error();
      targets[0] = *joined;
      obs.Watch(targets[0]);
      replicas += o_.gpus / gpus_per_pod;
    }
    const std::string checkpoints = state + "/checkpoints";
    if (!plan.workload.empty()) {
      WorkloadSpec w{ns,          o_.workload_bin,          {}, o_.nodes, o_.gpus,
                     checkpoints, plan.dra ? kDraClass : ""};
      for (int p = 0; p < o_.pools; ++p) w.pools.push_back(fmt::format("{}-pool-{}", prefix, p));
      if (auto s = kube::CreateObjects(
              *client_, plan.workload == "service" ? ServiceObjects(w) : TrainingObjects(w));
          !s)
        return s.error();
      Say(plan.workload == "service"
              ? fmt::format("workload: Deployment {}/serve behind the Service serve, {} pods x {} "
                            "GPUs, each an HTTP server ({} serve) run by the sim's process "
                            "runtime\n",
                            ns, replicas, gpus_per_pod, o_.workload_bin)
          : plan.dra
              ? fmt::format("workload: Deployment {}/trainer, {} pods of one GPU each (a DRA "
                            "claim), each a rank of a training loop ({} train: {} ms steps, a "
                            "checkpoint every {} s and when gpuheal asks)\n",
                            ns, replicas, o_.workload_bin, kTrainStepMs, kTrainEverySeconds)
              : fmt::format(
                    "workload: Deployments {0}/trainer and {0}/trainer-periodic, one pod of "
                    "each per node x {1} GPUs, each a training loop ({2} train: {3} ms "
                    "steps, a checkpoint every {4} s; trainer also when gpuheal asks)\n",
                    ns, gpus_per_pod, o_.workload_bin, kTrainStepMs, kTrainEverySeconds));
    } else {
      if (auto s = CreateWorkload(ns, prefix, replicas, gpus_per_pod, plan.dra); !s)
        return s.error();
      Say(
          fmt::format("workload: Deployment {}/trainer, {} pods x {} GPUs, PodDisruptionBudget "
                      "maxUnavailable 1\n",
                      ns, replicas, gpus_per_pod));
    }
    // kube-controller-manager creates a ReplicaSet's pods at its default 20 requests/s.
    const auto ready_deadline = std::chrono::steady_clock::now() + 120s + replicas * 300ms;
    if (plan.replace == "karpenter") {
      // The target: the node Karpenter launched for the pods the simulated nodes could not hold.
      if (!obs.WaitFor([&] { return obs.RunningPods() >= replicas; }, ready_deadline,
                       interrupted_)) {
        if (!interrupted_)
          fail("setup", fmt::format("Karpenter's node for the workload's last pods was not "
                                    "Running in time; its log: {}/control-plane/karpenter.log",
                                    work_));
        Teardown(ns, obs);
        return res;
      }
      // (Karpenter may have launched more than one: the one running the workload's pods.)
      std::string launched;
      {
        std::lock_guard<std::mutex> l(obs.mu());
        for (const auto& node : sim_->adopted()) {
          for (const auto& [uid, p] : obs.pods())
            if (p.node == node && p.running_us > 0 && launched.empty()) launched = node;
        }
      }
      if (launched.empty())
        return Error{"the workload ran but on no node of Karpenter's that the sim adopted"};
      targets[0] = launched;
      obs.Watch(targets[0]);
      Say(fmt::format("Karpenter launched {} for the workload's last pods\n", targets[0]));
    }
    if (!obs.WaitFor([&] { return obs.RunningPods() >= replicas && obs.AgentsReporting(targets); },
                     ready_deadline, interrupted_)) {
      if (!interrupted_)
        fail("setup",
             fmt::format(
                 "the workload was not Running on the simulated nodes in time ({}/{} pods)",
                 [&] {
                   std::lock_guard<std::mutex> l(obs.mu());
                   return obs.RunningPods();
                 }(),
                 replicas));
      Teardown(ns, obs);
      return res;
    }

    // The baseline, on a node of the cluster that is not faulted.
    const std::string probe_node = fmt::format("{}-{}-standby-0", prefix, o_.pools - 1);
    for (int i = 0; i < 3 && o_.standby > 0; ++i) {
      if (auto ms = obs.ProbeApiWrite(*client_, probe_node, interrupted_))
        res.api_write_ms.push_back(*ms);
    }

    // service: the clients, balancing over the Service's ready endpoints, from before the fault
    // (the same-run baseline) on.
    std::unique_ptr<LoadGenerator> load;
    if (plan.workload == "service") {
      auto g = LoadGenerator::Start(cfg_, ns, "serve", kServiceRate);
      if (!g) return g.error();
      load = std::move(*g);
      if (!obs.WaitFor([&] { return load->ReadyEndpoints() >= replicas; },
                       std::chrono::steady_clock::now() + 30s, interrupted_)) {
        if (!interrupted_)
          fail("setup", fmt::format("the Service's EndpointSlices listed {} of {} endpoints ready",
                                    load->ReadyEndpoints(), replicas));
        load.reset();
        Teardown(ns, obs);
        return res;
      }
      load->Go();
      Say(
          fmt::format("service: {} requests/s to the {} ready endpoints of Service serve, "
                      "round robin; {} s of it before the fault\n",
                      kServiceRate, replicas, kServiceBaseline.count()));
      std::this_thread::sleep_for(kServiceBaseline);
    }

    // training: the job trains a while first, past its first periodic checkpoint and to a point
    // of its interval drawn at random (as a fault falls), so that the periodic-only loss is what
    // a fault costs on average.
    if (plan.workload == "training") {
      std::mt19937 rng(std::random_device{}());
      const auto warm = std::chrono::milliseconds(std::uniform_int_distribution<int>(
          kTrainEverySeconds * 1000, kTrainEverySeconds * 2000)(rng));
      Say(fmt::format("training: the job trains for {:.1f} s before the fault\n",
                      static_cast<double>(warm.count()) / 1000.0));
      obs.WaitFor([] { return false; }, std::chrono::steady_clock::now() + warm, interrupted_);
    }

    // gpu-scoped: which pod kube-scheduler gave the faulty GPU.
    if (plan.dra) {
      if (auto s = FindDraVictim(ns, targets[0]); !s) return s.error();
    }

    // bmc: the target's BMC.
    std::unique_ptr<Child> bmc;
    if (plan.bmc) {
      auto b = StartBmc(state + "/bmc", targets[0]);
      if (!b) return b.error();
      bmc = std::move(*b);
    }

    // replace-*: the target's owner, as its provisioner made it.
    Owner owner;
    if (plan.replace == "karpenter") {
      auto o = KarpenterOwner(targets[0]);
      if (!o) return o.error();
      owner = *o;
      Say(fmt::format("{} owns {}\n", owner.what, targets[0]));
    } else if (plan.replace == "capi") {
      owner.path = CapiPath(ns, "machines", targets[0]);
      owner.what = "Cluster API Machine " + targets[0];
      Say(fmt::format("{} owns {}\n", owner.what, targets[0]));
    }

    // The fault.
    std::map<std::string, std::string> files;
    for (const auto& t : targets) files[t] = state + "/" + t + "/faults.jsonl";
    std::set<std::string> standby;
    for (const auto& t : targets) {
      const std::string pool =
          !plan.replace.empty()
              ? "0"  // the NodePool's and the MachineDeployment's nodes join pool 0
              : t.substr(prefix.size() + 1, t.find('-', prefix.size() + 1) - prefix.size() - 1);
      for (int i = 0; i < o_.standby; ++i)
        standby.insert(fmt::format("{}-{}-standby-{}", prefix, pool, i));
    }
    std::vector<std::string> messages, lines;
    for (size_t i = 0; i < plan.processes.size(); ++i) {
      lines = InjectMessages(
          InjectSpec{plan.xid, "0000:3b:00", std::to_string(4242 + i), plan.processes[i]});
      messages.insert(messages.end(), lines.begin(), lines.end());
    }
    if (containerd) {
      // The runtime answered the agent once (its monitor knows it), before it is frozen.
      const std::string log = state + "/" + targets[0] + "/agent.log";
      const auto until = std::chrono::steady_clock::now() + 20s;
      while (ReadWholeFile(log).value_or("").find("container runtime: ready") ==
             std::string::npos) {
        if (std::chrono::steady_clock::now() > until || interrupted_)
          return Error{"the agent never saw the drill's containerd answer; its log: " + log};
        std::this_thread::sleep_for(20ms);
      }
    }
    const int64_t t0 = NowUs();
    std::vector<std::string> lost_ips;  // the pods whose GPU the fault took
    obs.Arm(targets, files, standby, replicas, t0);
    if (containerd) {
      Say(fmt::format("\n  T+{:>9.1f} ms  {:<30} {}: SIGSTOP containerd (pid {}), CRI on {}\n", 0.0,
                      "runtime frozen", targets[0], containerd->pid(), cri_sock));
      containerd->Signal(SIGSTOP);
    } else {
      Say(fmt::format("\n  T+{:>9.1f} ms  {:<30} {}{}\n", 0.0, "kernel line",
                      targets.size() == 1 ? targets[0] : fmt::format("{} nodes", targets.size()),
                      ": " + lines.back()));
      for (const auto& t : targets) {
        auto s =
            o_.real_kmsg ? WriteKmsg("/dev/kmsg", messages) : WriteSimKernel(state, t, messages);
        if (!s) return Error{"injecting the fault: " + s.error().message};
      }
      // The processes on the faulty GPUs lose them with the fault: a CUDA program's next call
      // fails (gpu-scoped: the pod holding the faulty GPU alone).
      if (!plan.workload.empty())
        for (const auto& t : targets)
          for (auto& ip : sim_->GpuLost(t, plan.dra ? dra_.victim : ""))
            lost_ips.push_back(std::move(ip));
    }

    const auto deadline = std::chrono::steady_clock::now() + o_.run_timeout;
    auto wait = [&](const std::function<bool()>& pred, const std::string& what) {
      if (obs.WaitFor(pred, deadline, interrupted_)) return true;
      if (!interrupted_) fail("finished in time", "timed out waiting for " + what);
      return false;
    };
    std::unique_lock<std::mutex> held(obs.mu(), std::defer_lock);
    std::string pre_kill_transition;
    size_t lines_before_kill = 0;
    if (o_.scenario == "single" || o_.scenario == "pdb" || o_.scenario == "controller-crash" ||
        o_.scenario == "agent-restart" || o_.scenario == "runtime" || o_.scenario == "service" ||
        o_.scenario == "training") {
      if (o_.scenario == "controller-crash") {
        if (wait([&] { return obs.Has("repair_checkpointrequested"); },
                 "the repair's CheckpointRequested phase")) {
          controller_->Signal(SIGKILL);
          controller_->Wait(5s);
          obs.Mark("controller_killed", "SIGKILL inside the checkpoint window, before the drain");
          if (auto s = StartController(); !s) return s.error();
          if (ControllerLeads(30s))
            obs.Mark("controller_leader", controller_id_ + " holds the Lease");
        }
      }
      if (o_.scenario == "agent-restart") {
        if (wait([&] { return obs.Has("detected"); }, "the agent's detection") &&
            wait([&] { return CursorPastLastFault(state + "/" + targets[0]); },
                 "the agent's cursor past the fault")) {
          agent->Signal(SIGKILL);
          agent->Wait(5s);
          obs.Mark("agent_killed", "SIGKILL right after its fault line and saved cursor");
          lines_before_kill = CountLines(files[targets[0]]);
          {
            std::lock_guard<std::mutex> l(obs.mu());
            auto it = obs.nodes().find(targets[0]);
            if (it != obs.nodes().end()) pre_kill_transition = it->second.false_since;
          }
          if (auto s = start_agent(); !s) return s.error();
          obs.Mark("agent_restarted", "same state directory");
        }
      }
      wait([&] { return obs.Has("capacity_restored") && obs.Has("repair_remediating"); },
           "capacity back to 100% and the repair's Remediating phase");
    } else if (o_.scenario == "flap") {
      wait([&] { return obs.Has("released") && obs.Has("repair_recovered"); },
           "the node's release after the fault cleared");
    } else if (o_.scenario == "correlated") {
      if (wait([&] { return obs.Has("taint"); }, "every faulty node's quarantine")) {
        // Hold long enough for a gate that does not hold to show it: the repair of a node that is
        // let through reaches its drain within a few seconds.
        obs.WaitFor([] { return false; }, std::chrono::steady_clock::now() + 5s, interrupted_);
      }
    } else if (plan.dra) {
      std::atomic<bool> done{false};
      std::thread taints([&] { WatchDraTaint(ns, targets[0], done); });
      wait([&] { return obs.Has("repair_recovered") || obs.Has("repair_failed"); },
           "the GPU-level repair's end");
      if (!plan.workload.empty()) sim_->GpuReset(targets[0]);
      // The victim's replacement: allocated once the device is back (or elsewhere).
      wait(
          [&] {
            return std::any_of(obs.pods().begin(), obs.pods().end(), [](const auto& kv) {
              return !kv.second.initial && kv.second.running_us > 0;
            });
          },
          "the evicted pod's replacement Running");
      done = true;
      taints.join();
    } else if (o_.scenario == "critical") {
      wait([&] { return obs.Has("repair_recovered") || obs.Has("repair_failed"); },
           "the GPU-level repair's end");
      // A container started from now on has its GPU (one running keeps its error).
      if (!plan.workload.empty()) sim_->GpuReset(targets[0]);
    } else if (plan.bmc) {
      // The machine behind the BMC: off, its agent stops with it; on again, a new boot, its agent
      // starts with nothing of the last boot's faults (a new state directory).
      std::atomic<bool> done{false};
      std::string boot_error;
      std::thread machine([&] {
        auto ep = bmc::ParseEndpoint(bmc_url_);
        if (!ep) return;
        bmc::ClientOptions co;
        co.timeout = 2s;
        co.attempts = 1;
        bmc::RedfishClient rc(*ep, {"drill", bmc_password_}, co);
        bool off = false;
        while (!done && !interrupted_) {
          auto sys = rc.System();
          // The emulator's Off can last only milliseconds (it restarts 1 to 11 s after the reset,
          // from a whole second): the reset it accepted is the machine going down too.
          const bool down = sys && sys->power_state == "Off";
          if (!off && (down || BmcResets() > 0)) {
            off = true;
            obs.Mark("power_off", down ? "the BMC reports PowerState Off"
                                       : "the BMC accepted the reset (ComputerSystem.Reset 204)");
            agent->Signal(SIGKILL);
            agent->Wait(5s);
            obs.Mark("node_down", targets[0] + ": its agent stopped with the machine");
          } else if (sys && sys->power_state == "On" && off) {
            obs.Mark("power_on", "the BMC reports PowerState On");
            if (auto st = start_agent("boot-2"); !st) {
              boot_error = st.error().message;
              return;
            }
            obs.Mark("node_booted", targets[0] + ": a new boot, its agent started");
            return;
          }
          std::this_thread::sleep_for(100ms);
        }
      });
      wait([&] { return obs.Has("repair_recovered") && obs.Has("released"); },
           "the power cycle, the node's return and its release");
      done = true;
      machine.join();
      if (!boot_error.empty()) fail("node booted", boot_error);
    } else if (plan.racks) {
      RackIncident(targets, obs, deadline, fail);
    } else if (plan.fatal_xid) {
      PredictiveReplay(plan, state, targets[0], obs, deadline, fail);
    } else if (plan.replace == "karpenter") {
      FollowKarpenter(owner, prefix, targets[0], obs, deadline, fail);
      wait([&] { return obs.Has("repair_replaced") && obs.Has("capacity_restored"); },
           "the replacement node's join, the repair's Replaced and capacity back to 100%");
    } else if (plan.replace == "capi") {
      FollowCapi(owner, ns, prefix, targets[0], obs, deadline, fail);
      wait([&] { return obs.Has("repair_replaced") && obs.Has("capacity_restored"); },
           "the replacement node's join, the repair's Replaced and capacity back to 100%");
    }
    if (!interrupted_ && !plan.workload.empty())
      UserFigures(plan, targets, checkpoints, lost_ips, replicas, load, obs, res);
    if (!interrupted_) {
      if (o_.scenario == "agent-restart")
        std::this_thread::sleep_for(1s);  // the restarted agent has spoken
      held.lock();
      Checks(plan, targets, standby, replicas, obs, res);
      if (plan.replace == "karpenter") {
        const bool by_karpenter = !owner.fresh_claim.empty() && owner.fresh_creator == "karpenter";
        res.checks.push_back(
            {"replacement created by karpenter", by_karpenter,
             owner.fresh_claim.empty()
                 ? "no new NodeClaim of the run's NodePool"
                 : fmt::format("NodeClaim {} created by {} (owner {}), not by the drill",
                               owner.fresh_claim, owner.fresh_creator, owner.fresh_owner)});
      }
      if (plan.replace == "capi") {
        // Created by the MachineSet controller (its server-side apply field manager), owned by
        // the MachineDeployment's MachineSet.
        const bool by_capi = !owner.fresh_claim.empty() &&
                             owner.fresh_creator.starts_with("capi-machineset") &&
                             owner.fresh_owner.starts_with("MachineSet/");
        res.checks.push_back(
            {"replacement created by cluster-api", by_capi,
             owner.fresh_claim.empty()
                 ? "no new Machine of the run's MachineDeployment"
                 : fmt::format("Machine {} created by {} (owner {}), not by the drill",
                               owner.fresh_claim, owner.fresh_creator, owner.fresh_owner)});
      }
      if (o_.scenario == "agent-restart") {
        // A record reported by both agents is reported twice; a record the first one had not
        // reached yet (the fallen-off-the-bus text after the Xid 79 line) is reported once, by the
        // second.
        const size_t after = CountLines(files[targets[0]]);
        const size_t twice = RecordsReportedTwice(files[targets[0]]);
        res.checks.push_back(
            {"nothing reported twice", twice == 0 && lines_before_kill > 0,
             fmt::format(
                 "{} fault line(s) before the kill, {} in all after the restart, {} record(s) "
                 "reported twice",
                 lines_before_kill, after, twice)});
        auto it = obs.nodes().find(targets[0]);
        const bool still =
            it != obs.nodes().end() && it->second.was_false && it->second.false_transitions == 1 &&
            (pre_kill_transition.empty() || it->second.false_since == pre_kill_transition);
        res.checks.push_back(
            {"nothing lost", still,
             still
                 ? "the restarted agent kept the condition False (one transition, from its saved "
                   "active faults)"
                 : "the condition did not stay False through the restart, or turned False twice"});
      }
      held.unlock();
      res.steps_ms = obs.StepsMs();
    }
    obs.Disarm();
    if (plan.replace == "karpenter") {
      // NodePools and NodeClaims are cluster-scoped: the namespace's deletion does not take
      // them. The NodePool's deletion takes its NodeClaims (owner references), and Karpenter
      // terminates their machines.
      (void)client_->Delete("/apis/karpenter.sh/v1/nodepools/" + prefix);
    }
    if (plan.replace == "capi" && !(o_.keep && !interrupted_)) DeleteCapiCluster(ns, prefix);
    if (agent) agent->Stop();
    if (bmc) {
      bmc->Stop();
      (void)client_->Delete(fmt::format("/api/v1/namespaces/{}/secrets/{}", kSystemNs, kBmcSecret));
      (void)client_->Delete(
          fmt::format("/api/v1/namespaces/{}/configmaps/{}", kSystemNs, kBmcEndpoints));
    }
    if (containerd) {
      containerd->Signal(SIGCONT);
      containerd->Stop();
    }
    Teardown(ns, obs);
    return res;
  }

  // A containerd of the drill's own (Debian's package): its root, state and socket under `dir`,
  // the CRI plugin with a loopback-only CNI config (NetworkReady true, nothing on the host's
  // network), no pods. Ready when its socket exists.
  Result<std::unique_ptr<Child>> StartContainerd(const std::string& dir, const std::string& sock) {
    std::error_code ec;
    std::filesystem::create_directories(dir + "/net.d", ec);
    std::ofstream(dir + "/config.toml") << fmt::format(
        "version = 2\nroot = \"{0}/root\"\nstate = \"{0}/state\"\n[grpc]\n  address = \"{1}\"\n"
        "[plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = \"/usr/lib/cni\"\n"
        "  conf_dir = \"{0}/net.d\"\n",
        dir, sock);
    std::ofstream(dir + "/net.d/10-drill.conflist")
        << R"({"cniVersion": "0.4.0", "name": "gpuheal-drill", "plugins": [{"type": "loopback"}]})";
    const std::string bin = FindContainerd();
    if (bin.empty())
      return Error{
          "the runtime scenario needs containerd on PATH (Debian's package containerd; "
          "scripts/setup.sh installs it)"};
    auto c = Child::Spawn({bin, "--config", dir + "/config.toml"}, dir + "/containerd.log",
                          dir + "/containerd.log");
    if (!c)
      return Error{
          "the runtime scenario needs containerd (Debian's package; scripts/setup.sh "
          "installs it): " +
          c.error().message};
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (access(sock.c_str(), F_OK) != 0) {
      if (!(*c)->running() || std::chrono::steady_clock::now() > until)
        return Error{"containerd did not open its socket " + sock + "; its log: " + dir +
                     "/containerd.log"};
      std::this_thread::sleep_for(10ms);
    }
    return c;
  }

  // An agent config and an NVML double scenario for a node of eight healthy GPUs, the faulty one
  // at the bus id the injected line names (0000:3b:00). Returns {config, scenario}.
  Result<std::pair<std::string, std::string>> WriteSimulatedGpus(const std::string& dir) {
    if (access(o_.nvml_double.c_str(), R_OK) != 0 ||
        access(o_.nvml_double_ctl.c_str(), X_OK) != 0) {
      return Error{fmt::format(
          "the {} scenario plays the node's GPUs with the NVML test double: build it "
          "(cmake --build build --target nvml_double nvml_double_ctl) or give --nvml-double and "
          "--nvml-double-ctl (looked for {} and {})",
          o_.scenario, o_.nvml_double, o_.nvml_double_ctl)};
    }
    json devices = json::array();
    const int buses[] = {0x1b, 0x2b, 0x3b, 0x4b, 0x5b, 0x6b, 0x7b, 0x8b};
    for (int i = 0; i < 8; ++i) {
      devices.push_back({{"bus_id", fmt::format("00000000:{:02X}:00.0", buses[i])},
                         {"uuid", fmt::format("GPU-{}-0000-4000-8000-{:012x}", id_ + "0000", i)},
                         {"name", "NVIDIA H100 80GB HBM3"},
                         {"ecc", {{"volatile_uncorrected", 0}, {"volatile_corrected", 0}}},
                         {"remapped_rows",
                          {{"corrected", 0}, {"uncorrected", 0}, {"pending", 0}, {"failure", 0}}},
                         {"retired_pages_pending", false},
                         {"nvlink", {{"links", 18}, {"down", json::array()}, {"errors", 0}}},
                         {"clock_event_reasons", 0},
                         {"pcie", {{"gen", 5}, {"max_gen", 5}, {"width", 16}, {"max_width", 16}}},
                         {"temperature", 40},
                         {"temperature_slowdown", 87},
                         {"recovery_action", 0},
                         {"persistence_mode", false},
                         {"processes", json::array()}});
    }
    const std::string scenario = dir + "/gpus.json", config = dir + "/agent.yaml";
    std::error_code ec;
    std::filesystem::create_directories(dir + "/sysfs", ec);
    std::ofstream(scenario)
        << json({{"driver_version", "570.86.15"}, {"devices", devices}}).dump(2);
    std::ofstream(config) << fmt::format(
        "nvidia:\n  poll_period: 1h\n  sysfs_pci_devices: {}/sysfs\n  reset:\n    command: "
        "[\"{}\", \"reset\", \"{}\", \"{{bus_id}}\"]\n",
        dir, o_.nvml_double_ctl, scenario);
    return std::make_pair(config, scenario);
  }

  // Kernel records (kmsg_seq) with more than one fault line in the agent's output.
  static size_t RecordsReportedTwice(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::map<uint64_t, int> seen;
    size_t twice = 0;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_object() || !j.value("kmsg_seq", nlohmann::json()).is_number()) continue;
      twice += ++seen[j["kmsg_seq"].get<uint64_t>()] == 2;
    }
    return twice;
  }

  static size_t CountLines(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    size_t n = 0;
    while (std::getline(in, line)) n += !line.empty();
    return n;
  }

  // bmc: sushy-emulator (its fake driver) with one system named after `node`, on a loopback port,
  // basic auth with a random password; the credentials Secret and the endpoints ConfigMap the
  // policy names. The node then plays a compromised one: its own gpuheal.io/bmc-endpoint
  // annotation names a decoy that counts connections, asking for the fleet's BMC password.
  Result<std::unique_ptr<Child>> StartBmc(const std::string& dir, const std::string& node) {
    std::string exe = o_.bmc_emulator;
    if (exe.empty()) {
      if (const char* e = std::getenv("GPUHEAL_SUSHY_EMULATOR"); e && *e) exe = e;
    }
    if (exe.empty()) {
      auto out = RunScript("/scripts/build-bmc-emulator.sh", "SUSHY_EMULATOR=");
      if (!out) return out.error();
      exe = *out;
    }
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    bmc_dir_ = dir;
    bmc_password_ = fmt::format("{:08x}{:08x}", std::random_device{}(), std::random_device{}());
    // The emulator reads an Apache-style user file of bcrypt hashes: its own virtualenv's bcrypt.
    const std::string python = exe.substr(0, exe.rfind('/')) + "/python3";
    auto h = Child::Spawn({python, "-c",
                           "import bcrypt,sys;print('drill:'+bcrypt.hashpw(sys.argv[1].encode(),"
                           "bcrypt.gensalt(4)).decode())",
                           bmc_password_},
                          dir + "/htpasswd", dir + "/sushy.log");
    if (!h || (*h)->Wait(30s) != 0)
      return Error{"bmc: cannot write the emulator's user file with " + python + " (" + dir +
                   "/sushy.log); give --bmc-emulator the sushy-emulator of "
                   "scripts/build-bmc-emulator.sh"};
    std::ofstream(dir + "/sushy.conf") << fmt::format(
        "SUSHY_EMULATOR_FAKE_DRIVER = True\nSUSHY_EMULATOR_STATE_DIR = '{0}/state'\n"
        "SUSHY_EMULATOR_AUTH_FILE = '{0}/htpasswd'\nSUSHY_EMULATOR_FAKE_SYSTEMS = [\n"
        "  {{'uuid': '5e0c4a8e-0000-4000-8000-00000000d000', 'name': '{1}', 'power_state': 'On', "
        "'nics': []}},\n]\n",
        dir, node);
    const int port = FreeLoopbackPort();
    if (port <= 0) return Error{"bmc: no free loopback port"};
    auto c = Child::Spawn(
        {exe, "--config", dir + "/sushy.conf", "-i", "127.0.0.1", "-p", std::to_string(port)},
        dir + "/sushy.log", dir + "/sushy.log");
    if (!c) return Error{"bmc: " + c.error().message};
    bmc_url_ = fmt::format("http://127.0.0.1:{}", port);
    auto ep = bmc::ParseEndpoint(bmc_url_);
    if (!ep) return ep.error();
    bmc::ClientOptions co;
    co.timeout = 2s;
    co.attempts = 1;
    bmc::RedfishClient rc(*ep, {"drill", bmc_password_}, co);
    const auto until = std::chrono::steady_clock::now() + 30s;
    for (;;) {
      auto sys = rc.System();
      if (sys && sys->power_state == "On") break;
      if (!(*c)->running() || std::chrono::steady_clock::now() > until || interrupted_)
        return Error{"bmc: the emulator did not answer within 30 s; its log: " + dir +
                     "/sushy.log"};
      std::this_thread::sleep_for(100ms);
    }
    const json secret = {{"apiVersion", "v1"},
                         {"kind", "Secret"},
                         {"metadata", {{"name", kBmcSecret}, {"namespace", kSystemNs}}},
                         {"stringData", {{"username", "drill"}, {"password", bmc_password_}}}};
    const std::string path = fmt::format("/api/v1/namespaces/{}/secrets", kSystemNs);
    (void)client_->Delete(path + "/" + kBmcSecret);
    auto s = client_->Create(path, secret);
    if (!s || !s->ok())
      return Error{"bmc: creating the Secret: " + (s ? s->Describe() : s.error().message)};
    const json endpoints = {{"apiVersion", "v1"},
                            {"kind", "ConfigMap"},
                            {"metadata", {{"name", kBmcEndpoints}, {"namespace", kSystemNs}}},
                            {"data", {{node, bmc_url_}}}};
    const std::string cms = fmt::format("/api/v1/namespaces/{}/configmaps", kSystemNs);
    (void)client_->Delete(cms + "/" + kBmcEndpoints);
    auto m = client_->Create(cms, endpoints);
    if (!m || !m->ok())
      return Error{"bmc: creating the ConfigMap: " + (m ? m->Describe() : m.error().message)};
    auto decoy = Decoy::Start();
    if (!decoy) return decoy.error();
    bmc_decoy_ = std::move(*decoy);
    const std::string decoy_url = fmt::format("http://127.0.0.1:{}", bmc_decoy_->port());
    auto a = client_->Patch(
        kube::NodePath(node), kube::PatchType::kMerge,
        {{"metadata", {{"annotations", {{std::string(keys::kBmcEndpoint), decoy_url}}}}}});
    if (!a || !a->ok())
      return Error{"bmc: annotating " + node + ": " + (a ? a->Describe() : a.error().message)};
    Say(fmt::format(
        "BMC of {}: sushy-emulator (fake driver) at {} ({}), user drill, in ConfigMap {}/{}; the "
        "node's own {} names a decoy at {}\n",
        node, bmc_url_, dir, kSystemNs, kBmcEndpoints, keys::kBmcEndpoint, decoy_url));
    return c;
  }

  // The resets the emulator accepted (204), from its access log.
  int BmcResets() const {
    std::ifstream in(bmc_dir_ + "/sushy.log");
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      n += line.find("ComputerSystem.Reset HTTP") != std::string::npos &&
           line.find("\" 204 ") != std::string::npos;
    }
    return n;
  }

  static int FreeLoopbackPort() {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
    close(fd);
    return port;
  }

  // Runs scripts/<script> of the source directory; the value of its `key` line.
  Result<std::string> RunScript(const std::string& script, const std::string& key) {
    const std::string path = o_.source_dir + script;
    const std::string log = work_ + "/" + std::filesystem::path(script).stem().string() + ".log";
    Say("running " + path + " (cached)\n");
    auto child = Child::Spawn({"/bin/bash", path}, log, log + ".err");
    if (!child) return child.error();
    int rc = -1;
    while ((rc = (*child)->Wait(200ms)) < 0) {
      if (interrupted_) {
        (*child)->Stop(2s);
        return Error{"interrupted while " + path + " ran"};
      }
    }
    std::ifstream in(log);
    std::string line, value;
    while (std::getline(in, line)) {
      if (line.starts_with(key)) value = line.substr(key.size());
    }
    if (rc != 0 || value.empty())
      return Error{fmt::format("{} failed (exit {}; its log: {}.err)", path, rc, log)};
    return value;
  }

  // The faulty node's owner in a replace-* scenario, and the provisioner's new machine.
  struct Owner {
    std::string path, what;  // the owner object's path; "Karpenter NodeClaim X"
    std::string fresh;       // the replacement node (and its owner's name), once made
    // replace-karpenter: the replacement's NodeClaim, the field manager that created it and its
    // controller owner reference ("NodePool/<name>").
    std::string fresh_claim, fresh_creator, fresh_owner;
  };

  // replace-karpenter: a NodePool for this run, launching from the kwok NodeClass: its nodes
  // join the run's pool 0 as simulated GPU nodes. Voluntary disruption off (budget 0): Karpenter
  // replaces what is deleted and consolidates nothing on its own; at most two machines.
  Status CreateNodePool(const std::string& prefix) {
    json labels = {{std::string(keys::kDefaultPoolLabel), prefix + "-pool-0"},
                   {"gpuheal.io/sim", "true"},
                   {"gpuheal.io/drill", "true"},
                   {"nvidia.com/gpu.present", "true"}};
    json pool = {{"apiVersion", "karpenter.sh/v1"},
                 {"kind", "NodePool"},
                 {"metadata", {{"name", prefix}, {"labels", {{"gpuheal.io/drill", "true"}}}}},
                 {"spec",
                  {{"template",
                    {{"metadata", {{"labels", labels}}},
                     {"spec",
                      {{"nodeClassRef",
                        {{"group", "karpenter.kwok.sh"},
                         {"kind", "KWOKNodeClass"},
                         {"name", kKarpenterNodeClass}}},
                       {"requirements", json::array({{{"key", "node.kubernetes.io/instance-type"},
                                                      {"operator", "In"},
                                                      {"values", {kKarpenterInstanceType}}}})},
                       {"expireAfter", "Never"}}}}},
                   {"disruption",
                    {{"consolidationPolicy", "WhenEmpty"},
                     {"consolidateAfter", "Never"},
                     {"budgets", json::array({{{"nodes", "0"}}})}}},
                   {"limits", {{"nvidia.com/gpu", std::to_string(2 * o_.gpus)}}}}}};
    auto r = client_->Create("/apis/karpenter.sh/v1/nodepools", pool);
    if (!r || !r->ok())
      return Error{"creating Karpenter NodePool " + prefix + ": " +
                   (r ? r->Describe() : r.error().message)};
    Say(fmt::format("Karpenter NodePool {}: {} machines from KWOKNodeClass {}, pool {}-pool-0\n",
                    prefix, kKarpenterInstanceType, kKarpenterNodeClass, prefix));
    return Status::Ok();
  }

  // replace-karpenter: the NodeClaim Karpenter launched `node` for (status.nodeName, written at
  // registration, which may come after the sim reported the node Ready: waited for).
  Result<Owner> KarpenterOwner(const std::string& node) {
    const auto until = std::chrono::steady_clock::now() + 30s;
    for (;;) {
      auto r = client_->Get("/apis/karpenter.sh/v1/nodeclaims");
      if (!r || !r->ok())
        return Error{"listing Karpenter NodeClaims: " + (r ? r->Describe() : r.error().message)};
      const json list = json::parse(r->body, nullptr, false);
      for (const auto& c : list.value("items", json::array())) {
        if (c.contains("status") && c["status"].value("nodeName", "") == node) {
          const std::string name = c["metadata"].value("name", "");
          return Owner{"/apis/karpenter.sh/v1/nodeclaims/" + name,
                       "Karpenter NodeClaim " + name,
                       "",
                       "",
                       "",
                       ""};
        }
      }
      if (std::chrono::steady_clock::now() > until || interrupted_)
        return Error{"no Karpenter NodeClaim named node " + node + " within 30 s"};
      std::this_thread::sleep_for(100ms);
    }
  }

  // replace-karpenter, after the fault: gpuheal deletes the target's NodeClaim; Karpenter
  // terminates the machine (its Node goes), launches a new NodeClaim for the pods the repair
  // evicted, and its Node registers (the sim adopts it and reports it Ready).
  void FollowKarpenter(Owner& owner, const std::string& prefix, const std::string& target,
                       Observer& obs, std::chrono::steady_clock::time_point deadline,
                       const std::function<void(const std::string&, const std::string&)>& fail) {
    const std::string old_claim = owner.path.substr(owner.path.rfind('/') + 1);
    bool deleted = false, node_gone = false;
    while (!interrupted_ && std::chrono::steady_clock::now() < deadline) {
      if (!deleted) {
        auto r = client_->Get(owner.path);
        if (r && (r->status == 404 ||
                  (r->ok() && json::parse(r->body, nullptr, false)["metadata"].contains(
                                  "deletionTimestamp")))) {
          deleted = true;
          obs.Mark("owner_deleted", owner.what + " deleted (delete-node)");
        }
      }
      if (deleted && !node_gone) {
        auto n = client_->Get(kube::NodePath(target));
        if (n && n->status == 404) {
          node_gone = true;
          obs.Mark("node_deleted", target + ": Karpenter terminated the machine, Node deleted");
        }
      }
      // Karpenter may launch before the deletion: the evicted pods are pending from the drain on.
      if (owner.fresh_claim.empty()) {
        auto r = client_->Get("/apis/karpenter.sh/v1/nodeclaims?labelSelector=" +
                              kube::UrlEncode("karpenter.sh/nodepool=" + prefix));
        const json list = r && r->ok() ? json::parse(r->body, nullptr, false) : json();
        for (const auto& c : list.value("items", json::array())) {
          const std::string name = c["metadata"].value("name", "");
          if (name == old_claim || name.empty()) continue;
          owner.fresh_claim = name;
          // The field manager of the create: Karpenter's own client, or anyone else's.
          for (const auto& m : c["metadata"].value("managedFields", json::array())) {
            owner.fresh_creator = m.value("manager", "");
            break;
          }
          for (const auto& ref : c["metadata"].value("ownerReferences", json::array()))
            owner.fresh_owner = ref.value("kind", "") + "/" + ref.value("name", "");
          obs.Mark("replacement_launched",
                   fmt::format("Karpenter launched NodeClaim {} for the evicted pods", name));
          break;
        }
      }
      if (!owner.fresh_claim.empty() && owner.fresh.empty()) {
        auto r = client_->Get("/apis/karpenter.sh/v1/nodeclaims/" + owner.fresh_claim);
        const json c = r && r->ok() ? json::parse(r->body, nullptr, false) : json();
        const std::string node =
            c.contains("status") ? c["status"].value("nodeName", "") : std::string();
        const auto adopted = sim_->adopted();
        if (!node.empty() && std::count(adopted.begin(), adopted.end(), node)) {
          owner.fresh = node;
          obs.Watch(node);
          obs.Mark("replacement_node_registered",
                   fmt::format("{} registered, owned by Karpenter NodeClaim {}", node,
                               owner.fresh_claim));
        }
      }
      if (deleted && !owner.fresh.empty()) return;
      std::this_thread::sleep_for(20ms);
    }
    if (!interrupted_)
      fail("finished in time",
           !deleted ? "gpuheal never deleted " + owner.what
           : owner.fresh_claim.empty()
               ? "Karpenter launched no replacement NodeClaim"
               : "the replacement NodeClaim " + owner.fresh_claim + "'s node never registered");
  }

  static std::string OwnerKind(const std::string& replace) {
    return replace == "karpenter" ? "Karpenter NodeClaim" : "Cluster API Machine";
  }

  static std::string CapiPath(const std::string& ns, const std::string& resource,
                              const std::string& name = "") {
    const std::string group =
        resource.starts_with("dev") ? "infrastructure.cluster.x-k8s.io" : "cluster.x-k8s.io";
    return fmt::format("/apis/{}/v1beta2/namespaces/{}/{}{}", group, ns, resource,
                       name.empty() ? "" : "/" + name);
  }

  // replace-capi: a Cluster of the run whose workers are the GPU pool, a MachineDeployment of
  // one machine from a DevMachineTemplate (the docker provider's inMemory backend: machines
  // without a cloud or a container runtime) whose nodes join the run's pool 0. The workload
  // cluster is this one (its kubeconfig Secret holds the drill's kubeconfig), so the Machine
  // controller finds the machines' Nodes, annotates them, and drains them at deletion here.
  Status CreateCapiPool(const std::string& ns, const std::string& prefix) {
    auto kubeconfig = ReadWholeFile(kubeconfig_);
    if (!kubeconfig || kubeconfig->empty())
      return Error{"replace-capi: cannot read the kubeconfig " + kubeconfig_ + " for the Cluster"};
    const json drill_label = {{"gpuheal.io/drill", "true"}};
    const std::vector<std::pair<std::string, json>> objects = {
        {"/api/v1/namespaces",
         {{"apiVersion", "v1"},
          {"kind", "Namespace"},
          {"metadata", {{"name", ns}, {"labels", drill_label}}}}},
        {"/api/v1/namespaces/" + ns + "/secrets",
         {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata",
           {{"name", prefix + "-kubeconfig"},
            {"labels", {{"cluster.x-k8s.io/cluster-name", prefix}}}}},
          {"type", "cluster.x-k8s.io/secret"},
          {"stringData", {{"value", *kubeconfig}}}}},
        // The machines' bootstrap data, as a bootstrap provider would write it (the inMemory
        // backend waits for it, and boots nothing with it).
        {"/api/v1/namespaces/" + ns + "/secrets",
         {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", prefix + "-bootstrap"}}},
          {"type", "cluster.x-k8s.io/secret"},
          {"stringData", {{"value", "#cloud-config\n"}, {"format", "cloud-config"}}}}},
        // (An annotation: the provider writes its listener's name into the DevCluster's
        // annotations and panics on an object that has none.)
        {CapiPath(ns, "devclusters"),
         {{"apiVersion", "infrastructure.cluster.x-k8s.io/v1beta2"},
          {"kind", "DevCluster"},
          {"metadata", {{"name", prefix}, {"labels", drill_label}, {"annotations", drill_label}}},
          {"spec", {{"backend", {{"inMemory", json::object()}}}}}}},
        {CapiPath(ns, "clusters"),
         {{"apiVersion", "cluster.x-k8s.io/v1beta2"},
          {"kind", "Cluster"},
          {"metadata", {{"name", prefix}, {"labels", drill_label}}},
          {"spec",
           {{"infrastructureRef",
             {{"apiGroup", "infrastructure.cluster.x-k8s.io"},
              {"kind", "DevCluster"},
              {"name", prefix}}}}}}},
        {CapiPath(ns, "devmachinetemplates"),
         {{"apiVersion", "infrastructure.cluster.x-k8s.io/v1beta2"},
          {"kind", "DevMachineTemplate"},
          {"metadata", {{"name", prefix}, {"labels", drill_label}}},
          {"spec",
           {{"template",
             {{"spec",
               {{"backend",
                 {{"inMemory",
                   {{"vm", {{"provisioning", {{"startupDuration", "0s"}}}}},
                    {"node", {{"provisioning", {{"startupDuration", "0s"}}}}}}}}}}}}}}}}}};
    for (const auto& [path, obj] : objects) {
      auto r = client_->Create(path, obj);
      if (!r || !r->ok()) {
        return Error{fmt::format("replace-capi: creating {} {}: {}", obj.value("kind", ""),
                                 obj["metadata"].value("name", ""),
                                 r ? r->Describe() : r.error().message)};
      }
    }
    // The test bed's control plane is not a Cluster API machine: once the infrastructure is
    // provisioned, the Cluster's ControlPlaneInitialized is written True, as the status of a
    // control plane provider would make it (the Machine controller watches a cluster's Nodes
    // only from then on).
    const auto until = std::chrono::steady_clock::now() + 60s;
    for (;;) {
      auto r = client_->Get(CapiPath(ns, "clusters", prefix));
      const json c = r && r->ok() ? json::parse(r->body, nullptr, false) : json();
      if (c.is_object() && c.contains("status") && c["status"].contains("initialization") &&
          c["status"]["initialization"].value("infrastructureProvisioned", false))
        break;
      if (std::chrono::steady_clock::now() > until || interrupted_) {
        return Error{fmt::format(
            "replace-capi: Cluster {}/{}'s infrastructure (DevCluster, inMemory backend) was not "
            "provisioned within 60 s; the docker provider's log: {}/control-plane/capi-capd.log",
            ns, prefix, work_)};
      }
      std::this_thread::sleep_for(50ms);
    }
    const json initialized = {
        {"status",
         {{"initialization", {{"controlPlaneInitialized", true}}},
          {"conditions", json::array({{{"type", "ControlPlaneInitialized"},
                                       {"status", "True"},
                                       {"reason", "Initialized"},
                                       {"message", "the test bed's own control plane"},
                                       {"observedGeneration", 1},
                                       {"lastTransitionTime",
                                        kube::RfcTime(std::chrono::system_clock::now())}}})}}}};
    auto st = client_->Patch(CapiPath(ns, "clusters", prefix) + "/status", kube::PatchType::kMerge,
                             initialized);
    if (!st || !st->ok()) {
      return Error{"replace-capi: writing the Cluster's ControlPlaneInitialized: " +
                   (st ? st->Describe() : st.error().message)};
    }
    const json deployment = {{"apiVersion", "cluster.x-k8s.io/v1beta2"},
                             {"kind", "MachineDeployment"},
                             {"metadata", {{"name", prefix}, {"labels", drill_label}}},
                             {"spec",
                              {{"clusterName", prefix},
                               {"replicas", 1},
                               {"template",
                                {{"spec",
                                  {{"clusterName", prefix},
                                   {"bootstrap", {{"dataSecretName", prefix + "-bootstrap"}}},
                                   {"infrastructureRef",
                                    {{"apiGroup", "infrastructure.cluster.x-k8s.io"},
                                     {"kind", "DevMachineTemplate"},
                                     {"name", prefix}}}}}}}}}};
    auto md = client_->Create(CapiPath(ns, "machinedeployments"), deployment);
    if (!md || !md->ok()) {
      return Error{"replace-capi: creating the MachineDeployment: " +
                   (md ? md->Describe() : md.error().message)};
    }
    Say(
        fmt::format("Cluster API Cluster {}/{}: MachineDeployment {} of 1 machine from "
                    "DevMachineTemplate {} (inMemory), pool {}-pool-0\n",
                    ns, prefix, prefix, prefix, prefix));
    return Status::Ok();
  }

  // The run's Cluster, before its namespace: Cluster API deletes what it owns in order (the
  // MachineDeployment, its Machines, their DevMachines, then the DevCluster); a namespace's
  // deletion takes them all at once, and a DevMachine whose DevCluster went first is never
  // released.
  void DeleteCapiCluster(const std::string& ns, const std::string& prefix) {
    (void)client_->Delete(CapiPath(ns, "clusters", prefix));
    const auto until = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < until) {
      auto r = client_->Get(CapiPath(ns, "clusters", prefix));
      if (!r || r->status == 404) return;
      std::this_thread::sleep_for(100ms);
    }
    Say(
        fmt::format("Cluster API Cluster {}/{} was not deleted within 60 s; the managers' logs: "
                    "{}/control-plane/capi-core.log and capi-capd.log\n",
                    ns, prefix, work_));
  }

  struct CapiMachine {
    std::string name, provider_id, node, creator, owner;
    bool deleting = false;
  };

  // The machines of the run's MachineDeployment, as the API server has them now.
  Result<std::vector<CapiMachine>> CapiMachines(const std::string& ns, const std::string& prefix) {
    auto r = client_->Get(CapiPath(ns, "machines") + "?labelSelector=" +
                          kube::UrlEncode("cluster.x-k8s.io/deployment-name=" + prefix));
    if (!r || !r->ok())
      return Error{"listing Cluster API Machines: " + (r ? r->Describe() : r.error().message)};
    std::vector<CapiMachine> out;
    const json list = json::parse(r->body, nullptr, false);
    for (const auto& m : list.value("items", json::array())) {
      CapiMachine c;
      const json meta = m.value("metadata", json::object());
      c.name = meta.value("name", "");
      c.deleting = meta.contains("deletionTimestamp");
      c.provider_id = m.value("spec", json::object()).value("providerID", "");
      const json status = m.value("status", json::object());
      c.node = status.value("nodeRef", json::object()).value("name", "");
      // The field manager of the create (the first entry): the MachineSet controller's
      // server-side apply, or anyone else's.
      for (const auto& f : meta.value("managedFields", json::array())) {
        c.creator = f.value("manager", "");
        break;
      }
      for (const auto& ref : meta.value("ownerReferences", json::array()))
        c.owner = ref.value("kind", "") + "/" + ref.value("name", "");
      if (!c.name.empty()) out.push_back(std::move(c));
    }
    return out;
  }

  // replace-capi, before the workload: the MachineDeployment's machine boots (the provider sets
  // its providerID), its kubelet registers (the sim, under that providerID), and the Machine
  // controller links it (status.nodeRef) and annotates the Node with its Machine.
  Result<std::string> AwaitCapiMachine(const std::string& ns, const std::string& prefix) {
    const auto until = std::chrono::steady_clock::now() + 60s;
    std::string joined;
    while (!interrupted_) {
      auto machines = CapiMachines(ns, prefix);
      if (!machines) return machines.error();
      for (const auto& m : *machines) {
        if (m.deleting || m.provider_id.empty()) continue;
        if (joined.empty()) {
          if (auto s = sim_->Join(m.name, prefix + "-pool-0", m.provider_id); !s) return s.error();
          joined = m.name;
        }
        if (m.name == joined && m.node == joined) {
          auto n = client_->Get(kube::NodePath(joined));
          const json node = n && n->ok() ? json::parse(n->body, nullptr, false) : json();
          if (node.is_object() &&
              node["metadata"]
                      .value("annotations", json::object())
                      .value(std::string(kube::kCapiMachineAnnotation), "") == joined) {
            Say(fmt::format("Cluster API Machine {} booted, its Node registered and linked\n",
                            joined));
            return joined;
          }
        }
      }
      if (std::chrono::steady_clock::now() > until) break;
      std::this_thread::sleep_for(50ms);
    }
    return Error{fmt::format(
        "replace-capi: the MachineDeployment's machine {} within 60 s; the managers' logs: "
        "{}/control-plane/capi-core.log and capi-capd.log",
        joined.empty() ? "got no providerID" : joined + " was not linked to its Node", work_)};
  }

  // replace-capi, after the fault: gpuheal deletes the target's Machine; the Machine controller
  // drains its Node and deletes its DevMachine (the machine is gone: the sim's kubelet and agent
  // stop; the Node object stays, since Cluster API deletes a Node only in a cluster whose control
  // plane it knows); the MachineSet controller creates a new Machine, the provider boots it, its
  // kubelet registers, and the Machine controller links the Node.
  void FollowCapi(Owner& owner, const std::string& ns, const std::string& prefix,
                  const std::string& target, Observer& obs,
                  std::chrono::steady_clock::time_point deadline,
                  const std::function<void(const std::string&, const std::string&)>& fail) {
    bool deleted = false, gone = false, joined = false;
    while (!interrupted_ && std::chrono::steady_clock::now() < deadline) {
      if (!deleted) {
        auto r = client_->Get(owner.path);
        if (r && (r->status == 404 ||
                  (r->ok() && json::parse(r->body, nullptr, false)["metadata"].contains(
                                  "deletionTimestamp")))) {
          deleted = true;
          obs.Mark("owner_deleted", owner.what + " deleted (delete-node)");
        }
      }
      if (deleted && !gone) {
        auto r = client_->Get(CapiPath(ns, "devmachines", target));
        if (r && r->status == 404) {
          gone = true;
          sim_->PowerOff(target);
          obs.Mark("node_deleted",
                   target +
                       ": the docker provider deleted its machine (DevMachine gone), its "
                       "kubelet stopped");
        }
      }
      auto machines = CapiMachines(ns, prefix);
      for (const auto& m : machines ? *machines : std::vector<CapiMachine>()) {
        if (m.name == target || m.deleting) continue;
        if (owner.fresh_claim.empty()) {
          owner.fresh_claim = m.name;
          owner.fresh_creator = m.creator;
          owner.fresh_owner = m.owner;
          obs.Mark("replacement_launched",
                   fmt::format("the MachineSet controller created Machine {}", m.name));
        }
        if (m.name != owner.fresh_claim) continue;
        if (!joined && !m.provider_id.empty()) {
          obs.Watch(m.name);
          if (auto s = sim_->Join(m.name, prefix + "-pool-0", m.provider_id); !s) {
            fail("replacement booted", s.error().message);
            return;
          }
          joined = true;
          obs.Mark("replacement_node_registered",
                   fmt::format("{} registered under the provider's {}", m.name, m.provider_id));
        }
        if (joined && owner.fresh.empty() && m.node == m.name) {
          owner.fresh = m.name;
          obs.Mark("replacement_node_linked",
                   fmt::format("the Machine controller linked Machine {} to its Node", m.name));
        }
      }
      if (deleted && gone && !owner.fresh.empty()) return;
      std::this_thread::sleep_for(20ms);
    }
    if (!interrupted_)
      fail("finished in time",
           !deleted ? "gpuheal never deleted " + owner.what
           : !gone  ? "the docker provider never deleted " + target + "'s machine"
           : owner.fresh_claim.empty()
               ? "the MachineSet controller created no replacement Machine"
               : "the replacement Machine " + owner.fresh_claim + "'s node never registered");
  }

  // gpu-scoped, before the workload: as NVIDIA's DRA driver would on each node, a ResourceSlice
  // listing its eight GPUs (the NVML double's bus ids), and the DeviceClass the workload's claims
  // ask for. kube-scheduler allocates the claims (from the workload's ResourceClaimTemplate).
  Status PublishDra(const std::set<std::string>& nodes) {
    dra_ = {};
    const json device_class = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "DeviceClass"},
        {"metadata", {{"name", kDraClass}}},
        {"spec",
         {{"selectors", json::array({{{"cel",
                                       {{"expression", fmt::format("device.driver == \"{}\"",
                                                                   kDraDriver)}}}}})}}}};
    auto dc = client_->Create("/apis/resource.k8s.io/v1/deviceclasses", device_class);
    if (!dc || (!dc->ok() && dc->status != 409)) {
      return Error{
          "gpu-scoped: creating the DeviceClass (the cluster must serve resource.k8s.io/v1, "
          "Kubernetes 1.34 or later): " +
          (dc ? dc->Describe() : dc.error().message)};
    }
    const int buses[] = {0x1b, 0x2b, 0x3b, 0x4b, 0x5b, 0x6b, 0x7b, 0x8b};
    json devices = json::array();
    for (int i = 0; i < 8; ++i) {
      devices.push_back({{"name", fmt::format("gpu-{}", i)},
                         {"attributes",
                          {{"pciBusID", {{"string", fmt::format("0000:{:02x}:00.0", buses[i])}}},
                           {"index", {{"int", i}}}}}});
    }
    for (const auto& node : nodes) {
      const std::string name = node + "-" + kDraDriver;
      const json slice = {
          {"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"driver", kDraDriver},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", devices}}}};
      auto r = client_->Create("/apis/resource.k8s.io/v1/resourceslices", slice);
      if (!r || (!r->ok() && r->status != 409)) {
        return Error{"gpu-scoped: publishing ResourceSlice " + name + ": " +
                     (r ? r->Describe() : r.error().message)};
      }
      dra_.slices.push_back(name);
    }
    return Status::Ok();
  }

  // gpu-scoped, once the workload runs: the pod whose claim kube-scheduler allocated the GPU the
  // fault names (0000:3b:00, device gpu-2 of the target's pool).
  Status FindDraVictim(const std::string& ns, const std::string& target) {
    auto r = client_->Get(fmt::format("/apis/resource.k8s.io/v1/namespaces/{}/resourceclaims", ns));
    if (!r || !r->ok())
      return Error{"gpu-scoped: listing ResourceClaims: " +
                   (r ? r->Describe() : r.error().message)};
    int on_target = 0;
    for (const auto& c : json::parse(r->body, nullptr, false).value("items", json::array())) {
      const json st = c.value("status", json::object());
      for (const auto& res : st.value("allocation", json::object())
                                 .value("devices", json::object())
                                 .value("results", json::array())) {
        if (res.value("pool", "") != target) continue;
        ++on_target;
        if (res.value("device", "") != kDraVictimDevice) continue;
        for (const auto& ref : st.value("reservedFor", json::array()))
          dra_.victim = ref.value("name", "");
        dra_.victim_claim = c["metadata"].value("name", "");
      }
    }
    if (dra_.victim.empty()) {
      return Error{fmt::format(
          "gpu-scoped: kube-scheduler allocated no claim to {}'s {} ({} of its devices allocated)",
          target, kDraVictimDevice, on_target)};
    }
    Say(fmt::format(
        "DRA: {} ResourceSlices of 8 GPUs; kube-scheduler allocated {} claims on {}; {} holds "
        "GPU 0000:3b:00 ({}, claim {})\n",
        dra_.slices.size(), on_target, target, dra_.victim, kDraVictimDevice, dra_.victim_claim));
    return Status::Ok();
  }

  // gpu-scoped, while the repair runs: whether kube-scheduler allocated the tainted device to
  // another claim while gpuheal's DeviceTaintRule for it existed (polled every 20 ms).
  void WatchDraTaint(const std::string& ns, const std::string& target,
                     const std::atomic<bool>& done) {
    const std::string claims =
        fmt::format("/apis/resource.k8s.io/v1/namespaces/{}/resourceclaims", ns);
    while (!done && !interrupted_) {
      bool ruled = false;
      if (auto r = client_->Get("/apis/resource.k8s.io/v1/devicetaintrules"); r && r->ok()) {
        for (const auto& rule :
             json::parse(r->body, nullptr, false).value("items", json::array())) {
          const json sel =
              rule.value("spec", json::object()).value("deviceSelector", json::object());
          ruled |= sel.value("pool", "") == target && sel.value("device", "") == kDraVictimDevice;
        }
      }
      if (ruled) {
        dra_.rule_seen = true;
        if (auto r = client_->Get(claims); r && r->ok()) {
          for (const auto& c : json::parse(r->body, nullptr, false).value("items", json::array())) {
            const std::string name = c["metadata"].value("name", "");
            if (name == dra_.victim_claim) continue;
            for (const auto& res : c.value("status", json::object())
                                       .value("allocation", json::object())
                                       .value("devices", json::object())
                                       .value("results", json::array())) {
              if (res.value("pool", "") == target && res.value("device", "") == kDraVictimDevice)
                dra_.allocated_while_tainted = name;
            }
          }
        }
      } else if (dra_.rule_seen) {
        dra_.rule_gone = true;
      }
      std::this_thread::sleep_for(20ms);
    }
  }

  // predictive: watches the predictive drain until the recorded fatal fault's time, then replays
  // it on the same GPU and waits for its quarantine.
  void PredictiveReplay(const Plan& plan, const std::string& state, const std::string& target,
                        Observer& obs, std::chrono::steady_clock::time_point deadline,
                        const std::function<void(const std::string&, const std::string&)>& fail) {
    predictive_ = {};
    const auto fatal_at = std::chrono::steady_clock::now() + plan.fatal_after;
    auto node = [&]() -> const kube::Node* {
      auto it = obs.nodes().find(target);
      return it == obs.nodes().end() ? nullptr : &it->second.node;
    };
    // Until the recorded fatal fault's time, whatever the predictive drain did by then.
    obs.WaitFor(
        [&] {
          const kube::Node* n = node();
          if (!n) return false;
          auto a = n->meta.annotations.find(std::string(keys::kGpuAtRisk));
          if (a != n->meta.annotations.end() && a->second != "{}" && !predictive_.at_risk_us) {
            predictive_.at_risk_us = NowUs();
            obs.MarkLocked("at_risk",
                           target + ": " + std::string(keys::kGpuAtRisk) + " names GPU 0000:3b:00");
          }
          if (n->unschedulable && !predictive_.cordoned_us) {
            predictive_.cordoned_us = NowUs();
            obs.MarkLocked("cordoned", target + ": cordoned for the risk");
          }
          if (predictive_.cordoned_us && !n->unschedulable && !predictive_.uncordoned_us) {
            predictive_.uncordoned_us = NowUs();
            obs.MarkLocked("uncordoned", target + ": uncordoned after the GPU's reset");
          }
          return false;
        },
        std::min(deadline, fatal_at), interrupted_);
    if (interrupted_) return;
    // The replayed fatal fault, on the same GPU.
    const auto lines = InjectMessages(InjectSpec{plan.fatal_xid, "0000:3b:00", "4343", "trainer"});
    predictive_.fatal_us = NowUs();
    obs.Mark("fatal_replayed", fmt::format("Xid {} replayed on GPU 0000:3b:00", plan.fatal_xid));
    if (auto s = WriteSimKernel(state, target, lines); !s) {
      fail("fatal replayed", s.error().message);
      return;
    }
    if (!obs.WaitFor([&] { return obs.Has("taint"); }, deadline, interrupted_) && !interrupted_)
      fail("finished in time", "timed out waiting for the replayed fatal fault's quarantine");
  }

  // rack: the node outside the rack is remediated while the rack's four are held by one incident;
  // then the operator's release (gpuheal.io/incident-release on its nodes) lets them go on.
  void RackIncident(const std::vector<std::string>& targets, Observer& obs,
                    std::chrono::steady_clock::time_point deadline,
                    const std::function<void(const std::string&, const std::string&)>& fail) {
    rack_ = {};
    const std::vector<std::string> rack(targets.begin(), targets.end() - 1);
    const std::string& outside = targets.back();
    const std::string domain = fmt::format("{}=rack-0", kRackLabel);
    // Under the observer's lock: whether `node`'s repair reached `phase`, and its incident.
    auto reached = [&](const std::string& node, const char* phase) {
      for (const auto& [name, r] : obs.repairs()) {
        if (r.node == node && r.phase_times.count(phase)) return true;
      }
      return false;
    };
    auto incident = [&](const std::string& node) {
      std::string out;
      for (const auto& [name, r] : obs.repairs()) {
        if (r.node == node && r.phase != "Recovered" && r.phase != "Replaced" &&
            r.phase != "Failed")
          out = r.incident;
      }
      return out;
    };
    auto wait = [&](const std::function<bool()>& pred, const std::string& what) {
      if (obs.WaitFor(pred, deadline, interrupted_)) return true;
      if (!interrupted_) fail("finished in time", "timed out waiting for " + what);
      return false;
    };
    if (!wait([&] { return reached(outside, "Remediating"); },
              "the repair of the node outside the rack"))
      return;
    obs.Mark("outside_remediating", outside + ": its repair reached Remediating");
    // The rack's nodes faulted with it: let through, they would be remediating within a
    // reconcile or two; give them as long again as the incident's re-check.
    obs.WaitFor([] { return false; }, std::chrono::steady_clock::now() + 6s, interrupted_);
    {
      std::lock_guard<std::mutex> l(obs.mu());
      for (const auto& n : rack) {
        rack_.held += incident(n) == domain;
        rack_.remediated += reached(n, "Remediating");
      }
      rack_.detail = fmt::format(
          "{} of {} nodes of rack-0 held by the incident {} (status.incident), {} remediated; {} "
          "remediated with status.incident \"{}\"",
          rack_.held, rack.size(), domain, rack_.remediated, outside, incident(outside));
    }
    obs.Mark("incident_held", rack_.detail);
    // The operator's release, on the rack's nodes (kubectl annotate nodes -l LABEL=rack-0). Its
    // step is when the first annotation goes out: the controller may take a node's repair on
    // (Remediating, seen through a watch) before the last annotation's answer is back.
    const std::string at = kube::RfcTime(std::chrono::system_clock::now());
    obs.Mark("incident_released",
             fmt::format("{}={} on the rack's {} nodes", keys::kIncidentRelease, at, rack.size()));
    for (const auto& n : rack) {
      auto r = client_->Patch(
          kube::NodePath(n), kube::PatchType::kMerge,
          {{"metadata", {{"annotations", {{std::string(keys::kIncidentRelease), at}}}}}});
      if (!r || !r->ok()) {
        fail("operator release",
             "annotating " + n + ": " + (r ? r->Describe() : r.error().message));
        return;
      }
    }
    rack_.released = true;
    wait(
        [&] {
          return std::all_of(rack.begin(), rack.end(),
                             [&](const std::string& n) { return reached(n, "Remediating"); });
        },
        "the rack's repairs to go on after the release");
  }

  // service, training (and --workload): what the workload's users saw, measured through the
  // failover; its steps join the timeline and its checks the run's. `lost_ips`: the pods whose
  // GPU the fault took.
  void UserFigures(const Plan& plan, const std::vector<std::string>& targets,
                   const std::string& checkpoints, const std::vector<std::string>& lost_ips,
                   int replicas, std::unique_ptr<LoadGenerator>& load, Observer& obs,
                   RunResult& res) {
    auto check = [&](const std::string& name, bool ok, const std::string& detail) {
      res.checks.push_back({name, ok, detail});
    };
    // correlated: the gates may hold repairs, and a held node's pods stay where they are.
    const bool may_hold = o_.scenario == "correlated";
    int64_t t0 = 0, restored = 0;
    {
      std::lock_guard<std::mutex> l(obs.mu());
      t0 = obs.ArmedAt();
      restored = obs.At("replacement_running");
    }
    if (plan.workload == "service" && load) {
      // Until the faulty pods' endpoints are out of the Service: their pods evicted, or their
      // readiness probes failing (a repair that evicts nothing, or one a gate holds).
      obs.WaitFor(
          [&] {
            return std::none_of(lost_ips.begin(), lost_ips.end(),
                                [&](const std::string& ip) { return load->ListsReady(ip); });
          },
          std::chrono::steady_clock::now() + 30s, interrupted_);
      // No replacement (critical: the GPU reset under its pod): until every endpoint is ready
      // again, the pod's container restarted by its liveness probe on the reset GPU.
      if (restored == 0 && !may_hold &&
          obs.WaitFor([&] { return load->ReadyEndpoints() >= replicas; },
                      std::chrono::steady_clock::now() + 30s, interrupted_)) {
        restored = NowUs();
        obs.MarkAt("service_restored", restored,
                   fmt::format("{} of {} endpoints ready", load->ReadyEndpoints(), replicas));
      }
      // The load goes on for a while: errors then are a failure.
      std::this_thread::sleep_for(kServiceAfter);
      const int64_t end = NowUs();
      load->Stop();
      const ServiceFigures f = SummariseService(load->Samples(), t0, restored);
      const int ready_at_end = load->ReadyEndpoints();
      load.reset();
      if (f.first_error_us)
        obs.MarkAt(
            "service_first_error", f.first_error_us,
            fmt::format("{} of {} requests failed from the kernel line on", f.errors, f.requests));
      if (f.last_error_us)
        obs.MarkAt("service_last_error", f.last_error_us,
                   "the faulty pods' endpoints were out of the Service by then");
      res.service = f;
      const int64_t quiet_from = end - std::chrono::microseconds(kServiceAfter).count();
      check("service errors ended", f.last_error_us < quiet_from,
            fmt::format("{} requests failed, the last {:.1f} ms after the kernel line; none in the "
                        "load's last {} s: {}",
                        f.errors, f.error_window_ms, kServiceAfter.count(),
                        f.last_error_us < quiet_from ? "yes" : "no"));
      if (restored > 0 || !may_hold)
        check("service answered after the failover", restored > 0 && f.errors_after_restored == 0,
              restored == 0
                  ? fmt::format("the service never had its {} endpoints back ({} ready)", replicas,
                                ready_at_end)
                  : fmt::format("{} of the requests due after the service's capacity was back "
                                "failed; {} failed in all, the last {:.1f} ms after the kernel "
                                "line",
                                f.errors_after_restored, f.errors, f.error_window_ms));
      else
        check("service without the held nodes", ready_at_end == replicas - (int)lost_ips.size(),
              fmt::format("{} of {} endpoints ready at the end: the held nodes' {} pods out of the "
                          "Service by their readiness probes",
                          ready_at_end, replicas, lost_ips.size()));
      check("service measured", f.baseline_requests > 0 && f.requests > 0,
            fmt::format("{} requests before the fault (p99 {:.1f} ms), {} from the kernel line "
                        "(p99 {:.1f} ms through the failover)",
                        f.baseline_requests, f.baseline_p99_ms, f.requests, f.p99_ms));
      return;
    }
    if (plan.workload != "training") return;
    // The pods on the faulty GPUs, by Deployment, and whether gpuheal evicted a trainer after
    // asking it to checkpoint and waiting for the answer (not Kubernetes' NoExecute taint
    // manager, not a held repair). A catastrophic fault has no window: the trainer's answer
    // races its SIGTERM, and its checkpoint counts only when it answered.
    const XidInfo* info = FindXid(plan.xid);
    const bool windowed = !info || info->severity != Severity::kCatastrophic;
    std::multimap<std::string, std::string> faulty;
    bool asked_and_evicted = false;
    {
      std::lock_guard<std::mutex> l(obs.mu());
      for (const auto& [uid, p] : obs.pods()) {
        if (!p.initial || !std::count(targets.begin(), targets.end(), p.node)) continue;
        if (plan.dra && p.name != dra_.victim) continue;
        const bool periodic = p.name.starts_with("trainer-periodic-");
        faulty.insert({periodic ? "trainer-periodic" : "trainer", p.name});
        if (!periodic && p.checkpoint_requested && p.disruption == "EvictionByEvictionAPI" &&
            (windowed || p.checkpoint_done))
          asked_and_evicted = true;
      }
    }
    // Until every rank is taken over (a replacement, or the container restarted in its pod once
    // the GPU is reset); a held node's ranks stall.
    TrainingFigures f;
    const auto until = std::chrono::steady_clock::now() +
                       (may_hold ? std::chrono::seconds(kTrainLostExitSeconds + 3) : 25s);
    do {
      f = SummariseTraining(checkpoints, faulty);
      if (f.work_lost_s >= 0 && (plan.dra || f.periodic_only_work_lost_s >= 0)) break;
      std::this_thread::sleep_for(100ms);
    } while (std::chrono::steady_clock::now() < until && !interrupted_);
    if (f.checkpoint_us)
      obs.MarkAt("training_checkpoint", f.checkpoint_us,
                 fmt::format("trainer wrote step {} on gpuheal's request in {:.0f} ms",
                             f.steps_done, f.checkpoint_ms));
    if (f.resumed_us)
      obs.MarkAt("training_resumed", f.resumed_us,
                 f.resumed ? "its replacement resumed from that checkpoint"
                           : "the rank resumed from its last periodic checkpoint");
    res.training = f;
    const double bound_s = (kTrainStepMs + kTrainCheckpointMs) / 1000.0;
    if (asked_and_evicted) {
      check("checkpoint on gpuheal's request",
            f.resumed && f.work_lost_s >= 0 && f.work_lost_s <= bound_s,
            f.work_lost_s < 0 ? f.detail
                              : fmt::format("{:.2f} s of work lost (at most a step and a "
                                            "checkpoint: {:.2f} s); {}",
                                            f.work_lost_s, bound_s, f.detail));
    } else {
      // Not asked, or taken away at once (a catastrophic fault's NoExecute): measured as it is.
      check("training measured", f.work_lost_s >= 0 || (may_hold && f.stalled_ranks > 0),
            f.work_lost_s >= 0
                ? fmt::format("{:.2f} s of work lost over {} rank(s) on a faulty GPU; {}",
                              f.work_lost_s, f.ranks, f.detail)
                : fmt::format("{} of {} rank(s) stalled (their repair held); {}", f.stalled_ranks,
                              f.ranks, f.detail));
    }
    if (!plan.dra)
      check("periodic-only trainer measured",
            f.periodic_only_work_lost_s >= 0 || (may_hold && f.stalled_ranks > 0),
            f.periodic_only_work_lost_s < 0
                ? f.detail
                : fmt::format("{:.2f} s of work lost with checkpoints every {} s only",
                              f.periodic_only_work_lost_s, kTrainEverySeconds));
  }

  void Checks(const Plan& plan, const std::vector<std::string>& targets,
              const std::set<std::string>& standby, int replicas, Observer& obs, RunResult& res) {
    auto check = [&](const std::string& name, bool ok, const std::string& detail) {
      res.checks.push_back({name, ok, detail});
    };
    std::map<std::string, std::vector<const kube::NodeRepair*>> by_node;
    for (const auto& [name, r] : obs.repairs()) by_node[r.node].push_back(&r);
    const std::string& t = targets[0];
    auto records = [&](const std::string& node) {
      return by_node.count(node) ? by_node[node] : std::vector<const kube::NodeRepair*>{};
    };
    auto recs_for = [&](const std::string& node) {
      auto v = records(node);
      std::sort(v.begin(), v.end(), [](const kube::NodeRepair* a, const kube::NodeRepair* b) {
        return a->meta.name < b->meta.name;
      });
      return v;
    };
    auto evicted_once = [&](const kube::NodeRepair& r) {
      std::set<std::string> s(r.evicted_pods.begin(), r.evicted_pods.end());
      return s.size() == r.evicted_pods.size();
    };
    int target_pods = 0, deleted = 0;
    bool replacement_on_target = false;
    int replacements_running = 0;
    for (const auto& [uid, p] : obs.pods()) {
      if (p.initial && std::count(targets.begin(), targets.end(), p.node)) {
        ++target_pods;
        deleted += p.deleting_us > 0;
      }
      if (!p.initial) {
        replacement_on_target |= std::count(targets.begin(), targets.end(), p.node) > 0;
        replacements_running += p.running_us > 0;
      }
    }
    check("fault detected", obs.Has("detected"),
          !obs.Has("detected")       ? "no fault line from the agent"
          : o_.scenario == "runtime" ? "the node's agent saw the runtime stop answering"
                                     : "the node's agent read the kernel line");
    if (plan.fatal_xid) {
      const kube::NodeRepair* pred = nullptr;
      for (const auto* r : recs_for(t)) {
        if (r->reason == "NvidiaGPUAtRisk") pred = r;
      }
      check("GPU at risk", obs.Has("at_risk"),
            obs.Has("at_risk")
                ? "the agent published GPU 0000:3b:00 in " + std::string(keys::kGpuAtRisk) +
                      " after the Xid " + std::to_string(plan.xid)
                : "never published");
      // Each of the node's pods went through the Eviction API after it said it had checkpointed.
      int pods = 0, at_boundary = 0;
      for (const auto& [uid, p] : obs.pods()) {
        if (!p.initial || p.node != t) continue;
        ++pods;
        at_boundary += p.deleting_us > 0 && p.checkpoint_done &&
                       p.disruption == "EvictionByEvictionAPI" &&
                       (!predictive_.fatal_us || p.deleting_us < predictive_.fatal_us);
      }
      check("drained at the boundary", pods > 0 && at_boundary == pods,
            fmt::format("{} of {} pod(s) evicted through the Eviction API once checkpointed, "
                        "before the fatal fault",
                        at_boundary, pods));
      check("GPU reset", pred && pred->phase == "Recovered" && obs.Has("gpu_recovered"),
            pred
                ? fmt::format("NodeRepair {}: {} ({})", pred->meta.name, pred->phase, pred->message)
                : "no NvidiaGPUAtRisk repair");
      const int64_t off = obs.At("last_eviction"), fatal = predictive_.fatal_us;
      check("drained before the fatal fault", off && fatal && off < fatal,
            off && fatal ? fmt::format("the node's work was off it {:.1f} s after the precursor, "
                                       "{:.1f} s before the replayed Xid {} (the lead time "
                                       "gained; the checkpoint saved the work)",
                                       static_cast<double>(off - obs.At("detected")) / 1e6,
                                       static_cast<double>(fatal - off) / 1e6, plan.fatal_xid)
                         : "the work was not off the node before the fatal fault");
      const bool back = predictive_.uncordoned_us > predictive_.cordoned_us;
      const double out_s =
          static_cast<double>(predictive_.uncordoned_us - predictive_.cordoned_us) / 1e6;
      check("capacity cost", back && predictive_.cordoned_us > 0,
            back ? fmt::format("{} GPUs out of service for {:.1f} s ({:.1f} GPU-seconds): the "
                               "node cordoned until its GPU was reset, back before the fatal fault",
                               o_.gpus, out_s, out_s * o_.gpus)
                 : "the node was not uncordoned before the fatal fault");
      check("fatal fault still quarantined", obs.Has("taint"),
            obs.Has("taint") ? "the replayed fault's node-level repair took over"
                             : "no quarantine after the replayed fault");
      return;
    }
    if (plan.dra) {
      auto n = obs.nodes().count(t) ? obs.nodes().at(t).node : kube::Node{};
      const kube::NodeRepair* rec = nullptr;
      for (const auto* r : recs_for(t)) rec = r;
      int others = 0, others_gone = 0;
      std::string victim_by;
      bool victim_gone = false;
      for (const auto& [uid, p] : obs.pods()) {
        if (!p.initial || p.node != t) continue;
        if (p.name == dra_.victim) {
          victim_gone = p.deleting_us > 0;
          victim_by = p.disruption;
        } else {
          ++others;
          others_gone += p.deleting_us > 0;
        }
      }
      check("one GPU's pod evicted", victim_gone && victim_by == "EvictionByEvictionAPI",
            fmt::format("{} (holding GPU 0000:3b:00): {}", dra_.victim,
                        victim_gone ? "evicted (" + victim_by + ")" : "still running"));
      check("other GPUs' pods untouched", others > 0 && others_gone == 0,
            fmt::format("{} of {} other pod(s) of the node taken away", others_gone, others));
      bool tainted = false, untainted = false;
      if (rec) {
        for (const auto& s : rec->steps) {
          tainted |= s.kind == "DeviceTaintRuleCreated";
          untainted |= s.kind == "DeviceTaintRulesRemoved";
        }
      }
      check("device tainted, then released", tainted && untainted,
            tainted ? (untainted ? "a DeviceTaintRule for GPU 0000:3b:00's device, removed after "
                                   "the reset"
                                 : "the DeviceTaintRule was not removed")
                    : "no DeviceTaintRule");
      check("tainted GPU not allocated", dra_.rule_seen && dra_.allocated_while_tainted.empty(),
            !dra_.rule_seen ? "the drill never saw the DeviceTaintRule"
            : dra_.allocated_while_tainted.empty()
                ? fmt::format("while gpuheal's DeviceTaintRule for {} existed, kube-scheduler "
                              "allocated it to no claim (the victim's replacement waited{})",
                              kDraVictimDevice, dra_.rule_gone ? " until it was removed" : "")
                : fmt::format("kube-scheduler allocated the tainted {} to claim {}",
                              kDraVictimDevice, dra_.allocated_while_tainted));
      check("GPU reset", obs.Has("gpu_recovered") && rec && rec->phase == "Recovered",
            rec ? fmt::format("NodeRepair {}: {}", rec->meta.name, rec->phase) : "no repair");
      check("node never tainted", !obs.Has("taint") && !n.unschedulable,
            fmt::format("taint: {}, cordoned: {}", obs.Has("taint") ? "yes" : "no",
                        n.unschedulable ? "yes" : "no"));
      return;
    }
    if (o_.scenario == "critical") {
      auto n = obs.nodes().count(t) ? obs.nodes().at(t).node : kube::Node{};
      check("GPU-level repair", obs.Has("gpu_recovery_requested") && obs.Has("repair_recovered"),
            obs.Has("repair_recovered")
                ? "recovery requested from the agent, GPU reset and verified, repair Recovered"
                : "the repair did not reach Recovered");
      check("node stayed schedulable", !obs.Has("taint") && !n.unschedulable && deleted == 0,
            fmt::format("taint: {}, cordoned: {}, pods evicted: {}",
                        obs.Has("taint") ? "yes" : "no", n.unschedulable ? "yes" : "no", deleted));
      return;
    }
    check("NodeCondition False", obs.Has("condition"),
          obs.Has("condition") ? "set by the agent" : "never seen");
    check("quarantined", obs.Has("taint"),
          obs.Has("taint") ? "tainted and cordoned by the controller"
                           : "no gpuheal.io/gpu-fault taint");
    if (plan.racks) {
      const std::vector<std::string> rack(targets.begin(), targets.end() - 1);
      const std::string& outside = targets.back();
      auto remediating = [&](const std::string& node) {
        for (const auto* r : records(node)) {
          if (r->phase_times.count("Remediating")) return true;
        }
        return false;
      };
      int drained = 0;
      for (const auto& n : rack) {
        for (const auto& [uid, p] : obs.pods()) {
          if (p.initial && p.node == n && p.deleting_us) {
            ++drained;
            break;
          }
        }
      }
      check("one incident held the rack",
            rack_.held == static_cast<int>(rack.size()) && rack_.remediated == 0, rack_.detail);
      check("rack drained meanwhile", drained == static_cast<int>(rack.size()),
            fmt::format("{} of {} rack nodes had their pods taken away while held", drained,
                        rack.size()));
      check("node outside the rack repaired", remediating(outside),
            remediating(outside) ? outside + " reached Remediating"
                                 : outside + " never reached Remediating");
      const bool all = std::all_of(rack.begin(), rack.end(), remediating);
      check("operator release", rack_.released && all,
            rack_.released ? fmt::format("after {}: {}", keys::kIncidentRelease,
                                         all ? "every rack node reached Remediating"
                                             : "not every rack node reached Remediating")
                           : "no incident-release annotation could be set");
      return;
    }
    if (o_.scenario == "correlated") {
      // What the gates must let through: the breaker holds everything when more than its share of
      // GPU nodes is faulty at once; otherwise a pool with more faulty nodes than it may lose at
      // once holds them all.
      const int gpu_nodes = o_.nodes + o_.standby * o_.pools;
      const bool breaker = plan.fault_nodes * 100 > 30 * gpu_nodes;
      std::map<int, int> per_pool;
      for (size_t j = 0; j < targets.size(); ++j) per_pool[static_cast<int>(j) % o_.pools]++;
      // A node went on to its drain when gpuheal asked its pods to checkpoint or when any of its
      // pods was taken away, by whoever (the Eviction API or Kubernetes' NoExecute taint manager):
      // a gate that gpuheal's own records honour but a taint bypasses holds nothing.
      std::map<std::string, int> removed_by;
      int expect_drained = 0, drained = 0, held = 0;
      for (size_t j = 0; j < targets.size(); ++j) {
        const int pool = static_cast<int>(j) % o_.pools;
        const int pool_size = (o_.nodes + o_.pools - 1 - pool) / o_.pools + o_.standby;
        const int allowed = std::max(1, (pool_size * 20 + 99) / 100);
        const bool through = !breaker && per_pool[pool] <= allowed;
        expect_drained += through;
        bool went = false, gated = false;
        for (const auto* r : records(targets[j])) {
          went |= r->phase_times.count("CheckpointRequested") > 0;
          gated |= r->gate == "breaker" || r->gate == "pool";
        }
        for (const auto& [uid, p] : obs.pods()) {
          if (!p.initial || p.node != targets[j] || !p.deleting_us) continue;
          went = true;
          removed_by[p.disruption.empty() ? "unknown" : p.disruption]++;
        }
        drained += went;
        held += gated && !went;
      }
      std::string removed;
      for (const auto& [by, n] : removed_by)
        removed += fmt::format("{}{} by {}", removed.empty() ? "" : ", ", n, by);
      check("gates held",
            drained == expect_drained && held == static_cast<int>(targets.size()) - expect_drained,
            fmt::format("{} of {} GPU nodes faulty at once (breaker {}): {} held by a gate, {} "
                        "went on to drain (expected {}); "
                        "pods of faulty nodes removed: {}",
                        targets.size(), gpu_nodes, breaker ? "open" : "closed", held, drained,
                        expect_drained, removed.empty() ? "none" : removed));
      return;
    }
    const auto recs = records(t);
    if (o_.scenario == "flap") {
      const bool remediated = std::any_of(recs.begin(), recs.end(), [](const kube::NodeRepair* r) {
        return r->phase_times.count("Remediating") || r->phase_times.count("Replaced");
      });
      check("fault cleared inside the toleration window", obs.Has("condition_cleared"),
            obs.Has("condition_cleared")
                ? "the agent turned the condition True after its quiet period"
                : "the condition stayed False");
      check("node released", obs.Has("released") && obs.Has("repair_recovered"),
            obs.Has("released") ? "taint and cordon removed after probation, repair Recovered"
                                : "still quarantined");
      check("no remediation", !remediated,
            remediated ? "a remediation ran" : "no Remediating or Replaced phase");
      return;
    }
    check("pods evicted", target_pods > 0 && deleted == target_pods,
          fmt::format("{}/{} pods of the faulty node terminated", deleted, target_pods));
    if (!plan.replace.empty()) {
      check("owner deleted by gpuheal", obs.Has("owner_deleted"),
            obs.Has("owner_deleted") ? "delete-node deleted the node's " + OwnerKind(plan.replace)
                                     : "the node's " + OwnerKind(plan.replace) + " still exists");
      const kube::NodeRepair* rec = recs_for(t).empty() ? nullptr : recs_for(t).back();
      const bool joined = rec && rec->phase == "Replaced" && !rec->replacement.empty() &&
                          obs.nodes().count(rec->replacement) && rec->replacement != t;
      check("replacement joined", joined,
            rec ? fmt::format("{}: phase {}, status.replacement {}", rec->meta.name, rec->phase,
                              rec->replacement.empty() ? "(none)" : rec->replacement)
                : "no NodeRepair for " + t);
    } else {
      check("standby released", obs.Has("standby_released"),
            obs.Has("standby_released") ? *standby.begin() + " took the faulty node's place"
                                        : "no standby node released");
    }
    check("replacements Running elsewhere",
          replacements_running >= target_pods && !replacement_on_target,
          fmt::format("{} replacement pod(s) Running, none on the faulty node",
                      replacements_running));
    check("capacity restored", obs.Has("capacity_restored"),
          fmt::format("{} replicas Running on healthy nodes", replicas));
    const bool one = recs.size() == 1;
    const bool complete =
        one && recs[0]->phase_times.count("Remediating") && evicted_once(*recs[0]);
    check("one repair, each pod evicted once", complete,
          one ? fmt::format("{}: phase {}, {} pod(s) evicted through the Eviction API{}",
                            recs[0]->meta.name, recs[0]->phase, recs[0]->evicted_pods.size(),
                            evicted_once(*recs[0]) ? "" : " (a pod evicted twice)")
              : fmt::format("{} NodeRepair records for {}", recs.size(), t));
    if (o_.scenario == "pdb") {
      // The budget allows one pod down: the second pod of the node goes only once the first one's
      // replacement is Running elsewhere.
      std::vector<int64_t> deletions, runnings;
      for (const auto& [uid, p] : obs.pods()) {
        if (p.initial && p.node == t && p.deleting_us) deletions.push_back(p.deleting_us);
        if (!p.initial && p.running_us) runnings.push_back(p.running_us);
      }
      std::sort(deletions.begin(), deletions.end());
      std::sort(runnings.begin(), runnings.end());
      const bool held = deletions.size() >= 2 && !runnings.empty() && deletions[1] >= runnings[0];
      check("budget held the second eviction", held,
            deletions.size() >= 2 && !runnings.empty()
                ? fmt::format("second eviction {:.1f} ms after the first replacement was Running",
                              static_cast<double>(deletions[1] - runnings[0]) / 1000.0)
                : "fewer than two pods evicted");
    }
    if (plan.bmc) {
      const int resets = BmcResets();
      const bool accepted = complete && std::any_of(recs[0]->steps.begin(), recs[0]->steps.end(),
                                                    [](const kube::RepairStep& s) {
                                                      return s.kind == "BMCResetSent";
                                                    });
      check("one power cycle through the BMC", resets == 1 && accepted,
            fmt::format("the emulator accepted {} ComputerSystem.Reset; the record {}", resets,
                        accepted ? "says the BMC accepted it" : "has no accepted reset"));
      const int asked = bmc_decoy_ ? bmc_decoy_->connections() : -1;
      check("a compromised node asks for the fleet's BMC password: held", asked == 0 && resets == 1,
            fmt::format("the node's own {} named a decoy: {} connection(s) to it; the reset went "
                        "to the administrator's ConfigMap endpoint",
                        keys::kBmcEndpoint, asked));
      const auto n = obs.nodes().count(t) ? obs.nodes().at(t).node : kube::Node{};
      const bool back = obs.Has("node_booted") && obs.Has("released") &&
                        obs.Has("repair_recovered") && HasTaint(n, keys::kStandbyTaint);
      check("node back as the pool's standby", back,
            back ? "a new boot, its fault cleared, released after probation, repair Recovered, "
                   "gpuheal.io/standby"
                 : fmt::format("booted: {}, released: {}, Recovered: {}, standby: {}",
                               obs.Has("node_booted"), obs.Has("released"),
                               obs.Has("repair_recovered"), HasTaint(n, keys::kStandbyTaint)));
    }
    if (o_.scenario == "controller-crash") {
      check("controller restarted and continued",
            obs.Has("controller_killed") && obs.Has("controller_leader"),
            obs.Has("controller_leader")
                ? "a new controller took the Lease and finished the same repair"
                : "no new leader");
    }
  }

  // dra: each pod's GPU is a ResourceClaim from the template `gpu` (one device of the DeviceClass
  // gpu.nvidia.com), allocated by kube-scheduler, instead of the nvidia.com/gpu resource.
  Status CreateWorkload(const std::string& ns, const std::string& prefix, int replicas,
                        int gpus_per_pod, bool dra = false) {
    json pools = json::array();
    for (int p = 0; p < o_.pools; ++p) pools.push_back(fmt::format("{}-pool-{}", prefix, p));
    const json labels = {{"app", "trainer"}};
    json ns_obj = {{"apiVersion", "v1"}, {"kind", "Namespace"}};
    ns_obj["metadata"] = {{"name", ns}, {"labels", {{"gpuheal.io/drill", "true"}}}};
    json pdb = {{"apiVersion", "policy/v1"}, {"kind", "PodDisruptionBudget"}};
    pdb["metadata"] = {{"name", "trainer"}, {"namespace", ns}};
    pdb["spec"]["maxUnavailable"] = 1;
    pdb["spec"]["selector"]["matchLabels"] = labels;
    json container = {{"name", "train"}, {"image", "registry.k8s.io/pause:3.9"}};
    if (dra) {
      container["resources"]["claims"] = json::array({{{"name", "gpu"}}});
    } else {
      container["resources"]["limits"]["nvidia.com/gpu"] = gpus_per_pod;
    }
    json term = json::object();
    term["matchExpressions"] =
        json::array({{{"key", "gpuheal.io/pool"}, {"operator", "In"}, {"values", pools}}});
    json pod_spec = {{"terminationGracePeriodSeconds", 30},
                     {"containers", json::array({container})}};
    if (dra) {
      pod_spec["resourceClaims"] =
          json::array({{{"name", "gpu"}, {"resourceClaimTemplateName", "gpu"}}});
    }
    pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"] = json::array({term});
    json deploy = {{"apiVersion", "apps/v1"}, {"kind", "Deployment"}};
    deploy["metadata"] = {{"name", "trainer"}, {"namespace", ns}};
    deploy["spec"]["replicas"] = replicas;
    deploy["spec"]["selector"]["matchLabels"] = labels;
    deploy["spec"]["template"]["metadata"]["labels"] = labels;
    deploy["spec"]["template"]["spec"] = pod_spec;
    std::vector<json> objs = {ns_obj, pdb};
    if (dra) {
      objs.push_back(
          {{"apiVersion", "resource.k8s.io/v1"},
           {"kind", "ResourceClaimTemplate"},
           {"metadata", {{"name", "gpu"}, {"namespace", ns}}},
           {"spec",
            {{"spec",
              {{"devices",
                {{"requests",
                  json::array(
                      {{{"name", "gpu"}, {"exactly", {{"deviceClassName", kDraClass}}}}})}}}}}}}});
    }
    objs.push_back(deploy);
    return kube::CreateObjects(*client_, objs);
  }

  // The namespace first (no pod can be created in it from then on), then every pod in it at
  // once, with no grace period.
  void DeleteNamespaceAndPods(const std::string& ns) {
    (void)client_->Delete("/api/v1/namespaces/" + ns);
    (void)client_->Delete("/api/v1/namespaces/" + ns + "/pods", "", "", 0);
  }

  void Teardown(const std::string& ns, Observer& obs) {
    if (o_.keep && !interrupted_) {
      obs.Stop();
      kept_ns_ = ns;
      return;  // the sim stays up with its nodes, pods and agents until Ctrl-C (Hold, Cleanup)
    }
    // The namespace and its pods, then the nodes. A pod still terminating when the sim removes
    // its node waits for kube-controller-manager's pod garbage collector: on 1,500 nodes two
    // earlier runs' namespaces were still Terminating, with their pods, minutes into the next run.
    DeleteNamespaceAndPods(ns);
    for (const auto& slice : dra_.slices)
      (void)client_->Delete("/apis/resource.k8s.io/v1/resourceslices/" + slice);
    dra_.slices.clear();
    obs.WaitFor(
        [&] {
          return std::all_of(obs.pods().begin(), obs.pods().end(),
                             [](const auto& kv) { return kv.second.deleting_us > 0; });
        },
        std::chrono::steady_clock::now() + 10s, interrupted_);
    std::vector<std::string> records;
    {
      std::lock_guard<std::mutex> l(obs.mu());
      for (const auto& [name, r] : obs.repairs()) records.push_back(name);
    }
    obs.Stop();
    std::this_thread::sleep_for(600ms);  // the sim's capped grace period
    sim_.reset();
    for (const auto& r : records) (void)client_->Delete(std::string(kRepairs) + "/" + r);
  }

  void Cleanup() {
    if (!kept_ns_.empty() && client_) {
      DeleteNamespaceAndPods(kept_ns_);
    }
    sim_.reset();
    if (client_) {
      // This drill's NodeRepair records (their nodes are gone with the sim).
      auto r = client_->Get(std::string(kRepairs));
      if (r && r->ok()) {
        auto list = kube::DecodeNodeRepairList(r->body);
        for (const auto& rec : list ? list->items : std::vector<kube::NodeRepair>{}) {
          if (rec.node.starts_with("d" + id_))
            (void)client_->Delete(std::string(kRepairs) + "/" + rec.meta.name);
        }
      }
    }
    if (saved_stderr_ >= 0) {
      dup2(saved_stderr_, STDERR_FILENO);
      close(saved_stderr_);
      saved_stderr_ = -1;
    }
    if (controller_) {
      controller_->Stop();
      controller_.reset();
    }
    real_agent_.reset();
    // The control plane it started goes too (with --keep, this runs after the Ctrl-C that ends
    // it). Where the work directory stays, so do the components' logs: kube-scheduler's and
    // kube-controller-manager's say why a replacement waited.
    const bool keep_work = o_.keep || o_.work_dir.size() || !ok_;
    if (!cp_dir_.empty()) {
      std::vector<std::string> argv = {"/bin/bash", o_.source_dir + "/scripts/control-plane.sh",
                                       "down", "--dir", cp_dir_};
      if (keep_work) argv.push_back("--keep-logs");
      auto down = Child::Spawn(argv, work_ + "/control-plane.log", work_ + "/control-plane.log");
      if (down) (*down)->Wait(60s);
    }
    if (!ok_ && !o_.keep) Say("logs kept in " + work_ + "\n");
    if (keep_work) return;
    std::error_code ec;
    std::filesystem::remove_all(work_, ec);
  }

  const DrillOptions& o_;
  const std::atomic<bool>& interrupted_;
  std::string work_, id_, kubeconfig_, cp_dir_, policy_path_, controller_id_, last_ns_, kept_ns_;
  std::string real_node_, real_node_kubeconfig_, pause_image_;  // --real-node
  std::map<std::string, Report::Peer> peers_;                   // external controllers that ran
  kube::Config cfg_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<Child> controller_;
  std::unique_ptr<Child> real_agent_;  // --real-node --keep: the node's agent until Ctrl-C
  int controllers_started_ = 0;
  std::unique_ptr<sim::Sim> sim_;
  int saved_stderr_ = -1;

 public:
  bool ok_ = false;  // the drill passed: its work directory can go
};

}  // namespace

std::string FindContainerd() {
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  dirs += ":/usr/sbin:/sbin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t colon = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = dirs.substr(start, colon - start) + "/containerd";
    if (colon > start && access(candidate.c_str(), X_OK) == 0) return candidate;
    start = colon + 1;
  }
  return "";
}

const std::vector<std::string>& Scenarios() {
  static const std::vector<std::string> s = {"single",
                                             "correlated",
                                             "flap",
                                             "pdb",
                                             "controller-crash",
                                             "agent-restart",
                                             "critical",
                                             "runtime",
                                             "replace-karpenter",
                                             "replace-capi",
                                             "bmc",
                                             "rack",
                                             "predictive",
                                             "gpu-scoped",
                                             "service",
                                             "training"};
  return s;
}

Result<Report> RunDrill(const DrillOptions& opts, const std::atomic<bool>& interrupted) {
  Drill d(opts, interrupted);
  auto r = d.Run();
  d.ok_ = r && r->ok();
  if (r && opts.keep && !interrupted) d.Hold();
  return r;
}

}  // namespace gpuheal::drill
