#pragma once
// Test and benchmark helper: runs `gpuheal agent --standalone` as a child process and reads its
// JSON lines (stdout) and logs (stderr) with deadlines. Never sleeps to wait: it waits on output.

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gpuheal::testing {

class AgentProcess {
 public:
  explicit AgentProcess(std::vector<std::string> args) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) std::abort();
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    out_ = out[0];
    err_ = err[0];
  }
  ~AgentProcess() {
    Kill(SIGKILL);
    close(out_);
    close(err_);
  }

  // Waits for a stdout JSON line satisfying `pred`; nullopt at the deadline.
  template <typename Pred>
  std::optional<nlohmann::json> WaitEvent(Pred pred, std::chrono::milliseconds timeout) {
    return WaitLine(out_, out_buf_, pred, timeout, &events_);
  }
  // Waits for a stderr log line satisfying `pred`.
  template <typename Pred>
  std::optional<nlohmann::json> WaitLog(Pred pred, std::chrono::milliseconds timeout) {
    return WaitLine(err_, err_buf_, pred, timeout, &logs_);
  }
  // Every stdout event read so far.
  const std::vector<nlohmann::json>& events() const { return events_; }
  // Every stderr log line read so far.
  const std::vector<nlohmann::json>& logs() const { return logs_; }

  // Sends `sig`, then reaps the child, draining its output meanwhile (a child blocked writing to
  // a full pipe could never act on the signal). SIGKILL after 10 s. Returns its exit status, or
  // -1 when it did not exit normally.
  int Kill(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int status = 0;
    for (;;) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) break;
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      pollfd p[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
      if (poll(p, 2, 10) > 0) {
        char tmp[65536];
        for (auto& fd : p) {
          if (fd.revents & POLLIN) {
            const ssize_t n = read(fd.fd, tmp, sizeof tmp);
            if (n > 0) (fd.fd == out_ ? out_buf_ : err_buf_).append(tmp, static_cast<size_t>(n));
          }
        }
      }
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // False once the child has exited (and reaps it then).
  bool Running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) != pid_) return true;
    pid_ = -1;
    return false;
  }
  int out_fd() const { return out_; }
  pid_t pid() const { return pid_; }

 private:
  template <typename Pred>
  std::optional<nlohmann::json> WaitLine(int fd, std::string& buf, Pred pred,
                                         std::chrono::milliseconds timeout,
                                         std::vector<nlohmann::json>* seen) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      size_t nl;
      while ((nl = buf.find('\n')) != std::string::npos) {
        std::string line = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded()) continue;
        seen->push_back(j);
        if (pred(j)) return j;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char tmp[65536];
      const ssize_t n = read(fd, tmp, sizeof tmp);
      if (n <= 0) return std::nullopt;
      buf.append(tmp, static_cast<size_t>(n));
    }
  }

  pid_t pid_ = -1;
  int out_ = -1;
  int err_ = -1;
  std::string out_buf_, err_buf_;
  std::vector<nlohmann::json> events_, logs_;
};

// Sets /proc/sys/kernel/printk_devkmsg for the scope (writers of many records need "on").
class DevKmsgMode {
 public:
  explicit DevKmsgMode(const std::string& mode) {
    std::ifstream in("/proc/sys/kernel/printk_devkmsg");
    std::getline(in, old_);
    ok_ = Set(mode);
  }
  ~DevKmsgMode() {
    if (!old_.empty()) Set(old_);
  }
  bool ok() const { return ok_; }

  // The sysctl handler wants the trailing newline ("on" alone is EINVAL).
  static bool Set(const std::string& mode) {
    const int fd = open("/proc/sys/kernel/printk_devkmsg", O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const std::string v = mode + "\n";
    const bool ok = write(fd, v.data(), v.size()) == static_cast<ssize_t>(v.size());
    close(fd);
    return ok;
  }

 private:
  std::string old_;
  bool ok_ = false;
};

// Sets a sysctl (a /proc/sys file) for the scope and restores its old value.
class ScopedSysctl {
 public:
  ScopedSysctl(std::string path, const std::string& value) : path_(std::move(path)) {
    std::ifstream in(path_);
    std::getline(in, old_);
    ok_ = Write(value);
  }
  ~ScopedSysctl() {
    if (!old_.empty()) Write(old_);
  }
  bool ok() const { return ok_; }

 private:
  bool Write(const std::string& v) {
    std::ofstream out(path_);
    out << v << "\n";
    out.flush();
    return static_cast<bool>(out);
  }
  std::string path_, old_;
  bool ok_ = false;
};

// A TCP connection to 127.0.0.1:`port`, or -1.
inline int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A minimal HTTP/1.1 GET against 127.0.0.1:<port of hostport>; returns the raw response.
inline std::string HttpGet(const std::string& hostport, const std::string& path) {
  const int fd = ConnectLoopback(std::stoi(hostport.substr(hostport.rfind(':') + 1)));
  if (fd < 0) return {};
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  [[maybe_unused]] ssize_t w = write(fd, req.data(), req.size());
  std::string resp;
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  return resp;
}

inline bool CanWriteKmsg() { return geteuid() == 0 && access("/dev/kmsg", W_OK) == 0; }

}  // namespace gpuheal::testing
