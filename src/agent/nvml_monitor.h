#pragma once
// The agent's NVML side: driver events from the event thread, jittered health polls (ticked by
// the monitor queue, run on a poll thread so a slow or hung NVML call never stalls the kernel-log
// path), the GPU-count check against the PCI bus, and the GPU-level recovery sequence
// (drain, wait for compute processes, reset, verify, undrain) on an action thread. Everything it
// concludes is posted to the event loop, which owns the agent's state.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "agent/config.h"
#include "agent/event_loop.h"
#include "agent/gpu_health.h"
#include "agent/monitor_queue.h"
#include "serve/metrics.h"
#include "sources/nvml_source.h"

namespace gpuheal {

struct GpuActionStep {
  std::string pci, bus_id;
  std::string step;  // drain, wait, reset, verify, undrain, done
  bool ok = true;
  bool final = false;  // the sequence ended (ok: the GPU was reset and verified healthy)
  std::string message;
  int64_t elapsed_ms = 0;
};

class NvmlMonitor {
 public:
  struct Sink {
    std::function<void(Fault, int64_t detected_usec)> fault;
    std::function<void(std::string_view level, std::string msg, nlohmann::ordered_json fields)> log;
    std::function<void(const GpuActionStep&)> step;
    // A GPU's drain state as NVML reports it ("drained", or "" when not drained).
    std::function<void(const std::string& pci, const std::string& state)> gpu_state;
  };

  // nullptr when NVML is off in the config or cannot be loaded (said once through sink.log).
  static std::unique_ptr<NvmlMonitor> Start(const NvidiaConfig& config, EventLoop& loop,
                                            MonitorQueue& monitors, const Classifier& classifier,
                                            Metrics& metrics, Sink sink);
  ~NvmlMonitor();

  // Loop thread. Starts the recovery sequence for a GPU; false (and a log line) when the GPU is
  // unknown or a sequence for it is already running.
  bool RequestReset(const std::string& pci, const std::string& why);
  bool Knows(const std::string& pci) const { return source_->Find(pci) != nullptr; }
  size_t gpu_count() const { return source_->gpus().size(); }
  // The bus id and UUID of NVML's GPU `index` (("", "") when there is none).
  std::pair<std::string, std::string> GpuAt(unsigned index) const {
    if (index >= source_->gpus().size()) return {};
    return {source_->gpus()[index].pci, source_->gpus()[index].uuid};
  }

 private:
  NvmlMonitor(const NvidiaConfig& config, EventLoop& loop, const Classifier& classifier,
              Metrics& metrics, Sink sink, std::unique_ptr<NvmlSource> source);
  void OnEvent(const NvmlEvent& e);              // loop thread
  void OnPoll(NvmlPoll poll, size_t pci_count);  // loop thread
  void PollThread();
  void ActionThread();
  void RunRecovery(const std::string& pci);    // action thread
  bool SleepFor(std::chrono::milliseconds d);  // false when stopping

  NvidiaConfig config_;
  EventLoop& loop_;
  const Classifier& classifier_;
  Metrics& metrics_;
  Sink sink_;
  std::unique_ptr<NvmlSource> source_;
  GpuHealthLimits limits_;

  // Loop thread only.
  std::map<std::string, GpuSnapshot> last_;
  std::map<std::string, std::deque<std::chrono::steady_clock::time_point>> sbe_;
  std::set<std::string> recovering_;
  std::map<std::string, std::string> drain_state_;
  bool count_fault_reported_ = false;
  std::set<std::string> notices_said_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool poll_requested_ = false;
  std::deque<std::string> reset_queue_;
  std::thread poll_thread_, action_thread_;

  Histogram* poll_cpu_ = nullptr;
  Histogram* event_latency_ = nullptr;
};

}  // namespace gpuheal
