#pragma once
// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it:
// a candidate takes the Lease when it is free (no holder) or when its holder has not renewed it
// for leaseDurationSeconds, measured on this candidate's own monotonic clock from when it last
// saw the record change (so clocks need not agree); the leader renews every retry_period and
// steps down when it could not renew for renew_deadline; Stop() releases the Lease so a
// successor takes over at once. Every write carries the resourceVersion it read, so two
// candidates can never both win.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "kube/api.h"

namespace gpuheal::kube {

struct LeaderElectionConfig {
  std::string lease_namespace = "kube-system";
  std::string lease_name;
  std::string identity;  // unique per candidate: hostname + pid, pod name...
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& holder)> on_new_leader;  // any change of holder seen
};

// Checks durations are positive and lease_duration > renew_deadline > retry_period.
Result<bool> ValidateLeaderElection(const LeaderElectionConfig& c);

class LeaderElector {
 public:
  LeaderElector(Api& client, LeaderElectionConfig cfg);
  ~LeaderElector();
  void Start();
  // Stops campaigning; a leader releases the Lease and calls on_stopped_leading.
  void Stop();
  bool IsLeader() const { return leader_.load(); }

 private:
  void Run();
  bool TryAcquireOrRenew();  // true when this candidate holds the Lease afterwards
  bool HeldByMe() const;     // per the last record seen
  void Release();
  bool Sleep(std::chrono::milliseconds d);  // false when stopped meanwhile

  Api& client_;
  LeaderElectionConfig cfg_;
  std::atomic<bool> leader_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string observed_holder_, observed_renew_;
  std::chrono::steady_clock::time_point observed_at_{};
  std::thread thread_;
};

}  // namespace gpuheal::kube
