// The repair controller on a real loopback control plane (started and stopped by this program)
// with 1,500 GPU nodes in 15 pools, registered and kept alive by `gpuheal sim` as kubelets would
// (node Leases, Ready heartbeats, pods bound to them reported Running, deleted pods gone after
// their grace period, checkpoint requests answered after 500 ms):
//   latency: one node's AcceleratedHardwareReady set False -> gpuheal's quarantine taint seen by a
//     watcher, one fault at a time; baseline in the same run: the same PATCH -> the watcher seeing
//     the condition itself (the floor: the controller reacts to that very event);
//   burst: 300 nodes (20 in each pool) set False at once -> every one of them tainted;
//   eviction: --evict-nodes faulty nodes at once, --pods-per-node Running pods each under a
//     PodDisruptionBudget per node that allows it -> pods evicted per second by the controller
//     (first to last eviction seen by a watcher); baseline in the same run: this program evicting
//     as many pods of other nodes through the same Eviction API in the controller's order
//     (a thread per node up to --concurrency, each evicting its node's pods, one budget's, one
//     after another), at --workers threads (a drain holding its worker, as before the eviction
//     pool), and at twice the concurrency (two of a budget's pods at a time): the best of the
//     three is the API server's own ceiling on this machine;
//   the controller's RSS and CPU afterwards.
//   --memory: --nodes nodes and --pods pods (spread over the nodes) cached, no faults: the
//     controller's RSS once its informers hold them, against its RSS with the nodes alone. These
//     nodes are created by this program (no sim: it would report each of the 150,000 pods Running).
//
//   bench_controller [--nodes 1500] [--faults 100] [--burst 300] [--evict-nodes 25]
//   [--pods-per-node 8]
//                    [--workers 8] [--parallel 8] [--concurrency 32] [--no-sim]
//   --no-sim: the nodes are created by this program and nothing keeps them alive (no Leases, no
//     heartbeats: the API server serves only the benchmark), and it reports the pods Running
//     itself.
//   bench_controller --memory [--nodes 5000] [--pods 150000]

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "agent_process.h"
#include "apply_manifest.h"
#include "bench_util.h"
#include "core/time.h"
#include "kube/client.h"
#include "kube_test_util.h"
#include "local_control_plane.h"

using namespace gpuheal::kube;
using clk = std::chrono::steady_clock;
using nlohmann::json;

namespace {

std::string RfcTimeNow() { return RfcTime(std::chrono::system_clock::now()); }

json Condition(bool ok, const std::string& stamp) {
  return {{"status",
           {{"conditions",
             {{{"type", "AcceleratedHardwareReady"},
               {"status", ok ? "True" : "False"},
               {"reason", ok ? "NvidiaGPUIsReady" : "NvidiaXID48Error"},
               {"message", stamp},
               {"lastHeartbeatTime", RfcTimeNow()},
               {"lastTransitionTime", RfcTimeNow()}}}}}}};
}

}  // namespace

// Who makes a created pod Running: nobody (--memory: it stays Pending, as a Deployment's pod
// looks), the sim's kubelet, or this program (--no-sim).
enum class PodRunner { kNone, kSim, kBench };

// Creates pods [from, to) named prefix-<i>, bound to `node_of(i)`; 8 threads.
void CreatePods(Client& c, const std::string& ns, const std::string& prefix, int from, int to,
                const std::function<std::string(int)>& node_of, const json& labels,
                PodRunner runner) {
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&, t] {
      for (int i = from + t; i < to; i += 8) {
        const std::string name = fmt::format("{}-{}", prefix, i);
        json pod = gpuheal::testing::PodJson(ns, name, node_of(i), labels);
        if (runner == PodRunner::kNone) {
          // As a Deployment's pod looks (the memory figure). Not with kube-controller-manager:
          // its garbage collector would delete pods whose owner does not exist.
          pod["metadata"]["ownerReferences"] = {{{"apiVersion", "apps/v1"},
                                                 {"kind", "ReplicaSet"},
                                                 {"name", prefix},
                                                 {"uid", "00000000-0000-0000-0000-000000000001"},
                                                 {"controller", true}}};
        }
        pod["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", "1"}}},
                                                     {"requests", {{"nvidia.com/gpu", "1"}}}};
        (void)c.Create(PodPath(ns), pod);
        if (runner == PodRunner::kBench) {
          (void)c.Patch(PodPath(ns, name) + "/status", PatchType::kStrategicMerge,
                        {{"status",
                          {{"phase", "Running"},
                           {"podIP", "10.0.0.1"},
                           {"conditions",
                            {{{"type", "Ready"}, {"status", "True"}},
                             {{"type", "ContainersReady"}, {"status", "True"}}}}}}});
        }
      }
    });
  }
  for (auto& t : ts) t.join();
}

// The API server's request counters (apiserver_request_total) summed by "VERB resource/sub".
std::map<std::string, double> RequestCounts(Client& c) {
  std::map<std::string, double> out;
  auto r = c.Get("/metrics");
  if (!r || !r->ok()) return out;
  std::istringstream in(r->body);
  std::string line;
  auto label = [](const std::string& l, const std::string& name) {
    const auto at = l.find(name + "=\"");
    if (at == std::string::npos) return std::string();
    const auto from = at + name.size() + 2;
    return l.substr(from, l.find('"', from) - from);
  };
  while (std::getline(in, line)) {
    if (!line.starts_with("apiserver_request_total{")) continue;
    const std::string sub = label(line, "subresource");
    const std::string key =
        label(line, "verb") + " " + label(line, "resource") + (sub.empty() ? "" : "/" + sub);
    out[key] += std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
  }
  return out;
}

// CPU seconds so far of the control plane's processes and of gpuheal's (the controller, the sim).
struct CpuSnapshot {
  double apiserver, etcd, kcm, gpuheal;
};
CpuSnapshot CpuNow() {
  using gpuheal::bench::CpuSecondsOf;
  return {CpuSecondsOf("kube-apiserver"), CpuSecondsOf("etcd"), CpuSecondsOf("kube-controller"),
          CpuSecondsOf("gpuheal")};
}
std::string CpuDelta(const CpuSnapshot& a, const CpuSnapshot& b, double seconds) {
  auto share = [&](double x, double y) { return seconds > 0 ? 100.0 * (y - x) / seconds : 0.0; };
  return fmt::format(
      "CPU, % of one core: kube-apiserver {:.0f}%, etcd {:.0f}%, kube-controller-manager {:.0f}%, "
      "gpuheal (controller and sim) {:.0f}%",
      share(a.apiserver, b.apiserver), share(a.etcd, b.etcd), share(a.kcm, b.kcm),
      share(a.gpuheal, b.gpuheal));
}

// The requests counted between two RequestCounts, the busiest first.
std::string RequestDelta(const std::map<std::string, double>& before,
                         const std::map<std::string, double>& after, double seconds) {
  std::vector<std::pair<double, std::string>> d;
  double total = 0;
  for (const auto& [k, v] : after) {
    const auto it = before.find(k);
    const double n = v - (it == before.end() ? 0 : it->second);
    if (n >= 1) d.emplace_back(n, k);
    total += n;
  }
  std::sort(d.rbegin(), d.rend());
  std::string s =
      fmt::format("{:.0f} requests ({:.0f}/s):", total, seconds > 0 ? total / seconds : 0);
  for (size_t i = 0; i < d.size() && i < 8; ++i)
    s += fmt::format(" {} {:.0f};", d[i].second, d[i].first);
  return s;
}

// The sim's name for its i-th node in service: node i is in pool i % 15 (`gpuheal sim --pools 15
// --prefix bn` deals them out so).
std::string SimNode(int i) { return fmt::format("bn-{}-{}", i % 15, i / 15); }

// Nodes created directly (--memory, --no-sim): no Lease, no heartbeat, no kubelet; named as the sim
// names them.
void CreateNodes(Client& c, int nodes) {
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&, t] {
      for (int i = t; i < nodes; i += 8) {
        const std::string name = SimNode(i);
        (void)c.Create(NodePath(),
                       {{"apiVersion", "v1"},
                        {"kind", "Node"},
                        {"metadata",
                         {{"name", name},
                          {"labels", {{"gpuheal.io/pool", fmt::format("pool-{:02d}", i % 15)}}}}}});
        json st = Condition(true, "init");
        st["status"]["capacity"] = {{"nvidia.com/gpu", "8"}};
        st["status"]["allocatable"] = {{"nvidia.com/gpu", "8"}};
        (void)c.Patch(NodePath(name) + "/status", PatchType::kStrategicMerge, st);
      }
    });
  }
  for (auto& t : ts) t.join();
}

// RSS once it stops growing (two readings 3 s apart within 1%), at most `limit`.
long SettledRssKb(pid_t pid, std::chrono::seconds limit) {
  long last = gpuheal::bench::RssKb(pid);
  const auto deadline = clk::now() + limit;
  while (clk::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    const long now = gpuheal::bench::RssKb(pid);
    if (std::labs(now - last) * 100 <= last) return now;
    last = now;
  }
  return last;
}

int Memory(const std::string& kubeconfig, Client& c, int nodes, int pods) {
  const auto t0 = clk::now();
  CreateNodes(c, nodes);
  std::printf("%d nodes created in %.1f s\n", nodes,
              std::chrono::duration<double>(clk::now() - t0).count());
  char tmpl[] = "/tmp/gpuheal-bench-ctl-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/policy.yaml") << "toleration: {default: 1h}\n";
  gpuheal::testing::AgentProcess ctl({GPUHEAL_BIN, "controller", "--kubeconfig", kubeconfig,
                                      "--policy", dir + "/policy.yaml", "--listen", "",
                                      "--lease-namespace", "default"});
  if (!ctl.WaitLog([](const json& j) { return j.value("msg", "") == "started leading"; },
                   std::chrono::seconds(120))) {
    std::fprintf(stderr, "controller did not start leading\n");
    return 1;
  }
  const long base = SettledRssKb(ctl.pid(), std::chrono::seconds(60));
  std::printf("baseline: controller RSS %ld kB with %d nodes and no pods\n", base, nodes);
  const auto p0 = clk::now();
  (void)c.Create("/api/v1/namespaces",
                 {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "mem"}}}});
  CreatePods(
      c, "mem", "mp", 0, pods, [&](int i) { return SimNode(i % nodes); },
      {{"app", "trainer"}, {"team", "ml"}}, PodRunner::kNone);
  std::printf("%d pods created in %.1f s\n", pods,
              std::chrono::duration<double>(clk::now() - p0).count());
  const long with_pods = SettledRssKb(ctl.pid(), std::chrono::seconds(300));
  std::printf(
      "controller RSS %ld kB with %d nodes and %d pods cached (+%ld kB for the pods, %.0f B/pod); "
      "CPU %.1f s\n",
      with_pods, nodes, pods, with_pods - base,
      static_cast<double>(with_pods - base) * 1024.0 / pods, gpuheal::bench::CpuSeconds(ctl.pid()));
  ctl.Kill(SIGTERM);
  std::filesystem::remove_all(dir);
  return with_pods > 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  int nodes = 1500, faults = 100, burst = 300, evict_nodes = 25, pods_per_node = 8, pods = 150000,
      workers = 8, parallel = 8, concurrency = 32;
  bool memory = false, use_sim = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-sim")) {
      use_sim = false;
      continue;
    }
    if (!std::strcmp(argv[i], "--memory")) {
      memory = true;
      nodes = 5000;
      continue;
    }
    if (i + 1 >= argc) break;
    if (!std::strcmp(argv[i], "--nodes"))
      nodes = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--faults"))
      faults = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--burst"))
      burst = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--evict-nodes"))
      evict_nodes = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--pods-per-node"))
      pods_per_node = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--workers"))
      workers = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--parallel"))
      parallel = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--concurrency"))
      concurrency = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--pods"))
      pods = std::stoi(argv[++i]);
  }
  std::string log;
  // kube-controller-manager keeps the PodDisruptionBudgets' status (the eviction part needs it).
  auto cp = gpuheal::testing::LocalControlPlane::Up(!memory, {}, &log);
  if (!cp) {
    std::fprintf(stderr, "control plane did not come up:\n%s", log.c_str());
    return 1;
  }
  int rc = 0;
  {
    auto cfg = LoadKubeconfig(cp->kubeconfig());
    cfg->qps = 0;
    auto client = Client::Create(*cfg);
    auto watch_client = Client::Create(*cfg);
    Client& c = **client;
    gpuheal::testing::ApplyManifest(
        c, std::string(GPUHEAL_SOURCE_DIR) + "/deploy/crds/noderepairs.yaml");
    if (memory) return Memory(cp->kubeconfig(), c, nodes, pods);
    const auto t_create = clk::now();
    std::optional<gpuheal::testing::AgentProcess> sim;
    if (use_sim) {
      sim.emplace(std::vector<std::string>{GPUHEAL_BIN, "sim", "--kubeconfig", cp->kubeconfig(),
                                           "--nodes", std::to_string(nodes), "--pools", "15",
                                           "--standby", "0", "--prefix", "bn"});
      if (!sim->WaitEvent([](const json& j) { return j.value("sim", "") == "started"; },
                          std::chrono::seconds(300))) {
        std::fprintf(stderr, "gpuheal sim did not register its nodes\n");
        return 1;
      }
    } else {
      CreateNodes(c, nodes);
    }
    std::printf("%d %s in 15 pools %s in %.1f s\n", nodes, use_sim ? "sim nodes" : "nodes (no sim)",
                use_sim ? "registered" : "created",
                std::chrono::duration<double>(clk::now() - t_create).count());

    // The watcher: when each node first shows the False condition, and our taint.
    std::mutex mu;
    std::map<std::string, clk::time_point> cond_seen, taint_seen;
    std::atomic<bool> stop{false};
    std::string rv =
        json::parse(c.Get(NodePath() + "?limit=1")->body)["metadata"]["resourceVersion"];
    std::thread watcher([&] {
      while (!stop) {
        (void)(*watch_client)
            ->Watch(
                NodePath(), rv,
                [&](const WatchEventRaw& ev) {
                  if (!ev.resource_version.empty()) rv = ev.resource_version;
                  auto n = DecodeNode(ev.object);
                  if (!n) return !stop.load();
                  const auto now = clk::now();
                  std::lock_guard<std::mutex> lock(mu);
                  for (const auto& cond : n->conditions) {
                    if (cond.type == "AcceleratedHardwareReady" && cond.status == "False")
                      cond_seen.try_emplace(n->meta.name, now);
                  }
                  for (const auto& t : n->taints) {
                    if (t.key == "gpuheal.io/gpu-fault") taint_seen.try_emplace(n->meta.name, now);
                  }
                  return !stop.load();
                },
                std::chrono::seconds(60), &stop);
      }
    });

    char tmpl[] = "/tmp/gpuheal-bench-ctl-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    std::ofstream(dir + "/policy.yaml")
        << "toleration: {default: 1h, AcceleratedHardwareReady: 1h}\ncheckpoint: {window: 1s}\n"
           "skip: {namespaces: []}\n"
           // the figures are about speed: gates would hold most of the burst
           "pools: {max_unavailable_percent: 100}\nbreaker: {share_percent: 100}\n"
        << "eviction: {parallel: " << parallel << ", concurrency: " << concurrency << "}\n";
    gpuheal::testing::AgentProcess ctl({GPUHEAL_BIN, "controller", "--kubeconfig", cp->kubeconfig(),
                                        "--policy", dir + "/policy.yaml", "--listen", "",
                                        "--lease-namespace", "default", "--workers",
                                        std::to_string(workers)});
    if (!ctl.WaitLog([](const json& j) { return j.value("msg", "") == "started leading"; },
                     std::chrono::seconds(60))) {
      std::fprintf(stderr, "controller did not start leading\n");
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));  // its first pass over all nodes

    std::vector<double> base_us, ctl_us;
    for (int i = 0; i < faults; ++i) {
      const std::string name = SimNode(nodes - 1 - i);
      const auto t0 = clk::now();
      (void)c.Patch(NodePath(name) + "/status", PatchType::kStrategicMerge,
                    Condition(false, "fault"));
      const auto deadline = clk::now() + std::chrono::seconds(10);
      while (clk::now() < deadline) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (taint_seen.count(name) && cond_seen.count(name)) {
            base_us.push_back(
                std::chrono::duration<double, std::micro>(cond_seen[name] - t0).count());
            ctl_us.push_back(
                std::chrono::duration<double, std::micro>(taint_seen[name] - t0).count());
            break;
          }
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    gpuheal::bench::Report("baseline: condition PATCH -> seen by the watcher", base_us);
    gpuheal::bench::Report("controller: condition PATCH -> quarantine taint seen", ctl_us);
    if (static_cast<int>(ctl_us.size()) != faults) rc = 1;

    // Burst: `burst` nodes (the same share of every pool) at once.
    std::vector<std::string> targets;
    for (int i = 0; static_cast<int>(targets.size()) < burst && i < nodes - faults; ++i) {
      targets.push_back(SimNode(i));
    }
    const auto b0 = clk::now();
    {
      std::vector<std::thread> ts;
      for (int t = 0; t < 8; ++t) {
        ts.emplace_back([&, t] {
          for (size_t i = static_cast<size_t>(t); i < targets.size(); i += 8) {
            (void)c.Patch(NodePath(targets[i]) + "/status", PatchType::kStrategicMerge,
                          Condition(false, "burst"));
          }
        });
      }
      for (auto& t : ts) t.join();
    }
    const double sent_s = std::chrono::duration<double>(clk::now() - b0).count();
    double all_s = -1;
    const auto deadline = clk::now() + std::chrono::seconds(60);
    while (clk::now() < deadline) {
      size_t done = 0;
      {
        std::lock_guard<std::mutex> lock(mu);
        for (const auto& n : targets) done += taint_seen.count(n);
      }
      if (done == targets.size()) {
        all_s = std::chrono::duration<double>(clk::now() - b0).count();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::printf(
        "burst: %zu nodes set False in %.2f s; all quarantined %.2f s after the first PATCH\n",
        targets.size(), sent_s, all_s);
    if (all_s < 0) rc = 1;
    if (evict_nodes > 0) {
      // evict_nodes spare nodes (set A) and as many again three times (sets B, C and D), each
      // with pods_per_node Running pods under its own budget that lets all of them go. The bench
      // evicts sets B, C and D itself (the baselines below); the controller drains set A when
      // their conditions turn False at once.
      (void)c.Create("/api/v1/namespaces",
                     {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "ev"}}}});
      std::vector<std::string> set_a, set_b, set_c, set_d;
      for (int i = 0; i < evict_nodes; ++i) {
        set_a.push_back(SimNode(burst + i));
        set_b.push_back(SimNode(burst + evict_nodes + i));
        set_c.push_back(SimNode(burst + 2 * evict_nodes + i));
        set_d.push_back(SimNode(burst + 3 * evict_nodes + i));
      }
      const auto p0 = clk::now();
      for (const auto* set : {&set_a, &set_b, &set_c, &set_d}) {
        for (const auto& n : *set) {
          (void)c.Create(
              PdbPath("ev"),
              {{"apiVersion", "policy/v1"},
               {"kind", "PodDisruptionBudget"},
               {"metadata", {{"name", n}, {"namespace", "ev"}}},
               {"spec", {{"minAvailable", 0}, {"selector", {{"matchLabels", {{"app", n}}}}}}}});
          CreatePods(
              c, "ev", "p-" + n, 0, pods_per_node, [&](int) { return n; }, {{"app", n}},
              use_sim ? PodRunner::kSim : PodRunner::kBench);
        }
      }
      const int total = evict_nodes * pods_per_node;
      // Every budget allows all its pods to go (the sim has reported them Running and Ready, and
      // kube-controller-manager has counted them).
      const auto pdb_deadline = clk::now() + std::chrono::seconds(120);
      bool budgets_ready = false;
      while (!budgets_ready && clk::now() < pdb_deadline) {
        auto r = c.Get(PdbPath("ev"));
        int ready = 0;
        if (r && r->ok()) {
          const json list = json::parse(r->body);
          for (const auto& pdb : list["items"])
            ready += pdb["status"].value("disruptionsAllowed", 0) >= pods_per_node;
        }
        budgets_ready = ready == 4 * evict_nodes;
        if (!budgets_ready) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      std::printf(
          "eviction: 4 x %d nodes x %d pods, a budget each, created, reported Running by %s and "
          "counted "
          "by their budgets in %.1f s\n",
          evict_nodes, pods_per_node, use_sim ? "the sim" : "this program",
          std::chrono::duration<double>(clk::now() - p0).count());
      if (!budgets_ready) {
        std::fprintf(stderr, "the budgets did not allow every pod to go in 120 s\n");
        rc = 1;
      }
      // Pod watcher: the first time each pod is seen going (deletionTimestamp or deleted).
      std::map<std::string, clk::time_point> gone;
      std::atomic<bool> pstop{false};
      auto pod_client = Client::Create(*cfg);
      std::string prv =
          json::parse(c.Get(PodPath("ev") + "?limit=1")->body)["metadata"]["resourceVersion"];
      std::thread pw([&] {
        while (!pstop) {
          (void)(*pod_client)
              ->Watch(
                  PodPath("ev"), prv,
                  [&](const WatchEventRaw& ev) {
                    if (!ev.resource_version.empty()) prv = ev.resource_version;
                    auto p = DecodePod(ev.object);
                    if (p && (p->meta.deleting || ev.type == "DELETED")) {
                      std::lock_guard<std::mutex> lock(mu);
                      gone.try_emplace(p->meta.name, clk::now());
                    }
                    return !pstop.load();
                  },
                  std::chrono::seconds(60), &pstop);
        }
      });
      auto span = [&](const std::vector<std::string>& set) {
        std::lock_guard<std::mutex> lock(mu);
        clk::time_point first = clk::time_point::max(), last = clk::time_point::min();
        int n = 0;
        for (const auto& node : set) {
          for (int i = 0; i < pods_per_node; ++i) {
            auto it = gone.find(fmt::format("p-{}-{}", node, i));
            if (it == gone.end()) continue;
            ++n;
            first = std::min(first, it->second);
            last = std::max(last, it->second);
          }
        }
        return std::make_tuple(n, n ? std::chrono::duration<double>(last - first).count() : 0.0,
                               first);
      };
      // Where a set's time went: how far apart its nodes' first evictions were, and how long a
      // node took from its first eviction to its last (p50 and max).
      auto per_node_stats = [&](const std::vector<std::string>& set) {
        std::lock_guard<std::mutex> lock(mu);
        std::vector<double> spans;
        clk::time_point first_start = clk::time_point::max(), last_start = clk::time_point::min();
        for (const auto& node : set) {
          clk::time_point first = clk::time_point::max(), last = clk::time_point::min();
          for (int i = 0; i < pods_per_node; ++i) {
            auto it = gone.find(fmt::format("p-{}-{}", node, i));
            if (it == gone.end()) continue;
            first = std::min(first, it->second);
            last = std::max(last, it->second);
          }
          if (first == clk::time_point::max()) continue;
          first_start = std::min(first_start, first);
          last_start = std::max(last_start, first);
          spans.push_back(std::chrono::duration<double>(last - first).count());
        }
        if (spans.empty()) return std::string();
        std::sort(spans.begin(), spans.end());
        return fmt::format(
            "nodes' first evictions within {:.2f} s; a node's first to last: p50 {:.2f} s, max "
            "{:.2f} s",
            std::chrono::duration<double>(last_start - first_start).count(),
            spans[spans.size() / 2], spans.back());
      };
      auto wait_all = [&](const std::vector<std::string>& set) {
        const auto until = clk::now() + std::chrono::seconds(180);
        while (clk::now() < until && std::get<0>(span(set)) < total)
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
      };
      std::this_thread::sleep_for(std::chrono::seconds(1));
      // `threads` threads, each taking whole nodes and evicting a node's pods `per_node` at a time.
      auto direct = [&](const std::vector<std::string>& set, int threads, int per_node,
                        const char* what) {
        const auto counts0 = RequestCounts(c);
        const auto cpu0 = CpuNow();
        const auto t0 = clk::now();
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t) {
          ts.emplace_back([&, t] {
            for (size_t k = static_cast<size_t>(t); k < set.size();
                 k += static_cast<size_t>(threads)) {
              for (int from = 0; from < pods_per_node; from += per_node) {
                std::vector<std::thread> batch;
                for (int i = from; i < std::min(pods_per_node, from + per_node); ++i)
                  batch.emplace_back(
                      [&, k, i] { (void)c.Evict("ev", fmt::format("p-{}-{}", set[k], i)); });
                for (auto& b : batch) b.join();
              }
            }
          });
        }
        for (auto& t : ts) t.join();
        wait_all(set);
        const auto counts1 = RequestCounts(c);
        const auto cpu1 = CpuNow();
        const double took = std::chrono::duration<double>(clk::now() - t0).count();
        auto [bn, bs, bfirst] = span(set);
        const double rate = bs > 0 ? (bn - 1) / bs : 0.0;
        std::printf(
            "baseline%s: %d pods evicted by this program (%d threads, a node's pods %d at a time): "
            "%.2f s first to last, %.0f pods/s\n",
            what, bn, threads, per_node, bs, rate);
        std::printf("  %s\n", per_node_stats(set).c_str());
        std::printf("  API server: %s\n  %s\n", RequestDelta(counts0, counts1, took).c_str(),
                    CpuDelta(cpu0, cpu1, took).c_str());
        return rate;
      };
      // The controller's order (a node's pods are under one budget here, so one after another;
      // nodes side by side up to the pool's concurrency), the same at --workers nodes at once,
      // and at twice the concurrency: two of a budget's pods at a time (what evicting one
      // budget's pods side by side costs).
      const int width = std::min(concurrency, evict_nodes);
      const double same = direct(set_b, width, 1, "");
      const double at_workers = direct(set_c, workers, 1, " at the workers' count");
      const double side_by_side = direct(set_d, width, 2, " x2, one budget side by side");
      // The controller drains set A: quarantine, checkpoint requests, then the Eviction API.
      const auto f0 = clk::now();
      const auto counts0 = RequestCounts(c);
      const auto cpu0 = CpuNow();
      const double ctl_cpu0 = gpuheal::bench::CpuSeconds(ctl.pid());
      {
        std::vector<std::thread> ts;
        for (int t = 0; t < 4; ++t) {
          ts.emplace_back([&, t] {
            for (size_t k = static_cast<size_t>(t); k < set_a.size(); k += 4) {
              (void)c.Patch(NodePath(set_a[k]) + "/status", PatchType::kStrategicMerge,
                            Condition(false, "evict"));
            }
          });
        }
        for (auto& t : ts) t.join();
      }
      wait_all(set_a);
      auto [an, as, afirst] = span(set_a);
      std::printf(
          "controller: %d pods evicted: %.2f s first to last, %.0f pods/s; conditions False -> "
          "first eviction "
          "%.2f s (checkpoint window 1 s%s), -> last %.2f s\n",
          an, as, as > 0 ? (an - 1) / as : 0.0, std::chrono::duration<double>(afirst - f0).count(),
          use_sim ? "; the sim's workloads answer in 0.5 s" : "",
          std::chrono::duration<double>(afirst - f0).count() + as);
      std::printf("  %s\n", per_node_stats(set_a).c_str());
      {
        // The controller's own account (its NodeRepair records): when each node's checkpoint
        // requests went out and when its drain began, from the first node's to the last's.
        const auto sys0 =
            std::chrono::system_clock::now() -
            std::chrono::duration_cast<std::chrono::system_clock::duration>(clk::now() - f0);
        std::map<std::string, std::vector<double>> at;
        if (auto r = c.Get(std::string(kNodeRepairsPath)); r && r->ok()) {
          const std::set<std::string> in_a(set_a.begin(), set_a.end());
          const json list = json::parse(r->body);
          for (const auto& rec : list["items"]) {
            if (!in_a.count(rec["spec"].value("node", ""))) continue;
            for (const char* phase : {"Quarantined", "CheckpointRequested", "Draining"}) {
              const auto t = ParseTime(rec["status"]["phases"].value(phase, ""));
              if (t) at[phase].push_back(std::chrono::duration<double>(*t - sys0).count());
            }
          }
        }
        std::string line;
        for (const char* phase : {"Quarantined", "CheckpointRequested", "Draining"}) {
          auto& v = at[phase];
          if (v.empty()) continue;
          std::sort(v.begin(), v.end());
          line += fmt::format(" {} {:.2f}-{:.2f} s;", phase, v.front(), v.back());
        }
        if (line.empty()) line = " none read";
        std::printf("  records, after the conditions turned False:%s\n", line.c_str());
      }
      {
        const auto counts1 = RequestCounts(c);
        const auto cpu1 = CpuNow();
        const double took = std::chrono::duration<double>(clk::now() - f0).count();
        std::printf("  API server: %s\n  %s; the controller alone %.0f%%\n",
                    RequestDelta(counts0, counts1, took).c_str(),
                    CpuDelta(cpu0, cpu1, took).c_str(),
                    100.0 * (gpuheal::bench::CpuSeconds(ctl.pid()) - ctl_cpu0) / took);
      }
      const double ctl_rate = as > 0 ? (an - 1) / as : 0.0;
      const double best = std::max({same, at_workers, side_by_side});
      std::printf(
          "controller: %.0f pods/s = %.0f%% of the best direct rate of this run (%.0f pods/s)\n",
          ctl_rate, best > 0 ? 100.0 * ctl_rate / best : 0.0, best);
      if (an < total) rc = 1;
      pstop = true;
      pw.join();
    }
    std::printf("controller RSS %ld kB, CPU %.2f s (%d nodes cached)\n",
                gpuheal::bench::RssKb(ctl.pid()), gpuheal::bench::CpuSeconds(ctl.pid()), nodes);
    stop = true;
    ctl.Kill(SIGTERM);
    watcher.join();
    std::filesystem::remove_all(dir);
  }
  return rc;
}
