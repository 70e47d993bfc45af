#pragma once
// Runs a program from an argv (never through a shell) with a deadline: the GPU reset command now,
// the controller's exec provider later. The child gets its own process group so a timeout kills
// everything it started.

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"

namespace gpuheal {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal or the deadline
  bool timed_out = false;
  std::string output;  // stdout and stderr together, the last `max_output` bytes
};

// Errors: the program could not be started (not found, not executable).
Result<ProcessResult> RunArgv(const std::vector<std::string>& argv,
                              std::chrono::milliseconds timeout,
                              const std::vector<std::pair<std::string, std::string>>& env = {},
                              size_t max_output = 4096);

}  // namespace gpuheal
