#pragma once
// fn(0) .. fn(n - 1) on `width` threads at once, each taking the next index; on the calling thread
// alone when one at a time is all. Returns when every call has.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace gpuheal {

inline void ParallelFor(size_t n, int width, const std::function<void(size_t)>& fn) {
  const size_t threads = std::min(n, static_cast<size_t>(std::max(1, width)));
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> ts;
  ts.reserve(threads);
  for (size_t t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < n;) fn(i);
    });
  }
  for (auto& t : ts) t.join();
}

}  // namespace gpuheal
