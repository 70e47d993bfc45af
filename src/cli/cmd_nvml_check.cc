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
    std::cout << FormatNvmlReport(s, poll);
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
