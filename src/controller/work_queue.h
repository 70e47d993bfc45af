#pragma once
// The controller's work queue, keyed by node name: a key is queued at most once however often it
// is added, a key being processed is not handed to a second worker (an Add meanwhile queues it
// again for after Done), AddAfter delays a key (the earliest request wins), and
// AddRateLimited backs a failing key off exponentially until Forget.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

namespace gpuheal::controller {

class WorkQueue {
 public:
  using Clock = std::chrono::steady_clock;
  explicit WorkQueue(std::chrono::milliseconds base_delay = std::chrono::milliseconds(50),
                     std::chrono::milliseconds max_delay = std::chrono::seconds(60))
      : base_(base_delay), max_(max_delay) {}

  void Add(const std::string& key);
  void AddAfter(const std::string& key, std::chrono::milliseconds delay);
  void AddRateLimited(const std::string& key);
  void Forget(const std::string& key);
  // Blocks until a key is ready or ShutDown(); nullopt when shut down.
  std::optional<std::string> Get();
  void Done(const std::string& key);
  void ShutDown();
  // Open again after ShutDown(), empty: a replica that lost its Lease and wins it again starts
  // from the whole node list, not from what was queued before.
  void Reopen();
  size_t Len() const;

 private:
  void AddLocked(const std::string& key);
  std::chrono::milliseconds base_, max_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::set<std::string> queued_, processing_, dirty_;
  std::map<std::string, Clock::time_point> delayed_;
  std::map<std::string, int> failures_;
  bool shutdown_ = false;
};

}  // namespace gpuheal::controller
