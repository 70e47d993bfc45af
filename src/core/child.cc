#include "core/child.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace gpuheal {

Result<std::unique_ptr<Child>> Child::Spawn(
    const std::vector<std::string>& argv, const std::string& out_path, const std::string& err_path,
    const std::vector<std::pair<std::string, std::string>>& env, const std::string& cwd) {
  if (argv.empty()) return Error{"no program to start"};
  const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) return Error{fmt::format("cannot open {}: {}", out_path, std::strerror(errno))};
  const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (err < 0) {
    close(out);
    return Error{fmt::format("cannot open {}: {}", err_path, std::strerror(errno))};
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int ready[2];  // exec failure is reported back through a close-on-exec pipe
  if (pipe2(ready, O_CLOEXEC) != 0) {
    close(out);
    close(err);
    return Error{fmt::format("pipe: {}", std::strerror(errno))};
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(out);
    close(err);
    close(ready[0]);
    close(ready[1]);
    return Error{fmt::format("fork: {}", std::strerror(errno))};
  }
  if (pid == 0) {
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) {
      const int e = errno;
      [[maybe_unused]] ssize_t w = write(ready[1], &e, sizeof e);
      _exit(127);
    }
    execv(args[0], args.data());
    const int e = errno;
    [[maybe_unused]] ssize_t w = write(ready[1], &e, sizeof e);
    _exit(127);
  }
  close(out);
  close(err);
  close(ready[1]);
  int child_errno = 0;
  const ssize_t n = read(ready[0], &child_errno, sizeof child_errno);
  close(ready[0]);
  std::unique_ptr<Child> c(new Child());
  c->pid_ = pid;
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    c->Wait(std::chrono::seconds(1));
    return Error{fmt::format("cannot run {}: {}", argv[0], std::strerror(child_errno))};
  }
  return c;
}

Child::~Child() { Stop(); }

void Child::Signal(int sig) {
  if (pid_ > 0 && status_ < 0) kill(-pid_, sig);  // the whole group: what it started goes too
}

bool Child::running() { return Wait(std::chrono::milliseconds(0)) < 0; }

int Child::Wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return status_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (status_ < 0) {
    int st = 0;
    const pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
    if (r < 0 && errno != EINTR) {
      status_ = 255;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status_;
}

int Child::Stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0 || status_ >= 0) return status_;
  Signal(SIGTERM);
  if (Wait(grace) >= 0) return status_;
  Signal(SIGKILL);
  return Wait(std::chrono::seconds(5));
}

}  // namespace gpuheal
