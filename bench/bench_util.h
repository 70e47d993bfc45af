#pragma once
// Shared by the Kubernetes benchmarks: run a setup command, print a latency distribution.

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace gpuheal::bench {

// Runs `cmd` through the shell and returns its stdout.
inline std::string Run(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  return out;
}

// One line: n, p50/p90/p99/max in milliseconds of samples given in microseconds.
inline void Report(const char* what, std::vector<double> us) {
  if (us.empty()) {
    std::printf("%-52s no samples\n", what);
    return;
  }
  std::sort(us.begin(), us.end());
  auto q = [&](double f) { return us[std::min(us.size() - 1, static_cast<size_t>(f * us.size()))] / 1000.0; };
  std::printf("%-52s n=%zu  p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n", what, us.size(), q(0.5), q(0.9),
              q(0.99), us.back() / 1000.0);
}

}  // namespace gpuheal::bench
