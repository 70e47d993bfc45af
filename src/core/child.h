#pragma once
// A long-running child process (the drill's controller and agents, the sim's process-runtime
// containers): started from an argv (never a shell) in its own process group with stdout and
// stderr in files, signalled and reaped by its owner. The destructor stops it (SIGTERM, then
// SIGKILL after a grace period).

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"

namespace gpuheal {

class Child {
 public:
  // stdout to `out_path` (appended), stderr to `err_path` (appended), `env` added to this
  // process's environment, in `cwd` ("": this process's). The child starts with SIGINT/SIGTERM
  // unblocked whatever the parent's mask is.
  static Result<std::unique_ptr<Child>> Spawn(
      const std::vector<std::string>& argv, const std::string& out_path,
      const std::string& err_path, const std::vector<std::pair<std::string, std::string>>& env = {},
      const std::string& cwd = "");
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int sig);
  // Waits up to `timeout` for the child to end; its exit code, 128+signal, or -1 if still running.
  int Wait(std::chrono::milliseconds timeout);
  // SIGTERM, up to `grace` for it to end, then SIGKILL. The exit code (as Wait).
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  bool running();

 private:
  Child() = default;
  pid_t pid_ = -1;
  int status_ = -1;  // set once reaped
};

}  // namespace gpuheal
