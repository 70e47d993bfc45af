#include "agent/background_saver.h"

#include "agent/active_faults.h"

namespace gpuheal {

void BackgroundSaver::Save(std::string text) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    job_ = std::move(text);
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  }
  cv_.notify_one();
}

void BackgroundSaver::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void BackgroundSaver::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || job_.has_value(); });
    if (!job_) return;  // stopped, and nothing waits
    const std::string text = std::move(*job_);
    job_.reset();
    lock.unlock();
    // Written and renamed into place first (the old or the new text, never a torn one); the
    // fsync for power loss.
    Status s = ActiveFaults::Write(path_, text);
    if (s) s = ActiveFaults::Sync(path_);
    done_(s);
    lock.lock();
  }
}

}  // namespace gpuheal
