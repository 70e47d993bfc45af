#include "agent/node_state.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "parse/classifier.h"

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

Fault App(int n, const std::string& pci, int pid, const std::string& process) {
  Fault f = Xid(n, pci, Severity::kWarn);
  f.pid = pid;
  f.process = process;
  return f;
}

// Faults NVIDIA does not attribute to an application escalate on repeated incidents.
TEST(NodeState, OtherFaultsEscalateOnTheFifthIncidentWithinTheWindow) {
  NodeState st(EscalationPolicy{});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  Fault io;
  io.kind = FaultKind::kStorage;
  io.reason = "StorageIOError";
  io.condition = "StorageReady";
  io.device = "sdb";
  io.severity = Severity::kWarn;
  for (int i = 1; i <= 4; ++i) {
    auto r = st.Observe(io, t0 + i * 1h);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->count, i);
    EXPECT_FALSE(r->escalated);
  }
  auto r = st.Observe(io, t0 + 5h);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->escalated);
  EXPECT_EQ(r->severity, Severity::kFatal);
  EXPECT_EQ(r->action, Action::kQuarantine);
  EXPECT_EQ(r->reason, "StorageIOError");
  ASSERT_TRUE(r->escalation);
  EXPECT_EQ(r->escalation->rule, "repeated_incidents");
}

// The real H200 sequence: eight runs of one buggy program (eight pids, one name), ~0.9 s apart,
// each an Xid 31. Eight incidents, none escalated: a user's bug never drains a node.
TEST(NodeState, RepeatsOfOneProgramNeverEscalateAnApplicationXid) {
  NodeState st(EscalationPolicy{});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  const int pids[] = {870, 892, 918, 940, 962, 984, 1006, 1028};
  std::set<std::string> incidents;
  for (int i = 0; i < 8; ++i) {
    auto r = st.Observe(App(31, "0000:00:06", pids[i], "python3"), t0 + i * 900ms);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->count, i + 1);
    EXPECT_FALSE(r->escalated) << i;
    EXPECT_EQ(r->severity, Severity::kWarn);
    EXPECT_EQ(r->action, Action::kEvent);
    EXPECT_TRUE(r->repeat_of.empty()) << "another process is another incident";
    incidents.insert(r->incident);
  }
  EXPECT_EQ(incidents.size(), 8u);
}

// One application fault prints a line per SM: 8 Xid 13 lines of one process in a second are one
// incident, counted once.
TEST(NodeState, LinesOfOneProcessAreOneIncident) {
  NodeState st(EscalationPolicy{});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  auto first = st.Observe(App(13, "0000:3b:00", 4242, "train"), t0);
  ASSERT_TRUE(first);
  EXPECT_FALSE(first->incident.empty());
  EXPECT_TRUE(first->repeat_of.empty());
  for (int i = 1; i < 8; ++i) {
    auto r = st.Observe(App(13, "0000:3b:00", 4242, "train"), t0 + i * 100ms);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->repeat_of, first->incident);
    EXPECT_EQ(r->incident, first->incident);
    EXPECT_EQ(r->count, 1);
    EXPECT_TRUE(r->Follower());
  }
  // Lines that name no process join within the burst window of the first line only.
  auto a = st.Observe(Xid(13, "0000:5e:00", Severity::kWarn), t0);
  auto b = st.Observe(Xid(13, "0000:5e:00", Severity::kWarn), t0 + 1500ms);
  auto c = st.Observe(Xid(13, "0000:5e:00", Severity::kWarn), t0 + 2500ms);
  EXPECT_EQ(b->repeat_of, a->incident);
  EXPECT_TRUE(c->repeat_of.empty());
  EXPECT_EQ(c->count, 2);
}

// Hundreds of programs failing on one GPU: the event lists a few, says how many more, and the
// newest (the whole list made each event line grow with every program, ~35 KB at 500).
TEST(NodeState, EscalationEvidenceIsBounded) {
  NodeState st(EscalationPolicy{});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  std::optional<Fault> r;
  for (int i = 0; i < 30; ++i) {
    r = st.Observe(App(13, "0000:3b:00", 100 + i, fmt::format("p{}", i)), t0 + i * 1s);
  }
  ASSERT_TRUE(r && r->escalation);
  const auto& ev = r->escalation->evidence;
  ASSERT_EQ(ev.size(), 10u);
  EXPECT_NE(ev[0].find("process=p0 pid=100"), std::string::npos) << ev[0];
  EXPECT_NE(ev[7].find("process=p7 pid=107"), std::string::npos) << ev[7];
  EXPECT_EQ(ev[8], "... 21 more");
  EXPECT_NE(ev[9].find("process=p29 pid=129"), std::string::npos) << ev[9];
}

TEST(NodeState, DistinctWorkloadsOnOneGpuEscalateWhileTheOthersAreClean) {
  NodeState st(EscalationPolicy{});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  EXPECT_FALSE(st.Observe(App(13, "0000:3b:00", 1, "alpha"), t0)->escalated);
  EXPECT_FALSE(st.Observe(App(13, "0000:3b:00", 2, "alpha"), t0 + 1min)->escalated)
      << "same program";
  EXPECT_FALSE(st.Observe(App(13, "0000:3b:00", 3, "beta"), t0 + 2min)->escalated);
  auto r = st.Observe(App(13, "0000:3b:00", 4, "gamma"), t0 + 3min);
  ASSERT_TRUE(r->escalated);
  EXPECT_EQ(r->severity, Severity::kFatal);
  EXPECT_EQ(r->reason, "NvidiaXID13Error");
  ASSERT_TRUE(r->escalation);
  EXPECT_EQ(r->escalation->rule, "distinct_workloads");
  ASSERT_EQ(r->escalation->evidence.size(), 3u);
  EXPECT_NE(r->escalation->evidence[0].find("process=alpha"), std::string::npos);
  EXPECT_NE(r->escalation->evidence[2].find("process=gamma pid=4"), std::string::npos);

  // The same Xid on another GPU of the node too: the programs, not this GPU.
  NodeState spread(EscalationPolicy{});
  spread.Observe(App(13, "0000:86:00", 9, "alpha"), t0);
  spread.Observe(App(13, "0000:3b:00", 1, "alpha"), t0);
  spread.Observe(App(13, "0000:3b:00", 3, "beta"), t0 + 1min);
  EXPECT_FALSE(spread.Observe(App(13, "0000:3b:00", 4, "gamma"), t0 + 2min)->escalated);
}

TEST(NodeState, AnApplicationXidAfterAHardwareSignalOnTheSameGpuEscalates) {
  NodeState st(EscalationPolicy{});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  st.Observe(Xid(63, "0000:3b:00", Severity::kInfo), t0);  // row remapping event
  EXPECT_FALSE(st.Observe(App(31, "0000:86:00", 1, "job"), t0 + 1min)->escalated) << "another GPU";
  auto r = st.Observe(App(31, "0000:3b:00", 2, "job"), t0 + 2min);
  ASSERT_TRUE(r->escalated);
  EXPECT_EQ(r->escalation->rule, "hardware_signal");
  ASSERT_EQ(r->escalation->evidence.size(), 1u);
  EXPECT_NE(r->escalation->evidence[0].find("NvidiaXID63Warning on GPU 0000:3b:00"),
            std::string::npos);
  // A pending row remap read through NVML is a hardware signal too.
  NodeState nv(EscalationPolicy{});
  Fault remap;
  remap.kind = FaultKind::kGpuHealth;
  remap.reason = "NvidiaRowRemapPending";
  remap.pci = "0000:3b:00";
  remap.severity = Severity::kCritical;
  nv.Observe(remap, t0);
  EXPECT_TRUE(nv.Observe(App(13, "0000:3b:00", 2, "job"), t0 + 1s)->escalated);
}

TEST(NodeState, Xid45AndXid43FollowTheXidTheyAreConsequencesOf) {
  NodeState st(EscalationPolicy{});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  st.Observe(Xid(48, "0000:3b:00", Severity::kFatal), t0);
  auto x45 = st.Observe(App(45, "0000:3b:00", 7, "job"), t0 + 1s);
  ASSERT_TRUE(x45);
  EXPECT_EQ(x45->consequence_of, 48);
  EXPECT_TRUE(x45->Follower());
  // Solo, long after: its own incident.
  auto solo = st.Observe(App(45, "0000:3b:00", 8, "job"), t0 + 1min);
  EXPECT_FALSE(solo->consequence_of);
  EXPECT_FALSE(solo->incident.empty());
  // Xid 43 after Xid 31 of the same process; not after another process's fault.
  st.Observe(App(31, "0000:86:00", 11, "a"), t0 + 2min);
  EXPECT_EQ(st.Observe(App(43, "0000:86:00", 11, "a"), t0 + 2min + 1s)->consequence_of, 31);
  EXPECT_FALSE(st.Observe(App(43, "0000:86:00", 12, "b"), t0 + 2min + 2s)->consequence_of);
}

TEST(NodeState, CountsPerGpuAndForgetsOutsideTheWindow) {
  NodeState st(EscalationPolicy{true, 3, std::chrono::hours(1), Severity::kFatal});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  st.Observe(Xid(31, "0000:3b:00", Severity::kWarn), t0);
  st.Observe(Xid(31, "0000:86:00", Severity::kWarn), t0 + 1min);         // another GPU
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
  auto lost = st.Observe(Xid(79, "0000:3b:00", Severity::kCatastrophic), t0);
  ASSERT_TRUE(lost);
  EXPECT_FALSE(lost->Follower());
  auto text = st.Observe(
      Xid(79, "0000:3b:00", Severity::kCatastrophic, FaultKind::kGpuFallenOffBus), t0 + 1ms);
  ASSERT_TRUE(text) << "still reported";
  EXPECT_EQ(text->consequence_of, 79);
  EXPECT_EQ(text->incident, lost->incident);
  auto other = st.Observe(Xid(79, "0000:86:00", Severity::kCatastrophic), t0 + 2ms);
  EXPECT_FALSE(other->Follower());
  EXPECT_FALSE(st.Observe(Xid(79, "0000:3b:00", Severity::kCatastrophic), t0 + 1min)->Follower());
}

// The agent was killed between the two lines: the restarted one remembers the saved fault, so the
// companion line read after the restart is not a second fault; a later loss still is.
TEST(NodeState, AFaultRememberedFromBeforeARestartJoinsItsCompanionLine) {
  NodeState st(EscalationPolicy{});
  const auto t0 = NodeState::Clock::time_point{} + 1000h;
  st.Remember(Xid(79, "0000:3b:00", Severity::kCatastrophic), t0);
  EXPECT_EQ(st.Observe(Xid(79, "0000:3b:00", Severity::kCatastrophic, FaultKind::kGpuFallenOffBus),
                       t0 + 2s)
                ->consequence_of,
            79);
  EXPECT_FALSE(
      st.Observe(Xid(79, "0000:86:00", Severity::kCatastrophic, FaultKind::kGpuFallenOffBus),
                 t0 + 2s)
          ->Follower());
  EXPECT_FALSE(st.Observe(Xid(79, "0000:3b:00", Severity::kCatastrophic), t0 + 1min)->Follower());
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

// The real H200 kernel log (driver 580.159.04), replayed line for line with its own timestamps
// through the classifier and the node state the agent uses: the boot banner is no fault, one
// Xid 31 and one Xid 43 (a user's `trap;`) from two programs, then eight runs of one buggy
// program. Every fault stays at the workload level: warn, an Event, nothing escalated.
TEST(NodeState, TheRealH200SequenceStaysAtTheWorkloadLevel) {
  std::ifstream in(std::string(GPUHEAL_SOURCE_DIR) +
                   "/test/fixtures/real-gpu/h200-dmesg-app-faults.txt");
  ASSERT_TRUE(in) << "fixture missing";
  auto c = Classifier::Create({});
  ASSERT_TRUE(c.ok());
  NodeState st(EscalationPolicy{});
  const auto boot = NodeState::Clock::time_point{} + 1000h;
  std::string line;
  size_t n = 0;
  std::vector<Fault> reported;
  while (std::getline(in, line)) {
    std::vector<Fault> faults;
    (*c)->ClassifyLine(line, ++n, faults);
    const double secs = std::stod(line.substr(1, line.find(']') - 1));  // "[  123.537620] ..."
    const auto at = boot + std::chrono::microseconds(static_cast<int64_t>(secs * 1e6));
    for (Fault& f : faults) {
      auto r = st.Observe(std::move(f), at);
      ASSERT_TRUE(r);
      reported.push_back(*r);
    }
  }
  ASSERT_EQ(reported.size(), 10u) << "one Xid 31, one Xid 43, eight Xid 31";
  EXPECT_EQ(reported[1].xid, 43);
  EXPECT_FALSE(reported[1].consequence_of) << "the Xid 43 is another program's (pid 510, not 487)";
  std::set<std::string> incidents;
  for (const Fault& f : reported) {
    EXPECT_EQ(f.severity, Severity::kWarn) << f.message;
    EXPECT_EQ(f.action, Action::kEvent) << f.message;
    EXPECT_FALSE(f.escalated) << f.message;
    EXPECT_EQ(f.uuid, "GPU-cc4dc46e-88e1-215c-8b8c-d821041f979c");
    incidents.insert(f.incident);
  }
  EXPECT_EQ(incidents.size(), 10u) << "ten programs, ten incidents";
}

}  // namespace
}  // namespace gpuheal
