// The sim's process runtime (docs/sim.md, "Process runtime"): the containers of a pod annotated
// sim.gpuheal.io/runtime=process run as processes of this host, so that a drill measures what a
// service's clients and a training run see through a failover, not only gpuheal's own steps.
// What the kubelet does for a container, on the scale a drill needs: the container's command
// and args ($(VAR) expanded from its env) run from its pod's sandbox directory with its env
// (values and the fieldRefs below); the pod gets an IP of its own, added to the loopback
// interface; a downwardAPI annotations file is kept current; readiness probes (httpGet or
// tcpSocket: the first gates Ready, then every periodSeconds with the failure and success
// thresholds) and liveness probes (a container failing failureThreshold in a row is stopped
// and restarted); a deleted pod's processes get SIGTERM, then SIGKILL at the
// end of the grace period, and their exit codes are written to the pod's status before the pod
// object goes; a container that ends on its own is restarted by the pod's restartPolicy, or its
// pod ends Succeeded or Failed. No image is pulled and no namespace, cgroup or mount isolates the
// process: the command's first word is a path on this host.

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/child.h"
#include "core/http_get.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/time.h"
#include "sim/local_address.h"
#include "sim/sim.h"

namespace gpuheal::sim {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr std::string_view kRuntimeAnnotation = "sim.gpuheal.io/runtime";

std::string NowText() { return kube::RfcTime(std::chrono::system_clock::now()); }

// The downward API's annotations file: key="value" lines, sorted by key, values quoted. It holds
// the pod's gpuheal.io/ and sim.gpuheal.io/ annotations, those the sim's pod cache keeps.
std::string DownwardAnnotations(const std::map<std::string, std::string>& ann) {
  std::string out;
  for (const auto& [k, v] : ann) {
    if (!k.starts_with("gpuheal.io/") && !k.starts_with("sim.gpuheal.io/")) continue;
    out += k + "=\"";
    for (char c : v) {
      if (c == '"' || c == '\\') out += '\\';
      if (c == '\n') {
        out += "\\n";
        continue;
      }
      out += c;
    }
    out += "\"\n";
  }
  return out;
}

// The kubelet's expansion of $(VAR) in a container's command, args and env values: a defined
// variable's value, $$(VAR) the literal $(VAR), anything else left as written.
std::string Expand(const std::string& s, const std::map<std::string, std::string>& vars) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 3, "$$(") == 0) {
      out += "$(";
      i += 3;
      continue;
    }
    if (s.compare(i, 2, "$(") == 0) {
      const size_t end = s.find(')', i + 2);
      if (end != std::string::npos) {
        auto it = vars.find(s.substr(i + 2, end - i - 2));
        if (it != vars.end()) {
          out += it->second;
          i = end + 1;
          continue;
        }
      }
    }
    out += s[i++];
  }
  return out;
}

// One readiness probe, within 1 s: the TCP connection (tcpSocket) or an HTTP GET answered with a
// status from 200 to 399 (httpGet).
bool Probe(const std::string& ip, int port, const std::string& path) {
  const int status =
      HttpGetStatus(fmt::format("http://{}:{}{}", ip, port, path.empty() ? "/" : path),
                    std::chrono::seconds(1), "kube-probe/gpuheal-sim", path.empty());
  return status >= 200 && status < 400;
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.size() > 256 ? s.substr(0, 256) : s;
}

// A readiness or liveness probe as a pod spec gives it (the kubelet's defaults).
struct ProbeSpec {
  int port = 0;
  std::string path;  // httpGet's; empty: tcpSocket
  std::chrono::seconds period{10}, initial_delay{0};
  int failure = 3, success = 1;
};

// A container's readinessProbe or livenessProbe (httpGet or tcpSocket; a named port looked up in
// its ports), with the kubelet's defaults for what is not given; none for an exec probe.
std::optional<ProbeSpec> ParseProbe(const json& c, const char* key) {
  if (!c.contains(key) || !c[key].is_object()) return std::nullopt;
  const json& r = c[key];
  const json& how = r.contains("httpGet") ? r["httpGet"] : r.value("tcpSocket", json());
  if (!how.is_object() || !how.contains("port")) return std::nullopt;
  ProbeSpec ps;
  ps.path = r.contains("httpGet") ? how.value("path", "/") : "";
  if (how["port"].is_number_integer()) ps.port = how["port"].get<int>();
  for (const auto& port : c.value("ports", json::array()))
    if (how["port"].is_string() && port.value("name", "") == how["port"].get<std::string>())
      ps.port = port.value("containerPort", 0);
  auto positive = [&](const char* f, int def) {
    const json v = r.value(f, json());
    return v.is_number_integer() && v.get<int>() > 0 ? v.get<int>() : def;
  };
  ps.period = std::chrono::seconds(positive("periodSeconds", 10));
  ps.initial_delay = std::chrono::seconds(positive("initialDelaySeconds", 0));
  ps.failure = positive("failureThreshold", 3);
  ps.success = positive("successThreshold", 1);
  if (ps.port <= 0) return std::nullopt;
  return ps;
}

}  // namespace

struct Sim::PodProcesses {
  std::string ns, name, uid, node, ip, sandbox, restart_policy = "Always";
  struct Container {
    std::string name, log;
    std::optional<ProbeSpec> readiness, liveness;
    int readiness_fails = 0, readiness_oks = 0, liveness_fails = 0;
    Clock::time_point next_readiness{}, next_liveness{};
    std::vector<std::string> argv;
    std::vector<std::pair<std::string, std::string>> env;
    std::unique_ptr<Child> proc;
    int exit = -1;  // the last run's exit code (128+signal when killed); -1 while it runs
    int restarts = 0;
    bool ready = false;
    std::string started_at, finished_at;
    Clock::time_point restart_at{};  // a restart that is due (restartPolicy), or never
    bool waiting_restart = false;
    // Its environment, with SIM_GPU_LOST=1 when it starts on a lost GPU.
    std::vector<std::pair<std::string, std::string>> Env(bool gpu_lost) const {
      auto e = env;
      if (gpu_lost) e.push_back({"SIM_GPU_LOST", "1"});
      return e;
    }
  };
  std::vector<Container> containers;
  std::string annotations;  // the downward API file's content as last written
  std::string answered;     // the checkpoint answer last relayed
  bool deleting = false, finalizing = false;
  Clock::time_point kill_at{};

  json Status(const std::string& phase) const {
    json statuses = json::array();
    bool all_ready = true;
    for (const auto& c : containers) {
      json s = {{"name", c.name},
                {"image", "process"},
                {"imageID", "process://" + (c.argv.empty() ? "" : c.argv[0])},
                {"containerID", fmt::format("process://{}", c.proc ? c.proc->pid() : 0)},
                {"restartCount", c.restarts}};
      if (c.exit < 0 && c.proc) {
        s["state"] = {{"running", {{"startedAt", c.started_at}}}};
        s["ready"] = c.ready;
        s["started"] = true;
      } else {
        s["state"] = {{"terminated",
                       {{"exitCode", c.exit},
                        {"reason", c.exit == 0 ? "Completed" : "Error"},
                        {"startedAt", c.started_at},
                        {"finishedAt", c.finished_at}}}};
        s["ready"] = false;
        s["started"] = false;
      }
      all_ready = all_ready && s["ready"].get<bool>();
      statuses.push_back(std::move(s));
    }
    const std::string now = NowText();
    auto cond = [&](const char* type, bool v) {
      return json{{"type", type}, {"status", v ? "True" : "False"}, {"lastTransitionTime", now}};
    };
    json st = {{"containerStatuses", statuses},
               {"conditions",
                {cond("PodScheduled", true), cond("Initialized", true),
                 cond("ContainersReady", all_ready), cond("Ready", all_ready)}}};
    if (!phase.empty()) st["phase"] = phase;
    return {{"status", st}};
  }
};

bool Sim::IsProcessPod(const kube::Pod& p) {
  auto it = p.meta.annotations.find(std::string(kRuntimeAnnotation));
  return it != p.meta.annotations.end() && it->second == "process";
}

bool Sim::OnProcessPod(const kube::Pod& p, const std::string& id) {
  std::shared_ptr<PodProcesses> pp;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = procs_.find(p.meta.uid);
    if (it != procs_.end()) pp = it->second;
  }
  if (p.meta.deleting) {
    if (!pp) return false;
    std::lock_guard<std::mutex> lock(mu_);
    if (pp->deleting || !handled_.insert("delete/" + id).second) return true;
    // SIGTERM now; SIGKILL at the end of the grace period (capped), as the kubelet does.
    const int64_t grace = p.meta.deletion_grace_seconds >= 0 ? p.meta.deletion_grace_seconds : 30;
    pp->deleting = true;
    pp->kill_at = Clock::now() + std::min<std::chrono::milliseconds>(std::chrono::seconds(grace),
                                                                     opts_.max_termination);
    for (auto& c : pp->containers)
      if (c.proc && c.exit < 0) c.proc->Signal(SIGTERM);
    return true;
  }
  if (p.phase == "Succeeded" || p.phase == "Failed") return true;
  if (!pp) {
    bool first;
    {
      std::lock_guard<std::mutex> lock(mu_);
      first = handled_.insert("start/" + id).second;
    }
    if (first) {
      At(Clock::now(), [this, ns = p.meta.namespace_, name = p.meta.name, node = p.node_name] {
        StartProcessPod(ns, name, node);
      });
    }
    return true;
  }
  // The downward API's annotations file, current with the pod.
  const std::string text = DownwardAnnotations(p.meta.annotations);
  std::lock_guard<std::mutex> lock(mu_);
  if (text == pp->annotations) return true;
  pp->annotations = text;
  const std::string file = pp->sandbox + "/podinfo/annotations";
  std::ofstream(file + ".tmp", std::ios::trunc) << text;
  std::rename((file + ".tmp").c_str(), file.c_str());
  return true;
}

void Sim::StartProcessPod(const std::string& ns, const std::string& name, const std::string& node) {
  auto got = client_->Get(kube::PodPath(ns, name));
  if (!got || !got->ok()) return;
  const json pod = json::parse(got->body, nullptr, false);
  if (!pod.is_object() || pod["metadata"].contains("deletionTimestamp")) return;
  auto pp = std::make_shared<PodProcesses>();
  pp->ns = ns;
  pp->name = name;
  pp->node = node;
  pp->uid = pod["metadata"].value("uid", "");
  std::string host_ip;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = node_ip_.find(node);
    if (it == node_ip_.end()) return;
    host_ip = it->second;
    ++stats_.pods_started;
    const uint64_t k = process_ips_++;
    pp->ip = fmt::format("198.{}.{}.{}", 18 + (k / 250 / 256) % 2, (k / 250) % 256, k % 250 + 1);
  }
  auto fail = [&](const std::string& why) {
    Log("warn", "sim: process runtime: cannot start the pod",
        {{"pod", ns + "/" + name}, {"error", why}});
    json st = {
        {"status",
         {{"phase", "Failed"}, {"reason", "StartError"}, {"message", "gpuheal sim: " + why}}}};
    (void)Ok(
        client_->Patch(kube::PodPath(ns, name) + "/status", kube::PatchType::kStrategicMerge, st));
  };
  if (auto s = AddLoopbackAddress(pp->ip); !s) return fail(s.error().message);
  pp->sandbox = opts_.state_dir + "/pods/" + ns + "_" + name;
  std::error_code ec;
  std::filesystem::create_directories(pp->sandbox + "/podinfo", ec);
  if (ec) return fail(fmt::format("{}: {}", pp->sandbox, ec.message()));
  std::map<std::string, std::string> annotations;
  const json pod_annotations = pod["metadata"].value("annotations", json::object());
  for (const auto& [k, v] : pod_annotations.items())
    if (v.is_string()) annotations[k] = v.get<std::string>();
  pp->annotations = DownwardAnnotations(annotations);
  std::ofstream(pp->sandbox + "/podinfo/annotations") << pp->annotations;
  const json spec = pod.value("spec", json::object());
  pp->restart_policy = spec.value("restartPolicy", "Always");
  auto field = [&](const std::string& path) -> std::string {
    if (path == "metadata.name") return name;
    if (path == "metadata.namespace") return ns;
    if (path == "metadata.uid") return pp->uid;
    if (path == "spec.nodeName") return node;
    if (path == "status.podIP") return pp->ip;
    if (path == "status.hostIP") return host_ip;
    for (const char* map : {"annotations", "labels"}) {
      const std::string pre = fmt::format("metadata.{}['", map);
      if (path.starts_with(pre) && path.ends_with("']")) {
        const json m = pod["metadata"].value(map, json::object());
        return m.value(path.substr(pre.size(), path.size() - pre.size() - 2), "");
      }
    }
    return "";
  };
  for (const auto& c : spec.value("containers", json::array())) {
    PodProcesses::Container pc;
    pc.name = c.value("name", "");
    pc.log = pp->sandbox + "/" + pc.name + ".log";
    std::map<std::string, std::string> vars = {{"SIM_SANDBOX", pp->sandbox}};
    pc.env.push_back({"SIM_SANDBOX", pp->sandbox});
    for (const auto& e : c.value("env", json::array())) {
      const std::string k = e.value("name", "");
      std::string v = Expand(e.value("value", ""), vars);
      if (e.contains("valueFrom") && e["valueFrom"].contains("fieldRef"))
        v = field(e["valueFrom"]["fieldRef"].value("fieldPath", ""));
      vars[k] = v;
      pc.env.push_back({k, v});
    }
    for (const char* part : {"command", "args"})
      for (const auto& a : c.value(part, json::array()))
        if (a.is_string()) pc.argv.push_back(Expand(a.get<std::string>(), vars));
    if (pc.argv.empty() || !pc.argv[0].starts_with("/"))
      return fail(
          fmt::format("container {}: the process runtime runs no image: its command must "
                      "start with the absolute path of a program on this host",
                      pc.name));
    pc.readiness = ParseProbe(c, "readinessProbe");
    pc.liveness = ParseProbe(c, "livenessProbe");
    pp->containers.push_back(std::move(pc));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& c : pp->containers) {
      auto child = Child::Spawn(c.argv, c.log, c.log, c.Env(LostGpu(*pp)), pp->sandbox);
      c.started_at = NowText();
      if (!child) {
        c.exit = 128;
        c.finished_at = c.started_at;
        Log("warn", "sim: process runtime: cannot start a container",
            {{"pod", ns + "/" + name}, {"container", c.name}, {"error", child.error().message}});
        continue;
      }
      c.proc = std::move(*child);
      ++stats_.processes_started;
    }
  }
  // Ready once each container's first readiness probe passes (10 s at most); one without a probe
  // is ready once started.
  for (auto& c : pp->containers) {
    bool ready = true;
    if (c.readiness) {
      const auto until = Clock::now() + 10s;
      while (!(ready = Probe(pp->ip, c.readiness->port, c.readiness->path)) && Clock::now() < until)
        std::this_thread::sleep_for(20ms);
    }
    std::lock_guard<std::mutex> lock(mu_);
    c.ready = ready && c.exit < 0;
    const auto now = Clock::now();
    if (c.readiness) c.next_readiness = now + c.readiness->period;
    if (c.liveness) c.next_liveness = now + std::max(c.liveness->initial_delay, c.liveness->period);
  }
  json status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = pp->Status("Running");
  }
  status["status"]["startTime"] = NowText();
  status["status"]["podIP"] = pp->ip;
  status["status"]["podIPs"] = json::array({{{"ip", pp->ip}}});
  status["status"]["hostIP"] = host_ip;
  status["status"]["hostIPs"] = json::array({{{"ip", host_ip}}});
  (void)Ok(client_->Patch(kube::PodPath(ns, name) + "/status", kube::PatchType::kStrategicMerge,
                          status));
  // From now on the runtime loop reaps, restarts and stops its processes (a container that has
  // ended already is reported by its first pass, after the Running above).
  {
    std::lock_guard<std::mutex> lock(mu_);
    procs_[pp->uid] = pp;
  }
  // Deleted while it started: the runtime loop stops it at once.
  auto again = client_->Get(kube::PodPath(ns, name));
  if (again && (again->status == 404 ||
                (again->ok() && json::parse(again->body, nullptr, false)["metadata"].contains(
                                    "deletionTimestamp")))) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!pp->deleting) {
      pp->deleting = true;
      pp->kill_at = Clock::now();
    }
  }
}

void Sim::RuntimeLoop() {
  for (;;) {
    std::vector<std::function<void()>> work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      runtime_cv_.wait_for(lock, 20ms, [this] { return stop_; });
      if (stop_) return;
      const auto now = Clock::now();
      for (auto& [uid, pp] : procs_) {
        if (pp->finalizing) continue;
        bool ended = false;
        for (auto& c : pp->containers) {
          if (!c.proc || c.exit >= 0) continue;
          if (const int w = c.proc->Wait(0ms); w >= 0) {
            c.exit = w;
            c.finished_at = NowText();
            ended = true;
          }
        }
        // The workload's answer to gpuheal's checkpoint request, as the pod's annotation (what a
        // workload with the right to patch its own pod writes).
        if (const std::string a = ReadSmallFile(pp->sandbox + "/checkpoint-done");
            !a.empty() && a != pp->answered && !pp->deleting) {
          pp->answered = a;
          work.push_back([this, ns = pp->ns, name = pp->name] {
            auto r = client_->Patch(
                kube::PodPath(ns, name), kube::PatchType::kMerge,
                {{"metadata",
                  {{"annotations", {{std::string(keys::kCheckpointDone), NowText()}}}}}});
            if (Ok(r)) {
              std::lock_guard<std::mutex> l(mu_);
              ++stats_.checkpoints;
            }
          });
        }
        if (pp->deleting) {
          const bool all_ended = std::all_of(pp->containers.begin(), pp->containers.end(),
                                             [](const auto& c) { return !c.proc || c.exit >= 0; });
          if (!all_ended && now < pp->kill_at) continue;
          for (auto& c : pp->containers) {
            if (!c.proc || c.exit >= 0) continue;
            c.proc->Signal(SIGKILL);
            c.exit = c.proc->Wait(1s);
            c.finished_at = NowText();
          }
          pp->finalizing = true;
          // The containers' ends in the pod's status, then the pod object goes (its uid as a
          // precondition), as the kubelet does; then the pod's address.
          work.push_back([this, pp, status = pp->Status("")] {
            (void)client_->Patch(kube::PodPath(pp->ns, pp->name) + "/status",
                                 kube::PatchType::kStrategicMerge, status);
            auto r = client_->Delete(kube::PodPath(pp->ns, pp->name), pp->uid, "", 0);
            (void)RemoveLoopbackAddress(pp->ip);
            std::lock_guard<std::mutex> l(mu_);
            if (r && (r->ok() || r->status == 404 || r->status == 409)) ++stats_.pods_deleted;
            const std::string id = pp->ns + "/" + pp->name + "/" + pp->uid;
            for (const char* k : {"start/", "delete/", "checkpoint/"}) handled_.erase(k + id);
            procs_.erase(pp->uid);
          });
          continue;
        }
        // A container that ended on its own: restarted by the pod's restartPolicy (after 1 s),
        // or the pod ends.
        bool restart_due = false;
        for (auto& c : pp->containers) {
          if (c.exit < 0 || !c.proc) continue;
          const bool again =
              pp->restart_policy == "Always" || (pp->restart_policy == "OnFailure" && c.exit != 0);
          if (again && !c.waiting_restart) {
            c.waiting_restart = true;
            c.restart_at = now + 1s;
          } else if (again && now >= c.restart_at) {
            auto child = Child::Spawn(c.argv, c.log, c.log, c.Env(LostGpu(*pp)), pp->sandbox);
            c.waiting_restart = false;
            if (child) {
              c.proc = std::move(*child);
              c.exit = -1;
              // Ready again once its readiness probe passes (the prober); probed for liveness
              // after the initial delay.
              c.ready = !c.readiness;
              c.readiness_fails = c.readiness_oks = c.liveness_fails = 0;
              c.next_readiness = now;
              if (c.liveness)
                c.next_liveness = now + std::max(c.liveness->initial_delay, c.liveness->period);
              c.started_at = NowText();
              ++c.restarts;
              ++stats_.processes_started;
              restart_due = true;
            }
          }
        }
        if (ended || restart_due) {
          const bool all_ended = std::all_of(pp->containers.begin(), pp->containers.end(),
                                             [](const auto& c) { return c.exit >= 0; });
          const bool none_restart = std::none_of(pp->containers.begin(), pp->containers.end(),
                                                 [](const auto& c) { return c.waiting_restart; });
          std::string phase;
          if (all_ended && none_restart) {
            phase = std::all_of(pp->containers.begin(), pp->containers.end(),
                                [](const auto& c) { return c.exit == 0; })
                        ? "Succeeded"
                        : "Failed";
          }
          work.push_back([this, ns = pp->ns, name = pp->name, status = pp->Status(phase)] {
            (void)Ok(client_->Patch(kube::PodPath(ns, name) + "/status",
                                    kube::PatchType::kStrategicMerge, status));
          });
        }
      }
    }
    for (auto& w : work) At(Clock::now(), std::move(w));
  }
}

bool Sim::LostGpu(const PodProcesses& pp) const {
  return gpu_lost_.count(pp.node) || gpu_lost_.count(pp.node + "/" + pp.ns + "/" + pp.name);
}

std::vector<std::string> Sim::GpuLost(const std::string& node, const std::string& pod) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> ips;
  for (auto& [uid, pp] : procs_) {
    if (pp->node != node || (!pod.empty() && pp->name != pod)) continue;
    gpu_lost_.insert(pod.empty() ? node : node + "/" + pp->ns + "/" + pp->name);
    bool signalled = false;
    for (auto& c : pp->containers) {
      if (c.proc && c.exit < 0) {
        c.proc->Signal(SIGUSR1);
        signalled = true;
      }
    }
    if (signalled) ips.push_back(pp->ip);
  }
  if (pod.empty()) gpu_lost_.insert(node);
  return ips;
}

void Sim::GpuReset(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = gpu_lost_.begin(); it != gpu_lost_.end();)
    it = *it == node || it->starts_with(node + "/") ? gpu_lost_.erase(it) : std::next(it);
}

// The kubelet's prober: each running container's readiness and liveness probes when due. A
// readiness change is written to the pod's status; a liveness failure stops the container
// (SIGTERM), which the runtime loop restarts by the pod's restartPolicy.
void Sim::ProberLoop() {
  struct Due {
    std::shared_ptr<PodProcesses> pp;
    size_t index;
    bool liveness;
    std::string ip;
    ProbeSpec spec;
  };
  for (;;) {
    std::vector<Due> due;
    {
      std::unique_lock<std::mutex> lock(mu_);
      runtime_cv_.wait_for(lock, 50ms, [this] { return stop_; });
      if (stop_) return;
      const auto now = Clock::now();
      for (auto& [uid, pp] : procs_) {
        if (pp->deleting || pp->finalizing) continue;
        for (size_t i = 0; i < pp->containers.size(); ++i) {
          auto& c = pp->containers[i];
          if (!c.proc || c.exit >= 0) continue;
          if (c.readiness && now >= c.next_readiness) {
            c.next_readiness = now + c.readiness->period;
            due.push_back({pp, i, false, pp->ip, *c.readiness});
          }
          if (c.liveness && now >= c.next_liveness) {
            c.next_liveness = now + c.liveness->period;
            due.push_back({pp, i, true, pp->ip, *c.liveness});
          }
        }
      }
    }
    std::vector<std::function<void()>> work;
    for (auto& d : due) {
      const bool ok = Probe(d.ip, d.spec.port, d.spec.path);
      std::lock_guard<std::mutex> lock(mu_);
      auto& c = d.pp->containers[d.index];
      if (d.pp->deleting || d.pp->finalizing || !c.proc || c.exit >= 0) continue;
      if (d.liveness) {
        c.liveness_fails = ok ? 0 : c.liveness_fails + 1;
        if (c.liveness_fails >= d.spec.failure) {
          Log("info", "sim: process runtime: liveness probe failed, restarting the container",
              {{"pod", d.pp->ns + "/" + d.pp->name}, {"container", c.name}});
          c.liveness_fails = 0;
          c.next_liveness = Clock::time_point::max();  // until it is restarted
          c.proc->Signal(SIGTERM);
        }
        continue;
      }
      c.readiness_oks = ok ? c.readiness_oks + 1 : 0;
      c.readiness_fails = ok ? 0 : c.readiness_fails + 1;
      const bool was = c.ready;
      if (!c.ready && c.readiness_oks >= d.spec.success) c.ready = true;
      if (c.ready && c.readiness_fails >= d.spec.failure) c.ready = false;
      if (c.ready == was) continue;
      work.push_back([this, ns = d.pp->ns, name = d.pp->name, status = d.pp->Status("Running")] {
        (void)Ok(client_->Patch(kube::PodPath(ns, name) + "/status",
                                kube::PatchType::kStrategicMerge, status));
      });
    }
    for (auto& w : work) At(Clock::now(), std::move(w));
  }
}

void Sim::StopProcesses() {
  std::map<std::string, std::shared_ptr<PodProcesses>> procs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    procs.swap(procs_);
  }
  for (auto& [uid, pp] : procs) KillPodProcesses(*pp);
}

void Sim::KillNodeProcesses(const std::string& node) {
  for (auto it = procs_.begin(); it != procs_.end();) {
    if (it->second->node != node) {
      ++it;
      continue;
    }
    KillPodProcesses(*it->second);
    it = procs_.erase(it);
  }
}

void Sim::KillPodProcesses(PodProcesses& pp) {
  pp.finalizing = true;
  for (auto& c : pp.containers) {
    if (!c.proc || c.exit >= 0) continue;
    c.proc->Signal(SIGKILL);
    c.exit = c.proc->Wait(2s);
  }
  (void)RemoveLoopbackAddress(pp.ip);
}

}  // namespace gpuheal::sim
