// `gpuheal agent` reporting to a real control plane, with faults injected into the real
// /dev/kmsg (--accept-injected). Each test uses its own Node and a PCI bus id no other test uses;
// the agent's cursor is primed to the end of the kernel buffer so earlier records stay unread.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "agent/config.h"
#include "agent/diag_bundle.h"
#include "agent/diag_collectors.h"
#include "agent_process.h"
#include "apply_manifest.h"
#include "drill/inject.h"
#include "kube/client.h"
#include "kube_test_util.h"
#include "nvml_scenario.h"
#include "run_binary.h"
#include "s3_server.h"

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
    AgentProcess prime(
        {GPUHEAL_BIN, "agent", "--standalone", "--state-dir", state_dir_, "--listen", ""});
    ASSERT_TRUE(
        prime.WaitLog([](const auto& j) { return j.value("msg", "") == "agent started"; }, 10s));
    ASSERT_EQ(prime.Kill(SIGTERM), 0);
    std::filesystem::remove(state_dir_ +
                            "/active-faults.json");  // real faults of this machine, if any
  }
  void TearDown() override {
    controller_.reset();
    agent_.reset();
    if (!state_dir_.empty()) std::filesystem::remove_all(state_dir_);
  }

  void StartAgent(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {GPUHEAL_BIN,        "agent",
                                     "--node-name",      node_,
                                     "--kubeconfig",     ControlPlaneEnv::kubeconfig(),
                                     "--state-dir",      state_dir_,
                                     "--listen",         "127.0.0.1:0",
                                     "--accept-injected"};
    args.insert(args.end(), extra.begin(), extra.end());
    agent_ = std::make_unique<AgentProcess>(args);
    auto started =
        agent_->WaitLog([](const auto& j) { return j.value("msg", "") == "agent started"; }, 10s);
    ASSERT_TRUE(started) << "agent did not start";
    listen_ = started->value("listen", "");
  }

  // The agent with NVML (the double: one healthy GPU at pci_, resets by nvml_double_ctl), no
  // polling, and the reset policy left to the controller's requests. Config in
  // state_dir_/nvml.yaml.
  gpuheal::testing::TestGpu StartAgentWithOneGpu(gpuheal::testing::Scenario& sc,
                                                 const std::string& uuid) {
    gpuheal::testing::TestGpu gpu;
    gpu.pci = pci_;
    gpu.bus_id = "0000" + pci_ + ".0";
    for (char& ch : gpu.bus_id) ch = static_cast<char>(toupper(static_cast<unsigned char>(ch)));
    gpu.uuid = uuid;
    sc.Write({{"devices", {gpuheal::testing::HealthyDevice(gpu)}}});
    const std::string cfg = state_dir_ + "/nvml.yaml";
    std::filesystem::create_directories(state_dir_ + "/sysfs");
    std::ofstream(cfg) << fmt::format(
        "nvidia:\n  poll_period: 1h\n  sysfs_pci_devices: {}/sysfs\n  reset:\n"
        "    command: [\"{}\", \"reset\", \"{}\", \"{{bus_id}}\"]\n",
        state_dir_, NVML_DOUBLE_CTL, sc.path());
    StartAgent({"--config", cfg, "--nvml-library", NVML_DOUBLE});
    return gpu;
  }

  void Inject(int xid, const std::string& pci, const std::string& process = "trainer") {
    ASSERT_TRUE(WriteKmsg("/dev/kmsg", InjectMessages(InjectSpec{xid, pci, "4242", process})).ok());
  }

  std::optional<NodeCondition> Condition(const std::string& type) {
    return gpuheal::testing::NodeConditionOf(*client_, node_, type);
  }
  bool WaitCondition(const std::string& type, const std::string& status, const std::string& reason,
                     std::chrono::milliseconds timeout = 10s) {
    return Eventually(
        [&] {
          auto c = Condition(type);
          return c && c->status == status && c->reason == reason;
        },
        timeout);
  }
  // Sum of the counts of this node's Events with `reason`.
  int EventCount(const std::string& reason) {
    return gpuheal::testing::NodeEventCount(*client_, node_, reason);
  }

  // `gpuheal controller` on the shipped NodeRepair CRD, leading on its own Lease; the breaker off
  // (other tests' nodes stay unhealthy). Stopped at TearDown if the test did not.
  AgentProcess& StartController(const std::string& lease, const std::string& policy_extra = "") {
    gpuheal::testing::EnsureCrd(*client_, "noderepairs.yaml", kube::kNodeRepairsPath);
    const std::string policy = state_dir_ + "/policy.yaml";
    std::ofstream(policy) << "breaker:\n  share_percent: 100\n" << policy_extra;
    controller_ = std::make_unique<AgentProcess>(std::vector<std::string>{
        GPUHEAL_BIN, "controller", "--kubeconfig", ControlPlaneEnv::kubeconfig(), "--policy",
        policy, "--listen", "", "--lease-namespace", "default", "--lease-name", lease});
    return *controller_;
  }

  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<AgentProcess> agent_, controller_;
  std::string node_, pci_, other_pci_, state_dir_, listen_;
};

TEST_F(AgentKube, Xid79SetsItsDomainFalseAndLeavesOtherWritersAlone) {
  // kubelet's Ready and another agent's condition, written before ours.
  const nlohmann::json others = {
      {"status",
       {{"conditions",
         {{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}},
          {{"type", "VendorHealthy"}, {"status", "False"}, {"reason", "VendorSaysSo"}}}}}}};
  ASSERT_TRUE(
      client_->Patch(kube::NodePath(node_) + "/status", kube::PatchType::kStrategicMerge, others)
          ->ok());
  StartAgent();
  for (const char* t : {"AcceleratedHardwareReady", "KernelReady", "NetworkingReady",
                        "StorageReady", "ContainerRuntimeReady"}) {
    ASSERT_TRUE(Eventually(
        [&] {
          auto c = Condition(t);
          return c && c->status == "True";
        },
        10s))
        << t;
  }
  EXPECT_EQ(Condition("AcceleratedHardwareReady")->reason, "NvidiaGPUIsReady");

  Inject(79, pci_);
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID79Error"));
  const auto c = *Condition("AcceleratedHardwareReady");
  EXPECT_NE(c.message.find("GPU " + pci_ + ": Xid 79 (GPU has fallen off the bus)"),
            std::string::npos)
      << c.message;
  EXPECT_NE(c.message.find("seen 1 time"), std::string::npos) << c.message;
  EXPECT_EQ(Condition("KernelReady")->status, "True");
  EXPECT_EQ(Condition("Ready")->reason, "KubeletReady");
  EXPECT_EQ(Condition("VendorHealthy")->status, "False");
  EXPECT_EQ(Condition("VendorHealthy")->reason, "VendorSaysSo");
}

// An application Xid is an Event naming the process; repeats of one program never flip the
// condition, three different programs failing on this GPU alone do. (From the end of the kernel
// buffer: Xid 13s of other GPUs left there by earlier tests would hold the escalation back.)
TEST_F(AgentKube, WarningIsAnEventAndDistinctWorkloadsEscalateToTheCondition) {
  const std::string cfg = state_dir_ + "/agent.yaml";
  std::ofstream(cfg) << "kmsg_start: end\n";
  StartAgent({"--config", cfg});
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "True", "NvidiaGPUIsReady"));
  for (int i = 0; i < 5; ++i) Inject(13, pci_);
  ASSERT_TRUE(Eventually([&] { return EventCount("NvidiaXID13Warning") >= 1; }, 10s));
  ASSERT_TRUE(agent_->WaitEvent(
      [&](const auto& j) { return j.value("pci", "") == pci_ && j.contains("repeat_of"); }, 5s));
  EXPECT_EQ(Condition("AcceleratedHardwareReady")->status, "True")
      << "repeats of one program never flip the condition";
  Inject(13, pci_, "evaluator");
  Inject(13, pci_, "profiler");
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID13Error"));
  EXPECT_NE(Condition("AcceleratedHardwareReady")->message.find("escalated: distinct_workloads"),
            std::string::npos)
      << Condition("AcceleratedHardwareReady")->message;
}

TEST_F(AgentKube, TransitionTimeStaysAtTheFirstTransitionWhileUnhealthy) {
  StartAgent();
  Inject(79, pci_);
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID79Error"));
  const std::string first = Condition("AcceleratedHardwareReady")->last_transition_time;
  std::this_thread::sleep_for(1100ms);  // transition times have one-second resolution
  Inject(48, other_pci_);
  ASSERT_TRUE(Eventually(
      [&] {
        return Condition("AcceleratedHardwareReady")->message.find(other_pci_) != std::string::npos;
      },
      10s));
  const auto c = *Condition("AcceleratedHardwareReady");
  EXPECT_EQ(c.reason, "NvidiaXID79Error") << "the worst fault decides";
  EXPECT_NE(c.message.find("; also: GPU " + other_pci_ + ": Xid 48"), std::string::npos)
      << c.message;
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
  ASSERT_TRUE(client_
                  ->Patch(kube::NodePath(node_) + "/status", kube::PatchType::kStrategicMerge,
                          {{"status",
                            {{"conditions",
                              {{{"type", "AcceleratedHardwareReady"},
                                {"status", "True"},
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
  ASSERT_EQ(
      std::system(("bash " + script + " stop-apiserver --dir " + ControlPlaneEnv::dir()).c_str()),
      0);
  Inject(79, pci_);
  ASSERT_TRUE(agent_->WaitEvent([&](const auto& j) { return j.value("pci", "") == pci_; }, 5s));
  // The agent noticed it cannot write: /healthz says so.
  EXPECT_TRUE(Eventually(
      [&] {
        return gpuheal::testing::HttpGet(listen_, "/healthz")
                   .find("Kubernetes API not reachable") != std::string::npos;
      },
      10s));
  std::this_thread::sleep_for(8s);  // about 10 s of outage in all
  ASSERT_EQ(
      std::system(("bash " + script + " start-apiserver --dir " + ControlPlaneEnv::dir()).c_str()),
      0);
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID79Error", 45s));
  const std::string metrics = gpuheal::testing::HttpGet(listen_, "/metrics");
  // Initial conditions + the fault: two successful writes, whatever the number of retries.
  EXPECT_NE(metrics.find("gpuheal_api_writes_total 2\n"), std::string::npos) << metrics;
}

// etcd frozen: the API server takes the agent's write and never answers before the client's
// timeout. /healthz said 200 all that time; a write unanswered past its deadline now counts as
// failed, and health returns once the write lands.
TEST_F(AgentKube, AHangingWriteMakesHealthFailAfterItsDeadline) {
  StartAgent();
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "True", "NvidiaGPUIsReady"));
  ASSERT_NE(gpuheal::testing::HttpGet(listen_, "/healthz").find("200 OK"), std::string::npos);
  std::ifstream pids(ControlPlaneEnv::dir() + "/pids");
  std::string name;
  pid_t etcd = 0, pid = 0;
  while (pids >> name >> pid) {
    if (name == "etcd") etcd = pid;
  }
  ASSERT_GT(etcd, 0) << "no etcd in " << ControlPlaneEnv::dir() << "/pids";
  ASSERT_EQ(kill(etcd, SIGSTOP), 0);
  struct Thaw {
    pid_t p;
    ~Thaw() { kill(p, SIGCONT); }
  } thaw{etcd};
  const auto frozen = std::chrono::steady_clock::now();
  Inject(79, pci_);
  ASSERT_TRUE(agent_->WaitEvent([&](const auto& j) { return j.value("pci", "") == pci_; }, 5s));
  ASSERT_TRUE(Eventually(
      [&] {
        return gpuheal::testing::HttpGet(listen_, "/healthz").find("had no answer") !=
               std::string::npos;
      },
      15s))
      << gpuheal::testing::HttpGet(listen_, "/healthz");
  EXPECT_LT(std::chrono::steady_clock::now() - frozen, 12s)
      << "the 5 s write deadline, not the 30 s request timeout";
  kill(etcd, SIGCONT);
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID79Error", 60s));
  EXPECT_TRUE(Eventually(
      [&] {
        return gpuheal::testing::HttpGet(listen_, "/healthz").find("200 OK") != std::string::npos;
      },
      30s));
}

TEST_F(AgentKube, ATransientFaultClearsAfterItsQuietPeriod) {
  const std::string cfg = state_dir_ + "/agent.yaml";
  std::ofstream(cfg)
      << "kmsg_start: end\nescalation: {distinct_workloads: 2}\nrecovery: {quiet_period: 2s}\n";
  StartAgent({"--config", cfg});
  Inject(13, pci_);
  Inject(13, pci_, "evaluator");  // escalated: fatal, transient
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID13Error"));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "True", "NvidiaGPUIsReady", 10s));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1s);
}

// Reboot recovery through the binary: active faults saved in an earlier boot clear when the GPU is
// back on the PCI bus, and stay when it is still missing. (The boot is simulated by the boot id
// in the saved state; the GPU that is "back" is a PCI device this machine really has.)
TEST_F(AgentKube, AfterARebootOnlyTheGpusStillMissingKeepTheirFault) {
  std::string present;
  for (const auto& e : std::filesystem::directory_iterator("/sys/bus/pci/devices")) {
    present = e.path().filename().string().substr(0, 10);  // "dddd:bb:dd" of "dddd:bb:dd.f"
    break;
  }
  ASSERT_FALSE(present.empty());
  auto fault = [](const std::string& pci) {
    return nlohmann::json{
        {"key", "xid/79/" + pci},
        {"kind", "xid"},
        {"severity", "catastrophic"},
        {"condition", "AcceleratedHardwareReady"},
        {"reason", "NvidiaXID79Error"},
        {"message", "NVRM: Xid (PCI:" + pci + "): 79, GPU has fallen off the bus."},
        {"count", 1},
        {"first_seen_unix", 1796000000},
        {"last_seen_unix", 1796000000},
        {"boot_id", "an-earlier-boot"},
        {"xid", 79},
        {"pci", pci}};
  };
  std::ofstream(state_dir_ + "/active-faults.json")
      << nlohmann::json{{"version", 1}, {"active_faults", {fault(present), fault(pci_)}}}.dump();
  StartAgent();
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID79Error"));
  const auto c = *Condition("AcceleratedHardwareReady");
  EXPECT_NE(c.message.find("GPU " + pci_), std::string::npos) << c.message;
  EXPECT_EQ(c.message.find("GPU " + present), std::string::npos) << "present again: cleared\n"
                                                                 << c.message;
  bool logged = false;
  for (const auto& j : agent_->logs()) {
    logged |= j.value("msg", "") == "fault cleared by reboot" &&
              j.value("key", "") == "xid/79/" + present &&
              j.value("rule", "") == "reboot-with-gpu-present";
  }
  EXPECT_TRUE(logged) << "the clearing is logged";
}

// The driver-API side (NVML test double): a double-bit error reported by NVML sets the condition
// False; a critical fault on the same GPU makes the agent drain it (the drain state shows in the
// condition message), wait for its work, reset and verify it; the verified reset returns the
// condition to True and each step is an Event on the Node.
TEST_F(AgentKube, AVerifiedGpuResetReturnsTheConditionToTrue) {
  gpuheal::testing::Scenario sc;
  gpuheal::testing::TestGpu gpu;
  gpu.pci = pci_;
  gpu.bus_id = "0000" + pci_ + ".0";
  for (char& ch : gpu.bus_id) ch = static_cast<char>(toupper(static_cast<unsigned char>(ch)));
  gpu.uuid = "GPU-12345678-aaaa-bbbb-cccc-ddddeeeeffff";
  auto dev = gpuheal::testing::HealthyDevice(gpu);
  dev["processes"] = {4242};
  sc.Write({{"devices", {dev}}});
  const std::string cfg = state_dir_ + "/nvml.yaml";
  std::filesystem::create_directories(state_dir_ + "/sysfs");
  std::ofstream(cfg) << fmt::format(
      "nvidia:\n  poll_period: 200ms\n  sysfs_pci_devices: {}/sysfs\n  reset:\n    on_critical: "
      "true\n"
      "    drain_timeout: 30s\n    command: [\"{}\", \"reset\", \"{}\", \"{{bus_id}}\"]\n",
      state_dir_, NVML_DOUBLE_CTL, sc.path());
  StartAgent({"--config", cfg, "--nvml-library", NVML_DOUBLE});
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "True", "NvidiaGPUIsReady"));
  sc.Write({{"devices", {dev}}, {"events", {{{"id", "dbe"}, {"type", "DoubleBitEccError"}}}}});
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaDoubleBitError"));
  EXPECT_NE(Condition("AcceleratedHardwareReady")->message.find(gpu.uuid), std::string::npos);

  sc.Write({{"devices", {dev}},
            {"events",
             {{{"id", "dbe"}, {"type", "DoubleBitEccError"}},
              {{"id", "gsp"}, {"type", "XidCriticalError"}, {"data", 119}}}}});
  ASSERT_TRUE(Eventually(
      [&] {
        auto c = Condition("AcceleratedHardwareReady");
        return c && c->message.find("GPU " + pci_ + " (" + gpu.uuid + ") [drained]") !=
                        std::string::npos;
      },
      10s))
      << "the drain state is visible on the Node: "
      << Condition("AcceleratedHardwareReady")->message;
  EXPECT_EQ(Condition("AcceleratedHardwareReady")->status, "False")
      << "still faulty until the reset";

  auto s = sc.Read();
  s["devices"][0]["processes"] = nlohmann::json::array();  // the workload finished
  sc.Write(s);
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "True", "NvidiaGPUIsReady", 20s));
  EXPECT_EQ(sc.Read()["devices"][0]["resets"], 1);
  ASSERT_TRUE(Eventually([&] { return EventCount("GPURecovery") >= 3; }, 10s))
      << "drain, reset and done are Events on the Node";
  EXPECT_EQ(EventCount("GPURecoveryFailed"), 0);
  EXPECT_GE(EventCount("NvidiaXID119Warning"), 1) << "the critical fault itself is an Event";
}

// The controller's GPU-level request (annotation gpuheal.io/gpu-recovery-request on the Node):
// the agent drains, waits, resets, verifies and undrains the GPU, answers in
// gpuheal.io/gpu-recovery-status (written through nodes/status), and never acts on an id twice,
// not even after a restart. A malformed request is rejected with a reason.
TEST_F(AgentKube, TheControllersRecoveryRequestIsActedOnOnceAndAnswered) {
  gpuheal::testing::Scenario sc;
  const auto gpu = StartAgentWithOneGpu(sc, "GPU-87654321-aaaa-bbbb-cccc-ddddeeeeffff");
  const std::string cfg = state_dir_ + "/nvml.yaml";
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "True", "NvidiaGPUIsReady"));
  auto annotate = [&](const std::string& value) {
    ASSERT_TRUE(
        client_
            ->Patch(kube::NodePath(node_), kube::PatchType::kMerge,
                    {{"metadata", {{"annotations", {{"gpuheal.io/gpu-recovery-request", value}}}}}})
            ->ok());
  };
  auto status = [&]() -> nlohmann::json {
    auto r = client_->Get(kube::NodePath(node_));
    if (!r || !r->ok()) return nullptr;
    const auto node = nlohmann::json::parse(r->body);
    const auto a = node["metadata"].value("annotations", nlohmann::json::object());
    if (!a.contains("gpuheal.io/gpu-recovery-status")) return nullptr;
    return nlohmann::json::parse(a["gpuheal.io/gpu-recovery-status"].get<std::string>());
  };
  annotate(nlohmann::json({{"id", "nr-1"}, {"gpus", {gpu.bus_id}}}).dump());
  ASSERT_TRUE(Eventually(
      [&] {
        auto s = status();
        return s.is_object() && s["id"] == "nr-1" && s["state"] == "succeeded";
      },
      20s))
      << status().dump();
  EXPECT_EQ(status()["gpus"][pci_]["step"], "done");
  EXPECT_EQ(status()["gpus"][pci_]["ok"], true);
  EXPECT_EQ(sc.Read()["devices"][0]["resets"], 1);
  ASSERT_TRUE(Eventually([&] { return EventCount("GPURecovery") >= 3; }, 10s));

  // A restart sees the same request and does not act on it again.
  agent_.reset();
  StartAgent({"--config", cfg, "--nvml-library", NVML_DOUBLE});
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(sc.Read()["devices"][0]["resets"], 1) << "at most once per request id";

  annotate(R"({"id": "nr-2", "gpus": ["not-a-gpu"]})");
  ASSERT_TRUE(Eventually(
      [&] {
        auto s = status();
        return s.is_object() && s["state"] == "rejected";
      },
      10s))
      << status().dump();
  EXPECT_NE(status()["error"].get<std::string>().find("\"not-a-gpu\" is not a PCI bus id"),
            std::string::npos);
  annotate(nlohmann::json({{"id", "nr-3"}, {"gpus", {"0000:ee:00"}}}).dump());
  ASSERT_TRUE(Eventually(
      [&] {
        auto s = status();
        return s.is_object() && s["id"] == "nr-3" && s["state"] == "failed";
      },
      10s))
      << status().dump();
  EXPECT_NE(
      status()["gpus"]["0000:ee:00"]["message"].get<std::string>().find("NVML lists no such GPU"),
      std::string::npos);
  EXPECT_GE(EventCount("GPURecoveryFailed"), 1);
}

// The critical rung end to end: Xid 45 in the kernel log → the agent holds it for that GPU in
// gpuheal.io/gpu-faults (the condition stays True) → the controller asks for a GPU recovery →
// the agent drains, resets (NVML double), verifies and answers → the fault clears and the
// NodeRepair is Recovered. The node is never tainted or cordoned.
TEST_F(AgentKube, CriticalXidIsRecoveredThroughTheControllersRequest) {
  const std::string repairs = "/apis/gpuheal.io/v1alpha1/noderepairs";
  gpuheal::testing::Scenario sc;
  StartAgentWithOneGpu(sc, "GPU-45454545-aaaa-bbbb-cccc-ddddeeeeffff");
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "True", "NvidiaGPUIsReady"));
  auto annotation = [&](const std::string& key) -> nlohmann::json {
    auto r = client_->Get(kube::NodePath(node_));
    if (!r || !r->ok()) return nullptr;
    const auto n = nlohmann::json::parse(r->body);
    const auto a = n["metadata"].value("annotations", nlohmann::json::object());
    return a.contains(key) ? nlohmann::json::parse(a[key].get<std::string>()) : nlohmann::json();
  };
  EXPECT_EQ(annotation("gpuheal.io/gpu-faults"), nlohmann::json::object())
      << "published, empty, from the start";
  Inject(45, pci_);
  ASSERT_TRUE(Eventually([&] { return annotation("gpuheal.io/gpu-faults").contains(pci_); }, 10s));
  const auto entry = annotation("gpuheal.io/gpu-faults")[pci_];
  EXPECT_EQ(entry["severity"], "critical");
  EXPECT_EQ(entry["reason"], "NvidiaXID45Warning");
  EXPECT_EQ(entry["xid"], 45);
  EXPECT_EQ(Condition("AcceleratedHardwareReady")->status, "True")
      << "a critical fault flips no condition";

  auto& controller = StartController("critical-" + node_);
  auto records = [&]() {
    std::vector<nlohmann::json> out;
    auto r = client_->Get(repairs + "?labelSelector=gpuheal.io%2Fnode%3D" + node_);
    if (r && r->ok()) {
      const auto list = nlohmann::json::parse(r->body);
      for (const auto& i : list["items"]) out.push_back(i);
    }
    return out;
  };
  ASSERT_TRUE(Eventually(
      [&] {
        auto rs = records();
        return rs.size() == 1 &&
               rs[0].value("status", nlohmann::json::object()).value("phase", "") == "Recovered";
      },
      30s))
      << (records().empty() ? "no record" : records()[0].dump());
  EXPECT_EQ(sc.Read()["devices"][0]["resets"], 1);
  EXPECT_EQ(annotation("gpuheal.io/gpu-recovery-status")["state"], "succeeded");
  EXPECT_EQ(annotation("gpuheal.io/gpu-recovery-status")["id"], records()[0]["metadata"]["name"]);
  ASSERT_TRUE(Eventually(
      [&] { return annotation("gpuheal.io/gpu-faults") == nlohmann::json::object(); }, 10s))
      << "the verified reset cleared the GPU's fault";
  auto n = kube::DecodeNode(client_->Get(kube::NodePath(node_))->body);
  ASSERT_TRUE(n.ok());
  EXPECT_FALSE(n->unschedulable);
  for (const auto& t : n->taints) EXPECT_NE(t.key, "gpuheal.io/gpu-fault");
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(records().size(), 1u) << "one episode";
  EXPECT_EQ(sc.Read()["devices"][0]["resets"], 1) << "one reset";
  controller.Kill(SIGTERM);
}

// One severity from agent to controller: the agent's config makes Xid 48 (fatal in the catalog)
// catastrophic; the condition's message carries that decision, and the controller isolates the
// node (NoExecute) where the reason code alone means fatal (NoSchedule).
TEST_F(AgentKube, AnXidOverriddenInTheAgentIsActedOnAsTheAgentDecided) {
  const std::string cfg = state_dir_ + "/xids.yaml";
  std::ofstream(cfg) << "xids:\n  48: {severity: catastrophic}\n";
  // A pool of its own: other tests' nodes stay unhealthy, and the pool gate would hold the repair.
  ASSERT_TRUE(client_
                  ->Patch(kube::NodePath(node_), kube::PatchType::kMerge,
                          {{"metadata", {{"labels", {{"gpuheal.io/pool", node_}}}}}})
                  ->ok());
  StartAgent({"--config", cfg});
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "True", "NvidiaGPUIsReady"));
  Inject(48, pci_);
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID48Error"));
  const std::string msg = Condition("AcceleratedHardwareReady")->message;
  EXPECT_EQ(msg.find("[catastrophic/isolate] GPU " + pci_ + ": Xid 48"), 0u) << msg;
  auto& controller = StartController("override-" + node_);
  auto taint = [&]() -> kube::Taint {
    auto n = kube::DecodeNode(client_->Get(kube::NodePath(node_))->body);
    for (const auto& t : n ? n->taints : std::vector<kube::Taint>{}) {
      if (t.key == "gpuheal.io/gpu-fault") return t;
    }
    return {};
  };
  ASSERT_TRUE(Eventually([&] { return taint().effect == "NoExecute"; }, 20s))
      << taint().value << ":" << taint().effect;
  EXPECT_EQ(taint().value, "catastrophic");
  controller.Kill(SIGTERM);
}

// `gpuheal status` shows the node's domains and the GPU its fault names.
TEST_F(AgentKube, StatusShowsTheFaultAndTheGpu) {
  StartAgent();
  Inject(79, pci_);
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID79Error"));
  const auto json_run =
      gpuheal::testing::RunGpuheal("status -o json --kubeconfig " + ControlPlaneEnv::kubeconfig(),
                                   /*with_stderr=*/false);
  ASSERT_EQ(json_run.code, 0);
  const std::string& out = json_run.out;
  auto j = nlohmann::json::parse(out);
  bool found = false;
  for (const auto& node : j) {
    if (node["node"] != node_) continue;
    found = true;
    EXPECT_EQ(node["conditions"]["AcceleratedHardwareReady"]["status"], "False");
    EXPECT_EQ(node["conditions"]["KernelReady"]["status"], "True");
    EXPECT_EQ(node["gpus_affected"], nlohmann::json::array({pci_}));
  }
  EXPECT_TRUE(found) << out;
  // The table names the same.
  const auto table =
      gpuheal::testing::RunGpuheal("status --kubeconfig " + ControlPlaneEnv::kubeconfig());
  ASSERT_EQ(table.code, 0) << table.out;
  const size_t row = table.out.find(node_);
  ASSERT_NE(row, std::string::npos) << table.out;
  const std::string line = table.out.substr(row, table.out.find('\n', row) - row);
  EXPECT_NE(line.find("FAULT"), std::string::npos) << line;
  EXPECT_NE(line.find(pci_), std::string::npos) << line;
  EXPECT_NE(line.find("NvidiaXID79Error"), std::string::npos) << line;
}

// The shipped manifests, applied unchanged: the agent's service account with a token bound to a
// pod on node A can write A's status, cannot write B's (the ValidatingAdmissionPolicy) and
// cannot read secrets (RBAC).
TEST_F(AgentKube, ShippedManifestsGiveTheAgentItsOwnNodeOnly) {
  const std::string deploy = std::string(GPUHEAL_SOURCE_DIR) + "/deploy/kubernetes/";
  auto objs = gpuheal::testing::ApplyManifest(*client_, deploy + "agent.yaml");
  gpuheal::testing::ApplyManifest(*client_, deploy + "agent-node-restriction.yaml");
  // The ConfigMap's config is one the agent accepts.
  for (const auto& o : objs) {
    if (o["kind"] == "ConfigMap") {
      auto cfg =
          ParseAgentConfig(o["data"]["agent.yaml"].get<std::string>(), "configmap agent.yaml");
      EXPECT_TRUE(cfg.ok()) << cfg.error().message;
    }
  }
  const std::string node_b = node_ + "-b";
  ASSERT_EQ(client_->Create(kube::NodePath(), gpuheal::testing::NodeJson(node_b))->status, 201);
  nlohmann::json pod = gpuheal::testing::PodJson("gpuheal-system", "agent-on-a", node_);
  pod["spec"]["serviceAccountName"] = "gpuheal-agent";
  auto created = client_->Create(kube::PodPath("gpuheal-system"), pod);
  ASSERT_EQ(created->status, 201) << created->Describe();
  const std::string pod_uid = nlohmann::json::parse(created->body)["metadata"]["uid"];
  auto tr = client_->Create(
      "/api/v1/namespaces/gpuheal-system/serviceaccounts/gpuheal-agent/token",
      {{"apiVersion", "authentication.k8s.io/v1"},
       {"kind", "TokenRequest"},
       {"spec",
        {{"expirationSeconds", 3600},
         {"boundObjectRef",
          {{"kind", "Pod"}, {"apiVersion", "v1"}, {"name", "agent-on-a"}, {"uid", pod_uid}}}}}});
  ASSERT_EQ(tr->status, 201) << tr->Describe();
  const std::string token = nlohmann::json::parse(tr->body)["status"]["token"];

  // A kubeconfig with only that token, for the agent binary and for a client of our own.
  const std::string kc = state_dir_ + "/agent.kubeconfig";
  gpuheal::testing::WriteTokenKubeconfig(kc, client_->config().server, token);
  auto acfg = kube::LoadKubeconfig(kc);
  ASSERT_TRUE(acfg.ok()) << acfg.error().message;
  auto as_agent = kube::Client::Create(std::move(*acfg), kube::RetryPolicy{1, 10ms, 10ms});
  ASSERT_TRUE(as_agent.ok());

  // The agent itself, for A, with that token: its writes land.
  agent_ = std::make_unique<AgentProcess>(std::vector<std::string>{
      GPUHEAL_BIN, "agent", "--node-name", node_, "--kubeconfig", kc, "--state-dir", state_dir_,
      "--listen", "127.0.0.1:0", "--accept-injected"});
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "True", "NvidiaGPUIsReady", 20s));
  Inject(13, pci_);
  ASSERT_TRUE(Eventually([&] { return EventCount("NvidiaXID13Warning") >= 1; }, 10s))
      << "Events about A are allowed";

  // Writing B is denied by the policy. A new policy takes a moment to be in force: probe with a
  // harmless condition until the denial comes, then the real attempt must be refused at once.
  auto patch_b = [&](const std::string& type, const std::string& reason) {
    return (*as_agent)->Patch(
        kube::NodePath(node_b) + "/status", kube::PatchType::kStrategicMerge,
        {{"status",
          {{"conditions", {{{"type", type}, {"status", "False"}, {"reason", reason}}}}}}});
  };
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = patch_b("GpuhealPolicyProbe", "Probe");
        return r.ok() && !r->ok();
      },
      10s));
  auto spoof = patch_b("AcceleratedHardwareReady", "Spoofed");
  ASSERT_TRUE(spoof.ok());
  EXPECT_FALSE(spoof->ok());
  EXPECT_NE(spoof->Describe().find("gpuheal-agent may write only its own node (" + node_ + ")"),
            std::string::npos)
      << spoof->Describe();
  auto b = kube::DecodeNode(client_->Get(kube::NodePath(node_b))->body);
  for (const auto& c : b->conditions) EXPECT_NE(c.reason, "Spoofed");
  // ... and so is an Event about B.
  auto ev =
      (*as_agent)->Create("/api/v1/namespaces/default/events",
                          {{"apiVersion", "v1"},
                           {"kind", "Event"},
                           {"metadata", {{"name", node_b + ".spoof"}, {"namespace", "default"}}},
                           {"involvedObject", {{"kind", "Node"}, {"name", node_b}}},
                           {"reason", "Spoofed"},
                           {"message", "x"},
                           {"type", "Warning"}});
  ASSERT_TRUE(ev.ok());
  EXPECT_FALSE(ev->ok()) << ev->Describe();
  // Its own node, the same way: allowed (an Event about it, and a status write).
  auto own_ev =
      (*as_agent)->Create("/api/v1/namespaces/default/events",
                          {{"apiVersion", "v1"},
                           {"kind", "Event"},
                           {"metadata", {{"name", node_ + ".probe"}, {"namespace", "default"}}},
                           {"involvedObject", {{"kind", "Node"}, {"name", node_}}},
                           {"reason", "Probe"},
                           {"message", "x"},
                           {"type", "Normal"}});
  ASSERT_TRUE(own_ev.ok());
  EXPECT_EQ(own_ev->status, 201) << own_ev->Describe();
  auto own = (*as_agent)->Patch(
      kube::NodePath(node_) + "/status", kube::PatchType::kStrategicMerge,
      {{"status",
        {{"conditions",
          {{{"type", "KernelReady"}, {"status", "True"}, {"reason", "KernelIsReady"}}}}}}});
  ASSERT_TRUE(own.ok());
  EXPECT_TRUE(own->ok()) << own->Describe();

  // On its own node, nothing but its five condition types and its own annotations. Each of these
  // went through before (nodes/status keeps metadata writable): opting the node out, pausing
  // repairs, moving it to another pool, forging the controller's GPU recovery request or a Cluster
  // API owner (which made the controller delete an unrelated Machine), inflating capacity, and
  // writing the kubelet's Ready condition.
  auto as_agent_status = [&](const nlohmann::json& body) {
    auto r = (*as_agent)->Patch(kube::NodePath(node_) + "/status", kube::PatchType::kStrategicMerge,
                                body);
    return r.ok() ? r->status : -1;
  };
  const std::vector<std::pair<std::string, nlohmann::json>> refused = {
      {"label gpuheal.io/managed", {{"metadata", {{"labels", {{"gpuheal.io/managed", "false"}}}}}}},
      {"label gpuheal.io/paused", {{"metadata", {{"labels", {{"gpuheal.io/paused", "true"}}}}}}},
      {"label gpuheal.io/pool", {{"metadata", {{"labels", {{"gpuheal.io/pool", "elsewhere"}}}}}}},
      {"annotation gpuheal.io/gpu-recovery-request",
       {{"metadata", {{"annotations", {{"gpuheal.io/gpu-recovery-request", "{\"id\":\"x\"}"}}}}}}},
      {"annotation cluster.x-k8s.io/machine",
       {{"metadata", {{"annotations", {{"cluster.x-k8s.io/machine", "someone-elses"}}}}}}},
      {"capacity nvidia.com/gpu", {{"status", {{"capacity", {{"nvidia.com/gpu", "1000"}}}}}}},
      {"allocatable nvidia.com/gpu", {{"status", {{"allocatable", {{"nvidia.com/gpu", "1000"}}}}}}},
      {"kubelet's Ready condition",
       {{"status",
         {{"conditions", {{{"type", "Ready"}, {"status", "False"}, {"reason", "Spoofed"}}}}}}}},
      {"another tool's condition",
       {{"status",
         {{"conditions",
           {{{"type", "VendorHealthy"}, {"status", "True"}, {"reason", "Spoofed"}}}}}}}},
  };
  for (const auto& [what, body] : refused) {
    const int code = as_agent_status(body);
    EXPECT_EQ(code, 403) << what;
  }
  auto after = kube::DecodeNode(client_->Get(kube::NodePath(node_))->body);
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->meta.labels.contains("gpuheal.io/managed"));
  EXPECT_FALSE(after->meta.annotations.contains("gpuheal.io/gpu-recovery-request"));
  EXPECT_FALSE(after->meta.annotations.contains("cluster.x-k8s.io/machine"));
  for (const auto& c : after->conditions) EXPECT_NE(c.reason, "Spoofed") << c.type;
  // Its own annotations still go through.
  EXPECT_EQ(as_agent_status({{"metadata",
                              {{"annotations",
                                {{"gpuheal.io/gpu-faults", "{}"},
                                 {"gpuheal.io/gpu-recovery-status", "{}"},
                                 {"gpuheal.io/gpu-at-risk", "{}"}}}}}}),
            200);
  // The Node itself (not its status) is out of reach (RBAC).
  auto spec = (*as_agent)->Patch(kube::NodePath(node_), kube::PatchType::kStrategicMerge,
                                 {{"spec", {{"unschedulable", true}}}});
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->status, 403);
  // Events: create only. Changing any Event, even one about its own node, is refused (RBAC).
  auto touch = (*as_agent)->Patch("/api/v1/namespaces/default/events/" + node_ + ".probe",
                                  kube::PatchType::kMerge, {{"message", "rewritten"}});
  ASSERT_TRUE(touch.ok());
  EXPECT_EQ(touch->status, 403) << touch->Describe();
  // Secrets are out of reach (RBAC).
  auto secrets = (*as_agent)->Get("/api/v1/namespaces/gpuheal-system/secrets");
  ASSERT_TRUE(secrets.ok());
  EXPECT_EQ(secrets->status, 403);
  // NodeDiagnostic requests: it answers its own node's (status only), never another node's, and
  // never creates one (which could send another node's bundle to a URL of its choosing).
  gpuheal::testing::EnsureCrd(*client_, "nodediagnostics.yaml", kube::kNodeDiagnosticsPath);
  for (const auto& n : {node_, node_b}) {
    auto r = client_->Create(std::string(kube::kNodeDiagnosticsPath),
                             {{"apiVersion", "gpuheal.io/v1alpha1"},
                              {"kind", "NodeDiagnostic"},
                              {"metadata", {{"name", n + "-adm"}}},
                              {"spec", {{"nodeName", n}}}});
    ASSERT_EQ(r->status, 201) << r->Describe();
  }
  auto diag_status = [&](const std::string& n) {
    auto r = (*as_agent)->Patch(std::string(kube::kNodeDiagnosticsPath) + "/" + n + "-adm/status",
                                kube::PatchType::kMerge,
                                {{"status", {{"phase", "Failed"}, {"message", "probe"}}}});
    return r.ok() ? r->status : -1;
  };
  // The policy's new resources take a moment to be in force, as above.
  ASSERT_TRUE(Eventually([&] { return diag_status(node_b) == 403; }, 10s));
  EXPECT_EQ(diag_status(node_), 200);
  auto forged = (*as_agent)->Create(std::string(kube::kNodeDiagnosticsPath),
                                    {{"apiVersion", "gpuheal.io/v1alpha1"},
                                     {"kind", "NodeDiagnostic"},
                                     {"metadata", {{"name", node_ + "-forged"}}},
                                     {"spec", {{"nodeName", node_b}}}});
  ASSERT_TRUE(forged.ok());
  EXPECT_EQ(forged->status, 403) << forged->Describe();
}

// The shipped steering-keys policy (deploy/kubernetes/node-steering-keys.yaml): an identity that
// holds RBAC to patch Nodes but is neither the controller nor an administrator cannot write the
// keys that steer the controller (the BMC endpoint, replaces, cordoned, the incident release, the
// GPU recovery request, the standby and fault taints, opt-out, pause and pool), through the Node
// or its status; other keys it may. The controller's ServiceAccount and system:masters may.
TEST_F(AgentKube, ShippedSteeringPolicyKeepsTheKeysToTheController) {
  const std::string deploy = std::string(GPUHEAL_SOURCE_DIR) + "/deploy/kubernetes/";
  gpuheal::testing::ApplyManifest(*client_, deploy + "node-steering-keys.yaml");
  (void)client_->Create(
      "/api/v1/namespaces",
      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "gpuheal-system"}}}});
  const std::string role = "steer-test-" + node_;
  ASSERT_TRUE(client_
                  ->Create("/apis/rbac.authorization.k8s.io/v1/clusterroles",
                           {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                            {"kind", "ClusterRole"},
                            {"metadata", {{"name", role}}},
                            {"rules",
                             {{{"apiGroups", {""}},
                               {"resources", {"nodes", "nodes/status"}},
                               {"verbs", {"get", "patch", "update"}}}}}})
                  ->ok());
  auto token_of = [&](const std::string& sa) {
    (void)client_->Create("/api/v1/namespaces/gpuheal-system/serviceaccounts",
                          {{"apiVersion", "v1"},
                           {"kind", "ServiceAccount"},
                           {"metadata", {{"name", sa}, {"namespace", "gpuheal-system"}}}});
    (void)client_->Create(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {{"apiVersion", "rbac.authorization.k8s.io/v1"},
         {"kind", "ClusterRoleBinding"},
         {"metadata", {{"name", role + "-" + sa}}},
         {"roleRef",
          {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", role}}},
         {"subjects",
          {{{"kind", "ServiceAccount"}, {"name", sa}, {"namespace", "gpuheal-system"}}}}});
    auto tr = client_->Create("/api/v1/namespaces/gpuheal-system/serviceaccounts/" + sa + "/token",
                              {{"apiVersion", "authentication.k8s.io/v1"},
                               {"kind", "TokenRequest"},
                               {"spec", {{"expirationSeconds", 3600}}}});
    EXPECT_EQ(tr->status, 201) << tr->Describe();
    const std::string kc = state_dir_ + "/" + sa + ".kubeconfig";
    gpuheal::testing::WriteTokenKubeconfig(kc, client_->config().server,
                                           nlohmann::json::parse(tr->body)["status"]["token"]);
    auto cfg = kube::LoadKubeconfig(kc);
    EXPECT_TRUE(cfg.ok());
    auto c = kube::Client::Create(std::move(*cfg), kube::RetryPolicy{1, 10ms, 10ms});
    EXPECT_TRUE(c.ok());
    return std::move(*c);
  };
  auto operator_client = token_of("node-operator");
  auto controller_client = token_of("gpuheal-controller");
  const std::string node = node_ + "-steer";
  nlohmann::json n = gpuheal::testing::NodeJson(node);
  n["metadata"]["labels"]["gpuheal.io/pool"] = "pool-a";
  ASSERT_EQ(client_->Create(kube::NodePath(), n)->status, 201);
  auto patch = [&](kube::Client& c, const nlohmann::json& body, bool status = false) {
    auto r =
        c.Patch(kube::NodePath(node) + (status ? "/status" : ""), kube::PatchType::kMerge, body);
    return r.ok() ? std::make_pair(static_cast<int>(r->status), r->Describe())
                  : std::make_pair(-1, r.error().message);
  };
  auto annotate = [](const std::string& k, const std::string& v) {
    return nlohmann::json{{"metadata", {{"annotations", {{k, v}}}}}};
  };
  auto label = [](const std::string& k, const std::string& v) {
    return nlohmann::json{{"metadata", {{"labels", {{k, v}}}}}};
  };
  const nlohmann::json standby = {
      {"spec",
       {{"taints",
         {{{"key", "gpuheal.io/standby"}, {"value", "true"}, {"effect", "NoSchedule"}}}}}}};
  // RBAC allows it; the policy, once in force, refuses it.
  // RBAC allows it; the policy refuses it once in force. Until then a probe may land, so it
  // writes a new value each time, on a node of its own.
  const std::string probe_node = node + "-probe";
  ASSERT_EQ(client_->Create(kube::NodePath(), gpuheal::testing::NodeJson(probe_node))->status, 201);
  int probes = 0;
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = operator_client->Patch(
            kube::NodePath(probe_node), kube::PatchType::kMerge,
            annotate("gpuheal.io/bmc-endpoint", "http://probe-" + std::to_string(++probes)));
        return r.ok() && r->status == 403;
      },
      10s));
  (void)client_->Delete(kube::NodePath(probe_node));
  const std::vector<std::pair<std::string, nlohmann::json>> refused = {
      {"annotation gpuheal.io/replaces", annotate("gpuheal.io/replaces", "some-repair")},
      {"annotation gpuheal.io/cordoned", annotate("gpuheal.io/cordoned", "true")},
      {"annotation gpuheal.io/incident-release",
       annotate("gpuheal.io/incident-release", "2030-01-01T00:00:00Z")},
      {"annotation gpuheal.io/gpu-recovery-request",
       annotate("gpuheal.io/gpu-recovery-request", "{}")},
      {"label gpuheal.io/pool", label("gpuheal.io/pool", "pool-b")},
      {"label gpuheal.io/managed", label("gpuheal.io/managed", "false")},
      {"label gpuheal.io/paused", label("gpuheal.io/paused", "true")},
      {"taint gpuheal.io/standby", standby},
  };
  for (const auto& [what, body] : refused) {
    auto [code, text] = patch(*operator_client, body);
    EXPECT_EQ(code, 403) << what << ": " << text;
    EXPECT_NE(text.find("only gpuheal's controller and the administrators"), std::string::npos)
        << what << ": " << text;
    // Metadata is writable through nodes/status too (spec is not: the status strategy drops it).
    if (!body.contains("spec")) {
      EXPECT_EQ(patch(*operator_client, body, true).first, 403) << what << " through nodes/status";
    }
  }
  auto [code, text] = patch(*operator_client, annotate("gpuheal.io/bmc-endpoint", "http://x"));
  EXPECT_NE(text.find("gpuheal.io/bmc-endpoint on a Node, not "
                      "system:serviceaccount:gpuheal-system:node-operator"),
            std::string::npos)
      << text;
  // Keys that do not steer the controller, and labels only a node's own identity must keep.
  EXPECT_EQ(patch(*operator_client, annotate("example.com/owner", "team-a")).first, 200);
  EXPECT_EQ(patch(*operator_client, label("karpenter.sh/nodepool", "gpu")).first, 200);
  auto after = kube::DecodeNode(client_->Get(kube::NodePath(node))->body);
  ASSERT_TRUE(after.ok());
  for (const auto& k : {"gpuheal.io/bmc-endpoint", "gpuheal.io/replaces", "gpuheal.io/cordoned"})
    EXPECT_FALSE(after->meta.annotations.contains(k)) << k;
  EXPECT_EQ(after->meta.labels["gpuheal.io/pool"], "pool-a");
  for (const auto& t : after->taints) EXPECT_NE(t.key, "gpuheal.io/standby");
  // The controller and the administrators may.
  EXPECT_EQ(patch(*controller_client, annotate("gpuheal.io/replaces", "repair-1")).first, 200);
  EXPECT_EQ(patch(*controller_client, standby).first, 200);
  EXPECT_EQ(patch(*client_, annotate("gpuheal.io/bmc-endpoint", "https://10.20.0.11")).first, 200);
  EXPECT_EQ(patch(*client_, label("gpuheal.io/pool", "pool-b")).first, 200);
  // Unchanged keys do not stand in the way of another write by the operator.
  EXPECT_EQ(patch(*operator_client, annotate("example.com/owner", "team-b")).first, 200);
  (void)client_->Delete(kube::NodePath(node));
  (void)client_->Delete(
      "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/"
      "gpuheal-node-steering-keys");
  (void)client_->Delete(
      "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/"
      "gpuheal-node-steering-keys");
}

// ---------------------------------------------------------------------------------------------
// NodeDiagnostic requests (docs/diagnostics.md): the agent of the node collects, bundles and
// uploads to an S3-compatible server (tools/s3-server: moto, with presigned URLs checked as S3
// checks them) through a SigV4 presigned URL the test makes.

// What a child logged so far (read for up to 100 ms), for failure messages.
std::string LogText(AgentProcess& p) {
  p.WaitLog([](const auto&) { return false; }, 100ms);
  std::string out;
  for (const auto& j : p.logs()) out += j.dump() + "\n";
  return out;
}

// One S3 server for the binary, stopped when it exits (a static's destructor: a server that was
// never stopped outlived every run of this binary).
gpuheal::testing::S3Server& S3() {
  static gpuheal::testing::S3Server s3;
  static const bool started = [] {
    s3.Start();
    s3.CreateBucket("bundles");
    return true;
  }();
  (void)started;
  return s3;
}

void InstallDiagnosticsCrd(kube::Client& client) {
  gpuheal::testing::EnsureCrd(client, "nodediagnostics.yaml", kube::kNodeDiagnosticsPath);
}

nlohmann::json Diagnostic(kube::Client& client, const std::string& name) {
  auto r = client.Get(std::string(kube::kNodeDiagnosticsPath) + "/" + name);
  if (!r || !r->ok()) return nlohmann::json();
  return nlohmann::json::parse(r->body);
}

std::string DiagnosticPhase(kube::Client& client, const std::string& name) {
  const auto j = Diagnostic(client, name);
  return j.is_object() ? j.value("status", nlohmann::json::object()).value("phase", "") : "";
}

void CreateDiagnostic(kube::Client& client, const std::string& name, const std::string& node,
                      const std::string& url, const nlohmann::json& more = {}) {
  nlohmann::json spec = {{"nodeName", node}};
  if (!url.empty()) spec["upload"] = {{"url", url}};
  if (more.is_object()) spec.update(more);
  auto r =
      client.Create(std::string(kube::kNodeDiagnosticsPath), {{"apiVersion", "gpuheal.io/v1alpha1"},
                                                              {"kind", "NodeDiagnostic"},
                                                              {"metadata", {{"name", name}}},
                                                              {"spec", spec}});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 201) << r->Describe();
}

std::map<std::string, std::string> BundleMembers(const std::string& bytes, const std::string& dir) {
  const std::string file = dir + "/downloaded.tar.gz";
  std::ofstream(file, std::ios::binary) << bytes;
  auto members = ReadBundle(file);
  EXPECT_TRUE(members.ok()) << (members.ok() ? "" : members.error().message);
  std::map<std::string, std::string> out;
  if (members.ok()) {
    for (auto& [path, data] : *members) out[path] = std::move(data);
  }
  return out;
}

TEST_F(AgentKube, NodeDiagnosticIsCollectedBundledAndUploadedToS3) {
  InstallDiagnosticsCrd(*client_);
  auto& s3 = S3();
  // Secrets that must not reach the bundle: a secret-named environment value, also written to
  // the kernel log (which the kernel collector copies whole), and the admin kubeconfig's key.
  const std::string secret = "s3cr3t-" + node_ + "-value";
  setenv("GPUHEAL_TEST_API_TOKEN", secret.c_str(), 1);
  const std::string marker = "gpuheal-diag-marker-" + node_;
  ASSERT_TRUE(WriteKmsg("/dev/kmsg", {marker + " token=" + secret}).ok());
  gpuheal::testing::Scenario sc;
  const auto gpu = StartAgentWithOneGpu(sc, "GPU-" + node_);
  unsetenv("GPUHEAL_TEST_API_TOKEN");

  const std::string key = node_ + "/bundle.tar.gz";
  const std::string url = s3.PresignPut("bundles", key, 600);
  const std::string name = node_ + "-diag";
  const auto created = std::chrono::steady_clock::now();
  CreateDiagnostic(*client_, name, node_, url);
  ASSERT_TRUE(Eventually([&] { return DiagnosticPhase(*client_, name) == "Succeeded"; }, 30s))
      << Diagnostic(*client_, name).dump(2) << "\n"
      << LogText(*agent_);
  const auto took = std::chrono::steady_clock::now() - created;
  const auto st = Diagnostic(*client_, name)["status"];
  // In the status: where the bundle is (the URL without its signature), its size and hash, and
  // every collector with its outcome.
  EXPECT_EQ(st["bundle"]["location"], s3.endpoint() + "/bundles/" + key);
  EXPECT_EQ(st.dump().find("X-Amz-Signature"), std::string::npos) << st.dump();
  std::set<std::string> names;
  for (const auto& c : st["collectors"]) names.insert(c["name"].get<std::string>());
  EXPECT_EQ(names, std::set<std::string>(CollectorNames().begin(), CollectorNames().end()));
  EXPECT_LT(st.value("durationMs", 0), 7000);
  EXPECT_LT(took, 10s);
  EXPECT_TRUE(st.contains("startTime") && st.contains("completionTime")) << st.dump();

  // In S3: the same bytes, a manifest listing every collector, and the node's state.
  auto bytes = s3.GetObject("bundles", key);
  ASSERT_TRUE(bytes.has_value());
  EXPECT_EQ(static_cast<int64_t>(bytes->size()), st["bundle"]["size"].get<int64_t>());
  EXPECT_EQ(gpuheal::testing::s3_detail::Sha256Hex(*bytes), st["bundle"]["sha256"]);
  auto members = BundleMembers(*bytes, state_dir_);
  ASSERT_TRUE(members.count("manifest.json"));
  const auto manifest = nlohmann::json::parse(members["manifest.json"]);
  EXPECT_EQ(manifest["node"], node_);
  EXPECT_EQ(manifest["request"], name);
  std::set<std::string> in_manifest;
  for (const auto& c : manifest["collectors"]) {
    in_manifest.insert(c["name"].get<std::string>());
    for (const auto& f : c["files"]) EXPECT_TRUE(members.count(f.get<std::string>())) << f;
  }
  EXPECT_EQ(in_manifest, names);
  EXPECT_NE(members["kernel/dmesg.txt"].find(marker), std::string::npos) << "the whole buffer";
  EXPECT_NE(members["nvml/nvml.txt"].find(gpu.bus_id), std::string::npos)
      << members["nvml/nvml.txt"];
  EXPECT_NE(members["agent/state.json"].find("\"active_faults\""), std::string::npos);
  EXPECT_TRUE(members.count("system/meminfo"));
  EXPECT_TRUE(members.count("pcie/devices.json"));
  EXPECT_NE(members["agent/environment.txt"].find("GPUHEAL_TEST_API_TOKEN=<redacted>"),
            std::string::npos);
  // No secret anywhere: not the value, not the signature, not a private key.
  const std::string signature = url.substr(url.find("X-Amz-Signature=") + 16);
  for (const auto& [path, data] : members) {
    EXPECT_EQ(data.find(secret), std::string::npos) << path;
    EXPECT_EQ(data.find(signature), std::string::npos) << path;
    EXPECT_EQ(data.find("PRIVATE KEY"), std::string::npos) << path;
  }
  // The bundle stays on the node for the retention time.
  EXPECT_TRUE(std::filesystem::exists(st["bundle"]["nodePath"].get<std::string>()));
}

TEST_F(AgentKube, NodeDiagnosticFailuresSayWhyAndNothingPartialSucceeds) {
  InstallDiagnosticsCrd(*client_);
  auto& s3 = S3();
  const std::string cfg = state_dir_ + "/diag.yaml";
  std::ofstream(cfg) << "nvidia:\n  nvml: false\ndiagnostics:\n  upload_attempts: 2\n";
  StartAgent({"--config", cfg});
  // Expired: S3 refuses with 403 AccessDenied, the request is Failed and says so.
  const std::string expired = s3.PresignPut("bundles", node_ + "/expired.tar.gz", 60,
                                            std::chrono::system_clock::now() - 1h);
  CreateDiagnostic(*client_, node_ + "-expired", node_, expired);
  // A bucket that does not exist: 404 NoSuchBucket.
  CreateDiagnostic(*client_, node_ + "-nobucket", node_,
                   s3.PresignPut("no-such-bucket", "x.tar.gz", 600));
  // Nobody listening: retried, then Failed.
  const int port = gpuheal::testing::FreeLoopbackPort();
  CreateDiagnostic(*client_, node_ + "-down", node_,
                   fmt::format("http://127.0.0.1:{}/bundles/x.tar.gz", port));
  // An unknown collector.
  CreateDiagnostic(*client_, node_ + "-unknown", node_, "",
                   {{"include", nlohmann::json::array({"kernel", "crystal-ball"})}});
  // Only two collectors, kept on the node (no upload).
  CreateDiagnostic(*client_, node_ + "-local", node_, "",
                   {{"include", nlohmann::json::array({"kernel", "system"})}});
  for (const char* n : {"-expired", "-nobucket", "-down", "-unknown", "-local"}) {
    ASSERT_TRUE(Eventually(
        [&] {
          const auto p = DiagnosticPhase(*client_, node_ + n);
          return p == "Failed" || p == "Succeeded";
        },
        40s))
        << n << ": " << Diagnostic(*client_, node_ + n).dump(2);
  }
  auto message = [&](const char* n) {
    return Diagnostic(*client_, node_ + n)["status"].value("message", "");
  };
  EXPECT_EQ(DiagnosticPhase(*client_, node_ + "-expired"), "Failed");
  EXPECT_NE(message("-expired").find("HTTP 403 AccessDenied: Request has expired"),
            std::string::npos)
      << message("-expired");
  EXPECT_EQ(message("-expired").find("X-Amz-Signature"), std::string::npos);
  EXPECT_FALSE(s3.GetObject("bundles", node_ + "/expired.tar.gz").has_value());
  EXPECT_EQ(DiagnosticPhase(*client_, node_ + "-nobucket"), "Failed");
  EXPECT_NE(message("-nobucket").find("404 NoSuchBucket"), std::string::npos)
      << message("-nobucket");
  EXPECT_EQ(DiagnosticPhase(*client_, node_ + "-down"), "Failed");
  EXPECT_NE(message("-down").find("after 2 attempts"), std::string::npos) << message("-down");
  EXPECT_NE(message("-down").find("stays on the node"), std::string::npos) << message("-down");
  EXPECT_EQ(DiagnosticPhase(*client_, node_ + "-unknown"), "Failed");
  EXPECT_NE(message("-unknown").find("unknown collector \"crystal-ball\""), std::string::npos)
      << message("-unknown");
  EXPECT_EQ(DiagnosticPhase(*client_, node_ + "-local"), "Succeeded");
  const auto local = Diagnostic(*client_, node_ + "-local")["status"];
  EXPECT_EQ(local["collectors"].size(), 2u) << local.dump();
  EXPECT_FALSE(local["bundle"].contains("location"));
  EXPECT_TRUE(std::filesystem::exists(local["bundle"]["nodePath"].get<std::string>()));
  // Another node's request is not this agent's to answer.
  CreateDiagnostic(*client_, node_ + "-other", node_ + "-elsewhere", "");
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(DiagnosticPhase(*client_, node_ + "-other"), "");
}

// Detection and diagnosis are separate paths: while a request's collector hangs (an nvidia-smi
// that takes 4 s), a fatal Xid still reaches its condition at once; the hung collector is cut at
// its deadline and the bundle built without it.
TEST_F(AgentKube, ACollectingDiagnosticNeverDelaysDetection) {
  InstallDiagnosticsCrd(*client_);
  const std::string slow = state_dir_ + "/slow-nvidia-smi";
  std::ofstream(slow) << "#!/bin/sh\necho slow start\nsleep 4\n";
  std::filesystem::permissions(slow, std::filesystem::perms::owner_all);
  const std::string cfg = state_dir_ + "/diag.yaml";
  std::ofstream(cfg) << "nvidia:\n  nvml: false\ndiagnostics:\n  collector_timeout: 3s\n"
                     << "  nvidia_smi: " << slow << "\n";
  StartAgent({"--config", cfg});
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "True", "NvidiaGPUIsReady"));
  const std::string name = node_ + "-slow";
  CreateDiagnostic(*client_, name, node_, "");
  ASSERT_TRUE(Eventually([&] { return DiagnosticPhase(*client_, name) == "Collecting"; }, 10s));
  const auto injected = std::chrono::steady_clock::now();
  Inject(79, pci_);
  ASSERT_TRUE(WaitCondition("AcceleratedHardwareReady", "False", "NvidiaXID79Error", 10s));
  const auto detected = std::chrono::steady_clock::now() - injected;
  EXPECT_LT(detected, 1500ms) << "the condition waited for the collectors";
  EXPECT_EQ(DiagnosticPhase(*client_, name), "Collecting") << "still collecting meanwhile";
  ASSERT_TRUE(Eventually([&] { return DiagnosticPhase(*client_, name) == "Succeeded"; }, 15s))
      << Diagnostic(*client_, name).dump(2);
  const auto st = Diagnostic(*client_, name)["status"];
  bool cut = false;
  for (const auto& c : st["collectors"]) {
    if (c["name"] == "nvidia-smi")
      cut = c.value("error", "").find("did not finish before the deadline") != std::string::npos;
  }
  EXPECT_TRUE(cut) << st.dump(2);
  EXPECT_LT(st.value("durationMs", 0), 7000) << st.dump(2);
}

TEST_F(AgentKube, TheKubectlPluginDiagnosesANodeAndListsRepairs) {
  InstallDiagnosticsCrd(*client_);
  auto& s3 = S3();
  const std::string cfg = state_dir_ + "/diag.yaml";
  std::ofstream(cfg) << "nvidia:\n  nvml: false\n";
  StartAgent({"--config", cfg});
  // kubectl runs a plugin as the executable kubectl-<name> on PATH with the rest of its argv.
  const std::string bin = state_dir_ + "/bin";
  std::filesystem::create_directories(bin);
  std::filesystem::create_symlink(GPUHEAL_BIN, bin + "/kubectl-gpuheal");
  const std::string plugin = bin + "/kubectl-gpuheal";
  const std::string key = node_ + "/plugin.tar.gz";
  const auto r = gpuheal::testing::RunShell(
      fmt::format("{} diagnose {} --kubeconfig {} --upload-url '{}' --timeout 60s 2>&1", plugin,
                  node_, ControlPlaneEnv::kubeconfig(), s3.PresignPut("bundles", key, 600)));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Succeeded"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("location: " + s3.endpoint() + "/bundles/" + key), std::string::npos)
      << r.out;
  EXPECT_TRUE(s3.GetObject("bundles", key).has_value());
  const auto help = gpuheal::testing::RunShell(plugin + " --help 2>&1");
  EXPECT_NE(help.out.find("kubectl gpuheal"), std::string::npos) << help.out;
  const auto xid = gpuheal::testing::RunShell(plugin + " explain xid 79 2>&1");
  EXPECT_EQ(xid.code, 0) << xid.out;
  EXPECT_NE(xid.out.find("79"), std::string::npos) << xid.out;
  gpuheal::testing::EnsureCrd(*client_, "noderepairs.yaml", kube::kNodeRepairsPath);
  const auto repairs = gpuheal::testing::RunShell(plugin + " repairs --kubeconfig " +
                                                  ControlPlaneEnv::kubeconfig() + " 2>&1");
  EXPECT_EQ(repairs.code, 0) << repairs.out;
  EXPECT_NE(repairs.out.find("NODE"), std::string::npos) << repairs.out;
  const auto status = gpuheal::testing::RunShell(plugin + " status --kubeconfig " +
                                                 ControlPlaneEnv::kubeconfig() + " 2>&1");
  EXPECT_EQ(status.code, 0) << status.out;
  EXPECT_NE(status.out.find(node_), std::string::npos) << status.out;
  // A node that does not exist: a usage error, nothing created.
  const auto missing = gpuheal::testing::RunShell(plugin + " diagnose no-such-node --kubeconfig " +
                                                  ControlPlaneEnv::kubeconfig() + " 2>&1");
  EXPECT_EQ(missing.code, 2) << missing.out;
}

TEST_F(AgentKube, TheControllerAttachesABundleBeforeDeletingTheNode) {
  InstallDiagnosticsCrd(*client_);
  auto& s3 = S3();
  const std::string cfg = state_dir_ + "/diag.yaml";
  std::ofstream(cfg) << "nvidia:\n  nvml: false\n";
  // A pool of its own: other tests' nodes stay faulty, and the pool gate would count them.
  ASSERT_TRUE(client_
                  ->Patch(kube::NodePath(node_), kube::PatchType::kMerge,
                          {{"metadata", {{"labels", {{"gpuheal.io/pool", node_}}}}}})
                  ->ok());
  StartAgent({"--config", cfg});
  StartController("diag-" + node_,
                  fmt::format("toleration:\n  AcceleratedHardwareReady: 1s\n"
                              "checkpoint:\n  catastrophic_window: 1s\n"
                              "provider:\n  name: delete-node\n  replacement_timeout: 0s\n"
                              "diagnostics:\n  upload_url_template: {}/bundles/{{node}}/"
                              "{{repair}}.tar.gz\n  timeout: 30s\n",
                              s3.endpoint()));
  Inject(79, pci_);
  ASSERT_TRUE(Eventually(
      [&] {
        auto n = client_->Get(kube::NodePath(node_));
        return n && n->status == 404;
      },
      60s))
      << LogText(*controller_);
  auto list = client_->ListAll<kube::NodeRepair>(std::string(kube::kNodeRepairsPath),
                                                 kube::DecodeNodeRepairList);
  ASSERT_TRUE(list.ok());
  std::optional<kube::NodeRepair> rec;
  for (auto& r : list->items) {
    if (r.node == node_) rec = r;
  }
  ASSERT_TRUE(rec.has_value());
  // The bundle was taken first: its action comes before the rung's start, and it is in S3.
  ptrdiff_t diag_at = -1, rung_at = -1;
  for (size_t i = 0; i < rec->actions.size(); ++i) {
    const auto& a = rec->actions[i];
    if (a.find("diagnostic " + rec->meta.name + " done: Succeeded") != std::string::npos)
      diag_at = static_cast<ptrdiff_t>(i);
    if (a == "deleted the Node object") rung_at = static_cast<ptrdiff_t>(i);
  }
  std::string actions;
  for (const auto& a : rec->actions) actions += a + "\n";
  ASSERT_GE(diag_at, 0) << actions;
  ASSERT_GE(rung_at, 0) << actions;
  EXPECT_LT(diag_at, rung_at) << actions;
  const std::string key = node_ + "/" + rec->meta.name + ".tar.gz";
  auto bytes = s3.GetObject("bundles", key);
  ASSERT_TRUE(bytes.has_value()) << key;
  auto members = BundleMembers(*bytes, state_dir_);
  EXPECT_NE(members["kernel/dmesg.txt"].find("Xid (PCI:" + pci_), std::string::npos)
      << "the fault's own kernel line is in the evidence";
  const auto d = Diagnostic(*client_, rec->meta.name);
  EXPECT_EQ(d["spec"]["repair"], rec->meta.name);
}

}  // namespace
}  // namespace gpuheal

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new gpuheal::testing::ControlPlaneEnv(false));
  return RUN_ALL_TESTS();
}
