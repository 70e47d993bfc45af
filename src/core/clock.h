#pragma once
// CLOCK_MONOTONIC in microseconds: the agent's detection timestamps.

#include <time.h>

#include <cstdint>

namespace gpuheal {

inline int64_t MonotonicUsec() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

}  // namespace gpuheal
