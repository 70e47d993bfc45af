// The agent assembled from injected ports: a kernel log fed by the test, the fake Kubernetes API,
// a temporary state directory; no /dev/kmsg, no API server, no NVML. A driver record goes in, the
// NodeCondition comes out; a forged one does not.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "agent/standalone_agent.h"
#include "core/keys.h"
#include "fakes/fake_api.h"
#include "fakes/fake_clock.h"
#include "fakes/fake_kernel_log.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class AgentAssemblyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuheal-assembly-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
    auto owned_api = std::make_unique<testing::FakeApi>();
    api = owned_api.get();
    api->Put(kube::NodePath("n1"), {{"status", {{"conditions", json::array()}}}});
    auto owned_log = std::make_unique<testing::FakeKernelLog>();
    log = owned_log.get();
    AgentConfig cfg;
    cfg.state_dir = dir;
    cfg.listen = "";
    cfg.own_signals = false;
    cfg.nvidia.nvml = NvidiaConfig::Use::kOff;
    Configure(cfg);
    AgentPorts ports;
    ports.clock = clock;
    ports.api = std::move(owned_api);
    ports.reporter.node_name = "n1";
    ports.kernel_log = std::move(owned_log);
    out = open((dir + "/fault-lines").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    auto a = StandaloneAgent::Create(std::move(cfg), out, std::move(ports));
    ASSERT_TRUE(a) << a.error().message;
    agent = std::move(*a);
    loop = std::thread([this] { agent->Run(); });
  }
  void TearDown() override {
    if (agent) agent->Stop();
    if (loop.joinable()) loop.join();
    agent.reset();
    close(out);
    std::filesystem::remove_all(dir);
  }

  // The config and the clock of the agent SetUp starts (default: the system's).
  virtual void Configure(AgentConfig& /*cfg*/) {}
  const Clock* clock = nullptr;

  // The fault lines the agent wrote so far.
  std::string FaultLines() const {
    std::ifstream f(dir + "/fault-lines");
    return std::string((std::istreambuf_iterator<char>(f)), {});
  }
  static size_t Count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }
  // Waits at most `limit` for `done`; its last answer.
  static bool Eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = 5s) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() >= end) return false;
      std::this_thread::sleep_for(5ms);
    }
    return true;
  }
  std::string Annotation(const std::string& key) const {
    const json node = *api->Object(kube::NodePath("n1"));
    return node["metadata"].value("annotations", json::object()).value(key, "");
  }
  std::string ConditionStatus(const std::string& type) const {
    const json node = *api->Object(kube::NodePath("n1"));
    for (const auto& c : node.at("status").value("conditions", json::array()))
      if (c.value("type", "") == type) return c.value("status", "");
    return "";
  }

  // The node's AcceleratedHardwareReady once it is False, waiting at most `limit`.
  json WaitForFalse(std::chrono::milliseconds limit = 10s) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      const json node = *api->Object(kube::NodePath("n1"));
      const json conditions = node.at("status").value("conditions", json::array());
      for (const auto& c : conditions)
        if (c.value("type", "") == "AcceleratedHardwareReady" && c.value("status", "") == "False")
          return c;
      std::this_thread::sleep_for(2ms);
    }
    return json();
  }

  std::string dir;
  int out = -1;
  testing::FakeApi* api = nullptr;
  testing::FakeKernelLog* log = nullptr;
  std::unique_ptr<StandaloneAgent> agent;
  std::thread loop;
};

TEST_F(AgentAssemblyTest, ADriverRecordBecomesANodeCondition) {
  log->Push(
      "3,4100,55633652,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen "
      "off the bus.");
  const json c = WaitForFalse();
  ASSERT_FALSE(c.is_null()) << "no condition written";
  EXPECT_EQ(c.value("reason", ""), "NvidiaXID79Error");
  EXPECT_NE(c.value("message", "").find("0000:3b:00"), std::string::npos) << c.dump();
}

TEST_F(AgentAssemblyTest, AForgedRecordFromUserSpaceIsNotTrusted) {
  // Facility 1 (user): what `echo ... > /dev/kmsg` writes. Then a real one on another GPU.
  log->Push(
      "11,4100,55633652,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen "
      "off the bus.");
  log->Push(
      "3,4101,55633700,-;NVRM: Xid (PCI:0000:5e:00): 79, pid=1234, name=python3, GPU has fallen "
      "off the bus.");
  const json c = WaitForFalse();
  ASSERT_FALSE(c.is_null());
  EXPECT_NE(c.value("message", "").find("0000:5e:00"), std::string::npos) << c.dump();
  EXPECT_EQ(c.value("message", "").find("0000:3b:00"), std::string::npos)
      << "the forged record was acted on: " << c.dump();
}

// The agent's time is its Clock's: a fake one steps the quiet period, the OOM-storm window and
// the precursors' window without waiting for them.
class AgentTimeTest : public AgentAssemblyTest {
 protected:
  void Configure(AgentConfig& cfg) override {
    clock = &fake;
    cfg.quiet_period = 10s;  // looked at every second
    cfg.kernel.oom_storm_count = 3;
    cfg.kernel.oom_storm_window = 60s;
    cfg.escalation.count = 2;
  }
  testing::FakeClock fake;
  uint64_t seq = 5000;
  void Kernel(const std::string& text, int level = 3) {
    log->Push(std::to_string(level) + "," + std::to_string(++seq) + ",55633652,-;" + text);
  }
};

// A hung task that repeats escalates (a warning twice: fatal, KernelReady=False) and clears once
// it has been quiet for the quiet period; the repeat window, the escalation and the quiet period
// all count on the agent's clock.
TEST_F(AgentTimeTest, ARepeatingWarningEscalatesAndClearsAfterTheQuietPeriod) {
  const std::string hung = "INFO: task kworker/0:1:12 blocked for more than 120 seconds.";
  Kernel(hung);
  ASSERT_TRUE(Eventually([&] { return Count(FaultLines(), "KernelHungTask") > 0; }));
  fake.Advance(1min);  // past the window in which a line repeats its incident
  Kernel(hung);
  ASSERT_TRUE(Eventually([&] { return ConditionStatus("KernelReady") == "False"; }))
      << "the second incident escalates: " << FaultLines();
  fake.Advance(9s);
  std::this_thread::sleep_for(1500ms);  // a look at the quiet faults or more
  EXPECT_EQ(ConditionStatus("KernelReady"), "False") << "9 s of the 10 s quiet period";
  fake.Advance(2s);
  EXPECT_TRUE(Eventually([&] { return ConditionStatus("KernelReady") == "True"; }))
      << "quiet for 11 s on the agent's clock";
}

TEST_F(AgentTimeTest, TheOomStormWindowIsTheAgentsClocks) {
  auto kill = [&](int pid) {
    Kernel("Out of memory: Killed process " + std::to_string(pid) +
           " (python) total-vm:100kB, anon-rss:50kB, file-rss:0kB, shmem-rss:0kB, UID:0 "
           "pgtables:4kB oom_score_adj:0");
  };
  // Three kills a minute and a second apart: never three within the window.
  for (int pid = 100; pid < 103; ++pid) {
    kill(pid);
    ASSERT_TRUE(Eventually([&] {
      return Count(FaultLines(), "\"reason\":\"KernelOOMKill\"") == size_t(pid - 99);
    })) << FaultLines();
    fake.Advance(61s);
  }
  EXPECT_EQ(Count(FaultLines(), "\"reason\":\"KernelOOMKillStorm\""), 0u) << FaultLines();
  // Three within a minute: a storm.
  for (int pid = 200; pid < 203; ++pid) kill(pid);
  EXPECT_TRUE(Eventually([&] {
    return Count(FaultLines(), "\"reason\":\"KernelOOMKillStorm\"") == 1;
  })) << FaultLines();
}

TEST_F(AgentTimeTest, AGpuAtRiskIsNoLongerAtRiskAfterThePrecursorWindow) {
  Kernel(
      "NVRM: Xid (PCI:0000:3b:00): 63, Row Remapper: New row (0x00000000000123a0) is marked for "
      "remapping, reset gpu to activate.");
  ASSERT_TRUE(Eventually([&] {
    return Annotation(std::string(keys::kGpuAtRisk)).find("0000:3b:00") != std::string::npos;
  })) << FaultLines();
  fake.Advance(23h);
  std::this_thread::sleep_for(1500ms);
  EXPECT_NE(Annotation(std::string(keys::kGpuAtRisk)).find("0000:3b:00"), std::string::npos)
      << "within the 24 h window";
  fake.Advance(2h);
  EXPECT_TRUE(Eventually([&] {
    return Annotation(std::string(keys::kGpuAtRisk)).find("0000:3b:00") == std::string::npos;
  })) << Annotation(std::string(keys::kGpuAtRisk));
}

}  // namespace
}  // namespace gpuheal
