#include "core/subprocess.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace gpuheal {

Result<ProcessResult> RunArgv(const std::vector<std::string>& argv,
                              std::chrono::milliseconds timeout,
                              const std::vector<std::pair<std::string, std::string>>& env,
                              size_t max_output) {
  if (argv.empty() || argv[0].empty()) return Error{"no program to run"};
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Error{fmt::format("pipe: {}", std::strerror(errno))};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);  // the agent blocks SIGTERM for its signalfd
  sigset_t dfl;
  sigemptyset(&dfl);
  sigaddset(&dfl, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &dfl);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string_view kv(*e);
    bool replaced = false;
    for (const auto& [k, v] : env) replaced |= kv.starts_with(k + "=");
    if (!replaced) envs.emplace_back(kv);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &fa, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    return Error{fmt::format("cannot run {}: {}", argv[0], std::strerror(rc))};
  }
  ProcessResult res;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool open = true;
  char buf[4096];
  while (open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      res.timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    const ssize_t r = read(out[0], buf, sizeof buf);
    if (r <= 0) {
      open = false;
      break;
    }
    res.output.append(buf, static_cast<size_t>(r));
    if (res.output.size() > 2 * max_output) res.output.erase(0, res.output.size() - max_output);
  }
  close(out[0]);
  int status = 0;
  if (res.timed_out) {
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
    return res;
  }
  // Output closed: the program is exiting; wait for it, within what is left of the deadline.
  while (true) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      res.timed_out = true;
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return res;
    }
    usleep(2000);
  }
  if (res.output.size() > max_output) res.output.erase(0, res.output.size() - max_output);
  res.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return res;
}

}  // namespace gpuheal
