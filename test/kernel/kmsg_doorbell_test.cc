// Tier 2: the kernel-log doorbell (kmsg_bpf, src/sources/kmsg_doorbell.h) against the real kernel.
// Two agents read the same records side by side, one woken by the BPF doorbell, one by /dev/kmsg:
// they must report the same faults, each once; the doorbell agent must lose nothing and repeat
// nothing across a restart; and without the doorbell (forbidden by config, or without the
// capabilities to load it) the agent falls back, or refuses to start when kmsg_bpf is true.
//
// The trusted record is a real kernel one: attaching a loop device makes the kernel log
// "loopN: detected capacity change from 0 to SECTORS" (facility 0). A node-problem-detector rule
// given to this test's agents only, naming this test's own size, turns it into a fault; no other
// agent on the machine has the rule, so it stays harmless to them.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "agent_process.h"
#include "drill/inject.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using testing::AgentProcess;
using testing::HttpGet;

constexpr const char* kLoopReason = "GpuhealTestLoopAttached";

class KmsgDoorbellTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::CanWriteKmsg()) GTEST_SKIP() << "needs root and a writable /dev/kmsg";
    char tmpl[] = "/tmp/gpuheal-doorbell-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::random_device rd;
    pci_ = fmt::format("{:04x}:{:02x}:00", 0x1000 + rd() % 0xe000, rd() % 256);
    // 4 MiB plus a few sectors of this run's own: the kernel's line names the size in sectors.
    loop_sectors_ = 8192 + 1 + rd() % 60000;
    std::ofstream(dir_ + "/rules.json") << fmt::format(
        R"({{"plugin": "kmsg", "source": "kernel-monitor", "conditions": [],
            "rules": [{{"type": "temporary", "reason": "{}",
                       "pattern": "loop\\d+: detected capacity change from 0 to {}"}}]}})",
        kLoopReason, loop_sectors_);
  }
  void TearDown() override {
    if (!loop_dev_.empty()) std::system(("losetup -d " + loop_dev_).c_str());
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // An agent with its own state directory `name`, reading new records only.
  std::unique_ptr<AgentProcess> Start(const std::string& name, const std::string& bpf,
                                      std::vector<std::string> extra = {},
                                      std::string* listen = nullptr) {
    const std::string state = dir_ + "/" + name;
    std::filesystem::create_directories(state);
    std::ofstream(dir_ + "/" + name + ".yaml")
        << fmt::format("kmsg_start: end\nkmsg_bpf: {}\nnpd_rules: [{}/rules.json]\n", bpf, dir_);
    std::vector<std::string> args = std::move(extra);
    args.insert(args.end(),
                {GPUHEAL_BIN, "agent", "--standalone", "--config", dir_ + "/" + name + ".yaml",
                 "--state-dir", state, "--listen", "127.0.0.1:0"});
    if (accept_injected_) args.push_back("--accept-injected");
    auto a = std::make_unique<AgentProcess>(args);
    auto started =
        a->WaitLog([](const auto& j) { return j.value("msg", "") == "agent started"; }, 10s);
    EXPECT_TRUE(started.has_value()) << "agent " << name << " did not start";
    if (started) {
      started_ = *started;
      if (listen) *listen = started->value("listen", "");
    }
    return a;
  }

  void Inject(int xid, const std::string& name) {
    InjectSpec spec{xid, pci_, std::to_string(4000 + xid), name};
    ASSERT_TRUE(WriteKmsg("/dev/kmsg", InjectMessages(spec)).ok());
  }

  // A real kernel record: attach a loop device of this run's size.
  void AttachLoop() {
    const std::string img = dir_ + "/loop.img";
    std::ofstream{img}.close();
    std::filesystem::resize_file(img, static_cast<uintmax_t>(loop_sectors_) * 512);
    loop_dev_ = Output("losetup -f --show " + img);
    while (!loop_dev_.empty() && loop_dev_.back() == '\n') loop_dev_.pop_back();
    ASSERT_FALSE(loop_dev_.empty()) << "losetup printed nothing";
  }

  // What a shell command printed on stdout.
  static std::string Output(const std::string& cmd) {
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return out;
    char buf[4096];
    while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
    pclose(p);
    return out;
  }

  bool Mine(const nlohmann::json& j) const {
    return j.value("pci", nlohmann::json()) == pci_ || j.value("reason", "") == kLoopReason;
  }
  auto Named(const std::string& name) const {
    return
        [this, name](const nlohmann::json& j) { return Mine(j) && j.value("process", "") == name; };
  }

  // What an agent reported for this test: (sequence number, reason, trusted, ignored, injected).
  using Report = std::tuple<uint64_t, std::string, bool, bool, bool>;
  std::multiset<Report> Reports(const AgentProcess& a) const {
    std::multiset<Report> r;
    for (const auto& j : a.events()) {
      if (!Mine(j)) continue;
      r.emplace(j.value("kmsg_seq", uint64_t{0}), j.value("reason", ""), j.value("trusted", false),
                j.value("ignored", false), j.value("injected", false));
    }
    return r;
  }

  void SameFaultsOnce() {
    if (access("/dev/loop-control", W_OK) != 0) GTEST_SKIP() << "needs loop devices";
    std::string listen_bpf, listen_kmsg;
    auto bpf = Start("bpf", "true", {}, &listen_bpf);
    EXPECT_EQ(started_.value("kmsg_wakeup", ""), "bpf");
    auto kmsg = Start("kmsg", "false", {}, &listen_kmsg);
    EXPECT_EQ(started_.value("kmsg_wakeup", ""), "kmsg");
    for (int xid : {13, 31, 48, 79, 94}) Inject(xid, fmt::format("w{}", xid));
    AttachLoop();
    Inject(43, "end");  // after everything else: once both saw it, both saw the rest
    for (AgentProcess* a : {bpf.get(), kmsg.get()}) {
      ASSERT_TRUE(a->WaitEvent(Named("end"), 10s)) << "the last record was not reported";
    }
    const auto from_bpf = Reports(*bpf), from_kmsg = Reports(*kmsg);
    EXPECT_EQ(from_bpf, from_kmsg);
    // Six Xids (the last one "end"), Xid 79's second line (fallen off the bus), the kernel's loop
    // record.
    EXPECT_EQ(from_bpf.size(), 8u);
    std::map<uint64_t, int> per_seq;
    int trusted = 0, untrusted = 0;
    for (const auto& [seq, reason, is_trusted, ignored, injected] : from_bpf) {
      EXPECT_EQ(++per_seq[seq], 1) << "record " << seq << " reported twice";
      if (is_trusted) {
        ++trusted;
        EXPECT_EQ(reason, kLoopReason);
        EXPECT_FALSE(ignored);
        EXPECT_FALSE(injected);
      } else {
        ++untrusted;
        EXPECT_EQ(ignored, !accept_injected_) << reason;
        EXPECT_EQ(injected, accept_injected_) << reason;
      }
    }
    EXPECT_EQ(trusted, 1) << "the kernel's own loop record";
    EXPECT_EQ(untrusted, 7);
    // The doorbell woke the bpf agent; the other one says it waits for the kernel's tick.
    const std::string metrics = HttpGet(listen_bpf, "/metrics");
    EXPECT_NE(metrics.find("gpuheal_kmsg_wakeup_source{source=\"bpf\"} 1"), std::string::npos);
    const std::string rings_total = "\ngpuheal_kmsg_doorbell_rings_total ";
    const size_t rings = metrics.find(rings_total);
    ASSERT_NE(rings, std::string::npos);
    EXPECT_GE(std::stod(metrics.substr(rings + rings_total.size())), 1.0)
        << metrics.substr(rings, 60);
    EXPECT_NE(HttpGet(listen_bpf, "/healthz").find("kmsg wake-up: bpf"), std::string::npos);
    EXPECT_NE(
        HttpGet(listen_kmsg, "/metrics").find("gpuheal_kmsg_wakeup_source{source=\"kmsg\"} 1"),
        std::string::npos);
    EXPECT_NE(HttpGet(listen_kmsg, "/healthz").find("kmsg wake-up: kmsg"), std::string::npos);
  }

  std::string dir_;
  std::string pci_;
  int loop_sectors_ = 0;
  std::string loop_dev_;
  bool accept_injected_ = false;
  nlohmann::json started_;
};

TEST_F(KmsgDoorbellTest, BothWakeUpsReportTheSameFaultsOnce) { SameFaultsOnce(); }

TEST_F(KmsgDoorbellTest, BothWakeUpsReportTheSameFaultsOnceWhenActingOnInjected) {
  accept_injected_ = true;
  SameFaultsOnce();
}

// Records written while the agent is down are reported after its restart, once; none of those
// reported before the stop comes again.
TEST_F(KmsgDoorbellTest, NothingLostOrTwiceAcrossARestart) {
  auto first = Start("agent", "true");
  for (int i = 0; i < 5; ++i) Inject(13, fmt::format("n{}", i));
  ASSERT_TRUE(first->WaitEvent(Named("n4"), 10s));
  EXPECT_EQ(first->Kill(SIGTERM), 0);
  for (int i = 5; i < 10; ++i) Inject(13, fmt::format("n{}", i));
  auto second = Start("agent", "true");
  EXPECT_EQ(started_.value("kmsg_wakeup", ""), "bpf");
  ASSERT_TRUE(second->WaitEvent(Named("n9"), 10s));
  Inject(43, "end");
  ASSERT_TRUE(second->WaitEvent(Named("end"), 10s));
  std::map<std::string, int> seen;
  for (const AgentProcess* a : {first.get(), second.get()}) {
    for (const auto& j : a->events()) {
      if (Mine(j) && j.value("xid", 0) == 13) ++seen[j.value("process", "")];
    }
  }
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(seen[fmt::format("n{}", i)], 1) << "n" << i;
  }
  EXPECT_EQ(seen.size(), 10u);
}

TEST_F(KmsgDoorbellTest, ConfigFalseUsesKmsgAndSaysNothing) {
  std::string listen;
  auto a = Start("agent", "false", {}, &listen);
  EXPECT_EQ(started_.value("kmsg_wakeup", ""), "kmsg");
  Inject(13, "off");
  EXPECT_TRUE(a->WaitEvent(Named("off"), 10s));
  for (const auto& l : a->logs()) {
    EXPECT_EQ(l.value("msg", "").find("doorbell"), std::string::npos) << l.dump();
  }
  EXPECT_NE(HttpGet(listen, "/metrics").find("gpuheal_kmsg_wakeup_source{source=\"kmsg\"} 1"),
            std::string::npos);
}

// Without CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN (dropped from the bounding set before exec; root
// keeps CAP_SYSLOG for /dev/kmsg) the program cannot load.
TEST_F(KmsgDoorbellTest, WithoutCapabilitiesAutoFallsBackAndTrueRefusesToStart) {
  const std::vector<std::string> drop = {"/usr/bin/setpriv",
                                         "--bounding-set=-bpf,-perfmon,-sys_admin", "--"};
  if (access(drop[0].c_str(), X_OK) != 0) GTEST_SKIP() << "needs setpriv (util-linux)";
  {
    auto a = Start("auto", "auto", drop);
    EXPECT_EQ(started_.value("kmsg_wakeup", ""), "kmsg");
    // The warning comes before "agent started": it is among the lines read already.
    bool said = false;
    for (const auto& l : a->logs()) {
      if (l.value("msg", "").find("doorbell not used") != std::string::npos) {
        said = true;
        EXPECT_NE(l.value("reason", "").find("CAP_BPF"), std::string::npos) << l.dump();
      }
    }
    EXPECT_TRUE(said) << "the agent must say once why it wakes at the tick";
    Inject(13, "nocaps");
    EXPECT_TRUE(a->WaitEvent(Named("nocaps"), 10s)) << "detection goes on without the doorbell";
  }
  {
    // kmsg_bpf: true: no start without it, exit 2 and why.
    const std::string state = dir_ + "/true";
    std::filesystem::create_directories(state);
    const std::string cmd = fmt::format(
        "{} {} -- {} agent --standalone --kmsg-bpf true --state-dir {} --listen '' 2>&1; echo "
        "rc=$?",
        drop[0], drop[1], GPUHEAL_BIN, state);
    const std::string out = Output(cmd);
    EXPECT_NE(out.find("rc=2"), std::string::npos) << out;
    EXPECT_NE(out.find("CAP_BPF and CAP_PERFMON"), std::string::npos) << out;
    EXPECT_NE(out.find("kmsg_bpf is true"), std::string::npos) << out;
    EXPECT_EQ(out.find("agent started"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace gpuheal
