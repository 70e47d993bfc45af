#pragma once
// Writes the agent's JSON lines to its stdout from a thread of its own, through a bounded queue:
// a slow reader (a log shipper, a test) loses nothing and never slows detection; a reader that
// stopped reading costs at most `max_bytes` of memory, after which lines are dropped and counted.
// A line may carry the kernel record it reports: the writer tells which of those records are still
// waiting to be written, so the agent's cursor never passes a line a crash would lose.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace gpuheal {

class LineWriter {
 public:
  // `on_drop` is called (on the caller's thread) for each line dropped because the queue is full.
  LineWriter(int fd, size_t max_bytes, std::function<void()> on_drop);
  ~LineWriter();  // writes what is queued, waiting at most a second for the reader
  void Write(std::string line, std::optional<uint64_t> seq = std::nullopt);
  // The oldest record sequence number whose line is queued or being written; nullopt when every
  // line of a record has been written (or dropped).
  std::optional<uint64_t> OldestPending() const;
  // Called on the writer's thread whenever the queue has just become empty.
  void OnDrained(std::function<void()> fn);
  // Waits until every queued line is written, at most `max`; false when lines are still queued.
  bool Flush(std::chrono::milliseconds max);

 private:
  struct Line {
    std::string text;
    std::optional<uint64_t> seq;
  };
  void Run();
  const int fd_;
  const size_t max_bytes_;
  std::function<void()> on_drop_;
  std::function<void()> on_drained_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable drained_cv_;
  std::deque<Line> queue_;
  std::optional<uint64_t> in_flight_;       // the seq of the line being written
  bool in_flight_written_pending_ = false;  // a line (with or without a seq) is being written
  size_t bytes_ = 0;
  bool stop_ = false;
  std::atomic<bool> stopping_{false};
  std::chrono::steady_clock::time_point stop_deadline_;  // set before stopping_
  std::thread thread_;
};

}  // namespace gpuheal
