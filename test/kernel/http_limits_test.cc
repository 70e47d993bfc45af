// Tier 2: the agent's /metrics and /healthz listener (0.0.0.0:9464 in the DaemonSet) against
// hostile clients. A slow client used to hold the only worker, so /healthz timed out; a request
// with millions of headers grew the agent by hundreds of MB for good.

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "agent_process.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Reads until the peer closes or resets, or the deadline passes; `closed` says which.
std::string ReadUntilClosed(int fd, std::chrono::milliseconds timeout, bool& closed) {
  const auto deadline = Clock::now() + timeout;
  std::string got;
  closed = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return got;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      closed = true;
      return got;
    }
    got.append(buf, static_cast<size_t>(n));
  }
}

// GET `path`; the response, or "" when none came within `timeout`.
std::string GetWithin(int port, const std::string& path, std::chrono::milliseconds timeout) {
  const int fd = testing::ConnectLoopback(port);
  if (fd < 0) return {};
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  [[maybe_unused]] ssize_t w = send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  bool closed = false;
  std::string resp = ReadUntilClosed(fd, timeout, closed);
  close(fd);
  return closed ? resp : std::string();
}

long VmRssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

class HttpLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::CanWriteKmsg()) GTEST_SKIP() << "needs root and a writable /dev/kmsg";
    char tmpl[] = "/tmp/gpuheal-http-XXXXXX";
    state_dir_ = mkdtemp(tmpl);
    agent_ = std::make_unique<testing::AgentProcess>(
        std::vector<std::string>{GPUHEAL_BIN, "agent", "--standalone", "--state-dir", state_dir_,
                                 "--listen", "127.0.0.1:0"});
    auto started =
        agent_->WaitLog([](const auto& j) { return j.value("msg", "") == "agent started"; }, 10s);
    ASSERT_TRUE(started.has_value()) << "agent did not start";
    const std::string listen = started->value("listen", "");
    port_ = std::stoi(listen.substr(listen.rfind(':') + 1));
  }
  void TearDown() override {
    agent_.reset();
    if (!state_dir_.empty()) std::filesystem::remove_all(state_dir_);
  }

  std::string state_dir_;
  std::unique_ptr<testing::AgentProcess> agent_;
  int port_ = 0;
};

TEST_F(HttpLimitsTest, ASlowClientNeitherHoldsUpHealthzNorKeepsItsConnection) {
  const int slow = testing::ConnectLoopback(port_);
  ASSERT_GE(slow, 0);
  // Slowloris: a request that is never finished, one byte every 100 ms (each read succeeds, so a
  // per-read timeout alone never fires).
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::thread dribble([&] {
    const std::string head = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    std::unique_lock lock(mu);
    for (size_t i = 0; !cv.wait_for(lock, 100ms, [&] { return stop; }); ++i) {
      const char c = i < head.size() ? head[i] : 'a';
      if (send(slow, &c, 1, MSG_NOSIGNAL) != 1) return;
    }
  });
  const auto t0 = Clock::now();
  const std::string health = GetWithin(port_, "/healthz", 2s);
  EXPECT_NE(health.find("200 OK"), std::string::npos)
      << "no /healthz answer within 2 s: " << health;
  bool closed = false;
  ReadUntilClosed(slow, 10s, closed);
  EXPECT_TRUE(closed) << "the slow connection was kept past the request deadline";
  EXPECT_LT(Clock::now() - t0, 8s);
  {
    std::lock_guard lock(mu);
    stop = true;
  }
  cv.notify_all();
  dribble.join();
  close(slow);
}

TEST_F(HttpLimitsTest, MillionsOfHeadersAreRefusedWithoutGrowingTheAgent) {
  const long before = VmRssKiB(agent_->pid());
  ASSERT_GT(before, 0);
  const int fd = testing::ConnectLoopback(port_);
  ASSERT_GE(fd, 0);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::string chunk = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
  constexpr int kHeaders = 3'000'000;
  constexpr int kPerChunk = 8192;
  int sent = 0;
  bool refused = false;
  while (sent < kHeaders && !refused) {
    for (int i = 0; i < kPerChunk; ++i) chunk += "X-a: b\r\n";
    for (size_t off = 0; off < chunk.size();) {
      const ssize_t n = send(fd, chunk.data() + off, chunk.size() - off, MSG_NOSIGNAL);
      if (n <= 0) {
        refused = true;  // the server closed the connection on us
        break;
      }
      off += static_cast<size_t>(n);
    }
    sent += kPerChunk;
    chunk.clear();
  }
  bool closed = false;
  const std::string resp = ReadUntilClosed(fd, 10s, closed);
  close(fd);
  EXPECT_TRUE(refused || resp.find("400") != std::string::npos) << resp.substr(0, 200);
  EXPECT_EQ(resp.find("200 OK"), std::string::npos) << resp.substr(0, 200);
  const long after = VmRssKiB(agent_->pid());
  EXPECT_LT(after - before, 16 * 1024)
      << "VmRSS " << before << " kB before, " << after << " kB after";
  EXPECT_NE(GetWithin(port_, "/healthz", 2s).find("200 OK"), std::string::npos);
}

// A standalone agent speaks no TLS: serving /metrics, reading the kernel log and asking the
// container runtime (the runtime monitor is on by default) must not map libcurl or a TLS library,
// which cost it 8 MB resident when they were linked (docs/performance.md, agent footprint).
TEST_F(HttpLimitsTest, AStandaloneAgentMapsNoTlsLibrary) {
  ASSERT_NE(GetWithin(port_, "/metrics", 2s).find("200 OK"), std::string::npos);
  std::ifstream maps("/proc/" + std::to_string(agent_->pid()) + "/maps");
  std::string line;
  int lines = 0;
  while (std::getline(maps, line)) {
    ++lines;
    for (const char* lib : {"libcurl", "libssl", "libcrypto", "libgnutls"}) {
      EXPECT_EQ(line.find(lib), std::string::npos) << line;
    }
  }
  EXPECT_GT(lines, 10) << "could not read the agent's mappings";
}

}  // namespace
}  // namespace gpuheal
