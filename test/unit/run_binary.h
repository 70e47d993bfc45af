#pragma once
// Runs the gpuheal binary under test through the shell and collects its output and exit code.

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace gpuheal::testing {

struct RunResult {
  int code;  // exit status, -1 when killed by a signal
  std::string out;
};

// Runs `cmd` with /bin/sh and collects its stdout.
inline RunResult RunShell(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// `args` is appended to the binary's path as shell text; `with_stderr` merges stderr into out.
inline RunResult RunGpuheal(const std::string& args, bool with_stderr = true) {
  return RunShell(std::string(GPUHEAL_BIN) + " " + args + (with_stderr ? " 2>&1" : ""));
}

}  // namespace gpuheal::testing
