// `gpuheal agent` reporting to a real control plane, with faults injected into the real
// /dev/kmsg (--accept-injected). Each test uses its own Node and a PCI bus id no other test uses;
// the agent's cursor is primed to the end of the kernel buffer so earlier records stay unread.

#include <gtest/gtest.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "agent_process.h"
#include "cli/inject.h"
#include "kube_test_util.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using gpuheal::testing::AgentProcess;
using gpuheal::testing::ControlPlaneEnv;
using gpuheal::testing::Eventually;
using kube::NodeCondition;

class AgentKube : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpuheal::testing::CanWriteKmsg()) GTEST_SKIP() << "needs root and a writable /dev/kmsg";
    client_ = gpuheal::testing::AdminClient();
    std::random_device rd;
    node_ = fmt::format("agent-{:08x}", rd());
    pci_ = fmt::format("{:04x}:{:02x}:00", 0x1000 + rd() % 0xe000, rd() % 256);
    other_pci_ = fmt::format("{:04x}:{:02x}:00", 0x1000 + rd() % 0xe000, rd() % 256);
    ASSERT_EQ(client_->Create(kube::NodePath(), gpuheal::testing::NodeJson(node_))->status, 201);
    char tmpl[] = "/tmp/gpuheal-agent-it-XXXXXX";
    state_dir_ = mkdtemp(tmpl);
    // Prime the cursor: a standalone agent reads this boot's buffer to its end and saves it.
    AgentProcess prime({GPUHEAL_BIN, "agent", "--standalone", "--state-dir", state_dir_, "--listen", ""});
    ASSERT_TRUE(prime.WaitLog([](const auto& j) { return j.value("msg", "") == "agent started"; }, 10s));
    ASSERT_EQ(prime.Kill(SIGTERM), 0);
    std::filesystem::remove(state_dir_ + "/active-faults.json");  // real faults of this machine, if any
  }
  void TearDown() override {
    agent_.reset();
    if (!state_dir_.empty()) std::filesystem::remove_all(state_dir_);
  }

  void StartAgent(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {GPUHEAL_BIN,   "agent",       "--node-name", node_,        "--kubeconfig",
                                     ControlPlaneEnv::kubeconfig(), "--state-dir", state_dir_, "--listen",
                                     "127.0.0.1:0", "--accept-injected"};
    args.insert(args.end(), extra.begin(), extra.end());
    agent_ = std::make_unique<AgentProcess>(args);
    auto started = agent_->WaitLog([](const auto& j) { return j.value("msg", "") == "agent started"; }, 10s);
    ASSERT_TRUE(started) << "agent did not start";
    listen_ = started->value("listen", "");
  }

  void Inject(int xid, const std::string& pci) {
    ASSERT_TRUE(WriteKmsg("/dev/kmsg", InjectMessages(InjectSpec{xid, pci, "4242", "trainer"})).ok());
  }

  std::optional<NodeCondition> Condition(const std::string& type) {
    auto r = client_->Get(kube::NodePath(node_));
    if (!r || !r->ok()) return std::nullopt;
    auto n = kube::DecodeNode(r->body);
    if (!n) return std::nullopt;
    for (const auto& c : n->conditions) {
      if (c.type == type) return c;
    }
    return std::nullopt;
  }
  bool WaitCondition(const std::string& type, const std::string& status, const std::string& reason,
                     std::chrono::milliseconds timeout = 10s) {
    return Eventually([&] {
      auto c = Condition(type);
      return c && c->status == status && c->reason == reason;
    }, timeout);
  }
  // Sum of the counts of this node's Events with `reason`.
  int EventCount(const std::string& reason) {
    auto r = client_->Get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D" + node_);
    int n = 0;
    const nlohmann::json list = nlohmann::json::parse(r->body);
    for (const auto& ev : list["items"]) {
      if (ev["reason"] == reason) n += ev.value("count", 1);
    }
    return n;
  }

  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<AgentProcess> agent_;
  std::string node_, pci_, other_pci_, state_dir_, listen_;
};

TEST_F(AgentKube, Xid79SetsItsDomainFalseAndLeavesOtherWritersAlone) {
  // kubelet's Ready and another agent's condition, written before ours.
  const nlohmann::json others = {{"status",
                                  {{"conditions",
                                    {{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}},
                                     {{"type", "VendorHealthy"}, {"status", "False"}, {"reason", "VendorSaysSo"}}}}}}};
  ASSERT_TRUE(client_->Patch(kube::NodePath(node_) + "/status", kube::PatchType::kStrategicMerge, others)->ok());
  StartAgent();
  for (const char* t : {"AcceleratedHardwareReady", "KernelReady", "NetworkingReady", "StorageReady",
                        "ContainerRuntimeReady"}) {
    ASSERT_TRUE(Eventually([&] { auto c = Condition(t); return c && c->status == "True"; }, 10s)) << t;
  }
  EXPECT_EQ(Condition("AcceleratedHardwareReady")->reason, "NvidiaGPUIsReady");

  Inject(79, pci_);
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID79Error"));
  const auto c = *Condition("AcceleratedHardwareReady");
  EXPECT_NE(c.message.find("GPU " + pci_ + ": Xid 79 (GPU has fallen off the bus)"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("seen 1 time"), std::string::npos) << c.message;
  EXPECT_EQ(Condition("KernelReady")->status, "True");
  EXPECT_EQ(Condition("Ready")->reason, "KubeletReady");
  EXPECT_EQ(Condition("VendorHealthy")->status, "False");
  EXPECT_EQ(Condition("VendorHealthy")->reason, "VendorSaysSo");
}

TEST_F(AgentKube, WarningIsAnEventAndRepetitionEscalatesToTheCondition) {
  StartAgent();
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "True", "NvidiaGPUIsReady"));
  Inject(13, pci_);
  ASSERT_TRUE(Eventually([&] { return EventCount("NvidiaXID13Warning") >= 1; }, 10s));
  EXPECT_EQ(Condition("AcceleratedHardwareReady")->status, "True") << "a warning never flips the condition";
  for (int i = 0; i < 4; ++i) Inject(13, pci_);  // the fifth within 24 h escalates
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID13Error"));
  EXPECT_NE(Condition("AcceleratedHardwareReady")->message.find("escalated by repetition"), std::string::npos);
}

TEST_F(AgentKube, TransitionTimeStaysAtTheFirstTransitionWhileUnhealthy) {
  StartAgent();
  Inject(79, pci_);
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID79Error"));
  const std::string first = Condition("AcceleratedHardwareReady")->last_transition_time;
  std::this_thread::sleep_for(1100ms);  // transition times have one-second resolution
  Inject(48, other_pci_);
  ASSERT_TRUE(Eventually([&] {
    return Condition("AcceleratedHardwareReady")->message.find(other_pci_) != std::string::npos;
  }, 10s));
  const auto c = *Condition("AcceleratedHardwareReady");
  EXPECT_EQ(c.reason, "NvidiaXID79Error") << "the worst fault decides";
  EXPECT_NE(c.message.find("; also: GPU " + other_pci_ + ": Xid 48"), std::string::npos) << c.message;
  EXPECT_EQ(c.last_transition_time, first);
}

TEST_F(AgentKube, RestartReassertsTheFaultWithoutRepeatingOldEvents) {
  StartAgent();
  Inject(13, pci_);
  Inject(79, pci_);
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID79Error"));
  ASSERT_TRUE(Eventually([&] { return EventCount("NvidiaXID13Warning") == 1; }, 10s));
  agent_->Kill(SIGKILL);
  // Meanwhile somebody (wrongly) marks the domain healthy.
  ASSERT_TRUE(client_->Patch(kube::NodePath(node_) + "/status", kube::PatchType::kStrategicMerge,
                             {{"status", {{"conditions", {{{"type", "AcceleratedHardwareReady"}, {"status", "True"},
                                                           {"reason", "SomebodyElse"}}}}}}})
                  ->ok());
  StartAgent();
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID79Error"));
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(EventCount("NvidiaXID13Warning"), 1) << "the old record was not reported again";
}

TEST_F(AgentKube, AnApiOutageDelaysTheConditionButDoesNotLoseIt) {
  StartAgent();
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "True", "NvidiaGPUIsReady"));
  const std::string script = std::string(GPUHEAL_SOURCE_DIR) + "/scripts/control-plane.sh";
  ASSERT_EQ(std::system(("bash " + script + " stop-apiserver --dir " + ControlPlaneEnv::dir()).c_str()), 0);
  Inject(79, pci_);
  ASSERT_TRUE(agent_->WaitEvent([&](const auto& j) { return j.value("pci", "") == pci_; }, 5s));
  // The agent noticed it cannot write: /healthz says so.
  EXPECT_TRUE(Eventually([&] {
    return gpuheal::testing::HttpGet(listen_, "/healthz").find("Kubernetes API not reachable") != std::string::npos;
  }, 10s));
  std::this_thread::sleep_for(8s);  // about 10 s of outage in all
  ASSERT_EQ(std::system(("bash " + script + " start-apiserver --dir " + ControlPlaneEnv::dir()).c_str()), 0);
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID79Error", 45s));
  const std::string metrics = gpuheal::testing::HttpGet(listen_, "/metrics");
  // Initial conditions + the fault: two successful writes, whatever the number of retries.
  EXPECT_NE(metrics.find("gpuheal_api_writes_total 2\n"), std::string::npos) << metrics;
}

TEST_F(AgentKube, ATransientFaultClearsAfterItsQuietPeriod) {
  const std::string cfg = state_dir_ + "/agent.yaml";
  std::ofstream(cfg) << "escalation: {count: 2}\nrecovery: {quiet_period: 2s}\n";
  StartAgent({"--config", cfg});
  Inject(13, pci_);
  Inject(13, pci_);  // escalated: fatal, transient
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID13Error"));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "True", "NvidiaGPUIsReady", 10s));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1s);
}

}  // namespace
}  // namespace gpuheal

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new gpuheal::testing::ControlPlaneEnv(false));
  return RUN_ALL_TESTS();
}
