#pragma once
// Writes the agent's JSON lines to its stdout from a thread of its own, through a bounded queue:
// a slow reader (a log shipper, a test) loses nothing and never slows detection; a reader that
// stopped reading costs at most `max_bytes` of memory, after which lines are dropped and counted.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace gpuheal {

class LineWriter {
 public:
  // `on_drop` is called (on the caller's thread) for each line dropped because the queue is full.
  LineWriter(int fd, size_t max_bytes, std::function<void()> on_drop);
  ~LineWriter();  // writes what is queued, waiting at most a second for the reader
  void Write(std::string line);

 private:
  void Run();
  const int fd_;
  const size_t max_bytes_;
  std::function<void()> on_drop_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  size_t bytes_ = 0;
  bool stop_ = false;
  std::atomic<bool> stopping_{false};
  std::chrono::steady_clock::time_point stop_deadline_;  // set before stopping_
  std::thread thread_;
};

}  // namespace gpuheal
