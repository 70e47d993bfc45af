#include "sim/sim.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>

#include "agent/standalone_agent.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/time.h"

namespace gpuheal::sim {
namespace {

using nlohmann::json;
using std::chrono::system_clock;

const std::string kLeaseNamespace = "kube-node-lease";

std::string Now() { return kube::RfcTime(system_clock::now()); }

json ReadyConditions() {
  const std::string now = Now();
  auto c = [&](const char* type, const char* status, const char* reason, const char* msg) {
    return json{{"type", type},   {"status", status},         {"reason", reason},
                {"message", msg}, {"lastHeartbeatTime", now}, {"lastTransitionTime", now}};
  };
  return json::array(
      {c("MemoryPressure", "False", "KubeletHasSufficientMemory",
         "kubelet has sufficient memory available"),
       c("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
       c("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
       c("Ready", "True", "KubeletReady", "kubelet is posting ready status (gpuheal sim)")});
}

}  // namespace

struct Sim::HostedAgent {
  std::string node;
  std::unique_ptr<StandaloneAgent> agent;
  std::thread thread;
  int out_fd = -1;
  ~HostedAgent() {
    if (agent) agent->Stop();
    if (thread.joinable()) thread.join();
    agent.reset();
    if (out_fd >= 0) close(out_fd);
  }
};

Status Sim::StartAgent(const SimNode& n) {
  const std::string dir = opts_.state_dir + "/" + n.name;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error{fmt::format("sim: cannot create {}: {}", dir, ec.message())};
  const std::string fifo = dir + "/kmsg";
  if (mkfifo(fifo.c_str(), 0600) != 0 && errno != EEXIST) {
    return Error{
        fmt::format("sim: cannot create the kernel log FIFO {}: {}", fifo, std::strerror(errno))};
  }
  if (opts_.external_agents.count(n.name))
    return Status::Ok();  // its agent is a process of its own
  AgentConfig cfg;
  if (opts_.agent_quiet_period.count() > 0) cfg.quiet_period = opts_.agent_quiet_period;

  cfg.kmsg_path = fifo;
  if (n.name == opts_.real_kmsg_node) {
    cfg.kmsg_path = "/dev/kmsg";
    cfg.kmsg_from_end = true;
    cfg.accept_injected = true;
  }
  cfg.state_dir = dir;
  cfg.listen = "";
  cfg.nvidia.nvml =
      NvidiaConfig::Use::kOff;  // the simulated GPUs speak through the kernel log only
  cfg.own_signals = false;
  cfg.domain_monitors = false;  // the host's links, mounts and runtime are not this node's
  auto h = std::make_unique<HostedAgent>();
  h->node = n.name;
  h->out_fd =
      open((dir + "/faults.jsonl").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (h->out_fd < 0)
    return Error{fmt::format("sim: cannot open {}/faults.jsonl: {}", dir, std::strerror(errno))};
  kube::Config kc = opts_.agent_kube;
  kc.user_agent = "gpuheal-agent/" GPUHEAL_VERSION " (sim)";
  auto client = kube::Client::Create(kc);
  auto watch = kube::Client::Create(kc);
  if (!client || !watch)
    return Error{"sim: " + (client ? watch.error().message : client.error().message)};
  KubeReporterOptions ro;
  ro.node_name = n.name;
  ro.heartbeat = cfg.heartbeat_period;
  AgentPorts ports;
  ports.api = std::move(*client);
  ports.reporter = ro;
  ports.watch_api = std::move(*watch);
  auto agent = StandaloneAgent::Create(std::move(cfg), h->out_fd, std::move(ports));
  if (!agent) return Error{fmt::format("sim: the agent of {}: {}", n.name, agent.error().message)};
  h->agent = std::move(*agent);
  h->thread = std::thread([a = h->agent.get()] { (void)a->Run(); });
  std::lock_guard<std::mutex> lock(mu_);
  agents_.push_back(std::move(h));
  return Status::Ok();
}

Result<std::unique_ptr<Sim>> Sim::Start(std::unique_ptr<kube::Client> client,
                                        std::unique_ptr<kube::Client> watch_client,
                                        SimOptions opts) {
  if (opts.nodes < 0 || opts.pools < 1 || opts.standby_per_pool < 0 || opts.gpus_per_node < 0 ||
      opts.api_threads < 1 || opts.rack_size < 1) {
    return Error{
        "sim: --nodes, --standby and --gpus must be 0 or more, --pools, API threads and the rack "
        "size 1 or more",
        ErrorCode::kUsage};
  }
  if (opts.prefix.empty() || opts.prefix.size() > 40)
    return Error{"sim: --prefix must be 1 to 40 characters", ErrorCode::kUsage};
  std::unique_ptr<Sim> s(new Sim());
  s->opts_ = std::move(opts);
  s->client_ = std::move(client);
  s->watch_client_ = std::move(watch_client);
  const SimOptions& o = s->opts_;
  for (int p = 0; p < o.pools; ++p) {
    const std::string pool = fmt::format("{}-pool-{}", o.prefix, p);
    const bool racks = !o.rack_label.empty();
    for (int i = p; i < o.nodes; i += o.pools) {
      s->nodes_.push_back({fmt::format("{}-{}-{}", o.prefix, p, i / o.pools), pool, false, "",
                           racks ? fmt::format("rack-{}", i / o.rack_size) : ""});
    }
    for (int i = 0; i < o.standby_per_pool; ++i) {
      s->nodes_.push_back({fmt::format("{}-{}-standby-{}", o.prefix, p, i), pool, true, "",
                           racks ? "rack-spare" : ""});
    }
  }
  if (!o.real_kmsg_node.empty() &&
      std::none_of(s->nodes_.begin(), s->nodes_.end(),
                   [&](const SimNode& n) { return n.name == o.real_kmsg_node; })) {
    return Error{
        fmt::format("sim: --real-kmsg {}: no such node (names are {}-<pool>-<i>, e.g. {}-0-0)",
                    o.real_kmsg_node, o.prefix, o.prefix),
        ErrorCode::kUsage};
  }
  if (!o.real_kmsg_node.empty() && !o.agents)
    return Error{"sim: --real-kmsg needs --agents", ErrorCode::kUsage};
  for (size_t i = 0; i < s->nodes_.size(); ++i) {
    s->nodes_[i].ip = fmt::format("10.100.{}.{}", i / 250, i % 250 + 1);
    s->node_ip_[s->nodes_[i].name] = s->nodes_[i].ip;
  }
  for (int i = 0; i < o.api_threads; ++i)
    s->threads_.emplace_back([p = s.get()] { p->ApiThread(); });

  // Register every node (on the API threads), then keep each alive on its own schedule.
  std::atomic<int> pending{static_cast<int>(s->nodes_.size())};
  std::mutex err_mu;
  std::string first_error;
  for (const auto& n : s->nodes_) {
    s->At(Clock::now(), [&, p = s.get(), n] {
      if (auto st = p->RegisterNode(n); !st) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (first_error.empty()) first_error = st.error().message;
      }
      --pending;
    });
  }
  while (pending > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (!first_error.empty()) return Error{first_error};
  if (o.agents) {
    for (const auto& n : s->nodes_) {
      if (!o.agent_nodes.empty() && !o.agent_nodes.count(n.name)) continue;
      if (auto st = s->StartAgent(n); !st) return st.error();
    }
  }
  std::mt19937 rng(std::random_device{}());
  for (const auto& n : s->nodes_) {
    // Spread the renewals over the period, as a fleet of kubelets started at different times.
    const auto jitter = std::chrono::milliseconds(
        rng() % static_cast<uint64_t>(std::max<int64_t>(1, o.lease_period.count())));
    s->At(
        Clock::now() + jitter, [p = s.get(), name = n.name] { p->RenewLease(name); },
        Lane::kKeepAlive);
    s->At(
        Clock::now() + o.status_period + jitter,
        [p = s.get(), name = n.name] { p->Heartbeat(name); }, Lane::kKeepAlive);
  }

  if (o.process_runtime) {
    // Pod addresses from a random place in the range: two sims on one host rarely meet.
    s->process_ips_ = rng() % 50000;
    s->runtime_thread_ = std::thread([p = s.get()] { p->RuntimeLoop(); });
    s->prober_thread_ = std::thread([p = s.get()] { p->ProberLoop(); });
  }
  s->pods_ = std::make_unique<kube::Informer<kube::Pod>>(*s->watch_client_, "/api/v1/pods",
                                                         kube::DecodePodList, kube::DecodePod);
  auto on = [p = s.get()](const kube::Pod& pod) { p->OnPod(pod); };
  s->pods_->SetHandlers({on, [on](const kube::Pod&, const kube::Pod& pod) { on(pod); }, nullptr});
  s->pods_->Start();
  if (!s->pods_->WaitForSynced(std::chrono::seconds(60)))
    return Error{"sim: the pod informer did not sync within 60 s"};
  if (!o.adopt_selector.empty()) {
    auto c = kube::Client::Create(s->watch_client_->config());
    if (!c) return c.error();
    s->adopt_client_ = std::move(*c);
    s->adopt_ = std::make_unique<kube::Informer<kube::Node>>(
        *s->adopt_client_, kube::NodePath() + "?labelSelector=" + kube::UrlEncode(o.adopt_selector),
        kube::DecodeNodeList, kube::DecodeNode);
    auto adopt = [p = s.get()](const kube::Node& n) { p->Adopt(n); };
    s->adopt_->SetHandlers({adopt, [adopt](const kube::Node&, const kube::Node& n) { adopt(n); },
                            [p = s.get()](const kube::Node& n) { p->LetGo(n.meta.name); }});
    s->adopt_->Start();
    if (!s->adopt_->WaitForSynced(std::chrono::seconds(60)))
      return Error{"sim: the watch of nodes to adopt did not sync within 60 s"};
  }
  return s;
}

void Sim::Adopt(const kube::Node& n) {
  if (n.meta.deleting) return;
  auto pool = n.meta.labels.find(std::string(keys::kDefaultPoolLabel));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || node_ip_.count(n.meta.name) ||
        std::count(adopted_.begin(), adopted_.end(), n.meta.name))
      return;
    adopted_.push_back(n.meta.name);
  }
  Log("info", "sim: adopting a node its provisioner registered", {{"node", n.meta.name}});
  At(Clock::now(),
     [this, name = n.meta.name, pool = pool == n.meta.labels.end() ? std::string() : pool->second] {
       if (auto st = AddNode(name, pool); !st) {
         Log("warn", "sim: cannot adopt node", {{"node", name}, {"error", st.error().message}});
         return;
       }
       // Pods bound before the adoption was complete: started now.
       for (const auto& p : pods_->Items())
         if (p.node_name == name) OnPod(p);
     });
}

void Sim::LetGo(const std::string& name) {
  std::unique_ptr<HostedAgent> agent;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!std::count(adopted_.begin(), adopted_.end(), name)) return;
    agent = StopServing(name);
  }
  Log("info", "sim: its provisioner deleted the node: its kubelet and agent stop",
      {{"node", name}});
  agent.reset();
}

std::vector<std::string> Sim::adopted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return adopted_;
}

Status Sim::Join(const std::string& name, const std::string& pool, const std::string& provider_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || node_ip_.count(name) || std::count(adopted_.begin(), adopted_.end(), name))
      return Status::Ok();
    adopted_.push_back(name);
  }
  Log("info", "sim: a provisioner's machine booted: its kubelet registers",
      {{"node", name}, {"provider_id", provider_id}});
  return AddNode(name, pool, provider_id);
}

void Sim::PowerOff(const std::string& name) {
  std::unique_ptr<HostedAgent> agent;
  {
    std::lock_guard<std::mutex> lock(mu_);
    agent = StopServing(name);
  }
  Log("info", "sim: the node's machine is gone: its kubelet and agent stop", {{"node", name}});
  agent.reset();
}

Status Sim::AddNode(const std::string& name, const std::string& pool,
                    const std::string& provider_id) {
  SimNode n{name, pool, false, "", "", provider_id};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (node_ip_.count(name)) return Error{"sim: node " + name + " exists already"};
    const size_t i = added_.size();
    n.ip = fmt::format("10.101.{}.{}", i / 250, i % 250 + 1);
    node_ip_[name] = n.ip;
    added_.push_back(name);
  }
  if (auto st = RegisterNode(n); !st) return st;
  if (opts_.agents) {
    if (auto st = StartAgent(n); !st) return st;
  }
  At(
      Clock::now() + opts_.lease_period, [this, name] { RenewLease(name); }, Lane::kKeepAlive);
  At(
      Clock::now() + opts_.status_period, [this, name] { Heartbeat(name); }, Lane::kKeepAlive);
  return Status::Ok();
}

std::unique_ptr<Sim::HostedAgent> Sim::StopServing(const std::string& name) {
  std::unique_ptr<HostedAgent> agent;
  for (auto it = agents_.begin(); it != agents_.end(); ++it) {
    if ((*it)->node == name) {
      agent = std::move(*it);
      agents_.erase(it);
      break;
    }
  }
  node_ip_.erase(name);
  KillNodeProcesses(name);  // the machine is gone: so are its pods' processes
  return agent;
}

Status Sim::RemoveNode(const std::string& name) {
  std::unique_ptr<HostedAgent> agent;
  {
    std::lock_guard<std::mutex> lock(mu_);
    agent = StopServing(name);
  }
  agent.reset();  // stops and joins: the machine is gone
  auto r = client_->Delete(kube::NodePath(name));
  if (!r || (!r->ok() && r->status != 404)) {
    return Error{
        fmt::format("sim: cannot delete node {}: {}", name, r ? r->Describe() : r.error().message)};
  }
  return Status::Ok();
}

Sim::~Sim() {
  if (adopt_) adopt_->Stop();
  agents_.clear();  // each stops and joins
  if (pods_) pods_->Stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  runtime_cv_.notify_all();
  for (auto& t : threads_) t.join();
  if (runtime_thread_.joinable()) runtime_thread_.join();
  if (prober_thread_.joinable()) prober_thread_.join();
  StopProcesses();
  if (!opts_.keep_nodes && client_) {
    // From as many threads as the API calls had: one by one, 1,500 nodes take a minute on a busy
    // API server. Each node's Lease goes with it (owner reference).
    std::atomic<size_t> next{0};
    std::vector<std::thread> deleters;
    for (int t = 0; t < opts_.api_threads; ++t) {
      deleters.emplace_back([this, &next] {
        for (size_t i; (i = next++) < nodes_.size() + added_.size();) {
          (void)client_->Delete(
              kube::NodePath(i < nodes_.size() ? nodes_[i].name : added_[i - nodes_.size()]));
        }
      });
    }
    for (auto& t : deleters) t.join();
  }
}

Sim::Stats Sim::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Sim::At(Clock::time_point when, std::function<void()> fn, Lane lane) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    timers_[static_cast<int>(lane)].emplace(when, std::move(fn));
  }
  cv_.notify_one();
}

void Sim::ApiThread() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    // The first lane with work due; else the earliest time anything falls due (a copy: while this
    // thread waits, another may run and erase that very timer - TSan found the wait reading the
    // freed node, and waiting for a garbage time).
    const auto now = Clock::now();
    std::multimap<Clock::time_point, std::function<void()>>* due = nullptr;
    std::optional<Clock::time_point> next;
    for (auto& lane : timers_) {
      if (lane.empty()) continue;
      const Clock::time_point when = lane.begin()->first;
      if (when <= now) {
        due = &lane;
        break;
      }
      if (!next || when < *next) next = when;
    }
    if (!due) {
      if (next) {
        cv_.wait_until(lock, *next);
      } else {
        cv_.wait(lock);
      }
      continue;
    }
    auto it = due->begin();
    auto fn = std::move(it->second);
    due->erase(it);
    lock.unlock();
    fn();
    lock.lock();
  }
}

bool Sim::Ok(const Result<kube::Response>& r) {
  if (r && (r->ok() || r->status == 409)) return true;
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = ++stats_.api_errors;
  }
  if (n <= 20 || n % 1000 == 0) {  // enough to see what is wrong, not a flood
    Log("warn", "sim: API write failed",
        {{"error", r ? r->Describe() : r.error().message}, {"errors_so_far", n}});
  }
  return false;
}

Status Sim::RegisterNode(const SimNode& n) {
  json node = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", n.name},
        {"labels",
         {{"kubernetes.io/hostname", n.name},
          {"kubernetes.io/os", "linux"},
          {"kubernetes.io/arch", "amd64"},
          {"node.kubernetes.io/instance-type", fmt::format("sim.{}gpu", opts_.gpus_per_node)},
          {std::string(keys::kDefaultPoolLabel), n.pool},
          {"nvidia.com/gpu.present", "true"},
          {"gpuheal.io/sim", "true"}}}}},
      {"spec", {{"providerID", n.provider_id.empty() ? "sim://" + n.name : n.provider_id}}}};
  if (!n.rack.empty()) node["metadata"]["labels"][opts_.rack_label] = n.rack;
  if (n.standby) {
    node["spec"]["taints"] = json::array(
        {{{"key", std::string(keys::kStandbyTaint)}, {"value", "true"}, {"effect", "NoSchedule"}}});
  }
  auto created = client_->Create(kube::NodePath(), node);
  if (!created || (!created->ok() && created->status != 409)) {
    return Error{fmt::format("sim: cannot register node {}: {}", n.name,
                             created ? created->Describe() : created.error().message)};
  }
  std::string uid;
  if (created->ok()) {
    uid = json::parse(created->body, nullptr, false)["metadata"].value("uid", "");
  } else if (auto got = client_->Get(kube::NodePath(n.name)); got && got->ok()) {
    uid = json::parse(got->body, nullptr, false)["metadata"].value("uid",
                                                                   "");  // adopted after a restart
  }
  const std::string gpus = std::to_string(opts_.gpus_per_node);
  const json resources = {{"cpu", "96"},
                          {"memory", "1056Gi"},
                          {"pods", "110"},
                          {"ephemeral-storage", "3500Gi"},
                          {"nvidia.com/gpu", gpus}};
  json status = {{"status",
                  {{"capacity", resources},
                   {"allocatable", resources},
                   {"addresses",
                    {{{"type", "InternalIP"}, {"address", n.ip}},
                     {{"type", "Hostname"}, {"address", n.name}}}},
                   {"nodeInfo",
                    {{"machineID", n.name},
                     {"systemUUID", n.name},
                     {"bootID", "sim-boot-1"},
                     {"kernelVersion", "6.1.0-sim"},
                     {"osImage", "gpuheal sim"},
                     {"containerRuntimeVersion", "sim://1.0"},
                     {"kubeletVersion", "v1.31.0-sim"},
                     {"kubeProxyVersion", ""},
                     {"operatingSystem", "linux"},
                     {"architecture", "amd64"}}},
                   {"conditions", ReadyConditions()}}}};
  auto st =
      client_->Patch(kube::NodePath(n.name) + "/status", kube::PatchType::kStrategicMerge, status);
  if (!st || !st->ok()) {
    return Error{fmt::format("sim: cannot set the status of node {}: {}", n.name,
                             st ? st->Describe() : st.error().message)};
  }
  json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", n.name}, {"namespace", kLeaseNamespace}}},
                {"spec",
                 {{"holderIdentity", n.name},
                  {"leaseDurationSeconds", 40},
                  {"renewTime", kube::MicroTime(system_clock::now())}}}};
  if (!uid.empty()) {
    lease["metadata"]["ownerReferences"] =
        json::array({{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", n.name}, {"uid", uid}}});
  }
  auto l = client_->Create(kube::LeasePath(kLeaseNamespace), lease);
  if (!l || (!l->ok() && l->status != 409)) {
    return Error{fmt::format("sim: cannot create the node Lease of {}: {}", n.name,
                             l ? l->Describe() : l.error().message)};
  }
  return Status::Ok();
}

void Sim::RenewLease(const std::string& node) {
  auto r = client_->Patch(
      kube::LeasePath(kLeaseNamespace, node), kube::PatchType::kMerge,
      {{"spec", {{"holderIdentity", node}, {"renewTime", kube::MicroTime(system_clock::now())}}}});
  if (r && r->status == 404) {
    // The Node was deleted (a repair replaced it, or someone removed it): this kubelet is gone.
    Log("info", "sim: node gone, no longer renewing its lease", {{"node", node}});
    return;
  }
  if (Ok(r)) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.lease_renewals;
  }
  At(
      Clock::now() + opts_.lease_period, [this, node] { RenewLease(node); }, Lane::kKeepAlive);
}

void Sim::Heartbeat(const std::string& node) {
  const std::string now = Now();
  auto r = client_->Patch(kube::NodePath(node) + "/status", kube::PatchType::kStrategicMerge,
                          {{"status",
                            {{"conditions",
                              {{{"type", "Ready"},
                                {"status", "True"},
                                {"reason", "KubeletReady"},
                                {"lastHeartbeatTime", now}}}}}}});
  if (r && r->status == 404) return;
  (void)Ok(r);
  At(
      Clock::now() + opts_.status_period, [this, node] { Heartbeat(node); }, Lane::kKeepAlive);
}

void Sim::OnPod(const kube::Pod& p) {
  if (p.node_name.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!node_ip_.count(p.node_name)) return;
  }
  const std::string id = p.meta.namespace_ + "/" + p.meta.name + "/" + p.meta.uid;
  auto once = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    return handled_.insert(what + "/" + id).second;
  };
  if (opts_.process_runtime && IsProcessPod(p) && OnProcessPod(p, id)) return;
  if (p.meta.deleting) {
    if (!once("delete")) return;
    // The containers get the grace period to stop (capped), then the pod object goes.
    const int64_t grace = p.meta.deletion_grace_seconds >= 0 ? p.meta.deletion_grace_seconds : 30;
    const auto wait =
        std::min<std::chrono::milliseconds>(std::chrono::seconds(grace), opts_.max_termination);
    At(Clock::now() + wait,
       [this, ns = p.meta.namespace_, name = p.meta.name, uid = p.meta.uid, id] {
         auto r = client_->Delete(kube::PodPath(ns, name), uid, "", 0);
         if (r && (r->ok() || r->status == 404 || r->status == 409)) {
           std::lock_guard<std::mutex> lock(mu_);
           ++stats_.pods_deleted;
           for (const char* k : {"start/", "delete/", "checkpoint/"}) handled_.erase(k + id);
         } else {
           (void)Ok(r);
         }
       });
    return;
  }
  if (p.phase == "Succeeded" || p.phase == "Failed") return;
  if (p.phase != "Running" && once("start")) {
    At(Clock::now(), [this, ns = p.meta.namespace_, name = p.meta.name, node = p.node_name] {
      StartPod(ns, name, node);
    });
  }
  const auto& ann = p.meta.annotations;
  if (opts_.checkpoint_delay.count() >= 0 && ann.count(std::string(keys::kCheckpointRequested)) &&
      !ann.count(std::string(keys::kCheckpointDone)) && once("checkpoint")) {
    // The workload saves its state and says so.
    At(Clock::now() + opts_.checkpoint_delay, [this, ns = p.meta.namespace_, name = p.meta.name] {
      auto r = client_->Patch(
          kube::PodPath(ns, name), kube::PatchType::kMerge,
          {{"metadata", {{"annotations", {{std::string(keys::kCheckpointDone), Now()}}}}}});
      if (Ok(r)) {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.checkpoints;
      }
    });
  }
}

void Sim::StartPod(const std::string& ns, const std::string& name, const std::string& node) {
  auto got = client_->Get(kube::PodPath(ns, name));
  if (!got || !got->ok()) return;
  const json pod = json::parse(got->body, nullptr, false);
  if (!pod.is_object() || pod["metadata"].contains("deletionTimestamp")) return;
  const std::string now = Now();
  uint64_t n;
  std::string host_ip;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = node_ip_.find(node);
    if (it == node_ip_.end()) return;  // its node was removed meanwhile
    host_ip = it->second;
    n = ++stats_.pods_started;
  }
  const std::string ip =
      fmt::format("10.{}.{}.{}", 200 + (n >> 16) % 50, (n >> 8) & 0xff, n & 0xff);
  json statuses = json::array();
  const json spec = pod.value("spec", json::object());
  for (const auto& c : spec.value("containers", json::array())) {
    const std::string cname = c.value("name", "");
    statuses.push_back(
        {{"name", cname},
         {"image", c.value("image", "")},
         {"imageID", "sim://" + c.value("image", "")},
         {"containerID", fmt::format("sim://{}-{}", pod["metadata"].value("uid", ""), cname)},
         {"ready", true},
         {"started", true},
         {"restartCount", 0},
         {"state", {{"running", {{"startedAt", now}}}}}});
  }
  auto cond = [&](const char* type) {
    return json{{"type", type}, {"status", "True"}, {"lastTransitionTime", now}};
  };
  json status = {
      {"status",
       {{"phase", "Running"},
        {"startTime", now},
        {"podIP", ip},
        {"podIPs", {{{"ip", ip}}}},
        {"hostIP", host_ip},
        {"hostIPs", {{{"ip", host_ip}}}},
        {"conditions",
         {cond("PodScheduled"), cond("Initialized"), cond("ContainersReady"), cond("Ready")}},
        {"containerStatuses", statuses}}}};
  (void)Ok(client_->Patch(kube::PodPath(ns, name) + "/status", kube::PatchType::kStrategicMerge,
                          status));
}

}  // namespace gpuheal::sim
