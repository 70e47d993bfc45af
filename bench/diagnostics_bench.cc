// Diagnostic bundle build time (docs/performance.md, issue goal ≤ 7 s on a node under load): the
// agent's own path for a NodeDiagnostic — every collector at once, the Redactor, the tar.gz and
// its sha256 — with the NVML test double's 8 GPUs and a full kernel ring buffer, idle (the
// baseline of the same run) and with every core kept busy. Needs root (it fills /dev/kmsg).
//
//   sudo build/bench/bench_diagnostics [--runs N] [--json]

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "agent/diag_bundle.h"
#include "agent/diag_collectors.h"
#include "drill/inject.h"
#include "nvml_scenario.h"

namespace {

using namespace gpuheal;
using Clock = std::chrono::steady_clock;

// The first record's sequence number and the bytes of the whole ring buffer, read as the kernel
// collector reads it.
std::pair<unsigned long long, size_t> Ring() {
  const int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
  if (fd < 0) return {0, 0};
  char buf[8192 + 64];
  unsigned long long first = 0;
  size_t bytes = 0, n = 0;
  ssize_t r;
  while ((r = read(fd, buf, sizeof buf)) != 0) {
    if (r < 0) {
      if (errno == EPIPE || errno == EINTR) continue;
      break;
    }
    if (n++ == 0) {
      unsigned prio = 0;
      std::sscanf(buf, "%u,%llu", &prio, &first);
    }
    bytes += static_cast<size_t>(r);
  }
  close(fd);
  return {first, bytes};
}

// Writes records until the oldest one has been overwritten: the buffer is full. Returns whether
// it is.
bool FillRing() {
  const auto [first, before] = Ring();
  std::vector<std::string> batch;
  for (int i = 0; i < 500; ++i)
    batch.push_back(
        fmt::format("gpuheal bench_diagnostics filler {:05} {}", i, std::string(160, 'x')));
  for (int rounds = 0; rounds < 400; ++rounds) {
    if (!WriteKmsg("/dev/kmsg", batch, 7).ok()) return false;
    if (Ring().first != first) return true;
  }
  return false;
}

struct Run {
  double total_ms = 0, collect_ms = 0, write_ms = 0;
  int64_t bundle_bytes = 0, raw_bytes = 0;
  std::map<std::string, double> per_collector;
};

Run Once(const CollectContext& ctx, const std::string& dir, int i) {
  Run run;
  const auto t0 = Clock::now();
  auto names = SelectCollectors({}, {});
  auto results = RunCollectors(ctx, *names);
  Redactor().Apply(results);
  const auto t1 = Clock::now();
  for (const auto& c : results) {
    run.per_collector[c.name] = static_cast<double>(c.duration.count());
    run.raw_bytes += c.bytes();
  }
  auto info = WriteBundle(fmt::format("{}/b{}.tar.gz", dir, i), {"bench", "bench", "", ""},
                          std::move(results), 50LL << 20);
  const auto t2 = Clock::now();
  if (!info) {
    std::cerr << "bench_diagnostics: " << info.error().message << "\n";
    std::exit(1);
  }
  run.bundle_bytes = info->size;
  run.collect_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  run.write_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  run.total_ms = std::chrono::duration<double, std::milli>(t2 - t0).count();
  return run;
}

nlohmann::json Summary(const std::vector<Run>& runs) {
  std::vector<double> total;
  for (const auto& r : runs) total.push_back(r.total_ms);
  std::sort(total.begin(), total.end());
  nlohmann::json per = nlohmann::json::object();
  for (const auto& [name, ms] : runs.back().per_collector) {
    double worst = 0;
    for (const auto& r : runs) worst = std::max(worst, r.per_collector.at(name));
    per[name] = worst;
  }
  return {{"runs", runs.size()},
          {"total_ms_p50", total[total.size() / 2]},
          {"total_ms_max", total.back()},
          {"collect_ms_last", runs.back().collect_ms},
          {"write_and_hash_ms_last", runs.back().write_ms},
          {"raw_bytes", runs.back().raw_bytes},
          {"bundle_bytes", runs.back().bundle_bytes},
          {"collector_ms_max", per}};
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--json"))
      json = true;
  }
  if (geteuid() != 0) {
    std::cerr << "bench_diagnostics: needs root (it fills /dev/kmsg)\n";
    return 2;
  }
  gpuheal::testing::Scenario sc;  // GPUHEAL_NVML_SCENARIO for the double
  nlohmann::json devices = nlohmann::json::array();
  for (int i = 0; i < 8; ++i)
    devices.push_back(gpuheal::testing::HealthyDevice(gpuheal::testing::UniqueGpu()));
  sc.Write({{"devices", devices}});
  const bool full = FillRing();
  const size_t ring = Ring().second;
  char tmpl[] = "/tmp/gpuheal-bench-diag-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  AgentConfig cfg;
  cfg.nvidia.nvml = NvidiaConfig::Use::kOn;
  cfg.nvidia.nvml_library = NVML_DOUBLE;
  CollectContext ctx = ContextFor(cfg);
  ctx.agent_state = {{"bench", true}};
  std::vector<Run> idle, loaded;
  for (int i = 0; i < runs; ++i) idle.push_back(Once(ctx, dir, i));
  // Every core busy, as on a node whose training job has them all.
  std::atomic<bool> stop{false};
  std::vector<std::thread> burners;
  for (unsigned i = 0; i < std::max(1u, std::thread::hardware_concurrency()); ++i) {
    burners.emplace_back([&] {
      volatile unsigned long x = 0;
      while (!stop.load(std::memory_order_relaxed)) x = x + 1;
    });
  }
  for (int i = 0; i < runs; ++i) loaded.push_back(Once(ctx, dir, runs + i));
  stop = true;
  for (auto& t : burners) t.join();
  std::filesystem::remove_all(dir);
  const nlohmann::json out = {{"gpus", 8},
                              {"ring_buffer_bytes", ring},
                              {"ring_buffer_full", full},
                              {"cores_busy", burners.size()},
                              {"idle", Summary(idle)},
                              {"loaded", Summary(loaded)},
                              {"goal_ms", 7000}};
  if (json) {
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << fmt::format(
        "diagnostic bundle, 8 NVML double GPUs, ring buffer {} ({} bytes), {} runs each\n",
        full ? "full" : "NOT full", ring, runs);
    for (const char* k : {"idle", "loaded"}) {
      const auto& s = out[k];
      std::cout << fmt::format(
          "  {:<7} total p50 {:.0f} ms, max {:.0f} ms (collect {:.0f} ms, write+sha256 {:.0f} ms); "
          "{} raw bytes -> {} bytes\n",
          k, s["total_ms_p50"].get<double>(), s["total_ms_max"].get<double>(),
          s["collect_ms_last"].get<double>(), s["write_and_hash_ms_last"].get<double>(),
          s["raw_bytes"].get<int64_t>(), s["bundle_bytes"].get<int64_t>());
      std::cout << "          slowest collector run: " << s["collector_ms_max"].dump() << "\n";
    }
    std::cout << fmt::format("  goal: <= 7000 ms loaded; ratio loaded/idle p50 {:.2f}\n",
                             out["loaded"]["total_ms_p50"].get<double>() /
                                 std::max(1.0, out["idle"]["total_ms_p50"].get<double>()));
  }
  return 0;
}
