#pragma once
// Time as a port. Components that decide by time (the controller's Repairer, the agent's
// reporter) take a Clock; the binary hands them the system's, tests a fake they step.
// MonotonicUsec: CLOCK_MONOTONIC in microseconds, the agent's detection timestamps.

#include <time.h>

#include <chrono>
#include <cstdint>

namespace gpuheal {

inline int64_t MonotonicUsec() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::system_clock::time_point Now() const = 0;     // wall time (records)
  virtual std::chrono::steady_clock::time_point Steady() const = 0;  // intervals, deadlines
};

class SystemClock final : public Clock {
 public:
  std::chrono::system_clock::time_point Now() const override {
    return std::chrono::system_clock::now();
  }
  std::chrono::steady_clock::time_point Steady() const override {
    return std::chrono::steady_clock::now();
  }
};

}  // namespace gpuheal
