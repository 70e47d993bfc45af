// The repair controller on a real loopback control plane (started and stopped by this program)
// with 1,500 GPU nodes in 15 pools:
//   latency: one node's AcceleratedHardwareReady set False -> gpuheal's quarantine taint seen by a
//     watcher, one fault at a time; baseline in the same run: the same PATCH -> the watcher seeing
//     the condition itself (the floor: the controller reacts to that very event);
//   burst: 300 nodes (20 in each pool) set False at once -> every one of them tainted;
//   the controller's RSS and CPU afterwards.
//
//   bench_controller [--nodes 1500] [--faults 100] [--burst 300]

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "agent_process.h"
#include "apply_manifest.h"
#include "bench_util.h"
#include "kube/time.h"
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

int main(int argc, char** argv) {
  int nodes = 1500, faults = 100, burst = 300;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--nodes")) nodes = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--faults")) faults = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--burst")) burst = std::stoi(argv[i + 1]);
  }
  std::string log;
  auto cp = gpuheal::testing::LocalControlPlane::Up(false, {}, &log);
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
    gpuheal::testing::ApplyManifest(c, std::string(GPUHEAL_SOURCE_DIR) + "/deploy/crds/noderepairs.yaml");
    const auto t_create = clk::now();
    {
      std::vector<std::thread> ts;
      for (int t = 0; t < 8; ++t) {
        ts.emplace_back([&, t] {
          for (int i = t; i < nodes; i += 8) {
            const std::string name = fmt::format("bn-{:04d}", i);
            (void)c.Create(NodePath(), {{"apiVersion", "v1"}, {"kind", "Node"},
                                        {"metadata", {{"name", name}, {"labels", {{"gpuheal.io/pool", fmt::format("pool-{:02d}", i % 15)}}}}}});
            json st = Condition(true, "init");
            st["status"]["capacity"] = {{"nvidia.com/gpu", "8"}};
            st["status"]["allocatable"] = {{"nvidia.com/gpu", "8"}};
            (void)c.Patch(NodePath(name) + "/status", PatchType::kStrategicMerge, st);
          }
        });
      }
      for (auto& t : ts) t.join();
    }
    std::printf("%d nodes in 15 pools created in %.1f s\n", nodes,
                std::chrono::duration<double>(clk::now() - t_create).count());

    // The watcher: when each node first shows the False condition, and our taint.
    std::mutex mu;
    std::map<std::string, clk::time_point> cond_seen, taint_seen;
    std::atomic<bool> stop{false};
    std::string rv = json::parse(c.Get(NodePath() + "?limit=1")->body)["metadata"]["resourceVersion"];
    std::thread watcher([&] {
      while (!stop) {
        (void)(*watch_client)->Watch(NodePath(), rv, [&](const WatchEventRaw& ev) {
          if (!ev.resource_version.empty()) rv = ev.resource_version;
          auto n = DecodeNode(ev.object);
          if (!n) return !stop.load();
          const auto now = clk::now();
          std::lock_guard<std::mutex> lock(mu);
          for (const auto& cond : n->conditions) {
            if (cond.type == "AcceleratedHardwareReady" && cond.status == "False") cond_seen.try_emplace(n->meta.name, now);
          }
          for (const auto& t : n->taints) {
            if (t.key == "gpuheal.io/gpu-fault") taint_seen.try_emplace(n->meta.name, now);
          }
          return !stop.load();
        }, std::chrono::seconds(60), &stop);
      }
    });

    char tmpl[] = "/tmp/gpuheal-bench-ctl-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    std::ofstream(dir + "/policy.yaml") << "toleration: {default: 1h, AcceleratedHardwareReady: 1h}\n";
    gpuheal::testing::AgentProcess ctl({GPUHEAL_BIN, "controller", "--kubeconfig", cp->kubeconfig(), "--policy",
                                        dir + "/policy.yaml", "--listen", "", "--lease-namespace", "default"});
    if (!ctl.WaitLog([](const json& j) { return j.value("msg", "") == "started leading"; }, std::chrono::seconds(60))) {
      std::fprintf(stderr, "controller did not start leading\n");
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));  // its first pass over all nodes

    std::vector<double> base_us, ctl_us;
    for (int i = 0; i < faults; ++i) {
      const std::string name = fmt::format("bn-{:04d}", nodes - 1 - i);
      const auto t0 = clk::now();
      (void)c.Patch(NodePath(name) + "/status", PatchType::kStrategicMerge, Condition(false, "fault"));
      const auto deadline = clk::now() + std::chrono::seconds(10);
      while (clk::now() < deadline) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (taint_seen.count(name) && cond_seen.count(name)) {
            base_us.push_back(std::chrono::duration<double, std::micro>(cond_seen[name] - t0).count());
            ctl_us.push_back(std::chrono::duration<double, std::micro>(taint_seen[name] - t0).count());
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
      targets.push_back(fmt::format("bn-{:04d}", i));
    }
    const auto b0 = clk::now();
    {
      std::vector<std::thread> ts;
      for (int t = 0; t < 8; ++t) {
        ts.emplace_back([&, t] {
          for (size_t i = static_cast<size_t>(t); i < targets.size(); i += 8) {
            (void)c.Patch(NodePath(targets[i]) + "/status", PatchType::kStrategicMerge, Condition(false, "burst"));
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
    std::printf("burst: %zu nodes set False in %.2f s; all quarantined %.2f s after the first PATCH\n", targets.size(),
                sent_s, all_s);
    if (all_s < 0) rc = 1;
    std::printf("controller RSS %ld kB, CPU %.2f s (%d nodes cached)\n", gpuheal::bench::RssKb(ctl.pid()),
                gpuheal::bench::CpuSeconds(ctl.pid()), nodes);
    stop = true;
    ctl.Kill(SIGTERM);
    watcher.join();
    std::filesystem::remove_all(dir);
  }
  return rc;
}
