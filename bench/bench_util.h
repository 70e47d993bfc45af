#pragma once
// Shared by the benchmarks: latency distributions and a process's footprint.

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <utility>
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

// The CPU seconds of every process whose name (/proc/PID/comm) is `comm`, summed.
inline double CpuSecondsOf(const std::string& comm) {
  double total = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = e.path().filename();
    if (pid.empty() || !std::isdigit(static_cast<unsigned char>(pid[0]))) continue;
    std::ifstream in(e.path() / "comm");
    std::string name;
    if (!std::getline(in, name) || name != comm) continue;
    if (const double s = CpuSeconds(static_cast<pid_t>(std::stol(pid))); s > 0) total += s;
  }
  return total;
}

// Where a process's resident set is: /proc/PID/smaps' Rss summed per mapped file (anonymous
// mappings, the heap and stacks under "[anon]"), largest first, in kB.
inline std::vector<std::pair<std::string, long>> RssByMapping(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps");
  std::map<std::string, long> by;
  std::string line, name;
  while (std::getline(in, line)) {
    if (line.rfind("Rss:", 0) == 0) {
      by[name] += std::stol(line.substr(4));
      continue;
    }
    // A mapping's header: "start-end perms offset dev inode [path]"; field lines are "Key: v".
    const size_t colon = line.find(':'), dash = line.find('-');
    if (dash == std::string::npos || (colon != std::string::npos && colon < dash)) continue;
    size_t pos = 0;
    for (int field = 0; field < 5 && pos != std::string::npos; ++field) {
      pos = line.find_first_not_of(' ', line.find(' ', pos));
    }
    name = pos == std::string::npos ? "" : line.substr(pos);
    if (name.empty() || name == "[heap]" || name.rfind("[stack", 0) == 0) name = "[anon]";
  }
  std::vector<std::pair<std::string, long>> out(by.begin(), by.end());
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

// The group a mapping of RssByMapping belongs to: the agent's own memory, its binary, the C/C++
// runtime, libcurl with the TLS stack it brings, NVML, or another library.
inline std::string MappingGroup(const std::string& name, const std::string& binary) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (name == "[anon]") return "own: heap, stacks, anonymous";
  if (name == binary || name.rfind(binary + " ", 0) == 0) return "the gpuheal binary";
  if (has("/libc.so") || has("libstdc++") || has("/libm.so") || has("ld-linux") || has("libgcc_s"))
    return "C/C++ runtime (libc, libstdc++, libm, ld.so)";
  for (const char* tls :
       {"libcurl", "libssl",  "libcrypto", "gnutls", "p11-kit", "krb5",     "gssapi",
        "ldap",    "lber",    "sasl",      "nettle", "hogweed", "gmp",      "unistring",
        "idn2",    "rtmp",    "ssh2",      "psl",    "tasn1",   "k5crypto", "keyutils",
        "ffi",     "com_err", "brotli",    "zstd"}) {
    if (has(tls)) return "libcurl and its TLS stack";
  }
  if (has("nvml") || has("nvidia")) return "NVML";
  if (name.rfind("[", 0) == 0) return "kernel ([vdso], [vvar])";
  return "other libraries";
}

// Prints VmRSS, then its groups and the largest mappings, for `what`.
inline void ReportFootprint(const char* what, pid_t pid, const std::string& binary, int top = 6) {
  const auto maps = RssByMapping(pid);
  std::map<std::string, long> groups;
  long total = 0;
  for (const auto& [name, kb] : maps) {
    groups[MappingGroup(name, binary)] += kb;
    total += kb;
  }
  // Pss divides each shared page among the processes mapping it; Private_* is what is this
  // process's alone (its anonymous memory, and file pages no other process maps).
  std::ifstream rollup("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string line;
  long pss = -1, priv = 0;
  while (std::getline(rollup, line)) {
    if (line.rfind("Pss:", 0) == 0) pss = std::stol(line.substr(4));
    if (line.rfind("Private_Clean:", 0) == 0) priv += std::stol(line.substr(14));
    if (line.rfind("Private_Dirty:", 0) == 0) priv += std::stol(line.substr(14));
  }
  std::printf("%s: VmRSS %ld kB (smaps %ld kB), Pss %ld kB, private %ld kB\n", what, RssKb(pid),
              total, pss, priv);
  std::vector<std::pair<std::string, long>> g(groups.begin(), groups.end());
  std::sort(g.begin(), g.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [name, kb] : g) std::printf("  %6ld kB  %s\n", kb, name.c_str());
  std::printf("  largest:");
  for (int i = 0; i < top && i < static_cast<int>(maps.size()); ++i) {
    const std::string& n = maps[static_cast<size_t>(i)].first;
    std::printf(" %s %ld kB%s", n.substr(n.rfind('/') + 1).c_str(),
                maps[static_cast<size_t>(i)].second, i + 1 < top ? "," : "");
  }
  std::printf("\n");
}

}  // namespace gpuheal::bench
