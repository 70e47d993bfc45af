// The unchanged agent binary with its NVML backend pointed at the test double
// (--nvml-library), reading the real /dev/kmsg: every event type, the polls, the GPU count check,
// de-duplication with the kernel log, the drain/reset sequence and the error paths.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "agent_process.h"
#include "drill/inject.h"
#include "nvml_scenario.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::AgentProcess;
using testing::HealthyDevice;
using testing::Scenario;
using testing::TestGpu;
using testing::UniqueGpu;

class NvmlAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/dev/kmsg", R_OK) != 0) GTEST_SKIP() << "needs a readable /dev/kmsg";
    char tmpl[] = "/tmp/gpuheal-nvml-agent-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::filesystem::create_directories(dir_ + "/state");
    std::filesystem::create_directories(
        dir_ + "/sysfs");  // no NVIDIA GPU on this "bus" unless a test adds one
    gpu_ = UniqueGpu();
  }
  void TearDown() override {
    agent_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Starts the agent with `nvidia_yaml` as the body of its nvidia: section.
  AgentProcess& Start(const std::string& nvidia_yaml = "", std::vector<std::string> extra = {},
                      const std::string& library = NVML_DOUBLE) {
    // From the end of the kernel buffer: fault lines other processes wrote to it earlier (a drill,
    // a benchmark, another test) must not reach this test's counts.
    std::ofstream(dir_ + "/config.yaml")
        << "kmsg_start: end\nnvidia:\n  poll_period: 200ms\n  sysfs_pci_devices: " << dir_
        << "/sysfs\n"
        << nvidia_yaml;
    std::vector<std::string> args = {GPUHEAL_BIN,      "agent",         "--standalone",
                                     "--state-dir",    dir_ + "/state", "--listen",
                                     "127.0.0.1:0",    "--config",      dir_ + "/config.yaml",
                                     "--nvml-library", library};
    args.insert(args.end(), extra.begin(), extra.end());
    agent_ = std::make_unique<AgentProcess>(args);
    auto started =
        agent_->WaitLog([](const json& j) { return j.value("msg", "") == "agent started"; }, 10s);
    EXPECT_TRUE(started.has_value()) << "agent did not start";
    return *agent_;
  }

  // A log line, whether it came before the agent's "agent started" (already read) or comes later.
  template <typename Pred>
  std::optional<json> Logged(Pred pred, std::chrono::milliseconds timeout) {
    for (const json& j : agent_->logs()) {
      if (pred(j)) return j;
    }
    return agent_->WaitLog(pred, timeout);
  }
  static auto Msg(const std::string& prefix) {
    return [prefix](const json& j) { return j.value("msg", "").find(prefix) != std::string::npos; };
  }

  // The active faults file once `pred` holds for it (it is saved right after the fault is emitted).
  template <typename Pred>
  json WaitActive(Pred pred) {
    json active;
    for (int i = 0; i < 200; ++i) {
      std::ifstream in(dir_ + "/state/active-faults.json");
      active = json::parse(in, nullptr, false);
      if (!active.is_discarded() && pred(active)) break;
      std::this_thread::sleep_for(10ms);
    }
    return active;
  }

  auto Reason(const std::string& reason, const std::string& pci = "") {
    return [this, reason, pci](const json& j) {
      return j.value("pci", json()) == (pci.empty() ? gpu_.pci : pci) &&
             j.value("reason", "") == reason;
    };
  }

  std::string dir_;
  TestGpu gpu_;
  Scenario sc_;
  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(NvmlAgentTest, XidEventsBecomeFaultsWithMigInstanceAndUnknownXid) {
  sc_.Write({{"devices", {HealthyDevice(gpu_)}}});
  auto& a = Start();
  auto started = Logged(Msg("NVML backend started"), 5s);
  ASSERT_TRUE(started);
  EXPECT_EQ((*started)["gpus"][0]["pci"], gpu_.pci);
  EXPECT_EQ((*started)["gpus"][0]["uuid"], gpu_.uuid);
  sc_.Write({{"devices", {HealthyDevice(gpu_)}},
             {"events",
              {{{"id", "a"},
                {"type", "XidCriticalError"},
                {"data", 94},
                {"gpu_instance", 3},
                {"compute_instance", 0}},
               {{"id", "b"}, {"type", "XidCriticalError"}, {"data", 999}}}}});
  auto e = a.WaitEvent(Reason("NvidiaXID94Warning"), 5s);
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["source"], "nvml");
  EXPECT_EQ((*e)["kind"], "xid");
  EXPECT_EQ((*e)["xid"], 94);
  EXPECT_EQ((*e)["uuid"], gpu_.uuid);
  EXPECT_EQ((*e)["gpu_instance"], 3);
  EXPECT_EQ((*e)["compute_instance"], 0);
  EXPECT_EQ((*e)["severity"], "warn");
  auto unknown = a.WaitEvent(Reason("NvidiaXID999Warning"), 5s);
  ASSERT_TRUE(unknown);
  EXPECT_NE((*unknown)["message"].get<std::string>().find("unknown"), std::string::npos);
}

TEST_F(NvmlAgentTest, DoubleBitLostAndRecoveryActionEvents) {
  sc_.Write({{"devices", {HealthyDevice(gpu_)}}});
  auto& a = Start();
  sc_.Write({{"devices", {HealthyDevice(gpu_)}},
             {"events",
              {{{"id", "d"}, {"type", "DoubleBitEccError"}},
               {{"id", "r"}, {"type", "GpuRecoveryAction"}, {"data", 2}},
               {{"id", "u"}, {"type", "GpuUnavailableError"}}}}});
  auto dbe = a.WaitEvent(Reason("NvidiaDoubleBitError"), 5s);
  ASSERT_TRUE(dbe);
  EXPECT_EQ((*dbe)["severity"], "fatal");
  EXPECT_EQ((*dbe)["xid"], 48) << "keyed as the Xid the driver logs for it";
  auto rec = a.WaitEvent(Reason("NvidiaXID154Error"), 5s);
  ASSERT_TRUE(rec);
  EXPECT_EQ((*rec)["recovery_action"], 2);
  EXPECT_EQ((*rec)["severity"], "fatal");
  auto lost = a.WaitEvent(Reason("NvidiaGPULost"), 5s);
  ASSERT_TRUE(lost);
  EXPECT_EQ((*lost)["severity"], "catastrophic");
  EXPECT_EQ((*lost)["xid"], 79);
  // Fatal and worse are active faults, persisted for restarts and conditions.
  auto reasons = [](const json& active) {
    std::set<std::string> r;
    for (const json& f : active["active_faults"]) r.insert(f["reason"].get<std::string>());
    return r;
  };
  const std::set<std::string> want = {"NvidiaDoubleBitError", "NvidiaGPULost", "NvidiaXID154Error"};
  EXPECT_EQ(reasons(WaitActive([&](const json& j) { return reasons(j) == want; })), want);
}

TEST_F(NvmlAgentTest, PollsReportEachStateOnceWhenItAppears) {
  sc_.Write({{"devices", {HealthyDevice(gpu_)}}});
  auto& a = Start();
  ASSERT_TRUE(Logged(Msg("NVML backend started"), 5s));
  std::this_thread::sleep_for(500ms);  // a healthy baseline poll or two
  auto d = HealthyDevice(gpu_);
  d["ecc"] = {{"volatile_uncorrected", 1}, {"volatile_corrected", 500}};
  d["remapped_rows"] = {{"corrected", 0}, {"uncorrected", 1}, {"pending", 1}, {"failure", 1}};
  d["retired_pages_pending"] = true;
  d["nvlink"] = {{"links", 18}, {"down", {5}}, {"errors", 1000}};
  d["clock_event_reasons"] = 0x40;
  d["pcie"] = {{"gen", 5}, {"max_gen", 5}, {"width", 8}, {"max_width", 16}};
  d["temperature"] = 95;
  d["recovery_action"] = 1;
  d["persistence_mode"] = false;
  sc_.Write({{"devices", {d}}});
  const std::vector<std::pair<std::string, std::string>> want = {
      {"NvidiaDoubleBitError", "fatal"},         {"NvidiaSingleBitErrorStorm", "warn"},
      {"NvidiaRowRemapFailure", "fatal"},        {"NvidiaRowRemapPending", "critical"},
      {"NvidiaRetiredPagesPending", "critical"}, {"NvidiaNVLinkError", "fatal"},
      {"NvidiaNVLinkErrorRate", "warn"},         {"NvidiaClockSlowdown", "warn"},
      {"NvidiaPCIeLinkDegraded", "warn"},        {"NvidiaTemperatureHigh", "warn"},
      {"NvidiaXID154Warning", "critical"}};
  for (const auto& [reason, severity] : want) {
    auto e = a.WaitEvent(Reason(reason), 5s);
    ASSERT_TRUE(e) << reason;
    EXPECT_EQ((*e)["severity"], severity) << reason;
    EXPECT_EQ((*e)["source"], "nvml") << reason;
  }
  std::this_thread::sleep_for(1s);  // five more polls of the same state
  a.WaitEvent([](const json&) { return false; }, 100ms);
  std::map<std::string, int> seen;
  for (const json& e : a.events()) {
    if (e.value("pci", json()) == gpu_.pci) ++seen[e.value("reason", "")];
  }
  for (const auto& [reason, severity] : want)
    EXPECT_EQ(seen[reason], 1) << reason << " reported more than once";
}

TEST_F(NvmlAgentTest, LostDuringPollIsXid79) {
  sc_.Write({{"devices", {HealthyDevice(gpu_)}}});
  auto& a = Start();
  std::this_thread::sleep_for(300ms);
  auto d = HealthyDevice(gpu_);
  d["lost"] = true;
  sc_.Write({{"devices", {d}}});
  auto e = a.WaitEvent(Reason("NvidiaGPULost"), 5s);
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["xid"], 79);
  EXPECT_EQ((*e)["severity"], "catastrophic");
}

TEST_F(NvmlAgentTest, KernelLogAndNvmlReportOneFault) {
  if (!testing::CanWriteKmsg()) GTEST_SKIP() << "needs root and a writable /dev/kmsg";
  sc_.Write({{"devices", {HealthyDevice(gpu_)}}});
  auto& a = Start("", {"--accept-injected"});
  // The kernel line first, then the driver API's report of the same double-bit error.
  InjectSpec spec{48, gpu_.pci, "4242", "trainer"};
  ASSERT_TRUE(WriteKmsg("/dev/kmsg", InjectMessages(spec)).ok());
  auto k = a.WaitEvent(
      [&](const json& j) {
        return j.value("pci", json()) == gpu_.pci && j.value("xid", json()) == 48;
      },
      5s);
  ASSERT_TRUE(k);
  EXPECT_FALSE(k->contains("source")) << "the kernel log is the default source";
  sc_.Write({{"devices", {HealthyDevice(gpu_)}},
             {"events", {{{"id", "dbe"}, {"type", "DoubleBitEccError"}}}}});
  auto merged = a.WaitLog(
      [](const json& j) { return j.value("msg", "") == "fault also reported by another source"; },
      5s);
  ASSERT_TRUE(merged);
  EXPECT_EQ((*merged)["first"], "kmsg");
  EXPECT_EQ((*merged)["also"], "nvml");
  EXPECT_FALSE(a.WaitEvent(Reason("NvidiaDoubleBitError"), 300ms)) << "one fault, not two";
  auto both = [&](const json& active) {
    for (const json& f : active["active_faults"]) {
      if (f.value("pci", "") == gpu_.pci)
        return f.value("sources", json()) == json({"kmsg", "nvml"});
    }
    return false;
  };
  const json active = WaitActive(both);
  EXPECT_TRUE(both(active)) << active.dump();
}

TEST_F(NvmlAgentTest, DeviceCountMismatchAgainstPciBusAndConfig) {
  auto dev = [&](const std::string& name) {
    std::filesystem::create_directories(dir_ + "/sysfs/" + name);
    std::ofstream(dir_ + "/sysfs/" + name + "/vendor") << "0x10de\n";
    std::ofstream(dir_ + "/sysfs/" + name + "/class") << "0x030200\n";
  };
  dev("0000:3b:00.0");
  dev("0000:5e:00.0");
  sc_.Write({{"devices", {HealthyDevice(gpu_)}}});
  auto& a = Start("  expected_gpus: 2\n");
  auto e = a.WaitEvent(
      [](const json& j) { return j.value("reason", "") == "NvidiaDeviceCountMismatch"; }, 5s);
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["severity"], "fatal");
  EXPECT_EQ((*e)["source"], "sysfs");
  EXPECT_EQ((*e)["message"], "NVML sees 1 GPUs, the PCI bus holds 2, 2 expected");
  std::this_thread::sleep_for(600ms);
  a.WaitEvent([](const json&) { return false; }, 100ms);
  int n = 0;
  for (const json& j : a.events()) n += j.value("reason", "") == "NvidiaDeviceCountMismatch";
  EXPECT_EQ(n, 1) << "reported once while it lasts";
}

TEST_F(NvmlAgentTest, WithoutNvmlTheAgentSaysSoOnceAndKeepsWorking) {
  auto& a = Start("", {}, "/nonexistent/libnvidia-ml.so.1");
  auto said = Logged(Msg("NVML not available"), 1s);
  ASSERT_TRUE(said);
  EXPECT_NE((*said)["error"].get<std::string>().find("/nonexistent/libnvidia-ml.so.1"),
            std::string::npos);
  std::this_thread::sleep_for(500ms);
  a.WaitLog([](const json&) { return false; }, 100ms);
  int n = 0;
  for (const json& j : a.logs()) n += j.value("msg", "").starts_with("NVML not available");
  EXPECT_EQ(n, 1);
  auto started = std::find_if(a.logs().begin(), a.logs().end(),
                              [](const json& j) { return j.value("msg", "") == "agent started"; });
  ASSERT_NE(started, a.logs().end());
  EXPECT_EQ(testing::HttpGet((*started)["listen"], "/healthz").find("200 OK") != std::string::npos,
            true);
  EXPECT_NE(testing::HttpGet((*started)["listen"], "/metrics").find("gpuheal_nvml_up 0"),
            std::string::npos);
}

TEST_F(NvmlAgentTest, OldDriverWithoutEventsStillPolls) {
  auto d = HealthyDevice(gpu_);
  d["supported_events"] = json::array();
  d["errors"] = {{"nvmlDeviceGetRemappedRows", "NOT_SUPPORTED"}};
  sc_.Write({{"devices", {d}}});
  auto& a = Start();
  ASSERT_TRUE(Logged(Msg("supports none of the driver events"), 5s));
  ASSERT_TRUE(Logged(Msg("nvmlDeviceGetRemappedRows answered NVML_ERROR_NOT_SUPPORTED"), 5s));
  d["ecc"]["volatile_uncorrected"] = 3;
  sc_.Write({{"devices", {d}}});
  ASSERT_TRUE(a.WaitEvent(Reason("NvidiaDoubleBitError"), 5s))
      << "the polls still find what events would have";
}

class NvmlRecoveryTest : public NvmlAgentTest {
 protected:
  std::string ResetConfig(const std::string& drain_timeout = "10s") {
    return fmt::format(
        "  reset:\n    on_critical: true\n    drain_timeout: {}\n    timeout: 10s\n"
        "    command: [\"{}\", \"reset\", \"{}\", \"{{bus_id}}\"]\n",
        drain_timeout, NVML_DOUBLE_CTL, sc_.path());
  }
  std::optional<json> Step(AgentProcess& a, const std::string& step,
                           std::chrono::milliseconds t = 10s) {
    return a.WaitEvent(
        [&](const json& j) {
          return j.value("gpu_action", "") == "recovery" && j.value("pci", "") == gpu_.pci &&
                 j.value("step", "") == step;
        },
        t);
  }
  size_t ActiveFor(const std::string& pci) {
    std::ifstream in(dir_ + "/state/active-faults.json");
    const json active = json::parse(in, nullptr, false);
    size_t n = 0;
    for (const json& f : active["active_faults"]) n += f.value("pci", "") == pci;
    return n;
  }
};

TEST_F(NvmlRecoveryTest, DrainWaitResetVerifyUndrainClearsTheGpusFaults) {
  auto d = HealthyDevice(gpu_);
  d["processes"] = {4242};
  auto other = UniqueGpu();
  sc_.Write({{"devices", {d, HealthyDevice(other)}}});
  auto& a = Start(ResetConfig());
  // A fatal fault on the GPU (active), and one on another GPU that a reset of this one must not
  // clear.
  sc_.Write({{"devices", {d, HealthyDevice(other)}},
             {"events",
              {{{"id", "dbe"}, {"type", "DoubleBitEccError"}},
               {{"id", "dbe2"}, {"device", 1}, {"type", "DoubleBitEccError"}}}}});
  ASSERT_TRUE(a.WaitEvent(Reason("NvidiaDoubleBitError"), 5s));
  ASSERT_TRUE(a.WaitEvent(Reason("NvidiaDoubleBitError", other.pci), 5s));
  WaitActive([&](const json&) { return ActiveFor(gpu_.pci) == 1 && ActiveFor(other.pci) == 1; });
  EXPECT_EQ(ActiveFor(gpu_.pci), 1u);
  // Then a critical fault: a GSP timeout, which asks for a GPU reset.
  sc_.Write({{"devices", {d, HealthyDevice(other)}},
             {"events",
              {{{"id", "dbe"}, {"type", "DoubleBitEccError"}},
               {{"id", "dbe2"}, {"device", 1}, {"type", "DoubleBitEccError"}},
               {{"id", "gsp"}, {"type", "XidCriticalError"}, {"data", 119}}}}});
  auto crit = a.WaitEvent(Reason("NvidiaXID119Warning"), 5s);
  ASSERT_TRUE(crit);
  EXPECT_EQ((*crit)["severity"], "critical");
  auto drain = Step(a, "drain");
  ASSERT_TRUE(drain);
  EXPECT_TRUE((*drain)["ok"]);
  EXPECT_EQ((*drain)["bus_id"], gpu_.bus_id);
  // The work on the GPU is still running: no reset yet.
  EXPECT_FALSE(Step(a, "reset", 1500ms)) << "must wait for the compute processes";
  d["processes"] = json::array();
  auto scenario = sc_.Read();
  scenario["devices"][0]["processes"] = json::array();
  sc_.Write(scenario);
  auto wait = Step(a, "wait");
  ASSERT_TRUE(wait);
  EXPECT_TRUE((*wait)["ok"]);
  auto reset = Step(a, "reset");
  ASSERT_TRUE(reset);
  EXPECT_TRUE((*reset)["ok"]) << reset->dump();
  auto verify = Step(a, "verify");
  ASSERT_TRUE(verify);
  EXPECT_TRUE((*verify)["ok"]) << verify->dump();
  auto undrain = Step(a, "undrain");
  ASSERT_TRUE(undrain);
  EXPECT_TRUE((*undrain)["ok"]);
  auto done = Step(a, "done");
  ASSERT_TRUE(done);
  EXPECT_TRUE((*done)["ok"]);
  EXPECT_TRUE((*done)["final"]);
  EXPECT_EQ(sc_.Read()["devices"][0]["resets"], 1)
      << "the reset command ran once, with this GPU's bus id";
  ASSERT_TRUE(a.WaitLog(
      [](const json& j) { return j.value("msg", "") == "fault cleared by GPU reset"; }, 2s));
  WaitActive(
      [&](const json&) { return ActiveFor(gpu_.pci) == 0; });  // saved just after the log line
  EXPECT_EQ(ActiveFor(gpu_.pci), 0u) << "a verified reset clears the GPU's faults";
  EXPECT_EQ(ActiveFor(other.pci), 1u) << "and only that GPU's";
}

TEST_F(NvmlRecoveryTest, FailedResetLeavesFaultsAndUndrains) {
  auto d = HealthyDevice(gpu_);
  d["reset_fails"] = true;
  sc_.Write({{"devices", {d}}});
  auto& a = Start(ResetConfig());
  sc_.Write({{"devices", {d}},
             {"events",
              {{{"id", "dbe"}, {"type", "DoubleBitEccError"}},
               {{"id", "x"}, {"type", "XidCriticalError"}, {"data", 119}}}}});
  auto reset = Step(a, "reset");
  ASSERT_TRUE(reset);
  EXPECT_FALSE((*reset)["ok"]);
  EXPECT_NE((*reset)["message"].get<std::string>().find("exited 1"), std::string::npos)
      << reset->dump();
  auto undrain = Step(a, "undrain");
  ASSERT_TRUE(undrain) << "a failed reset gives the GPU back to work";
  auto done = Step(a, "done");
  ASSERT_TRUE(done);
  EXPECT_FALSE((*done)["ok"]);
  WaitActive([&](const json&) { return ActiveFor(gpu_.pci) == 2; });  // saved in the background
  EXPECT_EQ(ActiveFor(gpu_.pci), 2u)
      << "both faults stay: the double-bit error and the critical Xid 119";
}

TEST_F(NvmlRecoveryTest, WorkThatOutlivesTheDrainTimeoutStopsTheReset) {
  auto d = HealthyDevice(gpu_);
  d["processes"] = {777};
  d["persistence_mode"] = true;  // the driver refuses to drain: said, and the sequence goes on
  sc_.Write({{"devices", {d}}});
  auto& a = Start(ResetConfig("1s"));
  sc_.Write(
      {{"devices", {d}}, {"events", {{{"id", "x"}, {"type", "XidCriticalError"}, {"data", 119}}}}});
  auto drain = Step(a, "drain");
  ASSERT_TRUE(drain);
  EXPECT_FALSE((*drain)["ok"]);
  EXPECT_NE((*drain)["message"].get<std::string>().find("NVML_ERROR_IN_USE"), std::string::npos);
  auto wait = Step(a, "wait");
  ASSERT_TRUE(wait);
  EXPECT_FALSE((*wait)["ok"]);
  EXPECT_NE((*wait)["message"].get<std::string>().find("777"), std::string::npos);
  auto done = Step(a, "done");
  ASSERT_TRUE(done);
  EXPECT_FALSE((*done)["ok"]);
  EXPECT_FALSE(Step(a, "reset", 300ms)) << "never reset under running work";
  EXPECT_FALSE(sc_.Read()["devices"][0].contains("resets"));
}

}  // namespace
}  // namespace gpuheal

namespace gpuheal {
namespace {

// `gpuheal nvml-check` (what scripts/gpu-check.sh runs on a real GPU) against the double.
TEST(NvmlCheck, PrintsDevicesHealthAndEventsReadOnly) {
  testing::Scenario sc;
  auto g = testing::UniqueGpu();
  auto d = testing::HealthyDevice(g);
  d["remapped_rows"]["pending"] = 1;
  sc.Write({{"driver_version", "570.86.15"},
            {"devices", {d}},
            {"events", {{{"id", "e"}, {"type", "XidCriticalError"}, {"data", 31}}}}});
  const std::string cmd =
      fmt::format("{} nvml-check --nvml-library {} --wait 1s 2>&1", GPUHEAL_BIN, NVML_DOUBLE);
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int rc = pclose(p);
  EXPECT_EQ(WEXITSTATUS(rc), 0) << out;
  for (const std::string& want :
       {std::string("driver version: 570.86.15"),
        "GPU 0: " + g.bus_id + " " + g.uuid + " NVIDIA H100 80GB HBM3",
        std::string("remapped rows: uncorrectable 0, pending 1, failure 0"),
        std::string("drain state: not drained"), std::string("XidCriticalError"),
        std::string("data 31"), std::string("events received: 1")}) {
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  }
  const auto bad =
      fmt::format("{} nvml-check --nvml-library /nonexistent/lib.so --wait 0s 2>&1", GPUHEAL_BIN);
  EXPECT_EQ(WEXITSTATUS(system((bad + " >/dev/null").c_str())), 1);
  EXPECT_EQ(WEXITSTATUS(system(
                fmt::format("{} nvml-check --wait soon >/dev/null 2>&1", GPUHEAL_BIN).c_str())),
            2);
}

}  // namespace
}  // namespace gpuheal
