#pragma once
// The agent's DCGM side (nvidia.dcgm.enabled): policy violations pushed by DCGM's callback
// thread, and the health check on a jittered period, run on a thread of its own. A host engine
// that cannot be reached is a warning, a metric (gpuheal_dcgm_up 0) and a reconnect attempt on the
// next period, never a GPU fault: healthy nodes must not be replaced because a daemon restarted.

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "agent/config.h"
#include "agent/event_loop.h"
#include "agent/gpu_health.h"
#include "agent/monitor_queue.h"
#include "serve/metrics.h"
#include "sources/dcgm_source.h"

namespace gpuheal {

class DcgmMonitor {
 public:
  struct Sink {
    std::function<void(Fault, int64_t detected_usec)> fault;
    std::function<void(std::string_view level, std::string msg, nlohmann::ordered_json fields)> log;
    // DCGM GPU id -> (bus id, UUID) as NVML names it; ("", "") when unknown.
    std::function<std::pair<std::string, std::string>(unsigned gpu_id)> gpu;
  };
  // nullptr when DCGM is not enabled. Otherwise it runs even when the host engine is not there
  // yet: it says so and retries each health period.
  static std::unique_ptr<DcgmMonitor> Start(const NvidiaConfig& config, EventLoop& loop,
                                            MonitorQueue& monitors, const Classifier& classifier,
                                            Metrics& metrics, Sink sink);
  ~DcgmMonitor();

 private:
  DcgmMonitor(const NvidiaConfig& config, EventLoop& loop, const Classifier& classifier,
              Metrics& metrics, Sink sink);
  void Thread();
  void OnViolation(const DcgmViolation& v);            // loop thread
  void OnHealth(std::vector<DcgmIncident> incidents);  // loop thread
  void OnLost(const std::string& error);               // loop thread

  NvidiaConfig config_;
  EventLoop& loop_;
  const Classifier& classifier_;
  Metrics& metrics_;
  Sink sink_;
  Gauge* up_ = nullptr;

  // Loop thread.
  bool said_lost_ = false;
  std::set<std::string> incidents_;  // "gpu/system/health" seen in the last check

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool check_requested_ = false;
  std::unique_ptr<DcgmSource> source_;  // owned by the health thread
  std::thread thread_;
};

}  // namespace gpuheal
