#pragma once
// A token bucket: `rate` tokens a second up to `burst`. The time comes from the caller (a Clock's
// Steady()), so a test steps it. Not thread-safe: callers hold their own lock.

#include <algorithm>
#include <chrono>

namespace gpuheal {

class TokenBucket {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  TokenBucket(double rate, double burst, TimePoint now)
      : rate_(rate), burst_(burst), tokens_(burst), last_(now) {}

  // Takes a token if there is one.
  bool TryTake(TimePoint now) {
    Refill(now);
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }
  // How long until a token is there (zero when one is).
  std::chrono::duration<double> Wait(TimePoint now) {
    Refill(now);
    if (tokens_ >= 1 || rate_ <= 0) return std::chrono::duration<double>(0);
    return std::chrono::duration<double>((1 - tokens_) / rate_);
  }

 private:
  void Refill(TimePoint now) {
    if (now > last_) {
      tokens_ =
          std::min(burst_, tokens_ + std::chrono::duration<double>(now - last_).count() * rate_);
      last_ = now;
    }
  }
  double rate_, burst_, tokens_;
  TimePoint last_;
};

}  // namespace gpuheal
