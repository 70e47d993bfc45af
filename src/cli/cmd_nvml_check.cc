// gpuheal nvml-check: runs the agent's NVML backend once against this machine's GPUs and prints
// what it sees: devices, ECC, remapped rows, supported events, drain state (queried, never
// changed) and the events that arrive during a short wait. For bring-up on a new node type and
// for scripts/gpu-check.sh; the agent itself does not need it.

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include "agent/config.h"
#include "cli/commands.h"
#include "sources/nvml_source.h"

namespace gpuheal::cli {
namespace {

std::string EventNames(unsigned long long mask) {
  std::string out;
  const std::pair<unsigned long long, const char*> names[] = {{0x1, "SingleBitEccError"},
                                                              {0x2, "DoubleBitEccError"},
                                                              {0x4, "PState"},
                                                              {0x8, "XidCriticalError"},
                                                              {0x10, "Clock"},
                                                              {0x80, "PowerSourceChange"},
                                                              {0x100, "MigConfigChange"},
                                                              {0x200, "SingleBitEccErrorStorm"},
                                                              {0x400, "DramRetirementEvent"},
                                                              {0x800, "DramRetirementFailure"},
                                                              {0x1000, "NonFatalPoison"},
                                                              {0x2000, "FatalPoison"},
                                                              {0x4000, "GpuUnavailableError"},
                                                              {0x8000, "GpuRecoveryAction"}};
  for (auto [bit, name] : names) {
    if (mask & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  }
  return out.empty() ? "none" : out;
}

template <typename T>
std::string Opt(const std::optional<T>& v) {
  return v ? fmt::format("{}", *v) : std::string("n/a");
}

}  // namespace

void RegisterNvmlCheck(CLI::App& app, int& exit_code) {
  auto library = std::make_shared<std::string>();
  auto wait = std::make_shared<std::string>("20s");
  CLI::App* cmd = app.add_subcommand(
      "nvml-check",
      "Run the NVML backend once against this machine's GPUs (read-only) and print what it sees");
  cmd->add_option("--nvml-library", *library,
                  "NVML library (default $GPUHEAL_NVML_LIBRARY, else libnvidia-ml.so.1)");
  cmd->add_option("--wait", *wait, "How long to wait for driver events (default 20s; 0s skips)");
  cmd->callback([library, wait, &exit_code] {
    const auto wait_for = ParseDuration(*wait);
    if (!wait_for) {
      std::cerr << "gpuheal nvml-check: --wait " << *wait << ": not a duration (e.g. 20s)\n";
      exit_code = kExitUsage;
      return;
    }
    std::string lib = *library;
    if (lib.empty() && std::getenv("GPUHEAL_NVML_LIBRARY"))
      lib = std::getenv("GPUHEAL_NVML_LIBRARY");
    if (lib.empty()) lib = "libnvidia-ml.so.1";
    auto src = NvmlSource::Open(lib);
    if (!src) {
      std::cerr << "gpuheal nvml-check: " << src.error().message << "\n";
      exit_code = kExitFailure;
      return;
    }
    NvmlSource& s = **src;
    std::cout << fmt::format(
        "NVML library: {}\ndriver version: {}\nGPUs: {} (PCI bus: {} NVIDIA GPUs in sysfs)\n", lib,
        s.library().driver_version(), s.gpus().size(), CountPciGpus());
    NvmlPoll poll = s.Poll();
    for (size_t i = 0; i < s.gpus().size(); ++i) {
      const NvmlGpu& g = s.gpus()[i];
      const GpuSnapshot& p = poll.gpus[i];
      std::cout << fmt::format("\nGPU {}: {} {} {}\n", g.index, g.bus_id, g.uuid, g.name);
      std::cout << fmt::format("  supported events: {}\n", EventNames(g.supported_events));
      std::cout << fmt::format("  lost: {}\n", p.lost);
      std::cout << fmt::format("  ECC volatile: uncorrected {}, corrected {}\n",
                               Opt(p.ecc_volatile_uncorrected), Opt(p.ecc_volatile_corrected));
      std::cout << fmt::format("  remapped rows: uncorrectable {}, pending {}, failure {}\n",
                               Opt(p.remap_uncorrectable), Opt(p.remap_pending),
                               Opt(p.remap_failure));
      std::cout << fmt::format("  retired pages pending: {}\n", Opt(p.retired_pages_pending));
      std::cout << fmt::format("  NVLinks up: {}, down: {}, error counters: {}\n",
                               p.nvlinks_up.size(), p.nvlinks_down.size(), Opt(p.nvlink_errors));
      std::cout << fmt::format(
          "  clock event reasons: {}\n",
          p.clock_event_reasons ? fmt::format("{:#x}", *p.clock_event_reasons) : "n/a");
      std::cout << fmt::format("  PCIe: gen {}/{} width x{}/x{}\n", Opt(p.pcie_gen),
                               Opt(p.pcie_gen_max), Opt(p.pcie_width), Opt(p.pcie_width_max));
      std::cout << fmt::format("  temperature: {} C (slowdown {} C)\n", Opt(p.temperature),
                               Opt(p.temperature_slowdown));
      std::cout << fmt::format("  recovery action: {}\n", Opt(p.recovery_action));
      std::cout << fmt::format("  persistence mode: {}\n", Opt(p.persistence_mode));
      std::cout << fmt::format("  drain state: {}\n",
                               p.drained ? (*p.drained ? "drained" : "not drained") : "n/a");
    }
    for (const std::string& n : poll.notices) std::cout << "note: " << n << "\n";
    std::cout << fmt::format("poll CPU: {} us for {} GPUs\n", poll.cpu_usec, poll.gpus.size());
    if (wait_for->count() > 0) {
      std::mutex mu;
      size_t events = 0;
      for (const std::string& n : s.StartEvents([&](NvmlEvent e) {
             std::lock_guard<std::mutex> lock(mu);
             ++events;
             std::cout << fmt::format("event: GPU {} type {:#x} data {}\n", e.pci, e.type, e.data)
                       << std::flush;
           })) {
        std::cout << "note: " << n << "\n";
      }
      std::cout << fmt::format("waiting {} for driver events...\n", *wait) << std::flush;
      std::this_thread::sleep_for(*wait_for);
      s.StopEvents();
      std::cout << fmt::format("events received: {}\n", events);
    }
    exit_code = kExitOk;
  });
}

}  // namespace gpuheal::cli
