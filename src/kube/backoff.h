#pragma once
// Exponential backoff with "equal jitter": attempt n waits a random time in [d/2, d], where
// d = min(max, initial * 2^n). Shared by the client's retries, the informer's reconnects and
// the agent's reporter, so they all back off the same way.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace gpuheal::kube {

inline std::chrono::milliseconds JitteredBackoff(std::chrono::milliseconds initial,
                                                 std::chrono::milliseconds max, int attempt,
                                                 std::mt19937_64& rng) {
  const auto grown = initial * (int64_t{1} << std::clamp(attempt, 0, 16));
  const auto base = std::min(max, grown);
  return std::chrono::milliseconds(
      std::uniform_int_distribution<int64_t>(base.count() / 2, base.count())(rng));
}

}  // namespace gpuheal::kube
