// The domain monitors of `gpuheal agent` against a real control plane, each turned False and back
// to True through the real mechanism: veth interfaces the test creates (rtnetlink), a loop-mounted
// ext4 filesystem remounted read-only and a FUSE mount whose daemon never answers (the storage
// monitor's stat deadline), a real containerd stopped, frozen and restarted (CRI Status), the
// previous boot's panic in a pstore directory and in a journal file written by
// systemd-journal-remote, and kernel lines written to the real /dev/kmsg. InfiniBand ports are the
// one double: a sysfs-shaped directory (the same files, /sys/class/infiniband/<dev>/ports/<n>).

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "agent_process.h"
#include "kube/client.h"
#include "kube_test_util.h"
#include "run_binary.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using gpuheal::testing::AgentProcess;
using gpuheal::testing::ControlPlaneEnv;
using gpuheal::testing::Eventually;
using gpuheal::testing::RunShell;

// A child process of the test (containerd), killed at the end whatever happens.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& log) {
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> a;
      for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
      a.push_back(nullptr);
      execvp(a[0], a.data());
      _exit(127);
    }
  }
  ~Child() { Kill(); }
  void Signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGCONT);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

class DomainsKube : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpuheal::testing::CanWriteKmsg()) GTEST_SKIP() << "needs root and a writable /dev/kmsg";
    client_ = gpuheal::testing::AdminClient();
    std::random_device rd;
    tag_ = fmt::format("{:05x}", rd() % 0xfffff);
    node_ = "domains-" + tag_;
    ASSERT_EQ(client_->Create(kube::NodePath(), gpuheal::testing::NodeJson(node_))->status, 201);
    char tmpl[] = "/tmp/gpuheal-it-XXXXXX";  // run-tests.sh looks for leftovers under this name
    dir_ = mkdtemp(tmpl);
    std::filesystem::create_directories(dir_ + "/state");
  }
  void TearDown() override {
    if (HasFailure() && agent_) {
      // What the agent saw and said, for the failure's report.
      agent_->WaitEvent([](const auto&) { return false; }, 200ms);
      agent_->WaitLog([](const auto&) { return false; }, 200ms);
      for (const auto& e : agent_->events()) std::cerr << "agent event: " << e.dump() << "\n";
      for (const auto& l : agent_->logs()) std::cerr << "agent log: " << l.dump() << "\n";
      auto ev = client_->Get("/api/v1/namespaces/default/events");
      if (ev) std::cerr << "events: " << ev->body.substr(0, 3000) << "\n";
    }
    agent_.reset();
    containerd_.reset();
    if (fuse_fd_ >= 0) close(fuse_fd_);  // aborts the FUSE connection: its stat returns
    for (const auto& m : mounts_) umount2(m.c_str(), MNT_DETACH);
    if (!loop_.empty()) RunShell("losetup -d " + loop_);
    for (const auto& l : links_) RunShell("ip link del " + l + " 2>/dev/null");
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // The agent in Kubernetes mode with `config` (appended to a base that reads new kernel records
  // only and leaves the host's real interfaces, mounts and runtime out).
  void StartAgent(const std::string& config, std::vector<std::string> extra = {}) {
    const std::string path = dir_ + "/agent.yaml";
    std::ofstream(path) << "kmsg_start: end\n" << config;
    std::vector<std::string> args = {GPUHEAL_BIN,    "agent",
                                     "--node-name",  node_,
                                     "--kubeconfig", ControlPlaneEnv::kubeconfig(),
                                     "--state-dir",  dir_ + "/state",
                                     "--listen",     "",
                                     "--config",     path};
    args.insert(args.end(), extra.begin(), extra.end());
    agent_ = std::make_unique<AgentProcess>(args);
    ASSERT_TRUE(
        agent_->WaitLog([](const auto& j) { return j.value("msg", "") == "agent started"; }, 10s))
        << "agent did not start";
  }

  std::optional<kube::NodeCondition> Condition(const std::string& type) {
    return gpuheal::testing::NodeConditionOf(*client_, node_, type);
  }
  // Waits for the condition; on a timeout says what it was instead.
  ::testing::AssertionResult WaitCondition(const std::string& type, const std::string& status,
                                           const std::string& reason,
                                           std::chrono::milliseconds timeout = 15s) {
    if (Eventually(
            [&] {
              auto c = Condition(type);
              return c && c->status == status && c->reason == reason;
            },
            timeout)) {
      return ::testing::AssertionSuccess();
    }
    auto c = Condition(type);
    return ::testing::AssertionFailure()
           << type << " is not " << status << "/" << reason << " but "
           << (c ? c->status + "/" + c->reason + ": " + c->message : std::string("absent"));
  }
  int EventCount(const std::string& reason) {
    return gpuheal::testing::NodeEventCount(*client_, node_, reason);
  }
  std::string EventMessage(const std::string& reason) {
    const auto events = gpuheal::testing::NodeEvents(*client_, node_, reason);
    return events.empty() ? std::string() : events.front().value("message", "");
  }
  void Sh(const std::string& cmd) {
    auto r = RunShell(cmd);
    ASSERT_EQ(r.code, 0) << cmd << ": " << r.out;
  }
  void Kmsg(const std::string& text) {
    const int fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);  // a descriptor per write: ratelimit
    ASSERT_GE(fd, 0);
    const std::string rec = text + "\n";
    ASSERT_EQ(write(fd, rec.data(), rec.size()), static_cast<ssize_t>(rec.size()));
    close(fd);
  }

  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<AgentProcess> agent_;
  std::unique_ptr<Child> containerd_;
  std::string tag_, node_, dir_, loop_;
  std::vector<std::string> links_, mounts_;
  int fuse_fd_ = -1;
};

TEST_F(DomainsKube, NetworkLinkDownMissingAndInfiniBandPortTurnNetworkingReadyFalseAndBack) {
  const std::string fab = "ibt" + tag_, peer = "fpt" + tag_;  // 8 characters: within IFNAMSIZ
  Sh(fmt::format("ip link add {} type veth peer name {}", fab, peer));
  links_.push_back(fab);
  Sh(fmt::format("ip link set {} up && ip link set {} up", fab, peer));
  const std::string ib = dir_ + "/infiniband/mlx5_0/ports/1";
  std::filesystem::create_directories(ib);
  std::ofstream(ib + "/state") << "4: ACTIVE\n";
  std::ofstream(ib + "/phys_state") << "5: LinkUp\n";
  const std::string config = fmt::format(
      "network:\n  interfaces: [\"{}\"]\n  flap_count: 3\n"
      "  infiniband_sysfs: {}/infiniband\n  infiniband_period: 200ms\n"
      "storage:\n  paths: []\nruntime:\n  endpoint: unix://{}/none.sock\n",
      fab, dir_, dir_);
  StartAgent(config);
  ASSERT_TRUE(WaitCondition("NetworkingReady", "True", "NetworkingIsReady"));

  // The far end goes down: no carrier on ours.
  Sh(fmt::format("ip link set {} down", peer));
  ASSERT_TRUE(WaitCondition("NetworkingReady", "False", "InterfaceNotRunning"));
  EXPECT_NE(Condition("NetworkingReady")->message.find(fab + " has no carrier"), std::string::npos)
      << Condition("NetworkingReady")->message;
  Sh(fmt::format("ip link set {} up", peer));
  ASSERT_TRUE(WaitCondition("NetworkingReady", "True", "NetworkingIsReady"));

  // Third loss within the window: flapping, an Event.
  Sh(fmt::format("ip link set {} down && ip link set {} up", peer, peer));
  Sh(fmt::format("ip link set {} down && ip link set {} up", fab, fab));
  EXPECT_TRUE(Eventually([&] { return EventCount("NetworkInterfaceFlapping") >= 1; }, 10s));
  ASSERT_TRUE(WaitCondition("NetworkingReady", "True", "NetworkingIsReady"));

  // The interface vanishes, then comes back.
  Sh("ip link del " + fab);
  ASSERT_TRUE(WaitCondition("NetworkingReady", "False", "NetworkInterfaceMissing"));
  // A restarted agent still knows it vanished (from its saved faults): the condition stays.
  agent_.reset();
  StartAgent(config);
  std::this_thread::sleep_for(1s);  // its first link dump is in: nothing may clear it
  ASSERT_TRUE(WaitCondition("NetworkingReady", "False", "NetworkInterfaceMissing", 1s));
  Sh(fmt::format("ip link add {} type veth peer name {} && ip link set {} up && ip link set {} up",
                 fab, peer, fab, peer));
  ASSERT_TRUE(WaitCondition("NetworkingReady", "True", "NetworkingIsReady"));

  // An InfiniBand port leaves ACTIVE.
  std::ofstream(ib + "/state") << "1: DOWN\n";
  std::ofstream(ib + "/phys_state") << "3: Disabled\n";
  ASSERT_TRUE(WaitCondition("NetworkingReady", "False", "InfiniBandPortDown"));
  EXPECT_NE(Condition("NetworkingReady")->message.find("mlx5_0/1"), std::string::npos);
  std::ofstream(ib + "/state") << "4: ACTIVE\n";
  std::ofstream(ib + "/phys_state") << "5: LinkUp\n";
  ASSERT_TRUE(WaitCondition("NetworkingReady", "True", "NetworkingIsReady"));
}

std::string StorageConfig(const std::string& path, const std::string& dir) {
  return fmt::format(
      "storage:\n  paths: [{}]\n  period: 200ms\n  stat_timeout: 500ms\n"
      "network:\n  interfaces: []\n  infiniband_sysfs: \"\"\nruntime:\n  endpoint: "
      "unix://{}/none.sock\n",
      path, dir);
}

TEST_F(DomainsKube, ReadOnlyRemountTurnsStorageReadyFalseAndBack) {
  const std::string img = dir_ + "/disk.img", mnt = dir_ + "/mnt";
  std::filesystem::create_directories(mnt);
  Sh("truncate -s 32M " + img + " && mkfs.ext4 -q -F " + img);
  auto lo = RunShell("losetup -f --show " + img + " 2>&1");
  if (lo.code != 0) GTEST_SKIP() << "no loop device on this machine: " << lo.out;
  loop_ = lo.out.substr(0, lo.out.find('\n'));
  Sh("mount " + loop_ + " " + mnt);
  mounts_.push_back(mnt);
  StartAgent(StorageConfig(mnt, dir_));
  ASSERT_TRUE(WaitCondition("StorageReady", "True", "StorageIsReady"));

  Sh("mount -o remount,ro " + mnt);
  ASSERT_TRUE(WaitCondition("StorageReady", "False", "StorageMountReadOnly"));
  EXPECT_NE(Condition("StorageReady")->message.find("ext4 " + loop_), std::string::npos)
      << Condition("StorageReady")->message;
  Sh("mount -o remount,rw " + mnt);
  ASSERT_TRUE(WaitCondition("StorageReady", "True", "StorageIsReady"));
}

TEST_F(DomainsKube, AMountThatStopsAnsweringTurnsStorageReadyFalseAndBack) {
  if (access("/dev/fuse", R_OK | W_OK) != 0) GTEST_SKIP() << "no /dev/fuse on this machine";
  const std::string fuse = dir_ + "/fuse";
  std::filesystem::create_directories(fuse);
  StartAgent(StorageConfig(fuse, dir_));
  ASSERT_TRUE(WaitCondition("StorageReady", "True", "StorageIsReady"));
  // A FUSE filesystem whose daemon never answers: the kernel holds every stat until it does.
  fuse_fd_ = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  ASSERT_GE(fuse_fd_, 0);
  const std::string opts = fmt::format("fd={},rootmode=40000,user_id=0,group_id=0", fuse_fd_);
  ASSERT_EQ(mount("gpuheal-test", fuse.c_str(), "fuse", MS_NOSUID | MS_NODEV, opts.c_str()), 0)
      << strerror(errno);
  mounts_.push_back(fuse);
  ASSERT_TRUE(WaitCondition("StorageReady", "False", "StorageMountUnresponsive"));
  EXPECT_NE(Condition("StorageReady")->message.find("has not answered"), std::string::npos)
      << Condition("StorageReady")->message;
  // The agent's loop is not held by the hung stat: it still reads the kernel log (a record from
  // user space, reported as ignored).
  const std::string alive = "alive-" + tag_;
  Kmsg("<4>NVRM: Xid (PCI:0000:ee:00): 13, pid=4242, name=" + alive +
       ", Graphics Exception: ESR 0x505648=0x2000");
  ASSERT_TRUE(agent_->WaitEvent([&](const auto& j) { return j.value("process", "") == alive; }, 5s))
      << "the agent did not read the kernel log while a stat hung";
  // Restarted while the mount still hangs: the condition never turns True meanwhile (the new
  // agent's first stat is in flight, which decides nothing).
  agent_.reset();
  StartAgent(StorageConfig(fuse, dir_));
  const auto until = std::chrono::steady_clock::now() + 1500ms;
  while (std::chrono::steady_clock::now() < until) {
    auto c = Condition("StorageReady");
    ASSERT_TRUE(c && c->status == "False") << "StorageReady turned True after the restart";
    std::this_thread::sleep_for(20ms);
  }
  // The daemon goes away and the mount with it: the path answers again.
  close(fuse_fd_);
  fuse_fd_ = -1;
  ASSERT_EQ(umount2(fuse.c_str(), MNT_DETACH), 0) << strerror(errno);
  mounts_.pop_back();
  ASSERT_TRUE(WaitCondition("StorageReady", "True", "StorageIsReady"));
}

TEST_F(DomainsKube, ContainerdStoppedFrozenAndRestartedTurnsContainerRuntimeReadyFalseAndBack) {
  const std::string ctd = dir_ + "/containerd", sock = ctd + "/containerd.sock";
  std::filesystem::create_directories(ctd + "/net.d");
  std::ofstream(ctd + "/config.toml") << fmt::format(
      "version = 2\nroot = \"{0}/root\"\nstate = \"{0}/state\"\n[grpc]\n  address = \"{1}\"\n"
      "[plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = \"/usr/lib/cni\"\n"
      "  conf_dir = \"{0}/net.d\"\n",
      ctd, sock);
  const std::string conflist = ctd + "/net.d/10-test.conflist";
  auto write_conflist = [&] {
    std::ofstream(conflist)
        << R"({"cniVersion": "0.4.0", "name": "gpuheal-test", "plugins": [{"type": "loopback"}]})";
  };
  write_conflist();
  const std::vector<std::string> argv = {"containerd", "--config", ctd + "/config.toml"};
  containerd_ = std::make_unique<Child>(argv, ctd + "/containerd.log");
  ASSERT_TRUE(Eventually([&] { return access(sock.c_str(), F_OK) == 0; }, 20s));
  StartAgent(
      fmt::format("runtime:\n  endpoint: unix://{}\n  period: 200ms\n  timeout: 1s\n"
                  "network:\n  interfaces: []\n  infiniband_sysfs: \"\"\n"
                  "storage:\n  paths: []\n",
                  sock));
  ASSERT_TRUE(WaitCondition("ContainerRuntimeReady", "True", "ContainerRuntimeIsReady"));
  ASSERT_TRUE(agent_->WaitLog(
      [](const auto& j) { return j.value("runtime", "").find("containerd") == 0; }, 10s));

  // Frozen: the socket still accepts, Status never answers.
  containerd_->Signal(SIGSTOP);
  ASSERT_TRUE(WaitCondition("ContainerRuntimeReady", "False", "ContainerRuntimeUnresponsive"));
  containerd_->Signal(SIGCONT);
  ASSERT_TRUE(WaitCondition("ContainerRuntimeReady", "True", "ContainerRuntimeIsReady"));

  // The pod network's configuration disappears: the runtime says NetworkReady false.
  std::filesystem::remove(conflist);
  ASSERT_TRUE(WaitCondition("ContainerRuntimeReady", "False", "ContainerRuntimeNetworkNotReady"));
  EXPECT_NE(Condition("ContainerRuntimeReady")->message.find("containerd"), std::string::npos);
  write_conflist();
  ASSERT_TRUE(WaitCondition("ContainerRuntimeReady", "True", "ContainerRuntimeIsReady"));

  // Killed, then started again.
  containerd_->Kill();
  ASSERT_TRUE(WaitCondition("ContainerRuntimeReady", "False", "ContainerRuntimeUnreachable"));
  containerd_ = std::make_unique<Child>(argv, ctd + "/containerd.log");
  ASSERT_TRUE(WaitCondition("ContainerRuntimeReady", "True", "ContainerRuntimeIsReady", 20s));
}

TEST_F(DomainsKube, PreviousBootCrashIsOneEventPerBootFromPstoreOrTheJournal) {
  const std::string pstore = dir_ + "/pstore", journal = dir_ + "/journal";
  std::filesystem::create_directories(pstore);
  std::ofstream(pstore + "/dmesg-ramoops-0")
      << "Oops#1 Part1\n<4>[  812.100000] CPU: 12 PID: 4242 Comm: trainer Tainted: P  O\n"
         "<0>[  812.120000] Kernel panic - not syncing: Hard LOCKUP\n"
         "<4>[  812.120100] CPU: 12 PID: 0 Comm: swapper/12 Tainted: P  O 6.1.0 #1\n";
  const std::string cfg = fmt::format(
      "previous_boot:\n  pstore: {}\n  journal: {}\nnetwork:\n  interfaces: []\n"
      "  infiniband_sysfs: \"\"\nstorage:\n  paths: []\nruntime:\n  endpoint: unix://{}/none\n",
      pstore, journal, dir_);
  StartAgent(cfg);
  ASSERT_TRUE(Eventually([&] { return EventCount("KernelCrashPreviousBoot") == 1; }, 10s));
  const std::string msg = EventMessage("KernelCrashPreviousBoot");
  EXPECT_NE(msg.find("Kernel panic - not syncing: Hard LOCKUP"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pstore dmesg-ramoops-0"), std::string::npos) << msg;
  // The condition stays True: the node rebooted since; this is the evidence, not a fault now.
  ASSERT_TRUE(WaitCondition("KernelReady", "True", "KernelIsReady"));
  // A restart in the same boot does not report it again.
  agent_.reset();
  StartAgent(cfg);
  std::this_thread::sleep_for(1s);  // nothing is expected: give a second report its chance
  EXPECT_EQ(EventCount("KernelCrashPreviousBoot"), 1);

  // The persistent journal of the previous boot (a boot id that is not this one), as
  // systemd-journal-remote writes it from the journal's export format.
  agent_.reset();
  std::filesystem::remove_all(pstore);
  std::filesystem::remove(dir_ + "/state/previous-boot.json");
  std::filesystem::create_directories(journal);
  std::random_device rd;
  const std::string boot = fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
  std::ofstream(dir_ + "/export") << fmt::format(
      "__REALTIME_TIMESTAMP=1700000000000000\n__MONOTONIC_TIMESTAMP=9000000\n_BOOT_ID={0}\n"
      "_TRANSPORT=kernel\nPRIORITY=1\nMESSAGE=mce: [Hardware Error]: CPU 5: Machine Check "
      "Exception: 5 Bank 4: be00000000800400\n\n"
      "__REALTIME_TIMESTAMP=1700000000000100\n__MONOTONIC_TIMESTAMP=9000100\n_BOOT_ID={0}\n"
      "_TRANSPORT=kernel\nPRIORITY=0\nMESSAGE=Kernel panic - not syncing: Fatal machine check\n\n",
      boot);
  Sh(fmt::format("/lib/systemd/systemd-journal-remote -o {}/remote.journal - < {}/export", journal,
                 dir_));
  StartAgent(cfg);
  ASSERT_TRUE(Eventually([&] { return EventCount("KernelCrashPreviousBoot") == 2; }, 10s));
  auto r = client_->Get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D" +
                        node_);
  EXPECT_NE(r->body.find("KernelMachineCheck (journal"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find(boot), std::string::npos);
}

TEST_F(DomainsKube, KernelLockupsMachineChecksAndOomStormsFromTheKernelLog) {
  StartAgent(
      "escalation:\n  count: 2\nrecovery:\n  quiet_period: 3s\nkernel:\n  oom_storm_count: 3\n"
      "network:\n  interfaces: []\n  infiniband_sysfs: \"\"\nstorage:\n  paths: []\n"
      "runtime:\n  endpoint: unix:///nonexistent/cri.sock\n",
      {"--accept-injected"});
  ASSERT_TRUE(WaitCondition("KernelReady", "True", "KernelIsReady"));
  // Soft lockups are warnings; repeated incidents raise them to KernelReady=False, and they
  // clear after the quiet period.
  Kmsg("<0>watchdog: BUG: soft lockup - CPU#61 stuck for 23s! [trainer:4242]");
  ASSERT_TRUE(Eventually([&] { return EventCount("KernelSoftLockup") >= 1; }, 10s));
  std::this_thread::sleep_for(2100ms);  // a new incident, not a line of the first
  Kmsg("<0>watchdog: BUG: soft lockup - CPU#61 stuck for 49s! [trainer:4242]");
  ASSERT_TRUE(WaitCondition("KernelReady", "False", "KernelSoftLockup"));
  ASSERT_TRUE(WaitCondition("KernelReady", "True", "KernelIsReady", 20s));

  // Three OOM kills within the window: one storm Event (single kills are the kubelet's).
  for (int i = 0; i < 3; ++i) {
    Kmsg(
        fmt::format("<3>Memory cgroup out of memory: Killed process {} (python3) "
                    "total-vm:3149468kB, anon-rss:164992kB, file-rss:52176kB, shmem-rss:92kB, "
                    "UID:0 pgtables:1372kB oom_score_adj:986",
                    41000 + i));
  }
  ASSERT_TRUE(Eventually([&] { return EventCount("KernelOOMKillStorm") == 1; }, 10s));
  EXPECT_EQ(EventCount("KernelOOMKill"), 0);
  EXPECT_EQ(Condition("KernelReady")->status, "True");

  // An uncorrected machine check and a hard lockup hold KernelReady False (until a reboot).
  Kmsg("<0>mce: [Hardware Error]: CPU 5: Machine Check Exception: 5 Bank 4: be00000000800400");
  ASSERT_TRUE(WaitCondition("KernelReady", "False", "KernelMachineCheck"));
  Kmsg("<0>watchdog: CPU3: Watchdog detected hard LOCKUP on cpu 7");
  ASSERT_TRUE(Eventually(
      [&] {
        auto c = Condition("KernelReady");
        return c && c->message.find("KernelHardLockup") != std::string::npos;
      },
      10s))
      << Condition("KernelReady")->message;
}

}  // namespace
}  // namespace gpuheal
