// The domain monitors' parsers and rules: the mount table, rtnetlink link messages, interface
// patterns, the previous boot's crash in pstore records, the while-observed recovery rule and the
// config keys. The monitors against real interfaces, mounts, containerd and journals are in
// test/integration/domains_kube_test.cc.

#include "agent/domain_monitors.h"

#include <gtest/gtest.h>
#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "agent/active_faults.h"
#include "agent/config.h"
#include "agent/node_state.h"
#include "core/reasons.h"
#include "sources/cri_client.h"
#include "sources/mountinfo.h"
#include "sources/netlink_links.h"

namespace gpuheal {
namespace {

constexpr std::string_view kMountInfo =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
    "30 22 0:26 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
    "41 22 7:0 / /var/lib/kubelet rw,relatime shared:20 - ext4 /dev/loop0 ro\n"
    "42 22 7:1 / /mnt/my\\040data ro,relatime - xfs /dev/loop1 rw,attr2\n"
    "43 22 7:2 / /data rw,relatime - xfs /dev/nvme0n1 rw\n";

TEST(MountInfo, ParsesFieldsEscapesAndBothReadOnlyFlags) {
  auto m = ParseMountInfo(kMountInfo);
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->size(), 5u);
  EXPECT_EQ((*m)[0].mount_point, "/");
  EXPECT_EQ((*m)[0].fstype, "ext4");
  EXPECT_EQ((*m)[0].source, "/dev/sda1");
  EXPECT_FALSE((*m)[0].read_only);  // errors=remount-ro is an option, not the state
  EXPECT_TRUE((*m)[2].read_only);   // the superblock turned read-only (ext4 error)
  EXPECT_EQ((*m)[3].mount_point, "/mnt/my data");
  EXPECT_FALSE((*m)[3].read_only);  // the mount's own ro (a read-only bind): by choice, no fault
  EXPECT_FALSE((*m)[4].read_only);
}

TEST(MountInfo, MalformedLineIsAnErrorNamingIt) {
  auto m = ParseMountInfo("22 1 8:1 / / rw - ext4\n30 22 0:26\n");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("line 1"), std::string::npos) << m.error().message;
}

TEST(MountInfo, MountOfTakesTheLongestCoveringMountPoint) {
  auto m = ParseMountInfo(kMountInfo);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(MountOf(*m, "/var/lib/kubelet/pods")->mount_point, "/var/lib/kubelet");
  EXPECT_EQ(MountOf(*m, "/var/lib/kubeletx")->mount_point, "/");
  EXPECT_EQ(MountOf(*m, "/data")->mount_point, "/data");
  EXPECT_EQ(MountOf(*m, "/database")->mount_point, "/");
}

// One RTM_NEWLINK (or RTM_DELLINK) message as the kernel sends it.
std::string LinkMessage(uint16_t type, int index, unsigned flags, const std::string& name,
                        int oper = -1) {
  std::string attrs;
  auto add = [&](uint16_t t, const void* data, size_t len) {
    rtattr a{};
    a.rta_len = static_cast<unsigned short>(RTA_LENGTH(len));
    a.rta_type = t;
    std::string one(RTA_SPACE(len), '\0');
    memcpy(one.data(), &a, sizeof(a));
    memcpy(one.data() + RTA_LENGTH(0), data, len);
    attrs += one;
  };
  add(IFLA_IFNAME, name.c_str(), name.size() + 1);
  if (oper >= 0) {
    const uint8_t o = static_cast<uint8_t>(oper);
    add(IFLA_OPERSTATE, &o, 1);
  }
  nlmsghdr h{};
  h.nlmsg_type = type;
  h.nlmsg_len = static_cast<uint32_t>(NLMSG_LENGTH(sizeof(ifinfomsg)) + attrs.size());
  ifinfomsg i{};
  i.ifi_index = index;
  i.ifi_flags = flags;
  std::string out(NLMSG_ALIGN(h.nlmsg_len), '\0');
  memcpy(out.data(), &h, sizeof(h));
  memcpy(out.data() + NLMSG_LENGTH(0), &i, sizeof(i));
  memcpy(out.data() + NLMSG_LENGTH(sizeof(ifinfomsg)), attrs.data(), attrs.size());
  return out;
}

TEST(NetlinkLinks, ParsesNewAndDeletedLinksAndTheDumpsEnd) {
  std::string d = LinkMessage(RTM_NEWLINK, 3, IFF_UP | IFF_RUNNING | IFF_LOWER_UP, "ib0", 6) +
                  LinkMessage(RTM_NEWLINK, 4, IFF_UP, "ib1", 2) +
                  LinkMessage(RTM_DELLINK, 5, 0, "ib2");
  nlmsghdr done{};
  done.nlmsg_type = NLMSG_DONE;
  done.nlmsg_len = NLMSG_LENGTH(4);
  std::string dm(NLMSG_ALIGN(done.nlmsg_len), '\0');
  memcpy(dm.data(), &done, sizeof(done));
  d += dm;
  std::vector<LinkState> got;
  bool end = false;
  ASSERT_TRUE(ParseLinkMessages(
      d, [&](const LinkState& s) { got.push_back(s); }, &end));
  EXPECT_TRUE(end);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].name, "ib0");
  EXPECT_TRUE(got[0].admin_up && got[0].carrier && got[0].running);
  EXPECT_EQ(got[0].operstate, "up");
  EXPECT_EQ(got[1].name, "ib1");
  EXPECT_TRUE(got[1].admin_up);
  EXPECT_FALSE(got[1].carrier);
  EXPECT_EQ(got[1].operstate, "down");
  EXPECT_TRUE(got[2].deleted);
}

TEST(NetlinkLinks, TruncatedMessageIsRejected) {
  std::string d = LinkMessage(RTM_NEWLINK, 3, IFF_UP, "ib0");
  d.resize(NLMSG_LENGTH(sizeof(ifinfomsg)) - 2);
  // Too short for its own header length: not a crash, not a link.
  int n = 0;
  ParseLinkMessages(d, [&](const LinkState&) { ++n; });
  EXPECT_EQ(n, 0);
}

std::string Corpus(const std::string& name) {
  std::ifstream in(std::string(GPUHEAL_SOURCE_DIR) + "/test/fuzz/corpus/cri/" + name,
                   std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(CriWire, DecodesContainerdsOwnAnswers) {
  // Bytes containerd 1.6 sent for Status (ready, then without a CNI config) and Version.
  const std::string ready = Corpus("containerd-status-ready");
  auto m = UnframeGrpc(ready);
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto s = ParseCriStatus(*m);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].type, "RuntimeReady");
  EXPECT_TRUE((*s)[0].status);
  EXPECT_EQ((*s)[1].type, "NetworkReady");
  EXPECT_TRUE((*s)[1].status);

  const std::string nonet = Corpus("containerd-status-network-not-ready");
  s = ParseCriStatus(*UnframeGrpc(nonet));
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->size(), 2u);
  EXPECT_FALSE((*s)[1].status);
  EXPECT_EQ((*s)[1].reason, "NetworkPluginNotReady");
  EXPECT_EQ((*s)[1].message, "Network plugin returns error: cni plugin not initialized");

  auto v = ParseCriVersion(*UnframeGrpc(Corpus("containerd-version")));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->runtime_name, "containerd");
  EXPECT_EQ(v->runtime_version, "1.6.20~ds1");
  EXPECT_EQ(v->runtime_api_version, "v1");
}

TEST(CriWire, MalformedAnswersAreErrors) {
  EXPECT_FALSE(UnframeGrpc(std::string("\0\0\0", 3)).ok());
  EXPECT_FALSE(UnframeGrpc(std::string("\x01\0\0\0\0", 5)).ok());  // compressed
  EXPECT_FALSE(UnframeGrpc(std::string("\0\0\0\0\x09"
                                       "abc",
                                       8))
                   .ok());                                                // cut short
  EXPECT_FALSE(ParseCriStatus(std::string("\x0a\x05\x0a\x01", 4)).ok());  // length past the end
  EXPECT_FALSE(ParseCriStatus(std::string("\x0b", 1)).ok());              // a group: not proto3
  // Unknown fields are skipped, as protobuf does.
  auto s =
      ParseCriStatus(std::string("\x10\x01\x1a\x02"
                                 "hi",
                                 6));
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->empty());
}

TEST(DomainMonitors, InterfacePatternsAreGlobs) {
  const std::vector<std::string> p = {"ib*", "mlx5_?", "enp1s0f0"};
  EXPECT_TRUE(InterfaceWatched(p, "ib0"));
  EXPECT_TRUE(InterfaceWatched(p, "ibp12s0"));
  EXPECT_TRUE(InterfaceWatched(p, "mlx5_3"));
  EXPECT_FALSE(InterfaceWatched(p, "mlx5_10"));
  EXPECT_TRUE(InterfaceWatched(p, "enp1s0f0"));
  EXPECT_FALSE(InterfaceWatched(p, "eth0"));
  EXPECT_FALSE(InterfaceWatched({}, "ib0"));
}

TEST(PreviousBoot, FindsThePanicInAPstoreRecord) {
  const auto dir = std::filesystem::temp_directory_path() / "gpuheal-pstore-unit";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "dmesg-ramoops-0")
      << "Panic#1 Part1\n"
         "<6>[  100.000000] nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver\n"
         "<0>[  123.456789] Kernel panic - not syncing: Fatal local machine check\n"
         "<4>[  123.456800] CPU: 3 PID: 0 Comm: swapper/3 Not tainted 6.1.0 #1\n";
  std::ofstream(dir / "console-ramoops-0") << "Kernel panic - not syncing: ignored\n";
  auto c = ReadPstoreCrash(dir.string());
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kind, "KernelPanic");
  EXPECT_EQ(c->source, "pstore dmesg-ramoops-0");
  ASSERT_EQ(c->lines.size(), 2u);
  EXPECT_EQ(c->lines[0], "Kernel panic - not syncing: Fatal local machine check");
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(ReadPstoreCrash(dir.string()));  // no directory: nothing, no error
}

TEST(PreviousBoot, OnlyCrashesCount) {
  EXPECT_FALSE(FindCrashInLines({"INFO: task kworker/0:1:12 blocked for more than 120 seconds.",
                                 "EXT4-fs error (device sda1): ext4_lookup:1: inode #2"}));
  auto c = FindCrashInLines({"[    1.0] watchdog: Watchdog detected hard LOCKUP on cpu 3"});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kind, "KernelHardLockup");
}

Fault ObservedFault(std::string_view r, const std::string& dev, const std::string& source) {
  Fault f;
  f.kind = FaultKind::kNetwork;
  f.reason = std::string(r);
  f.condition = "NetworkingReady";
  f.severity = Severity::kFatal;
  f.device = dev;
  f.source = source;
  return f;
}

TEST(DomainMonitors, WhileObservedFaultsClearOnlyWhenTheirMonitorStopsReportingThem) {
  const Fault down = ObservedFault(reason::kInterfaceNotRunning, "ib0", "netlink");
  EXPECT_EQ(RecoveryRuleOf(down), RecoveryRule::kWhileObserved);
  ActiveFaults a;
  ASSERT_TRUE(a.Observe(down, 100, "boot-1"));
  ASSERT_TRUE(a.Observe(ObservedFault(reason::kInfiniBandPortDown, "mlx5_0/1", "infiniband"), 100,
                        "boot-1"));
  // Not by time, and not by another monitor's report.
  EXPECT_TRUE(a.ClearQuiet(100 + 86400, std::chrono::seconds(600)).empty());
  EXPECT_TRUE(a.ClearObserved("mount", {}).empty());
  // Still observed: kept.
  EXPECT_TRUE(a.ClearObserved("netlink", {NodeState::KeyOf(down)}).empty());
  // Gone from its monitor's report: cleared.
  auto cleared = a.ClearObserved("netlink", {});
  ASSERT_EQ(cleared.size(), 1u);
  EXPECT_EQ(cleared[0].fault.reason, reason::kInterfaceNotRunning);
  EXPECT_EQ(a.all().size(), 1u);
  // A reboot clears them too (the monitor reports again if the state persists).
  EXPECT_EQ(a.ClearAfterReboot("boot-2", [](const std::string&) { return true; }).size(), 1u);
}

TEST(DomainMonitors, ConditionsNameTheObservedState) {
  ActiveFaults a;
  Fault f = ObservedFault(reason::kContainerRuntimeUnresponsive, "unix:///run/c.sock", "cri");
  f.kind = FaultKind::kRuntime;
  f.condition = "ContainerRuntimeReady";
  f.message = "CRI Status did not answer within 5000ms";
  ASSERT_TRUE(a.Observe(f, 100, "b"));
  bool found = false;
  for (const auto& c : a.Conditions(MonitorSwitches{})) {
    if (c.type != "ContainerRuntimeReady") continue;
    found = true;
    EXPECT_EQ(c.status, "False");
    EXPECT_EQ(c.reason, "ContainerRuntimeUnresponsive");
    EXPECT_NE(c.message.find("did not answer"), std::string::npos) << c.message;
  }
  EXPECT_TRUE(found);
  // Saved and loaded, it keeps its source (so its monitor can clear it after a restart).
  auto back = ActiveFaults::FromJson(a.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->ClearObserved("cri", {}).size(), 1u);
}

TEST(DomainMonitors, ConfigKeysAndErrors) {
  auto c = ParseAgentConfig(
      "network:\n  interfaces: [\"ib*\", \"mlx5_*\"]\n  required: [ib0]\n  flap_count: 4\n"
      "  flap_window: 2m\n  infiniband_sysfs: \"\"\nstorage:\n  paths: [/var/lib/kubelet, /data]\n"
      "  stat_timeout: 2s\nruntime:\n  endpoint: unix:///run/crio/crio.sock\n  timeout: 3s\n"
      "  network_ready: false\nprevious_boot:\n  journal: \"\"\nkernel:\n  oom_storm_count: 20\n",
      "agent.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->network.interfaces.size(), 2u);
  EXPECT_EQ(c->network.required, std::vector<std::string>{"ib0"});
  EXPECT_EQ(c->network.flap_count, 4);
  EXPECT_EQ(c->network.flap_window, std::chrono::minutes(2));
  EXPECT_EQ(c->network.infiniband_sysfs, "");
  EXPECT_EQ(c->storage.paths.size(), 2u);
  EXPECT_EQ(c->storage.stat_timeout, std::chrono::seconds(2));
  EXPECT_EQ(c->runtime.endpoint, "unix:///run/crio/crio.sock");
  EXPECT_FALSE(c->runtime.network_ready);
  EXPECT_EQ(c->previous_boot.journal, "");
  EXPECT_EQ(c->kernel.oom_storm_count, 20);

  auto bad = ParseAgentConfig("runtime:\n  endpoint: /run/containerd/containerd.sock\n", "a.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("a.yaml:2:13"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("unix://"), std::string::npos);
  bad = ParseAgentConfig("storage:\n  paths: [relative/dir]\n", "a.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("not an absolute path"), std::string::npos);
  bad = ParseAgentConfig("network:\n  flap_count: 1\n", "a.yaml");
  ASSERT_FALSE(bad.ok());
  bad = ParseAgentConfig("storage:\n  stat_timout: 1s\n", "a.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("stat_timout"), std::string::npos);
}

}  // namespace
}  // namespace gpuheal
