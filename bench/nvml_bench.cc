// NVML backend costs, against the NVML test double (the real ABI, a JSON scenario):
//   event latency: the scenario file gains an event (rename) -> the fault on the agent's stdout,
//     for `gpuheal agent --standalone --nvml-library <double>`; baseline in the same run: the same
//     event -> NvmlSource's callback in-process (the double's own inotify wake-up and the wait
//     thread, without the agent), so the difference is what the agent adds.
//   poll cost: CPU time of one health poll (every check of docs/nvml.md) per GPU, 8 GPUs.
//
//   bench_nvml [--events 300] [--polls 2000]

#include <fmt/format.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "agent_process.h"
#include "bench_util.h"
#include "nvml_scenario.h"
#include "sources/nvml_source.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using nlohmann::json;

json Devices(const std::vector<gpuheal::testing::TestGpu>& gpus) {
  json d = json::array();
  for (const auto& g : gpus) d.push_back(gpuheal::testing::HealthyDevice(g));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  int events = 300, polls = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--events")) events = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--polls")) polls = std::atoi(argv[i + 1]);
  }
  gpuheal::testing::Scenario sc;
  std::vector<gpuheal::testing::TestGpu> gpus;
  for (int i = 0; i < 8; ++i) gpus.push_back(gpuheal::testing::UniqueGpu());
  sc.Write({{"devices", Devices(gpus)}});
  std::printf("NVML test double, 8 GPUs, %d events, %d polls\n", events, polls);

  // Baseline: the double's delivery to NvmlSource's callback, in-process.
  {
    auto src = gpuheal::NvmlSource::Open(NVML_DOUBLE);
    if (!src) {
      std::fprintf(stderr, "%s\n", src.error().message.c_str());
      return 1;
    }
    std::mutex mu;
    std::condition_variable cv;
    int got = 0;
    Clock::time_point at;
    (*src)->StartEvents(
        [&](gpuheal::NvmlEvent) {
          std::lock_guard<std::mutex> lock(mu);
          at = Clock::now();
          ++got;
          cv.notify_all();
        },
        500ms);
    std::vector<double> us;
    for (int i = 0; i < events; ++i) {
      const auto t0 = Clock::now();
      sc.Write({{"devices", Devices(gpus)},
                {"events",
                 {{{"id", fmt::format("base-{}", i)},
                   {"device", i % 8},
                   {"type", "XidCriticalError"},
                   {"data", 13}}}}});
      std::unique_lock<std::mutex> lock(mu);
      if (!cv.wait_for(lock, 5s, [&] { return got > i; })) break;
      us.push_back(std::chrono::duration<double, std::micro>(at - t0).count());
    }
    gpuheal::bench::Report("baseline: scenario event -> NvmlSource callback", us);
  }

  // The agent: the same event -> its JSON fault line.
  {
    char tmpl[] = "/tmp/gpuheal-bench-nvml-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    std::ofstream(dir + "/config.yaml")
        << "nvidia:\n  poll_period: 1h\n  sysfs_pci_devices: " << dir << "\n";
    gpuheal::testing::AgentProcess agent({GPUHEAL_BIN, "agent", "--standalone", "--state-dir", dir,
                                          "--listen", "", "--config", dir + "/config.yaml",
                                          "--nvml-library", NVML_DOUBLE});
    if (!agent.WaitLog([](const json& j) { return j.value("msg", "") == "agent started"; }, 10s)) {
      std::fprintf(stderr, "agent did not start\n");
      return 1;
    }
    std::vector<double> us;
    for (int i = 0; i < events; ++i) {
      const auto t0 = Clock::now();
      sc.Write({{"devices", Devices(gpus)},
                {"events",
                 {{{"id", fmt::format("agent-{}", i)},
                   {"device", i % 8},
                   {"type", "XidCriticalError"},
                   {"data", 13}}}}});
      const std::string pci = gpus[static_cast<size_t>(i % 8)].pci;
      auto e = agent.WaitEvent(
          [&](const json& j) {
            return j.value("pci", json()) == pci && j.value("xid", json()) == 13;
          },
          5s);
      if (!e) break;
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    gpuheal::bench::Report("agent: scenario event -> fault line on stdout", us);
    std::filesystem::remove_all(dir);
  }

  // Poll cost per GPU.
  {
    auto src = gpuheal::NvmlSource::Open(NVML_DOUBLE);
    if (!src) return 1;
    std::vector<double> per_gpu_us;
    for (int i = 0; i < polls; ++i) {
      auto p = (*src)->Poll();
      per_gpu_us.push_back(static_cast<double>(p.cpu_usec) / static_cast<double>(p.gpus.size()));
    }
    std::sort(per_gpu_us.begin(), per_gpu_us.end());
    double sum = 0;
    for (double v : per_gpu_us) sum += v;
    std::printf(
        "%-52s mean %.1f us  p50 %.1f us  p99 %.1f us (CPU per GPU per poll, incl. the double)\n",
        "poll: every health check", sum / static_cast<double>(per_gpu_us.size()),
        per_gpu_us[per_gpu_us.size() / 2], per_gpu_us[per_gpu_us.size() * 99 / 100]);
  }
  return 0;
}
