// kmsg write -> NodeCondition visible to a watcher, on a real loopback control plane (started and
// stopped by this program), against a bare status PATCH round trip in the same run. Also the
// connected agent's footprint and its API requests while idle.
//
//   sudo bench_agent_kube [--iterations N] [--idle-seconds S]

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "agent_process.h"
#include "bench_util.h"
#include "drill/inject.h"
#include "kube/client.h"
#include "local_control_plane.h"

using namespace gpuheal;
using clk = std::chrono::steady_clock;

using gpuheal::bench::Report;

namespace {

double Metric(const std::string& metrics, const std::string& name) {
  const size_t at = metrics.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(metrics.substr(at + name.size() + 2));
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 300, idle_seconds = 30;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iterations")) iterations = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--idle-seconds")) idle_seconds = std::stoi(argv[i + 1]);
  }
  if (!gpuheal::testing::CanWriteKmsg()) {
    std::fprintf(stderr, "bench_agent_kube: needs root and a writable /dev/kmsg\n");
    return 2;
  }
  std::string log;
  auto cp = gpuheal::testing::LocalControlPlane::Up(false, {}, &log);  // stopped on every way out
  if (!cp) {
    std::fprintf(stderr, "control plane did not come up:\n%s", log.c_str());
    return 1;
  }
  const std::string& dir = cp->dir();
  const std::string& kubeconfig = cp->kubeconfig();
  int rc = 0;
  {
    auto cfg = kube::LoadKubeconfig(kubeconfig);
    cfg->qps = 0;
    auto created = kube::Client::Create(std::move(*cfg));
    if (!created) return 1;
    auto client = std::move(*created);
    const std::string node = "bench-agent";
    (void)client->Create(kube::NodePath(),
                         {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node}}}});
    const std::string state = dir + "/state";
    std::filesystem::create_directories(state);
    {
      gpuheal::testing::AgentProcess prime(
          {GPUHEAL_BIN, "agent", "--standalone", "--state-dir", state, "--listen", ""});
      prime.WaitLog([](const auto& j) { return j.value("msg", "") == "agent started"; },
                    std::chrono::seconds(10));
      prime.Kill(SIGTERM);
      std::filesystem::remove(state + "/active-faults.json");
    }
    std::ofstream(dir + "/agent.yaml") << "kubernetes: {heartbeat_period: 10s}\n";
    gpuheal::testing::AgentProcess agent(
        {GPUHEAL_BIN, "agent", "--node-name", node, "--kubeconfig", kubeconfig, "--state-dir",
         state, "--listen", "127.0.0.1:0", "--accept-injected", "--config", dir + "/agent.yaml"});
    auto started =
        agent.WaitLog([](const auto& j) { return j.value("msg", "") == "agent started"; },
                      std::chrono::seconds(10));
    const std::string listen = started ? started->value("listen", "") : "";
    // Read the agent's stdout as a container runtime would (a stalled reader costs it a second).
    std::atomic<bool> stop_drain{false};
    std::thread drain([&] {
      while (!stop_drain)
        agent.WaitEvent([](const nlohmann::json&) { return false; },
                        std::chrono::milliseconds(100));
    });

    // Watch the node: note when each "seen N time(s)" first appears.
    std::mutex mu;
    std::map<int, clk::time_point> seen_at, baseline_seen_at;
    std::atomic<bool> stop{false};
    auto rv = kube::DecodeNode(client->Get(kube::NodePath(node))->body)->meta.resource_version;
    std::thread watcher([&] {
      const std::regex seen_re("seen ([0-9]+) time");
      while (!stop) {
        (void)client->Watch(
            kube::NodePath() + "?fieldSelector=metadata.name%3D" + node, rv,
            [&](const kube::WatchEventRaw& ev) {
              const auto now = clk::now();
              if (!ev.resource_version.empty()) rv = ev.resource_version;
              auto n = kube::DecodeNode(ev.object);
              if (!n) return !stop;
              for (const auto& c : n->conditions) {
                std::smatch m;
                if (c.type == "BenchBaseline") {
                  std::lock_guard<std::mutex> lock(mu);
                  baseline_seen_at.try_emplace(std::stoi(c.message), now);
                }
                if (c.type == "AcceleratedHardwareReady" &&
                    std::regex_search(c.message, m, seen_re)) {
                  std::lock_guard<std::mutex> lock(mu);
                  seen_at.try_emplace(std::stoi(m[1]), now);
                }
              }
              return !stop;
            },
            std::chrono::seconds(60), &stop);
      }
    });
    std::this_thread::sleep_for(std::chrono::seconds(1));
    // Microseconds from `t0` until the watcher noted `i` in `seen`; nullopt after 5 s.
    auto WaitSeen = [&](const std::map<int, clk::time_point>& seen, int i,
                        clk::time_point t0) -> std::optional<double> {
      while (clk::now() < t0 + std::chrono::seconds(5)) {
        {
          std::lock_guard<std::mutex> lock(mu);
          auto it = seen.find(i);
          if (it != seen.end())
            return std::chrono::duration<double, std::micro>(it->second - t0).count();
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      return std::nullopt;
    };

    // Baseline, same run: a bare status PATCH round trip of another condition on the same node.
    std::vector<double> patch_us, patch_watch_us, agent_us;
    for (int i = 0; i < iterations; ++i) {
      const auto t0 = clk::now();
      auto r = client->Patch(kube::NodePath(node) + "/status", kube::PatchType::kStrategicMerge,
                             {{"status",
                               {{"conditions",
                                 {{{"type", "BenchBaseline"},
                                   {"status", "True"},
                                   {"reason", "R"},
                                   {"message", std::to_string(i)}}}}}}});
      patch_us.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
      if (!r || !r->ok()) rc = 1;
      if (auto us = WaitSeen(baseline_seen_at, i, t0)) patch_watch_us.push_back(*us);
      std::this_thread::sleep_for(
          std::chrono::milliseconds(100));  // the same pace as the agent's faults
    }

    // The agent: Xid 48 (fatal) on one GPU, again and again; each occurrence raises the count the
    // condition message shows, so each is one node write and one watch event.
    const std::string pci =
        fmt::format("{:04x}:{:02x}:00", 0x1000 + std::random_device{}() % 0xe000, 7);
    for (int i = 1; i <= iterations; ++i) {
      const auto msgs = InjectMessages(InjectSpec{48, pci, "4242", "bench"});
      const auto t0 = clk::now();
      if (!WriteKmsg("/dev/kmsg", msgs).ok()) rc = 1;
      if (auto us = WaitSeen(seen_at, i, t0)) {
        agent_us.push_back(*us);
      } else {
        std::fprintf(stderr, "occurrence %d not seen by the watcher\n", i);
      }
      // Faults ~10/s: below the client's 50 writes/s limit, which a burst meets (and coalesces).
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    Report("baseline: bare status PATCH round trip", patch_us);
    Report("baseline: bare status PATCH -> seen by the watcher", patch_watch_us);
    Report("agent: kmsg write -> condition seen by a watcher", agent_us);

    // Idle, connected: footprint and API traffic (heartbeat 10 s for this measurement).
    const std::string m0 = gpuheal::testing::HttpGet(listen, "/metrics");
    const double cpu0 = gpuheal::bench::CpuSeconds(agent.pid());
    std::this_thread::sleep_for(std::chrono::seconds(idle_seconds));
    const std::string m1 = gpuheal::testing::HttpGet(listen, "/metrics");
    const double cpu1 = gpuheal::bench::CpuSeconds(agent.pid());
    const double writes =
        Metric(m1, "gpuheal_api_writes_total") - Metric(m0, "gpuheal_api_writes_total");
    std::printf("agent RSS after %d faults, connected: %ld kB\n", iterations,
                gpuheal::bench::RssKb(agent.pid()));
    gpuheal::bench::ReportFootprint("agent, Kubernetes mode, no NVML, connected", agent.pid(),
                                    std::filesystem::canonical(GPUHEAL_BIN).string());
    std::printf(
        "idle %d s: CPU %.3f s (%.3f%% of a core); API writes %.0f (heartbeat 10 s) -> %.0f/hour "
        "at the "
        "default 5 min heartbeat\n",
        idle_seconds, cpu1 - cpu0, 100 * (cpu1 - cpu0) / idle_seconds, writes,
        writes / idle_seconds * 10 / 300 * 3600);
    stop = true;
    watcher.join();
    stop_drain = true;
    drain.join();
    agent.Kill(SIGTERM);
  }
  return rc;
}
