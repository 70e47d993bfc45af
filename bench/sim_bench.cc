// `gpuheal sim` at scale on a real loopback control plane (started and stopped by this program):
// --nodes simulated nodes in 15 pools, their node Leases renewed every 10 s as kubelets do. It
// reports the time to register them, the sim's CPU per second of wall time over --seconds (the
// goal: 5,000 nodes within one core), and how many node Leases are older than 15 s at the end.
// Baseline in the same run: this program making the same lease renewals itself (one merge PATCH
// each, 4 threads) for the same time, and its own CPU for them — the client-side floor.
//
//   bench_sim [--nodes 5000] [--seconds 60]

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "agent_process.h"
#include "bench_util.h"
#include "core/time.h"
#include "kube/client.h"
#include "kube/kube_config.h"
#include "local_control_plane.h"

using namespace gpuheal::kube;
using clk = std::chrono::steady_clock;
using nlohmann::json;

int main(int argc, char** argv) {
  int nodes = 5000, seconds = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--nodes")) nodes = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::stoi(argv[i + 1]);
  }
  std::string log;
  auto cp = gpuheal::testing::LocalControlPlane::Up(false, {}, &log);
  if (!cp) {
    std::fprintf(stderr, "control plane did not come up:\n%s", log.c_str());
    return 1;
  }
  auto cfg = LoadKubeconfig(cp->kubeconfig());
  cfg->qps = 0;
  auto client = Client::Create(*cfg);
  Client& c = **client;
  (void)c.Create(
      "/api/v1/namespaces",
      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "kube-node-lease"}}}});

  const auto t0 = clk::now();
  gpuheal::testing::AgentProcess sim({GPUHEAL_BIN, "sim", "--kubeconfig", cp->kubeconfig(),
                                      "--nodes", std::to_string(nodes), "--pools", "15",
                                      "--standby", "0", "--prefix", "scale", "--keep"});
  if (!sim.WaitEvent([](const json& j) { return j.value("sim", "") == "started"; },
                     std::chrono::seconds(600))) {
    std::fprintf(stderr, "sim did not start\n");
    return 1;
  }
  const double reg_s = std::chrono::duration<double>(clk::now() - t0).count();
  const double cpu0 = gpuheal::bench::CpuSeconds(sim.pid());
  const auto w0 = clk::now();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const double sim_cpu = gpuheal::bench::CpuSeconds(sim.pid()) - cpu0;
  const double wall = std::chrono::duration<double>(clk::now() - w0).count();
  // Freshness: every node Lease renewed within the last 15 s.
  int stale = 0, total = 0;
  {
    auto list = c.Get(LeasePath("kube-node-lease"));
    const json j = json::parse(list->body);
    const auto now = std::chrono::system_clock::now();
    for (const auto& l : j["items"]) {
      ++total;
      auto t = ParseTime(l["spec"].value("renewTime", ""));
      if (!t || now - *t > std::chrono::seconds(15)) ++stale;
    }
  }
  const long rss = gpuheal::bench::RssKb(sim.pid());
  sim.Kill(SIGTERM);

  // Baseline: the same renewals from this program.
  const int renewals = static_cast<int>(nodes * wall / 10.0);
  std::atomic<int> next{0};
  const double b_cpu0 = gpuheal::bench::CpuSeconds(getpid());
  const auto b0 = clk::now();
  {
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t) {
      ts.emplace_back([&] {
        for (int i; (i = next++) < renewals;) {
          const std::string name = fmt::format("scale-{}-{}", i % 15, (i % nodes) / 15);
          (void)c.Patch(LeasePath("kube-node-lease", name), PatchType::kMerge,
                        {{"spec", {{"renewTime", MicroTime(std::chrono::system_clock::now())}}}});
        }
      });
    }
    for (auto& t : ts) t.join();
  }
  const double b_cpu = gpuheal::bench::CpuSeconds(getpid()) - b_cpu0;
  const double b_wall = std::chrono::duration<double>(clk::now() - b0).count();
  std::printf("%d sim nodes registered in %.1f s (3 API writes each)\n", nodes, reg_s);
  std::printf(
      "sim: %.1f s of CPU over %.0f s = %.1f%% of one core; %d of %d node leases older than 15 s; "
      "RSS %ld kB\n",
      sim_cpu, wall, 100 * sim_cpu / wall, stale, total, rss);
  std::printf(
      "baseline: the same %d lease renewals from this program: %.1f s of CPU (%.1f s wall)\n",
      renewals, b_cpu, b_wall);
  return stale == 0 ? 0 : 1;
}
