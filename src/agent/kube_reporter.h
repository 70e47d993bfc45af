#pragma once
// The agent's Kubernetes reporter: writes the node's five domain conditions to nodes/status and
// warn/critical faults as Events, on a thread of its own so that the kernel-log loop never waits
// for the API server. The loop hands it the latest desired conditions; the reporter writes them
// at once (no batching), refreshes lastHeartbeatTime every heartbeat period, and while the API
// server is unreachable keeps only the latest desired state and retries with backoff, so what
// arrives when the server returns is the current truth, once.
//
// Writes are strategic-merge patches of nodes/status keyed by condition type: only the agent's
// own condition types are in them, so kubelet's and other writers' conditions are never touched.
// lastTransitionTime is sent only when a condition's status changes, so it stays at the first
// transition while a domain is unhealthy.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "agent/active_faults.h"
#include "core/clock.h"
#include "core/token_bucket.h"
#include "kube/api.h"
#include "kube/events.h"
#include "serve/metrics.h"

namespace gpuheal {

struct KubeReporterOptions {
  std::string node_name;
  std::chrono::milliseconds heartbeat{std::chrono::minutes(5)};
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{std::chrono::seconds(30)};
  // Events: at most `event_burst` per reason at once, then one per `event_refill`.
  int event_burst = 10;
  std::chrono::milliseconds event_refill{std::chrono::minutes(1)};
  std::chrono::milliseconds event_patch_interval{std::chrono::seconds(10)};
  // A write still unanswered after this long counts as failed for api_ok() (an API server whose
  // etcd is gone accepts the request and answers only at the client's 30 s timeout).
  std::chrono::milliseconds write_deadline{std::chrono::seconds(5)};
};

class KubeReporter {
 public:
  KubeReporter(std::unique_ptr<kube::Api> client, const Clock& clock, KubeReporterOptions opts,
               Metrics& metrics);
  ~KubeReporter();
  void Start();
  void Stop();  // writes what is pending (bounded by one attempt), then returns

  // One pass of the reporter's loop: reads the Node once, writes the pending conditions (or the
  // heartbeat that is due) and Events, or schedules a retry with backoff. Returns when it wants
  // to run again even if nothing changes. The reporter's thread runs it whenever something is
  // pending; a test runs it directly instead of Start(), stepping its clock.
  std::chrono::steady_clock::time_point Step(bool stopping = false);

  // Called by the agent's loop; never block on the API. `detected_mono_usec` (CLOCK_MONOTONIC)
  // is when the fault that changed them was detected, for the detection->write histogram.
  void SetConditions(std::vector<DesiredCondition> desired, int64_t detected_mono_usec = 0);
  void RecordEvent(std::string type, std::string reason, std::string message);
  // An annotation on the Node, written with the conditions through nodes/status (the agent's
  // answer to a GPU recovery request).
  void SetAnnotation(const std::string& key, std::string value);

  bool api_ok() const;
  std::string last_error() const;

 private:
  struct PendingEvent {
    std::string type, reason, message;
  };
  void Run();
  bool Init();  // reads the Node: its uid and the current status of our condition types
  bool WriteConditions(const std::vector<DesiredCondition>& desired,
                       const std::map<std::string, std::string>& annotations);
  bool AllowEvent(const std::string& reason);
  void Fail(const std::string& what);

  std::unique_ptr<kube::Api> client_;
  const Clock& clock_;
  KubeReporterOptions opts_;
  std::unique_ptr<kube::EventRecorder> events_;
  kube::ObjectReference node_ref_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<DesiredCondition> desired_;
  std::map<std::string, std::string> desired_annotations_;
  uint64_t desired_gen_ = 0;
  uint64_t written_gen_ = 0;
  int64_t detected_usec_ = 0;
  std::deque<PendingEvent> pending_events_;
  bool api_ok_ = false;
  std::string last_error_;
  std::optional<std::chrono::steady_clock::time_point> write_started_;  // a write in flight

  // Reporter thread only (Step).
  std::map<std::string, std::string> server_status_;  // condition type -> status on the server
  std::map<std::string, TokenBucket> event_buckets_;  // per reason
  std::mt19937_64 rng_;
  int failures_ = 0;
  bool initialized_ = false;
  std::chrono::steady_clock::time_point next_heartbeat_{}, retry_at_{};
  std::thread thread_;

  Counter& writes_;
  Counter& write_failures_;
  Counter& events_written_;
  Counter& events_dropped_;
  Histogram& write_latency_;
  Gauge& api_up_;
};

}  // namespace gpuheal
