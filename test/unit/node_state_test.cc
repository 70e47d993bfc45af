#include "agent/node_state.h"

#include <gtest/gtest.h>

namespace gpuheal {
namespace {

using namespace std::chrono_literals;

Fault Xid(int n, const std::string& pci, Severity s, FaultKind kind = FaultKind::kXid) {
  Fault f;
  f.kind = kind;
  f.xid = n;
  f.pci = pci;
  f.severity = s;
  f.action = DefaultAction(s);
  f.reason = "NvidiaXID" + std::to_string(n) + "Warning";
  f.condition = "AcceleratedHardwareReady";
  return f;
}

TEST(NodeState, EscalatesTheFifthRepeatWithinTheWindow) {
  NodeState st(EscalationPolicy{});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  for (int i = 1; i <= 4; ++i) {
    auto r = st.Observe(Xid(13, "0000:3b:00", Severity::kWarn), t0 + i * 1h);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->count, i);
    EXPECT_FALSE(r->escalated);
    EXPECT_EQ(r->severity, Severity::kWarn);
  }
  auto r = st.Observe(Xid(13, "0000:3b:00", Severity::kWarn), t0 + 5h);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->escalated);
  EXPECT_EQ(r->severity, Severity::kFatal);
  EXPECT_EQ(r->action, Action::kQuarantine);
  EXPECT_EQ(r->reason, "NvidiaXID13Error");
}

TEST(NodeState, CountsPerGpuAndForgetsOutsideTheWindow) {
  NodeState st(EscalationPolicy{true, 3, std::chrono::hours(1), Severity::kFatal});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  st.Observe(Xid(31, "0000:3b:00", Severity::kWarn), t0);
  st.Observe(Xid(31, "0000:86:00", Severity::kWarn), t0 + 1min);  // another GPU
  auto r = st.Observe(Xid(31, "0000:3b:00", Severity::kWarn), t0 + 2h);  // first one expired
  EXPECT_EQ(r->count, 1);
  EXPECT_FALSE(r->escalated);
}

TEST(NodeState, InfoNeverEscalatesAndDisabledPolicyDoesNothing) {
  NodeState st(EscalationPolicy{true, 2, std::chrono::hours(1), Severity::kFatal});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(st.Observe(Xid(63, "0000:3b:00", Severity::kInfo), t0 + i * 1s)->severity,
              Severity::kInfo);
  }
  NodeState off(EscalationPolicy{false, 2, std::chrono::hours(1), Severity::kFatal});
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(off.Observe(Xid(13, "0000:3b:00", Severity::kWarn), t0 + i * 1s)->severity,
              Severity::kWarn);
  }
}

TEST(NodeState, Xid79AndTheFallenOffLineAreOneEvent) {
  NodeState st(EscalationPolicy{});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  EXPECT_TRUE(st.Observe(Xid(79, "0000:3b:00", Severity::kCatastrophic), t0));
  EXPECT_FALSE(st.Observe(Xid(79, "0000:3b:00", Severity::kCatastrophic,
                              FaultKind::kGpuFallenOffBus), t0 + 1ms));
  EXPECT_TRUE(st.Observe(Xid(79, "0000:86:00", Severity::kCatastrophic), t0 + 2ms));
  EXPECT_TRUE(st.Observe(Xid(79, "0000:3b:00", Severity::kCatastrophic), t0 + 1min));
}

// The agent was killed between the two lines: the restarted one remembers the saved fault, so the
// companion line read after the restart is not a second fault; a later loss still is.
TEST(NodeState, AFaultRememberedFromBeforeARestartJoinsItsCompanionLine) {
  NodeState st(EscalationPolicy{});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  st.Remember(Xid(79, "0000:3b:00", Severity::kCatastrophic), t0);
  EXPECT_FALSE(st.Observe(Xid(79, "0000:3b:00", Severity::kCatastrophic, FaultKind::kGpuFallenOffBus), t0 + 2s));
  EXPECT_TRUE(st.Observe(Xid(79, "0000:86:00", Severity::kCatastrophic, FaultKind::kGpuFallenOffBus), t0 + 2s));
  EXPECT_TRUE(st.Observe(Xid(79, "0000:3b:00", Severity::kCatastrophic), t0 + 1min));
}

TEST(NodeState, MemoryIsBoundedUnderAStormOfDistinctDevices) {
  NodeState st(EscalationPolicy{});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  for (int i = 0; i < 20000; ++i) {
    Fault f;
    f.kind = FaultKind::kStorage;
    f.reason = "StorageIOError";
    f.severity = Severity::kWarn;
    f.device = "sd" + std::to_string(i);
    st.Observe(f, t0 + i * 1ms);
  }
  EXPECT_LE(st.tracked_keys(), 4096u);
}

TEST(NodeState, OneFaultThroughTwoSourcesIsMerged) {
  NodeState st(EscalationPolicy{});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  Fault k = Xid(48, "0000:3b:00", Severity::kFatal);
  Fault n = k;
  n.source = "nvml";
  ASSERT_TRUE(st.Observe(k, t0));
  NodeState::Merge m;
  EXPECT_FALSE(st.Observe(n, t0 + 2s, &m)) << "the driver API's report of the same error";
  EXPECT_EQ(m.key, "xid/48/0000:3b:00");
  EXPECT_EQ(m.first_source, "kmsg");
  // The same source again is a repetition, counted for escalation.
  auto again = st.Observe(k, t0 + 3s);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->count, 2);
  // Another GPU, or long after: a fault of its own.
  Fault other = n;
  other.pci = "0000:5e:00";
  EXPECT_TRUE(st.Observe(other, t0 + 4s));
  EXPECT_TRUE(st.Observe(n, t0 + 60s));
}

TEST(NodeState, GpuLostFromNvmlMergesWithTheKernelsXid79) {
  NodeState st(EscalationPolicy{});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  Fault k = Xid(79, "0000:3b:00", Severity::kCatastrophic);
  Fault n = k;
  n.source = "nvml";
  n.reason = "NvidiaGPULost";
  ASSERT_TRUE(st.Observe(n, t0));
  NodeState::Merge m;
  EXPECT_FALSE(st.Observe(k, t0 + 1s, &m));
  EXPECT_EQ(m.first_source, "nvml");
}

TEST(NodeState, GpuHealthFaultsAreKeyedByReasonGpuAndDevice) {
  Fault f;
  f.kind = FaultKind::kGpuHealth;
  f.reason = "NvidiaNVLinkError";
  f.pci = "0000:3b:00";
  f.device = "nvlink5";
  EXPECT_EQ(NodeState::KeyOf(f), "gpu/NvidiaNVLinkError/0000:3b:00/nvlink5");
}

}  // namespace
}  // namespace gpuheal
