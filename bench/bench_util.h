#pragma once
// Shared by the benchmarks: latency distributions and a process's footprint.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace gpuheal::bench {

// One line: n, p50/p90/p99/max in milliseconds of samples given in microseconds.
inline void Report(const char* what, std::vector<double> us) {
  if (us.empty()) {
    std::printf("%-52s no samples\n", what);
    return;
  }
  std::sort(us.begin(), us.end());
  auto q = [&](double f) {
    return us[std::min(us.size() - 1, static_cast<size_t>(f * us.size()))] / 1000.0;
  };
  std::printf("%-52s n=%zu  p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n", what, us.size(),
              q(0.5), q(0.9), q(0.99), us.back() / 1000.0);
}

// A process's resident set (VmRSS, kB), or -1.
inline long RssKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// A process's user + system CPU time in seconds (/proc/PID/stat fields 14 and 15).
inline double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  unsigned long ut = 0, st = 0;
  if (close == std::string::npos) return -1;
  std::sscanf(stat.c_str() + close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
              &st);
  return static_cast<double>(ut + st) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace gpuheal::bench
