#include "agent/active_faults.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/condition_decision.h"
#include "core/reasons.h"

namespace gpuheal {
namespace {

Fault Xid(int xid, const std::string& pci, Severity s) {
  Fault f;
  f.kind = FaultKind::kXid;
  f.xid = xid;
  f.pci = pci;
  f.severity = s;
  f.action = DefaultAction(s);
  f.condition = "AcceleratedHardwareReady";
  f.reason = reason::XidReason(xid, s);
  return f;
}

Fault Kernel(const std::string& r, Severity s, const std::string& device = "") {
  Fault f;
  f.kind = FaultKind::kKernel;
  f.severity = s;
  f.condition = "KernelReady";
  f.reason = r;
  f.device = device;
  return f;
}

const DesiredCondition& Find(const std::vector<DesiredCondition>& v, const std::string& type) {
  for (const auto& c : v) {
    if (c.type == type) return c;
  }
  static DesiredCondition none;
  return none;
}

TEST(ActiveFaults, HealthyNodeHasEveryEnabledDomainTrue) {
  ActiveFaults a;
  MonitorSwitches m;
  m.runtime = false;
  auto c = a.Conditions(m);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(Find(c, "AcceleratedHardwareReady").status, "True");
  EXPECT_EQ(Find(c, "AcceleratedHardwareReady").reason, "NvidiaGPUIsReady");
  EXPECT_EQ(Find(c, "KernelReady").reason, "KernelIsReady");
  EXPECT_EQ(Find(c, "ContainerRuntimeReady").type, "") << "disabled monitors own no condition";
}

TEST(ActiveFaults, OnlyFatalOrWorseHoldsAConditionFalse) {
  ActiveFaults a;
  EXPECT_FALSE(a.Observe(Xid(13, "0000:3b:00", Severity::kWarn), 100, "boot"));
  EXPECT_FALSE(a.Observe(Xid(43, "", Severity::kCritical), 100, "boot"))
      << "critical without a GPU: nothing to reset";
  EXPECT_TRUE(a.empty());
  // A critical fault of one GPU is held (for the GPU-level rung) but flips no condition.
  EXPECT_TRUE(a.Observe(Xid(43, "0000:3b:00", Severity::kCritical), 100, "boot"));
  EXPECT_EQ(Find(a.Conditions({}), "AcceleratedHardwareReady").status, "True");
  EXPECT_EQ(a.ConditionFaults(), 0u);
  EXPECT_TRUE(a.Observe(Xid(48, "0000:3b:00", Severity::kFatal), 100, "boot"));
  EXPECT_EQ(a.ConditionFaults(), 1u);
  auto c = Find(a.Conditions({}), "AcceleratedHardwareReady");
  EXPECT_EQ(c.status, "False");
  EXPECT_EQ(c.reason, "NvidiaXID48Error");
  EXPECT_NE(c.message.find("GPU 0000:3b:00: Xid 48"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("seen 1 time since 1970-01-01T00:01:40Z"), std::string::npos)
      << c.message;
}

TEST(ActiveFaults, TheWorstDecidesTheReasonAndTheMessageListsTheOthers) {
  ActiveFaults a;
  Fault f48 = Xid(48, "0000:3b:00", Severity::kFatal);
  Fault f79 = Xid(79, "0000:86:00", Severity::kCatastrophic);
  f79.uuid = "GPU-1234";
  a.Observe(f48, 100, "boot");
  a.Observe(f48, 105, "boot");
  a.Observe(f79, 200, "boot");
  auto c = Find(a.Conditions({}), "AcceleratedHardwareReady");
  EXPECT_EQ(c.reason, "NvidiaXID79Error");
  // The agent's decision on the worst fault leads (core/condition_decision.h).
  EXPECT_EQ(
      c.message.find(
          "[catastrophic/isolate] GPU 0000:86:00 (GPU-1234): Xid 79 (GPU has fallen off the bus)"),
      0u)
      << c.message;
  EXPECT_EQ(ParseDecisionPrefix(c.message),
            (ConditionDecision{Severity::kCatastrophic, Action::kIsolate}));
  EXPECT_NE(c.message.find("; also: GPU 0000:3b:00: Xid 48"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("seen 2 times"), std::string::npos) << c.message;
  // Other domains are untouched.
  EXPECT_EQ(Find(a.Conditions({}), "KernelReady").status, "True");
}

TEST(ActiveFaults, RecoveryRulesPerReason) {
  EXPECT_EQ(RecoveryRuleOf(Xid(79, "0000:3b:00", Severity::kCatastrophic)),
            RecoveryRule::kRebootWithGpuPresent);
  EXPECT_EQ(RecoveryRuleOf(Kernel("KernelPanic", Severity::kFatal)), RecoveryRule::kReboot);
  EXPECT_EQ(RecoveryRuleOf(Kernel("KernelHungTask", Severity::kFatal)), RecoveryRule::kQuietPeriod);
  Fault escalated = Xid(13, "0000:3b:00", Severity::kFatal);
  escalated.escalated = true;
  EXPECT_EQ(RecoveryRuleOf(escalated), RecoveryRule::kQuietPeriod);
  escalated.escalation = Fault::Escalation{"distinct_workloads", {"a", "b", "c"}};
  EXPECT_EQ(RecoveryRuleOf(escalated), RecoveryRule::kQuietPeriod);
  // Raised because the GPU showed a memory fault: quiet is no evidence of repair.
  escalated.escalation = Fault::Escalation{"hardware_signal", {"Xid 48"}};
  EXPECT_EQ(RecoveryRuleOf(escalated), RecoveryRule::kRebootWithGpuPresent);
}

TEST(ActiveFaults, AHardwareSignalEscalationOutlivesTheQuietPeriodAndASavedRestart) {
  ActiveFaults a;
  Fault f = Xid(31, "0000:3b:00", Severity::kFatal);
  f.escalated = true;
  f.escalation = Fault::Escalation{"hardware_signal", {"Xid 48 on 0000:3b:00"}};
  a.Observe(f, 100, "boot-1");
  EXPECT_TRUE(a.ClearQuiet(100 + 3600, std::chrono::seconds(600)).empty());
  ASSERT_EQ(a.all().size(), 1u);
  // A new boot with the GPU present clears it, as it would the memory fault itself.
  EXPECT_EQ(a.ClearAfterReboot("boot-2", [](const std::string&) { return true; }).size(), 1u);
}

TEST(ActiveFaults, RebootClearsGpuFaultsOnlyWhenTheGpuIsBack) {
  ActiveFaults a;
  a.Observe(Xid(79, "0000:3b:00", Severity::kCatastrophic), 100, "boot-1");
  a.Observe(Xid(79, "0000:86:00", Severity::kCatastrophic), 100, "boot-1");
  a.Observe(Kernel("KernelPanic", Severity::kFatal), 100, "boot-1");
  // Same boot (an agent restart): nothing clears.
  EXPECT_TRUE(a.ClearAfterReboot("boot-1", [](const std::string&) { return true; }).empty());
  // New boot: the kernel fault clears; of the GPUs only the one present again.
  auto cleared =
      a.ClearAfterReboot("boot-2", [](const std::string& pci) { return pci == "0000:3b:00"; });
  EXPECT_EQ(cleared.size(), 2u);
  ASSERT_EQ(a.all().size(), 1u);
  EXPECT_EQ(a.all().begin()->second.fault.pci, "0000:86:00");
}

TEST(ActiveFaults, QuietPeriodClearsOnlyTransientFaults) {
  ActiveFaults a;
  a.Observe(Kernel("KernelHungTask", Severity::kFatal, "kworker"), 100, "b");
  a.Observe(Kernel("KernelPanic", Severity::kFatal), 100, "b");
  EXPECT_TRUE(a.ClearQuiet(100 + 599, std::chrono::seconds(600)).empty());
  a.Observe(Kernel("KernelHungTask", Severity::kFatal, "kworker"), 650,
            "b");  // a repeat restarts the clock
  EXPECT_TRUE(a.ClearQuiet(100 + 700, std::chrono::seconds(600)).empty());
  auto cleared = a.ClearQuiet(650 + 600, std::chrono::seconds(600));
  ASSERT_EQ(cleared.size(), 1u);
  EXPECT_EQ(cleared[0].fault.reason, "KernelHungTask");
  EXPECT_EQ(a.all().size(), 1u);
}

TEST(ActiveFaults, GpuLevelFaultsArePublishedPerGpuWorstFirst) {
  ActiveFaults a;
  EXPECT_TRUE(a.GpuLevel().empty());
  a.Observe(Xid(45, "0000:3b:00", Severity::kCritical), 100, "boot");
  a.Observe(Xid(45, "0000:3b:00", Severity::kCritical), 105, "boot");
  a.Observe(Xid(119, "0000:5e:00", Severity::kCritical), 110, "boot");
  a.Observe(Xid(48, "0000:5e:00", Severity::kFatal), 120, "boot");
  a.Observe(Kernel("KernelPanic", Severity::kFatal), 130, "boot");
  const GpuFaults g = a.GpuLevel();
  ASSERT_EQ(g.size(), 2u) << "GPUs only";
  EXPECT_EQ(g.at("0000:3b:00").reason, "NvidiaXID45Warning");
  EXPECT_EQ(g.at("0000:3b:00").xid, 45);
  EXPECT_EQ(g.at("0000:3b:00").count, 2);
  EXPECT_EQ(g.at("0000:3b:00").since, std::chrono::system_clock::from_time_t(100));
  EXPECT_EQ(g.at("0000:5e:00").severity, Severity::kFatal) << "the GPU's worst";
  auto round = ParseGpuFaults(GpuFaultsToJson(g));
  ASSERT_TRUE(round) << round.error().message;
  EXPECT_EQ(*round, g);
  // A verified reset clears the critical fault with the others of that GPU.
  a.ClearGpu("0000:3b:00");
  EXPECT_EQ(a.GpuLevel().count("0000:3b:00"), 0u);
}

TEST(ActiveFaults, GpuFaultAnnotationErrorsNameTheAnnotation) {
  for (
      const char* bad :
      {"", "[]", R"({"x": {}})", R"({"0000:3b:00": 1})",
       R"({"0000:3b:00": {"severity": "bad", "reason": "R", "since": "2026-11-30T08:00:00Z", "count": 1}})",
       R"({"0000:3b:00": {"severity": "critical", "reason": "R", "since": "yesterday", "count": 1}})",
       R"({"0000:3b:00": {"severity": "critical", "reason": "R", "since": "2026-11-30T08:00:00Z", "count": 0}})",
       R"({"0000:3b:00": {"severity": "critical", "reason": "R", "since": "2026-11-30T08:00:00Z", "count": 1, "xid": -4}})"}) {
    auto r = ParseGpuFaults(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("gpuheal.io/gpu-faults"), std::string::npos)
        << r.error().message;
  }
  auto ok = ParseGpuFaults(
      R"({"00000000:3B:00.0": {"severity": "critical", "reason": "R", "since": "2026-11-30T08:00:00Z", "count": 1}})");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->count("0000:3b:00"), 1u) << "bus ids normalised";
}

TEST(ActiveFaults, GpuResetClearsThatGpu) {
  ActiveFaults a;
  a.Observe(Xid(48, "0000:3b:00", Severity::kFatal), 1, "b");
  a.Observe(Xid(48, "0000:86:00", Severity::kFatal), 1, "b");
  EXPECT_EQ(a.ClearGpu("0000:3b:00").size(), 1u);
  EXPECT_EQ(a.all().size(), 1u);
}

TEST(ActiveFaults, GpuHealthFaultsClearWithTheirGpu) {
  ActiveFaults a;
  Fault f;
  f.kind = FaultKind::kGpuHealth;
  f.pci = "0000:3b:00";
  f.severity = Severity::kFatal;
  f.condition = "AcceleratedHardwareReady";
  f.reason = "NvidiaRowRemapFailure";
  f.source = "nvml";
  a.Observe(f, 1, "b");
  EXPECT_EQ(RecoveryRuleOf(f), RecoveryRule::kRebootWithGpuPresent);
  EXPECT_EQ(a.ClearGpu("0000:3b:00").size(), 1u);
  EXPECT_TRUE(a.empty());
}

TEST(ActiveFaults, SourcesAndDrainStateShowInTheMessage) {
  ActiveFaults a;
  a.Observe(Xid(48, "0000:3b:00", Severity::kFatal), 1, "b");
  const std::string key = a.all().begin()->first;
  EXPECT_TRUE(a.AddSource(key, "nvml"));
  EXPECT_FALSE(a.AddSource(key, "nvml")) << "not news the second time";
  EXPECT_FALSE(a.AddSource("no/such/key", "nvml"));
  EXPECT_TRUE(a.SetGpuNote("0000:3b:00", "drained"));
  EXPECT_FALSE(a.SetGpuNote("0000:3b:00", "drained"));
  const std::string msg = Find(a.Conditions({}), "AcceleratedHardwareReady").message;
  EXPECT_NE(msg.find("GPU 0000:3b:00 [drained]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(reported by kmsg and nvml)"), std::string::npos) << msg;
  EXPECT_TRUE(a.SetGpuNote("0000:3b:00", ""));
  EXPECT_EQ(Find(a.Conditions({}), "AcceleratedHardwareReady").message.find("[drained]"),
            std::string::npos);
  // Sources survive a restart.
  auto back = ActiveFaults::FromJson(a.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->all().begin()->second.sources, (std::vector<std::string>{"kmsg", "nvml"}));
}

TEST(ActiveFaults, PersistRoundTripAndCorruptFile) {
  const std::string dir = ::testing::TempDir() + "/active-faults-test";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/active-faults.json";
  std::filesystem::remove(path);
  auto empty = ActiveFaults::Load(path);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());

  ActiveFaults a;
  Fault f = Xid(79, "0000:3b:00", Severity::kCatastrophic);
  f.uuid = "GPU-abc";
  a.Observe(f, 100, "boot-1");
  a.Observe(Kernel("KernelHungTask", Severity::kFatal, "kworker/1"), 120, "boot-1");
  ASSERT_TRUE(a.Save(path).ok());
  auto b = ActiveFaults::Load(path);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->Conditions({}), a.Conditions({}));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  std::ofstream(path) << "{\"version\":1,\"active_faults\":[{\"key\":1}]}";
  auto bad = ActiveFaults::Load(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find(path), std::string::npos);
}

TEST(ActiveFaults, GpuPresentLooksForAnyFunctionOfTheBusId) {
  const std::string dir = ::testing::TempDir() + "/fake-sysfs-pci";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/0000:3b:00.0");
  EXPECT_TRUE(GpuPresent("0000:3b:00", dir));
  EXPECT_FALSE(GpuPresent("0000:3b:0", dir));
  EXPECT_FALSE(GpuPresent("0000:86:00", dir));
  EXPECT_FALSE(GpuPresent("", dir));
}

}  // namespace
}  // namespace gpuheal
