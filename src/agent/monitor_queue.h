#pragma once
// Periodic monitors on one sequential queue. Each monitor's first tick is offset by a random
// 0-20% of its period so that a fleet restarted together does not poll in lockstep, and all
// monitors due at a tick share one cache of /proc and sysfs reads.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "agent/event_loop.h"
#include "core/result.h"

namespace gpuheal {

// Reads each path at most once per tick.
class ProcCache {
 public:
  // The file's contents ("" when unreadable).
  const std::string& Read(const std::string& path);
  void Clear() { files_.clear(); }
  size_t reads() const { return reads_; }

 private:
  std::map<std::string, std::string> files_;
  size_t reads_ = 0;
};

class Monitor {
 public:
  virtual ~Monitor() = default;
  virtual std::string_view name() const = 0;
  virtual std::chrono::milliseconds period() const = 0;
  virtual void Tick(ProcCache& cache) = 0;
};

// A monitor made of a function (for small checks).
class FunctionMonitor : public Monitor {
 public:
  FunctionMonitor(std::string name, std::chrono::milliseconds period,
                  std::function<void(ProcCache&)> fn)
      : name_(std::move(name)), period_(period), fn_(std::move(fn)) {}
  std::string_view name() const override { return name_; }
  std::chrono::milliseconds period() const override { return period_; }
  void Tick(ProcCache& cache) override { fn_(cache); }

 private:
  std::string name_;
  std::chrono::milliseconds period_;
  std::function<void(ProcCache&)> fn_;
};

// The schedule alone (no I/O), so jitter and ordering are unit-testable with a stepped clock.
class MonitorSchedule {
 public:
  using Clock = std::chrono::steady_clock;
  explicit MonitorSchedule(uint64_t seed) : rng_(seed) {}

  void Add(std::unique_ptr<Monitor> m, Clock::time_point now);
  // Runs every monitor due at `now`, in deadline order, sharing one cache; returns how many ran.
  size_t RunDue(Clock::time_point now);
  Clock::time_point next_deadline() const;
  size_t size() const { return entries_.size(); }
  // The deadline of monitor `i` (in order of Add), for tests.
  Clock::time_point deadline(size_t i) const { return entries_[i].deadline; }

 private:
  struct Entry {
    std::unique_ptr<Monitor> monitor;
    Clock::time_point deadline;
  };
  std::mt19937_64 rng_;
  std::vector<Entry> entries_;
  ProcCache cache_;
};

// Drives a MonitorSchedule from the event loop with one timerfd.
class MonitorQueue {
 public:
  static Result<std::unique_ptr<MonitorQueue>> Create(EventLoop& loop, uint64_t seed);
  void Add(std::unique_ptr<Monitor> m);

 private:
  MonitorQueue(EventLoop& loop, uint64_t seed) : loop_(loop), schedule_(seed) {}
  void Rearm();
  EventLoop& loop_;
  MonitorSchedule schedule_;
  int timer_ = -1;
};

}  // namespace gpuheal
