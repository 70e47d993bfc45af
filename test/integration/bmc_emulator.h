#pragma once
// Test helper: a real Redfish service, the OpenStack sushy-tools emulator with its fake driver
// (`sushy-emulator --fake`), on loopback with basic auth and optionally TLS. Installed into a
// virtualenv by scripts/build-bmc-emulator.sh (run-tests.sh exports GPUHEAL_SUSHY_EMULATOR; run
// alone, a test runs the script itself). Its fake systems change power state 1 to 11 s after a
// reset, as real hardware does not do at once.

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace gpuheal::testing {

inline int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return -1;
  }
  close(fd);
  return ntohs(a.sin_port);
}

// A test-setup tool's path: $`env`, else the `KEY=` line that scripts/`script` prints (it
// installs the tool on first use), then exported for the rest of the process. "" if neither.
inline std::string SetupToolPath(const char* env, const std::string& script,
                                 const std::string& key) {
  if (const char* p = std::getenv(env); p && *p) return p;
  const std::string cmd = "bash " + std::string(GPUHEAL_SOURCE_DIR) + "/scripts/" + script;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return "";
  char buf[4096];
  std::string out;
  while (fgets(buf, sizeof buf, f)) out += buf;
  pclose(f);
  auto at = out.find(key + "=");
  if (at == std::string::npos) return "";
  std::string path = out.substr(at + key.size() + 1);
  while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
  setenv(env, path.c_str(), 1);
  return path;
}

inline std::string SushyEmulatorPath() {
  return SetupToolPath("GPUHEAL_SUSHY_EMULATOR", "build-bmc-emulator.sh", "SUSHY_EMULATOR");
}

class BmcEmulator {
 public:
  struct System {
    std::string uuid, name, power = "On";
  };

  // Writes the config (systems, user admin with `password`) under `dir` and starts the emulator.
  // With `tls`, it serves HTTPS with a certificate for 127.0.0.1 signed by ca_file().
  BmcEmulator(const std::string& dir, std::vector<System> systems, const std::string& password,
              bool tls = false)
      : BmcEmulator(dir, std::move(systems),
                    std::vector<std::pair<std::string, std::string>>{{"admin", password}}, tls) {}
  // The same with several users (name, password), each able to act on every system.
  BmcEmulator(const std::string& dir, std::vector<System> systems,
              const std::vector<std::pair<std::string, std::string>>& users, bool tls = false)
      : dir_(dir), tls_(tls) {
    const std::string exe = SushyEmulatorPath();
    if (exe.empty())
      throw std::runtime_error("no sushy-emulator: run scripts/build-bmc-emulator.sh");
    const std::string python = exe.substr(0, exe.rfind('/')) + "/python3";
    // The emulator reads an Apache-style user file with bcrypt hashes only.
    std::ofstream(dir + "/htpasswd", std::ios::trunc);
    for (const auto& [user, password] : users) {
      const std::string hash_cmd = python +
                                   " -c 'import bcrypt,sys;print(sys.argv[1]+\":\"+bcrypt.hashpw("
                                   "sys.argv[2].encode(),bcrypt.gensalt(4)).decode())' '" +
                                   user + "' '" + password + "' >> " + dir + "/htpasswd";
      if (std::system(hash_cmd.c_str()) != 0) throw std::runtime_error("htpasswd: " + hash_cmd);
    }
    std::ostringstream cfg;
    cfg << "SUSHY_EMULATOR_FAKE_DRIVER = True\n"
        << "SUSHY_EMULATOR_STATE_DIR = '" << dir << "/state'\n"
        << "SUSHY_EMULATOR_AUTH_FILE = '" << dir << "/htpasswd'\n"
        << "SUSHY_EMULATOR_FAKE_SYSTEMS = [\n";
    for (const auto& s : systems) {
      cfg << "  {'uuid': '" << s.uuid << "', 'name': '" << s.name << "', 'power_state': '"
          << s.power << "', 'nics': []},\n";
    }
    cfg << "]\n";
    std::ofstream(dir + "/sushy.conf") << cfg.str();
    if (tls_) {
      const std::string ssl = fmt::format(
          "cd {0} && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
          "-keyout ca.key -out ca.crt -days 2 -subj /CN=bmc-test-ca 2>/dev/null && "
          "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout bmc.key "
          "-out bmc.csr -subj /CN=127.0.0.1 2>/dev/null && "
          "printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext && "
          "openssl x509 -req -in bmc.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
          "-extfile san.ext -out bmc.crt 2>/dev/null",
          dir);
      if (std::system(ssl.c_str()) != 0) throw std::runtime_error("openssl: " + ssl);
    }
    port_ = FreeLoopbackPort();
    std::vector<std::string> args = {exe,         "--config", dir + "/sushy.conf",  "-i",
                                     "127.0.0.1", "-p",       std::to_string(port_)};
    if (tls_) {
      args.insert(args.end(),
                  {"--ssl-certificate", dir + "/bmc.crt", "--ssl-key", dir + "/bmc.key"});
    }
    const std::string log = dir + "/sushy.log";
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      setpgid(0, 0);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    // Ready once it accepts a connection.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(port_));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      const bool up = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      close(fd);
      if (up) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    Stop();
    throw std::runtime_error("sushy-emulator did not listen within 30 s; see " + log);
  }
  ~BmcEmulator() { Stop(); }
  BmcEmulator(const BmcEmulator&) = delete;
  BmcEmulator& operator=(const BmcEmulator&) = delete;

  void Stop() {
    if (pid_ <= 0) return;
    kill(-pid_, SIGTERM);
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  int port() const { return port_; }
  std::string url() const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
  }
  std::string ca_file() const { return dir_ + "/ca.crt"; }
  // The resets the emulator accepted (204), from its own access log.
  int Resets() const {
    std::ifstream in(dir_ + "/sushy.log");
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.find("ComputerSystem.Reset HTTP") != std::string::npos &&
          line.find("\" 204 ") != std::string::npos)
        ++n;
    }
    return n;
  }
  std::string Log() const {
    std::ifstream in(dir_ + "/sushy.log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string dir_;
  bool tls_ = false;
  int port_ = -1;
  pid_t pid_ = -1;
};

// A stand-in at an address a BMC endpoint must never reach: it accepts and counts every
// connection (and closes it). `address` is a loopback address (127.0.0.1, 127.0.0.2, ...).
class ConnectionCounter {
 public:
  explicit ConnectionCounter(const std::string& address = "127.0.0.1") : address_(address) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, address.c_str(), &a.sin_addr);
    socklen_t len = sizeof a;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd_, 64) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("ConnectionCounter: cannot listen on " + address);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0) continue;
        for (int c; (c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) {
          ++connections_;
          close(c);
        }
      }
    });
  }
  ~ConnectionCounter() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  ConnectionCounter(const ConnectionCounter&) = delete;
  ConnectionCounter& operator=(const ConnectionCounter&) = delete;
  std::string url(const std::string& scheme = "https") const {
    return scheme + "://" + address_ + ":" + std::to_string(port_);
  }
  int connections() const { return connections_.load(); }

 private:
  std::string address_;
  int fd_ = -1;
  int port_ = -1;
  std::atomic<int> connections_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A BMC that accepts connections and never answers: a hung management controller.
class SilentServer {
 public:
  SilentServer() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    listen(fd_, 16);  // the kernel completes handshakes; nobody ever reads or writes
  }
  ~SilentServer() { close(fd_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = -1;
};

}  // namespace gpuheal::testing
