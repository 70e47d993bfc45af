#pragma once
// A Clock that moves only when the test steps it.

#include <atomic>
#include <chrono>

#include "core/clock.h"

namespace gpuheal::testing {

class FakeClock final : public Clock {
 public:
  // Starts at a fixed wall time (2026-06-01T00:00:00Z) and an arbitrary steady time.
  FakeClock() : now_us_(1'780'272'000'000'000), steady_us_(1'000'000'000) {}
  std::chrono::system_clock::time_point Now() const override {
    return std::chrono::system_clock::time_point(std::chrono::microseconds(now_us_.load()));
  }
  std::chrono::steady_clock::time_point Steady() const override {
    return std::chrono::steady_clock::time_point(std::chrono::microseconds(steady_us_.load()));
  }
  void Advance(std::chrono::microseconds d) {
    now_us_ += d.count();
    steady_us_ += d.count();
  }

 private:
  std::atomic<int64_t> now_us_, steady_us_;
};

}  // namespace gpuheal::testing
