#include "controller/work_queue.h"

#include <algorithm>

namespace gpuheal::controller {

void WorkQueue::AddLocked(const std::string& key) {
  delayed_.erase(key);
  if (processing_.count(key)) {
    dirty_.insert(key);
    return;
  }
  if (queued_.insert(key).second) queue_.push_back(key);
  cv_.notify_one();
}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutdown_) return;
  AddLocked(key);
}

void WorkQueue::AddAfter(const std::string& key, std::chrono::milliseconds delay) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutdown_) return;
  if (delay.count() <= 0) return AddLocked(key);
  if (queued_.count(key)) return;  // already due sooner
  const auto at = Clock::now() + delay;
  auto it = delayed_.find(key);
  if (it == delayed_.end() || at < it->second) delayed_[key] = at;
  cv_.notify_all();
}

void WorkQueue::AddRateLimited(const std::string& key) {
  int n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = failures_[key]++;
  }
  auto d = base_ * (1LL << std::min(n, 20));
  AddAfter(key, std::min<std::chrono::milliseconds>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(d), max_));
}

void WorkQueue::Forget(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.erase(key);
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (shutdown_) return std::nullopt;
    const auto now = Clock::now();
    auto next = Clock::time_point::max();
    for (auto it = delayed_.begin(); it != delayed_.end();) {
      if (it->second <= now) {
        const std::string k = it->first;
        it = delayed_.erase(it);
        if (processing_.count(k)) {
          dirty_.insert(k);
        } else if (queued_.insert(k).second) {
          queue_.push_back(k);
        }
      } else {
        next = std::min(next, it->second);
        ++it;
      }
    }
    if (!queue_.empty()) {
      std::string k = queue_.front();
      queue_.pop_front();
      queued_.erase(k);
      processing_.insert(k);
      return k;
    }
    if (next == Clock::time_point::max())
      cv_.wait(lock);
    else
      cv_.wait_until(lock, next);
  }
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  processing_.erase(key);
  if (dirty_.erase(key) && !shutdown_ && queued_.insert(key).second) {
    queue_.push_back(key);
    cv_.notify_one();
  }
}

void WorkQueue::ShutDown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = true;
  cv_.notify_all();
}

void WorkQueue::Reopen() {
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = false;
  queue_.clear();
  queued_.clear();
  dirty_.clear();
  delayed_.clear();
  failures_.clear();
}

size_t WorkQueue::Len() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

}  // namespace gpuheal::controller
