// The Slurm backend's pure parts: the drain reason (a public contract), the desired state from
// the active faults, the signal names and the config keys.

#include <gtest/gtest.h>
#include <signal.h>

#include "agent/config.h"
#include "agent/slurm_reporter.h"
#include "slurm/client.h"
#include "slurm/reason.h"

namespace gpuheal {
namespace {

using slurm::DrainReason;

TEST(SlurmReason, FormatsNodeAndGpuFaults) {
  EXPECT_EQ(
      slurm::FormatReason({"NvidiaXID79Error", "0000:3b:00", "GPU has fallen off the bus.", 0}),
      "gpuheal: NvidiaXID79Error GPU 0000:3b:00 GPU has fallen off the bus.");
  EXPECT_EQ(slurm::FormatReason({"KernelSoftLockup", "", "stuck", 2}),
            "gpuheal: KernelSoftLockup stuck (+2 more)");
  EXPECT_EQ(slurm::FormatReason({"KernelSoftLockup", "", "", 0}), "gpuheal: KernelSoftLockup");
}

TEST(SlurmReason, StaysWithinTheLimitOnOneLine) {
  const std::string r =
      slurm::FormatReason({"NvidiaXID48Error", "0000:86:00", std::string(500, 'x') + "\nnext", 3});
  EXPECT_LE(r.size(), slurm::kMaxReasonBytes);
  EXPECT_EQ(r.find('\n'), std::string::npos);
  EXPECT_TRUE(r.ends_with("... (+3 more)")) << r;
  // A cut never splits a UTF-8 character.
  const std::string u = slurm::FormatReason({"X", "", std::string(400, '\xc3') + "", 0});
  EXPECT_LE(u.size(), slurm::kMaxReasonBytes);
}

TEST(SlurmReason, ParsesItsOwnAndOnlyItsOwn) {
  for (const DrainReason& d : {DrainReason{"NvidiaXID79Error", "0000:3b:00", "fell off", 0},
                               DrainReason{"KernelSoftLockup", "", "a b (c)", 4},
                               DrainReason{"NvidiaXID13Error", "0000:01:00", "", 1},
                               DrainReason{"StorageNotWritable", "", "", 0}}) {
    const auto p = slurm::ParseReason(slurm::FormatReason(d));
    ASSERT_TRUE(p) << slurm::FormatReason(d);
    EXPECT_EQ(*p, d) << slurm::FormatReason(d);
  }
  EXPECT_FALSE(slurm::ParseReason("hw swap ticket 4711"));
  EXPECT_FALSE(slurm::ParseReason("gpuheal:NoSpace"));
  EXPECT_FALSE(slurm::ParseReason("gpuheal: "));
  EXPECT_FALSE(slurm::IsGpuhealReason("maintenance (gpuheal: later)"));
}

TEST(SlurmSignal, NamesAndNumbersAsScancelTakesThem) {
  EXPECT_EQ(slurm::ParseSignal("USR1"), SIGUSR1);
  EXPECT_EQ(slurm::ParseSignal("sigusr2"), SIGUSR2);
  EXPECT_EQ(slurm::ParseSignal("TERM"), SIGTERM);
  EXPECT_EQ(slurm::ParseSignal("10"), 10);
  EXPECT_EQ(slurm::ParseSignal("0"), -1);
  EXPECT_EQ(slurm::ParseSignal("65"), -1);
  EXPECT_EQ(slurm::ParseSignal("USR3"), -1);
  EXPECT_EQ(slurm::ParseSignal(""), -1);
}

Fault MakeFault(std::string reason, Severity s, std::string pci, std::string condition) {
  Fault f;
  f.kind = pci.empty() ? FaultKind::kKernel : FaultKind::kXid;
  f.reason = std::move(reason);
  f.severity = s;
  f.pci = std::move(pci);
  f.condition = std::move(condition);
  f.message = "msg of " + f.reason;
  if (f.kind == FaultKind::kXid) f.xid = 79;
  return f;
}

TEST(SlurmDesired, TheWorstNodeLevelFaultNamesTheDrain) {
  ActiveFaults a;
  MonitorSwitches on;
  EXPECT_EQ(DesiredSlurmState(a, on), SlurmDesired{});
  ASSERT_TRUE(a.Observe(
      MakeFault("NvidiaXID119Error", Severity::kCritical, "0000:3b:00", "AcceleratedHardwareReady"),
      100, "boot"));
  auto d = DesiredSlurmState(a, on);
  ASSERT_TRUE(d.reason);
  EXPECT_FALSE(d.node_level) << "one GPU's critical fault drains without the checkpoint";
  EXPECT_EQ(d.reason->gpu, "0000:3b:00");
  ASSERT_TRUE(a.Observe(
      MakeFault("NvidiaXID79Error", Severity::kFatal, "0000:86:00", "AcceleratedHardwareReady"),
      200, "boot"));
  d = DesiredSlurmState(a, on);
  ASSERT_TRUE(d.reason);
  EXPECT_TRUE(d.node_level);
  EXPECT_EQ(d.reason->code, "NvidiaXID79Error");
  EXPECT_EQ(d.reason->gpu, "0000:86:00");
  EXPECT_EQ(d.reason->more, 1);
  // A domain switched off drains nothing.
  MonitorSwitches no_nvidia;
  no_nvidia.nvidia = false;
  d = DesiredSlurmState(a, no_nvidia);
  ASSERT_TRUE(d.reason);
  EXPECT_FALSE(d.node_level);
}

TEST(SlurmConfig, KeysAndErrors) {
  auto c = ParseAgentConfig(
      "backend: slurm\n"
      "slurm: {conf: /etc/slurm/x.conf, node_name: n1, checkpoint_signal: SIGUSR2,\n"
      "        checkpoint_window: 0s, requeue: false, resume: false, recheck_period: 5s}\n",
      "agent.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->backend, AgentConfig::Backend::kSlurm);
  EXPECT_EQ(c->slurm.conf, "/etc/slurm/x.conf");
  EXPECT_EQ(c->slurm.node_name, "n1");
  EXPECT_EQ(c->slurm.checkpoint_signal, SIGUSR2);
  EXPECT_EQ(c->slurm.checkpoint_window.count(), 0);
  EXPECT_FALSE(c->slurm.requeue);
  EXPECT_FALSE(c->slurm.resume);
  auto none = ParseAgentConfig("slurm: {checkpoint_signal: none}\n", "agent.yaml");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->slurm.checkpoint_signal, 0);

  auto bad = ParseAgentConfig("backend: lsf\n", "agent.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("agent.yaml:1:10"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("kubernetes, standalone or slurm"), std::string::npos);
  bad = ParseAgentConfig("slurm: {checkpoint_signal: USR9}\n", "agent.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("signal name"), std::string::npos) << bad.error().message;
  bad = ParseAgentConfig("slurm: {partition_gate: 20}\n", "agent.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("partition_gate"), std::string::npos) << bad.error().message;
}

TEST(SlurmClient, AMissingLibraryIsAClearError) {
  auto api = slurm::OpenLibslurm("libslurm-does-not-exist.so.0", "");
  ASSERT_FALSE(api);
  EXPECT_NE(api.error().message.find("libslurm"), std::string::npos) << api.error().message;
}

}  // namespace
}  // namespace gpuheal
