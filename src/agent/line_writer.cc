#include "agent/line_writer.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>

namespace gpuheal {

LineWriter::LineWriter(int fd, size_t max_bytes, std::function<void()> on_drop)
    : fd_(fd), max_bytes_(max_bytes), on_drop_(std::move(on_drop)), thread_([this] { Run(); }) {}

LineWriter::~LineWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    stop_deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void LineWriter::Write(std::string line, std::optional<uint64_t> seq) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes_ + line.size() > max_bytes_) {
      if (on_drop_) on_drop_();
      return;
    }
    bytes_ += line.size();
    queue_.push_back({std::move(line), seq});
  }
  cv_.notify_one();
}

std::optional<uint64_t> LineWriter::OldestPending() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (in_flight_) return in_flight_;
  for (const Line& l : queue_) {
    if (l.seq) return l.seq;  // records arrive in order: the first one queued is the oldest
  }
  return std::nullopt;
}

bool LineWriter::Flush(std::chrono::milliseconds max) {
  std::unique_lock<std::mutex> lock(mu_);
  return drained_cv_.wait_for(lock, max,
                              [this] { return queue_.empty() && !in_flight_written_pending_; });
}

void LineWriter::OnDrained(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  on_drained_ = std::move(fn);
}

void LineWriter::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, all written
    Line next = std::move(queue_.front());
    queue_.pop_front();
    const std::string& line = next.text;
    bytes_ -= line.size();
    in_flight_ = next.seq;
    in_flight_written_pending_ = true;
    lock.unlock();
    size_t off = 0;
    while (off < line.size()) {
      // Never block in write(2): a reader that stopped reading would keep this thread (and the
      // agent's shutdown) forever. Wait for room in slices, checking for shutdown; once stopping,
      // the reader gets one more second. A pipe that polls writable has room for PIPE_BUF bytes.
      pollfd p{fd_, POLLOUT, 0};
      const int ready = poll(&p, 1, 100);
      if (ready < 0 && errno == EINTR) continue;
      if (ready != 1) {
        if (stopping_.load() && std::chrono::steady_clock::now() >= stop_deadline_) return;
        continue;
      }
      if (p.revents & (POLLERR | POLLNVAL)) break;  // the reader is gone: the line is lost
      const ssize_t n =
          write(fd_, line.data() + off, std::min<size_t>(line.size() - off, PIPE_BUF));
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) break;  // a closed stdout: the line is gone, detection goes on
      off += static_cast<size_t>(n);
    }
    lock.lock();
    in_flight_.reset();
    in_flight_written_pending_ = false;
    if (queue_.empty()) drained_cv_.notify_all();
    if (queue_.empty() && on_drained_) {
      auto fn = on_drained_;
      lock.unlock();
      fn();
      lock.lock();
    }
  }
}

}  // namespace gpuheal
