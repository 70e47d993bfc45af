// Tier 2: the standalone agent against the real /dev/kmsg. Each test injects records naming a
// PCI bus id no other test uses, so records left in the kernel buffer by earlier runs or tests
// cannot be confused with this test's.

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "agent_process.h"
#include "cli/inject.h"

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
    std::vector<std::string> args = {GPUHEAL_BIN, "agent", "--standalone", "--state-dir",
                                     state_dir_,  "--listen", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto a = std::make_unique<AgentProcess>(args);
    auto started = a->WaitLog([](const auto& j) { return j.value("msg", "") == "agent started"; }, 10s);
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
  // The accompanying "fallen off the bus" line is the same event: merged, not reported twice.
  auto dup = agent->WaitEvent(
      [this](const nlohmann::json& j) { return j.value("kind", "") == "gpu_fallen_off_bus" && j.value("pci", nlohmann::json()) == pci_; },
      500ms);
  EXPECT_FALSE(dup) << dup->dump();
}

TEST_F(KmsgAgentTest, RepetitionEscalates) {
  auto agent = Start({"--accept-injected"});
  for (int i = 1; i <= 5; ++i) {
    Inject(13, "rep" + std::to_string(i));
    auto e = agent->WaitEvent(Mine(13, "rep" + std::to_string(i)), 5s);
    ASSERT_TRUE(e) << i;
    EXPECT_EQ((*e)["count"], i);
    if (i < 5) {
      EXPECT_EQ((*e)["severity"], "warn");
      EXPECT_EQ((*e)["reason"], "NvidiaXID13Warning");
    } else {
      EXPECT_EQ((*e)["severity"], "fatal");
      EXPECT_EQ((*e)["reason"], "NvidiaXID13Error");
      EXPECT_EQ((*e)["escalated"], true);
    }
  }
}

TEST_F(KmsgAgentTest, RestartNeitherRepeatsNorLoses) {
  {
    auto agent = Start({"--accept-injected"});
    Inject(31, "before");
    ASSERT_TRUE(agent->WaitEvent(Mine(31, "before"), 5s));
    // SIGKILL right after detection: the cursor was saved before the event was printed.
    agent->Kill(SIGKILL);
  }
  Inject(31, "while-down");  // must not be lost
  auto agent = Start({"--accept-injected"});
  Inject(31, "after");
  ASSERT_TRUE(agent->WaitEvent(Mine(31, "after"), 5s));
  int before = 0, down = 0;
  for (const auto& e : agent->events()) {
    if (Mine(31, "before")(e)) ++before;
    if (Mine(31, "while-down")(e)) ++down;
  }
  EXPECT_EQ(before, 0) << "a restart re-reported an old record";
  EXPECT_EQ(down, 1) << "a fault logged while the agent was down was lost";
}

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
  for (int i = 0; i < kFaults; ++i) Inject(48, "stall");
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (metric(faults) < before + kFaults && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(metric(faults), before + kFaults);
  EXPECT_EQ(metric("gpuheal_output_lines_dropped_total"), 0) << "4 MiB of queue holds them all";
  // When the reader comes back, every line is there.
  int stalled = 0;
  while (agent->WaitEvent(Mine(48, "stall"), 5s)) {
    if (++stalled == kFaults) break;
  }
  EXPECT_EQ(stalled, kFaults);
}

TEST_F(KmsgAgentTest, SigtermStopsCleanly) {
  auto agent = Start();
  EXPECT_EQ(agent->Kill(SIGTERM), 0);
}

}  // namespace
}  // namespace gpuheal
