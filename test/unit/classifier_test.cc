#include "parse/classifier.h"

#include <gtest/gtest.h>

namespace gpuheal {
namespace {

std::vector<Fault> Classify(Classifier& c, const std::vector<std::string>& lines) {
  std::vector<Fault> out;
  size_t n = 0;
  for (const auto& l : lines) c.ClassifyLine(l, ++n, out);
  return out;
}

TEST(Classifier, OverridesChangeSeverityAndAction) {
  ClassifierOptions o;
  o.xid_overrides[13] = {Severity::kFatal, std::nullopt};
  o.xid_overrides[79] = {std::nullopt, Action::kQuarantine};
  auto c = Classifier::Create(std::move(o));
  ASSERT_TRUE(c.ok());
  auto f = Classify(**c, {"NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=a, b",
                          "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus."});
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].severity, Severity::kFatal);
  EXPECT_EQ(f[0].action, Action::kQuarantine);
  EXPECT_EQ(f[0].reason, "NvidiaXID13Error");
  EXPECT_EQ(f[1].severity, Severity::kCatastrophic);  // only the action was overridden
  EXPECT_EQ(f[1].action, Action::kQuarantine);
}

TEST(Classifier, OverrideBeatsTheLinesOwnSeverityFor154) {
  ClassifierOptions o;
  o.xid_overrides[154] = {Severity::kWarn, std::nullopt};
  auto c = Classifier::Create(std::move(o));
  auto f = Classify(**c, {"NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 "
                          "(None) to 0x2 (Node Reboot Required)"});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kWarn);
}

TEST(Classifier, MultiRecordMessageIsAbandonedWhenTooMuchInterleaves) {
  auto c = Classifier::Create({});
  std::vector<std::string> lines = {"NVRM: The NVIDIA GPU 0000:b3:00.0"};
  for (int i = 0; i < 20; ++i) lines.push_back("unrelated " + std::to_string(i));
  lines.push_back("NVRM: fallen off the bus and is not responding to commands.");
  auto f = Classify(**c, lines);
  ASSERT_EQ(f.size(), 1u);  // still reported, but without the bus id it cannot know
  EXPECT_EQ(f[0].kind, FaultKind::kGpuFallenOffBus);
  EXPECT_TRUE(f[0].pci.empty());
  EXPECT_EQ(f[0].line, lines.size());
}

TEST(Classifier, UntrustedRecordsAreClassifiedButMarked) {
  auto c = Classifier::Create({});
  auto f =
      Classify(**c, {"12,5,100,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen "
                     "off the bus."});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_FALSE(f[0].trusted);
  EXPECT_EQ(f[0].kmsg_seq, 5u);
  EXPECT_EQ(f[0].kmsg_usec, 100u);
}

TEST(Classifier, NvrmLinesNeverFallThroughToKernelRules) {
  auto c = Classifier::Create({});
  auto f = Classify(**c, {"NVRM: nvlink: Link down on link 3 I/O error, dev x, sector 1"});
  EXPECT_TRUE(f.empty());
}

TEST(Classifier, UuidIsAttachedAfterTheAnnouncement) {
  auto c = Classifier::Create({});
  auto f = Classify(**c, {"NVRM: GPU at PCI:0000:3b:00: GPU-1111",
                          "NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=a, DBE",
                          "NVRM: Xid (PCI:0000:86:00): 48, pid=1, name=a, DBE"});
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].uuid, "GPU-1111");
  EXPECT_EQ(f[1].uuid, "");
  EXPECT_EQ((*c)->UuidFor("0000:3b:00"), "GPU-1111");
}

// Text that user space chooses and the kernel prints on its behalf (a process name before
// "[pid]: segfault at", a mount option in "tmpfs: Unknown parameter") is a kernel record, so it
// is trusted; none of it may match a fault pattern. Every built-in pattern is anchored at the
// start of the message and spells out the subsystem's own format.
TEST(Classifier, TextUserSpaceMakesTheKernelPrintIsNoFault) {
  auto c = Classifier::Create({});
  ASSERT_TRUE(c.ok());
  const std::vector<std::string> forged = {
      "tmpfs: Unknown parameter 'NVRM: Xid (PCI:0000:d1:00): 79'",
      "tmpfs: Unknown parameter 'NVRM: GPU 0000:d1:00.0: GPU has fallen off the bus.'",
      "tmpfs: Unknown parameter 'nvidia-nvswitch0: SXid (PCI:0000:86:00.0): 24007, Fatal, x'",
      "Adapter removed[4242]: segfault at 0 ip 000055d0c0de1129 sp 00007ffd2ad1c3b0 error 6 in "
      "a.out[55d0c0de1000+1000] likely on CPU 1 (core 1, socket 0)",
      "PCIe link lost[4242]: segfault at 0 ip 000055d0c0de1129 sp 00007ffd2ad1c3b0 error 6 in "
      "a.out[55d0c0de1000+1000]",
      "forced readonly[4242]: segfault at 0 ip 000055d0c0de1129 sp 00007ffd2ad1c3b0 error 6 in "
      "a.out[55d0c0de1000+1000]",
      "kernel BUG at[4242]: segfault at 0 ip 000055d0c0de1129 sp 00007ffd2ad1c3b0 error 6 in "
      "a.out[55d0c0de1000+1000]",
      "kernel BUG at x[4242]: segfault at 0 ip 000055d0c0de1129 sp 00007ffd2ad1c3b0 error 6 in "
      "y:1![55d0c0de1000+1000]",
      "Oops: 0000 [#1][4242]: segfault at 0 ip 000055d0c0de1129 sp 00007ffd2ad1c3b0 error 6 in "
      "0000 [#1] x[55d0c0de1000+1000]",
      "I/O error, dev [4242]: segfault at 0 ip 0 sp 0 error 6 in x, sector 1[55d0c0de1000+1000]",
      "Link is Down[4242]: segfault at 0 ip 0 sp 0 error 6 in a.out[55d0c0de1000+1000]",
      "NETDEV WATCHDO[4242]: segfault at 0 ip 0 sp 0 error 6 in a.out[55d0c0de1000+1000]",
      "traps: a.out[4242] general protection fault ip:55d0c0de1129 sp:7ffd2ad1c3b0 error:0 in "
      "a.out[55d0c0de1000+1000]",
      "audit: type=1400 audit(0.0:1): apparmor=\"DENIED\" name=\"NVRM: Xid (PCI:0000:d1:00): 79\"",
      "x NVRM: Xid (PCI:0000:d1:00): 79, pid=1, name=x, GPU has fallen off the bus.",
      "a.out (4242): drop_caches: 1 EXT4-fs error (device sda1): x",
      "pcieport 0000:00:01.0: pciehp: Slot(1): Link Down",
  };
  for (const std::string& line : forged) {
    EXPECT_TRUE(Classify(**c, {line}).empty()) << line;
  }
}

// The kernel's own forms still match.
TEST(Classifier, KernelFormatsAtTheStartOfTheMessage) {
  auto c = Classifier::Create({});
  ASSERT_TRUE(c.ok());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"INFO: task kworker/u16:3:77 blocked for more than 122 seconds.", "kworker/u16:3:77"},
      {"BUG: soft lockup - CPU#3 stuck for 22s! [nccl:77]", "CPU#3"},
      {"rcu: INFO: rcu_sched detected stalls on CPUs/tasks:", ""},
      {"rcu: INFO: rcu_preempt detected expedited stalls on CPUs/tasks: {", ""},
      {"general protection fault, probably for non-canonical address 0xdead000000000100: 0000 [#1] "
       "PREEMPT SMP NOPTI",
       ""},
      {"Oops: general protection fault, probably for non-canonical address 0xdffffc0000000000: "
       "0000 [#1] PREEMPT SMP KASAN NOPTI",
       ""},
      {"BUG: unable to handle page fault for address: ffffffffc0a1b000", ""},
      {"BTRFS info (device dm-0 state EA): forced readonly", "dm-0"},
      {"critical medium error, dev sdc, sector 77 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2",
       "sdc"},
      {"ixgbe 0000:01:00.0 eth0: NETDEV WATCHDOG: CPU: 3: transmit queue 2 timed out 5040 ms",
       "eth0"},
      {"igb 0000:04:00.0 eno1: PCIe link lost", "eno1"},
      {"ixgbe 0000:03:00.0: Adapter removed", "0000:03:00.0"},
      {"e1000e: eth0 NIC Link is Down", "eth0"},
      {"ena 0000:00:05.0 ens5: Link is down", "ens5"},
  };
  for (const auto& [line, device] : cases) {
    auto f = Classify(**c, {line});
    ASSERT_EQ(f.size(), 1u) << line;
    EXPECT_EQ(f[0].device, device) << line;
  }
}

}  // namespace
}  // namespace gpuheal
