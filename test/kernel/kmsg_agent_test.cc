// Tier 2: the standalone agent against the real /dev/kmsg. Each test injects records naming a
// PCI bus id no other test uses, so records left in the kernel buffer by earlier runs or tests
// cannot be confused with this test's.

#include <fmt/format.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "agent_process.h"
#include "drill/inject.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using testing::AgentProcess;
using testing::HttpGet;

class KmsgAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::CanWriteKmsg()) GTEST_SKIP() << "needs root and a writable /dev/kmsg";
    char tmpl[] = "/tmp/gpuheal-kernel-XXXXXX";
    state_dir_ = mkdtemp(tmpl);
    std::random_device rd;
    // A bus id unique to this test run: domain 0x1000-0xffff is never a real one here.
    pci_ = fmt::format("{:04x}:{:02x}:00", 0x1000 + rd() % 0xe000, rd() % 256);
  }
  void TearDown() override {
    if (!state_dir_.empty()) std::filesystem::remove_all(state_dir_);
  }

  std::unique_ptr<AgentProcess> Start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {GPUHEAL_BIN, "agent",    "--standalone", "--state-dir",
                                     state_dir_,  "--listen", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto a = std::make_unique<AgentProcess>(args);
    auto started =
        a->WaitLog([](const auto& j) { return j.value("msg", "") == "agent started"; }, 10s);
    EXPECT_TRUE(started.has_value()) << "agent did not start";
    if (started) listen_ = started->value("listen", "");
    return a;
  }

  void Inject(int xid, const std::string& name = "test") {
    InjectSpec spec{xid, pci_, "4242", name};
    ASSERT_TRUE(WriteKmsg("/dev/kmsg", InjectMessages(spec)).ok());
  }

  auto Mine(int xid, const std::string& name = "") {
    return [this, xid, name](const nlohmann::json& j) {
      return j.value("pci", nlohmann::json()) == pci_ && j.value("xid", nlohmann::json()) == xid &&
             (name.empty() || j.value("process", "") == name);
    };
  }

  std::string state_dir_;
  std::string pci_;
  std::string listen_;
};

TEST_F(KmsgAgentTest, UserSpaceWriteIsUntrustedAndIgnoredByDefault) {
  auto agent = Start();
  Inject(48);
  auto e = agent->WaitEvent(Mine(48), 5s);
  ASSERT_TRUE(e) << "the agent must still report the record";
  EXPECT_EQ((*e)["trusted"], false);
  EXPECT_EQ((*e)["ignored"], true);
  EXPECT_FALSE(e->contains("injected"));
  EXPECT_FALSE(e->contains("count")) << "ignored records never reach the node state";
  EXPECT_EQ((*e)["severity"], "fatal");
  EXPECT_TRUE((*e)["kmsg_seq"].is_number());
  // Two clocks: kmsg_usec is the kernel's printk clock (local_clock), detected_usec is
  // CLOCK_MONOTONIC, which NTP slews; on a long-running VM they drift apart by milliseconds
  // (1.1 ms seen here after 2.7 h), so detection may even appear to precede the record.
  const int64_t gap = static_cast<int64_t>((*e)["detected_usec"].get<uint64_t>()) -
                      static_cast<int64_t>((*e)["kmsg_usec"].get<uint64_t>());
  EXPECT_LT(std::abs(gap), 1'000'000) << "the two clocks agree to within a second";
}

TEST_F(KmsgAgentTest, AcceptInjectedActsAndMarksTheEvent) {
  auto agent = Start({"--accept-injected"});
  Inject(79);
  auto e = agent->WaitEvent(Mine(79), 5s);
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["trusted"], false);
  EXPECT_EQ((*e)["injected"], true);
  EXPECT_FALSE(e->contains("ignored"));
  EXPECT_EQ((*e)["kind"], "xid");
  EXPECT_EQ((*e)["severity"], "catastrophic");
  EXPECT_EQ((*e)["count"], 1);
  // The accompanying "fallen off the bus" line is the same event: reported as its consequence,
  // with the incident of the Xid 79 line and no action of its own.
  auto text = agent->WaitEvent(
      [this](const nlohmann::json& j) {
        return j.value("kind", "") == "gpu_fallen_off_bus" &&
               j.value("pci", nlohmann::json()) == pci_;
      },
      5s);
  ASSERT_TRUE(text);
  EXPECT_EQ((*text)["consequence_of"], 79) << text->dump();
  EXPECT_EQ((*text)["incident"], (*e)["incident"]);
}

// An application Xid escalates when distinct programs hit it on one GPU (three by default), never
// on repeats of one program. From the end of the buffer: Xid 13s on other GPUs left there by
// earlier tests would rightly hold the escalation back (the programs, not this GPU).
TEST_F(KmsgAgentTest, DistinctWorkloadsEscalateRepeatsOfOneDoNot) {
  const std::string cfg = state_dir_ + "/agent.yaml";
  std::ofstream(cfg) << "kmsg_start: end\n";
  auto agent = Start({"--accept-injected", "--config", cfg});
  for (int i = 1; i <= 4; ++i) {
    Inject(13, "same");
    auto e = agent->WaitEvent(Mine(13, "same"), 5s);
    ASSERT_TRUE(e) << i;
    EXPECT_EQ((*e)["severity"], "warn") << e->dump();
    EXPECT_FALSE(e->contains("escalated"));
  }
  for (int i = 2; i <= 3; ++i) {
    Inject(13, "rep" + std::to_string(i));
    auto e = agent->WaitEvent(Mine(13, "rep" + std::to_string(i)), 5s);
    ASSERT_TRUE(e) << i;
    if (i < 3) {
      EXPECT_EQ((*e)["severity"], "warn");
      EXPECT_EQ((*e)["reason"], "NvidiaXID13Warning");
    } else {
      EXPECT_EQ((*e)["severity"], "fatal");
      EXPECT_EQ((*e)["reason"], "NvidiaXID13Error");
      EXPECT_EQ((*e)["escalated"], true);
      EXPECT_EQ((*e)["escalation"]["rule"], "distinct_workloads") << e->dump();
      EXPECT_EQ((*e)["escalation"]["evidence"].size(), 3u) << e->dump();
    }
  }
}

// Restarts, kill -9 and the cursor: test/kernel/kmsg_durability_test.cc.

TEST_F(KmsgAgentTest, FirstStartReportsFaultsAlreadyInTheBuffer) {
  Inject(94, "early");
  auto agent = Start({"--accept-injected"});
  EXPECT_TRUE(agent->WaitEvent(Mine(94, "early"), 5s));
}

// kmsg_start: end: a first start skips what the buffer already holds (a drill on a machine whose
// buffer has old faults), and still reports what is written from then on.
TEST_F(KmsgAgentTest, KmsgStartEndSkipsTheBufferOnFirstStart) {
  Inject(94, "old");
  const std::string cfg = state_dir_ + "/agent.yaml";
  std::ofstream(cfg) << "kmsg_start: end\n";
  auto agent = Start({"--accept-injected", "--config", cfg});
  Inject(94, "new");
  auto e = agent->WaitEvent(Mine(94), 5s);
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["process"], "new") << "the record from before the start was reported";
}

TEST_F(KmsgAgentTest, ServesMetricsAndHealth) {
  auto agent = Start({"--accept-injected"});
  Inject(48, "metrics");
  ASSERT_TRUE(agent->WaitEvent(Mine(48, "metrics"), 5s));
  ASSERT_FALSE(listen_.empty());
  const std::string health = HttpGet(listen_, "/healthz");
  EXPECT_NE(health.find("200 OK"), std::string::npos) << health;
  const std::string metrics = HttpGet(listen_, "/metrics");
  EXPECT_NE(metrics.find("gpuheal_kmsg_records_total"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("gpuheal_faults_total{reason=\"NvidiaXID48Error\",severity=\"fatal\"}"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("gpuheal_detection_latency_seconds_count"), std::string::npos);
}

// Nobody reads the agent's stdout for a while (a stuck log shipper): detection goes on at full
// speed, and the lines wait in the agent's queue instead of blocking its loop.
TEST_F(KmsgAgentTest, AStalledStdoutReaderDoesNotStopDetection) {
  auto agent = Start({"--accept-injected"});
  auto metric = [&](const std::string& key) {
    const std::string m = HttpGet(listen_, "/metrics");
    const size_t at = m.find("\n" + key + " ");
    return at == std::string::npos ? 0.0 : std::stod(m.substr(at + key.size() + 2));
  };
  const std::string faults = "gpuheal_faults_total{reason=\"NvidiaXID48Error\",severity=\"fatal\"}";
  // Once this marker is out, the records already in the kernel buffer have been counted.
  Inject(48, "marker");
  ASSERT_TRUE(agent->WaitEvent(Mine(48, "marker"), 5s));
  const double before = metric(faults);
  constexpr int kFaults = 400;  // ~200 kB of JSON lines: far more than a pipe holds
  for (int i = 0; i < kFaults; ++i) Inject(48, "stall" + std::to_string(i));  // one incident each
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (metric(faults) < before + kFaults && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(metric(faults), before + kFaults);
  EXPECT_EQ(metric("gpuheal_output_lines_dropped_total"), 0) << "4 MiB of queue holds them all";
  // When the reader comes back, every line is there.
  int stalled = 0;
  auto stalled_line = [this](const nlohmann::json& j) {
    return Mine(48)(j) && j.value("process", "").starts_with("stall");
  };
  while (agent->WaitEvent(stalled_line, 5s)) {
    if (++stalled == kFaults) break;
  }
  EXPECT_EQ(stalled, kFaults);
}

// Runs `fn` in a child process as nobody (uid and gid 65534, no groups) and waits for it;
// returns the child's wait status.
template <typename Fn>
int AsNobody(Fn fn) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(120);
    fn();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// The kernel records written from now on, read by the test itself: proof that the kernel did
// print the text a test relies on (a check that nothing was reported proves nothing otherwise).
class KernelRecords {
 public:
  KernelRecords() : fd_(open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC)) {
    lseek(fd_, 0, SEEK_END);
  }
  ~KernelRecords() { close(fd_); }
  // The messages of kernel-facility records read so far that contain `text`.
  std::vector<std::string> Find(const std::string& text) {
    char buf[8192];
    for (;;) {
      const ssize_t n = read(fd_, buf, sizeof buf);
      if (n < 0 && errno == EPIPE) continue;
      if (n <= 0) break;
      const std::string rec(buf, static_cast<size_t>(n));
      const size_t semi = rec.find(';');
      if (semi == std::string::npos || std::stoul(rec.substr(0, rec.find(','))) >= 8) continue;
      seen_.push_back(rec.substr(semi + 1, rec.find('\n') - semi - 1));
    }
    std::vector<std::string> out;
    for (const auto& m : seen_) {
      if (m.find(text) != std::string::npos) out.push_back(m);
    }
    return out;
  }

 private:
  int fd_;
  std::vector<std::string> seen_;
};

// An unprivileged user names a process after a fault pattern and lets it segfault, and mounts a
// tmpfs in a user namespace with a driver line as its option: the kernel prints both texts in
// records of its own facility. Neither may become a fault (they did: a trusted fatal network
// fault and a trusted catastrophic Xid 79).
TEST_F(KmsgAgentTest, TextAnUnprivilegedUserMakesTheKernelPrintIsNoFault) {
  const std::string cfg = state_dir_ + "/agent.yaml";
  std::ofstream(cfg) << "kmsg_start: end\n";
  auto agent = Start({"--config", cfg});
  KernelRecords kernel;
  // The kernel prints at most 10 segfault lines per 5 s (printk_ratelimit): lift that for the
  // test, or an earlier run's lines would suppress this run's.
  testing::ScopedSysctl burst("/proc/sys/kernel/printk_ratelimit_burst", "1000");
  ASSERT_TRUE(burst.ok());
  const std::vector<std::string> names = {"Adapter removed", "PCIe link lost",  "forced readonly",
                                          "kernel BUG at",   "Oops: 0000 [#1]", "Link is Down"};
  for (const std::string& name : names) {
    const int status = AsNobody([&] {
      prctl(PR_SET_NAME, name.c_str());
      const rlimit no_core{0, 0};
      setrlimit(RLIMIT_CORE, &no_core);
      signal(SIGSEGV, SIG_DFL);  // the kernel prints "segfault at" only for an unhandled signal
      volatile uintptr_t address = 0x10;
      *reinterpret_cast<volatile int*>(address) = 1;
    });
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) << name << ": " << status;
  }
  const std::string option = fmt::format("NVRM: Xid (PCI:{}): 79", pci_);
#if !defined(__SANITIZE_THREAD__)
  // (Not under TSan: its runtime thread makes the child multi-threaded, and unshare(CLONE_NEWUSER)
  // refuses a multi-threaded process with EINVAL.)
  const int mounted = AsNobody([&] {
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) _exit(121);
    std::ofstream("/proc/self/setgroups") << "deny";
    std::ofstream("/proc/self/uid_map") << "0 65534 1";
    std::ofstream("/proc/self/gid_map") << "0 65534 1";
    if (mount("none", "/tmp", "tmpfs", 0, option.c_str()) == 0) _exit(122);  // must be refused
  });
  ASSERT_TRUE(WIFEXITED(mounted) && WEXITSTATUS(mounted) == 0)
      << "user namespace setup: " << mounted;
#endif
  // The agent has read everything before this marker once it reports the marker.
  Inject(13, "marker");
  ASSERT_TRUE(agent->WaitEvent(Mine(13, "marker"), 5s));
  for (const std::string& name : names) {
    EXPECT_FALSE(kernel.Find(name + "[").empty())
        << "the kernel printed no segfault line for " << name;
  }
#if !defined(__SANITIZE_THREAD__)
  EXPECT_FALSE(kernel.Find("Unknown parameter '" + option).empty())
      << "the kernel printed no mount error";
#endif
  for (const auto& e : agent->events()) {
    const std::string m = e.value("message", "");
    EXPECT_TRUE(m.find("segfault") == std::string::npos &&
                m.find("Unknown parameter") == std::string::npos)
        << "text printed for a user became a fault: " << e.dump();
  }
}

// A user-space write with a priority of 1024 or more keeps a non-zero facility above 127: the
// record reaches the reader as PRI 1024-2047 and is untrusted like any other user-space write
// (it was parsed as a bare line, trusted, and re-reported after every restart).
TEST_F(KmsgAgentTest, UserSpaceWriteWithALargePriorityIsUntrusted) {
  const std::string cfg = state_dir_ + "/agent.yaml";
  std::ofstream(cfg) << "kmsg_start: end\n";
  auto agent = Start({"--config", cfg});
  const std::string line = fmt::format(
      "NVRM: Xid (PCI:{}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", pci_);
  for (int pri : {1024, 1027, 2047}) {
    const int fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
    // With its newline: the kernel keeps a record open for continuation until one arrives.
    const std::string rec = fmt::format("<{}>{}\n", pri, line);
    ASSERT_EQ(write(fd, rec.data(), rec.size()), static_cast<ssize_t>(rec.size()));
    close(fd);
    auto e = agent->WaitEvent(Mine(79), 5s);
    ASSERT_TRUE(e) << pri;
    EXPECT_EQ((*e)["trusted"], false) << pri;
    EXPECT_EQ((*e)["ignored"], true) << pri;
    EXPECT_TRUE((*e)["kmsg_seq"].is_number())
        << "a kmsg record, with its sequence number: " << e->dump();
  }
}

TEST_F(KmsgAgentTest, SigtermStopsCleanly) {
  auto agent = Start();
  EXPECT_EQ(agent->Kill(SIGTERM), 0);
}

}  // namespace
}  // namespace gpuheal
