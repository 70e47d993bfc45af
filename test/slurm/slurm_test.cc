// Slurm tier: the unchanged agent with --slurm against a real Slurm cluster on loopback (munged,
// slurmctld and slurmd from Debian's packages, started by scripts/slurm.sh) and the real
// /dev/kmsg. What Slurm did is read back with Slurm's own tools (sinfo, squeue, scontrol), never
// through the agent's client. Root: the agent drains the node and the faults are kernel records.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>

#include "agent_process.h"
#include "drill/inject.h"
#include "nvml_scenario.h"
#include "slurm/reason.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using testing::AgentProcess;

constexpr const char* kNode = "gpunode0";

// Runs a command line (test setup only) and returns its stdout without the trailing newline.
std::string Sh(const std::string& cmd, int* rc = nullptr) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  if (rc) *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

bool Eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return pred();
}

class SlurmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0 || !testing::CanWriteKmsg()) return;
    char tmpl[] = "/tmp/gpuheal-it-slurmXXXXXX";
    dir_ = mkdtemp(tmpl);
    int rc = 0;
    const std::string out =
        Sh(fmt::format("bash {}/scripts/slurm.sh up --dir {}/cluster --node {} 2>{}/up.err",
                       GPUHEAL_SOURCE_DIR, dir_, kNode, dir_),
           &rc);
    const size_t at = out.rfind("SLURM_CONF=");
    if (rc != 0 || at == std::string::npos) {
      up_error_ = fmt::format("scripts/slurm.sh up failed (exit {}): {}", rc,
                              Sh("cat " + dir_ + "/up.err"));
      return;
    }
    conf_ = out.substr(at + 11);
    setenv("SLURM_CONF", conf_.c_str(), 1);
  }
  static void TearDownTestSuite() {
    if (dir_.empty()) return;
    Sh(fmt::format("bash {}/scripts/slurm.sh down --dir {}/cluster", GPUHEAL_SOURCE_DIR, dir_));
    std::filesystem::remove_all(dir_);
  }

  void SetUp() override {
    if (geteuid() != 0 || !testing::CanWriteKmsg())
      GTEST_SKIP() << "needs root and a writable /dev/kmsg";
    ASSERT_TRUE(up_error_.empty()) << up_error_;
    ASSERT_FALSE(conf_.empty());
    // Each test starts with an idle node and no jobs.
    Sh("scancel --quiet --full -u root");
    ASSERT_TRUE(Eventually([] { return Sh("squeue -h -o %i").empty(); }, 30s)) << Sh("squeue");
    Sh(fmt::format("scontrol update nodename={} state=resume 2>/dev/null", kNode));
    ASSERT_TRUE(Eventually([] { return NodeState() == "idle"; }, 30s)) << NodeState();
    std::random_device rd;
    pci_ = fmt::format("{:04x}:{:02x}:00", 0x1000 + rd() % 0xe000, rd() % 256);
    cpu_ = static_cast<int>(1000 + rd() % 9000);
    ++n_;
    work_ = fmt::format("{}/t{}", dir_, n_);
    std::filesystem::create_directories(work_);
  }

  static std::string NodeState() { return Sh(fmt::format("sinfo -h -n {} -o %T", kNode)); }
  static std::string NodeReason() { return Sh(fmt::format("sinfo -h -n {} -o %E", kNode)); }
  static std::string JobState(const std::string& id) { return Sh("squeue -h -o %T -j " + id); }
  static int Restarts(const std::string& id) {
    const std::string s = Sh("scontrol -o show job " + id);
    const size_t at = s.find("Restarts=");
    return at == std::string::npos ? -1 : std::atoi(s.c_str() + at + 9);
  }

  // A batch job that records each start and each checkpoint signal (USR1) in files of its own.
  std::string SubmitJob(bool requeue = true) {
    const std::string script = work_ + "/job.sh";
    std::ofstream(script) << "#!/bin/bash\n"
                          << "trap 'echo usr1 >> " << work_ << "/signals' USR1\n"
                          << "echo start >> " << work_ << "/starts\n"
                          << "while true; do sleep 1 & wait $!; done\n";
    const std::string id = Sh(fmt::format("sbatch --parsable {} --gres=gpu:1 -o /dev/null {}",
                                          requeue ? "--requeue" : "--no-requeue", script));
    EXPECT_FALSE(id.empty());
    EXPECT_TRUE(Eventually([&] { return JobState(id) == "RUNNING"; }, 30s)) << JobState(id);
    EXPECT_TRUE(Eventually([&] { return Lines("starts") >= 1; }, 10s));
    return id;
  }

  int Lines(const std::string& file) {
    std::ifstream in(work_ + "/" + file);
    int n = 0;
    for (std::string l; std::getline(in, l);) ++n;
    return n;
  }

  // `nvidia` replaces the config's nvidia: section (NVML off by default); `args` are added.
  std::unique_ptr<AgentProcess> StartAgent(const std::string& extra_config = "",
                                           const std::vector<std::string>& args = {},
                                           const std::string& nvidia = "nvidia: {nvml: false}\n") {
    const std::string cfg = work_ + "/agent.yaml";
    std::ofstream(cfg) << "kmsg_start: end\n"
                       << "monitors: {storage: false, network: false, runtime: false}\n"
                       << "previous_boot: {enabled: false}\n"
                       << nvidia << "slurm:\n"
                       << "  conf: " << conf_ << "\n"
                       << "  checkpoint_window: 3s\n"
                       << "  recheck_period: 1s\n"
                       << extra_config;
    std::vector<std::string> argv = {
        GPUHEAL_BIN, "agent",       "--slurm",        "--node-name", kNode, "--config",
        cfg,         "--state-dir", work_ + "/state", "--listen",    "",    "--accept-injected"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto a = std::make_unique<AgentProcess>(argv);
    auto started =
        a->WaitLog([](const auto& j) { return j.value("msg", "") == "agent started"; }, 10s);
    EXPECT_TRUE(started.has_value()) << "the agent did not start";
    return a;
  }

  void InjectXid(int xid) {
    InjectSpec spec{xid, pci_, "4242", "train"};
    ASSERT_TRUE(WriteKmsg("/dev/kmsg", InjectMessages(spec)).ok());
  }
  // A soft lockup of a CPU number no other test uses (a warning; repeats escalate it).
  void InjectSoftLockup() {
    ASSERT_TRUE(WriteKmsg("/dev/kmsg", {fmt::format("watchdog: BUG: soft lockup - CPU#{} stuck for "
                                                    "23s! [train:4242]",
                                                    cpu_)})
                    .ok());
  }

  static std::string dir_, conf_, up_error_;
  static int n_;
  std::string work_, pci_;
  int cpu_ = 0;
};
std::string SlurmTest::dir_, SlurmTest::conf_, SlurmTest::up_error_;
int SlurmTest::n_ = 0;

// An Xid 79 in the kernel log: the node is drained with gpuheal's reason, the running job's batch
// step gets the checkpoint signal at once, and at the window's end the job is requeued.
TEST_F(SlurmTest, Xid79DrainsTheNodeSignalsTheJobAndRequeuesIt) {
  const std::string job = SubmitJob();
  auto agent = StartAgent();
  const auto t0 = std::chrono::steady_clock::now();
  InjectXid(79);
  ASSERT_TRUE(Eventually([] { return NodeReason().starts_with("gpuheal: "); }, 10s))
      << NodeState() << " " << NodeReason();
  const auto drained_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_LT(drained_ms, 5s);
  const auto r = slurm::ParseReason(NodeReason());
  ASSERT_TRUE(r) << NodeReason();
  EXPECT_EQ(r->code, "NvidiaXID79Error");
  EXPECT_EQ(r->gpu, pci_);
  EXPECT_TRUE(NodeState() == "draining" || NodeState() == "drained") << NodeState();
  // The signal within the window, the job still running meanwhile.
  ASSERT_TRUE(Eventually([&] { return Lines("signals") >= 1; }, 3s)) << "no USR1 reached the job";
  EXPECT_EQ(Lines("signals"), 1);
  // Requeued at the window's end: pending again (the node is drained), one restart.
  ASSERT_TRUE(Eventually([&] { return Restarts(job) == 1; }, 15s))
      << Sh("scontrol show job " + job);
  EXPECT_TRUE(Eventually([&] { return JobState(job) == "PENDING"; }, 15s)) << JobState(job);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 3s) << "requeued before the window ended";
  // The node stays drained: an Xid 79 clears with a reboot with the GPU present.
  std::this_thread::sleep_for(1500ms);
  EXPECT_TRUE(NodeReason().starts_with("gpuheal: NvidiaXID79Error")) << NodeReason();
  EXPECT_EQ(agent->Kill(SIGTERM), 0) << "the agent must exit cleanly on SIGTERM";
}

// A critical fault of one GPU (Xid 119, GSP RPC timeout: drain and reset that GPU): Slurm cannot
// take one GPU out, so the node is drained with a reason naming the GPU, and its jobs run on to
// their end: no checkpoint signal, no requeue.
TEST_F(SlurmTest, AGpuLevelFaultDrainsTheNodeAndLetsItsJobsFinish) {
  const std::string job = SubmitJob();
  auto agent = StartAgent();
  InjectXid(119);
  ASSERT_TRUE(Eventually([] { return NodeReason().starts_with("gpuheal: "); }, 10s))
      << NodeState() << " " << NodeReason();
  const auto r = slurm::ParseReason(NodeReason());
  ASSERT_TRUE(r) << NodeReason();
  EXPECT_EQ(r->code, "NvidiaXID119Warning");
  EXPECT_EQ(r->gpu, pci_);
  EXPECT_EQ(NodeState(), "draining") << "the job still runs, so the node is draining";
  std::this_thread::sleep_for(4s);  // past the 3 s checkpoint window
  EXPECT_EQ(Lines("signals"), 0) << "a GPU-level fault sends no checkpoint signal";
  EXPECT_EQ(JobState(job), "RUNNING");
  EXPECT_EQ(Restarts(job), 0);
  EXPECT_EQ(agent->Kill(SIGTERM), 0) << "the agent must exit cleanly on SIGTERM";
}

// The same GPU-level fault healed without the node: with nvidia.reset.on_critical the agent drains
// that GPU in NVML, waits for its compute processes to end, resets it (the NVML double plays
// `nvidia-smi --gpu-reset`) and verifies it; the fault clears and gpuheal resumes its drain.
TEST_F(SlurmTest, AGpuResetByTheAgentResumesTheNode) {
  testing::Scenario sc;
  const testing::TestGpu gpu = testing::UniqueGpu();
  auto d = testing::HealthyDevice(gpu);
  d["processes"] = {4242};
  sc.Write({{"devices", {d}}});
  const std::string nvidia = fmt::format(
      "nvidia:\n  poll_period: 200ms\n  sysfs_pci_devices: {}\n"
      "  reset:\n    on_critical: true\n    drain_timeout: 30s\n    timeout: 10s\n"
      "    command: [\"{}\", \"reset\", \"{}\", \"{{bus_id}}\"]\n",
      work_, NVML_DOUBLE_CTL, sc.path());
  auto agent = StartAgent("", {"--nvml-library", NVML_DOUBLE}, nvidia);
  sc.Write({{"devices", {d}},
            {"events", {{{"id", "gsp"}, {"type", "XidCriticalError"}, {"data", 119}}}}});
  ASSERT_TRUE(Eventually([] { return NodeReason().starts_with("gpuheal: NvidiaXID119"); }, 10s))
      << NodeState() << " " << NodeReason();
  EXPECT_EQ(slurm::ParseReason(NodeReason())->gpu, gpu.pci);
  // The GPU's work still runs: drained in Slurm and in NVML, not reset.
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(sc.Read()["devices"][0].value("resets", 0), 0) << "must wait for the compute processes";
  EXPECT_TRUE(NodeReason().starts_with("gpuheal: ")) << NodeReason();
  // The work ends: reset, verified, the fault cleared, the node resumed.
  auto scenario = sc.Read();
  scenario["devices"][0]["processes"] = nlohmann::json::array();
  sc.Write(scenario);
  ASSERT_TRUE(Eventually([] { return NodeState() == "idle"; }, 20s))
      << NodeState() << " " << NodeReason();
  EXPECT_EQ(sc.Read()["devices"][0].value("resets", 0), 1);
  EXPECT_TRUE(agent->WaitLog(
      [](const auto& j) { return j.value("msg", "").starts_with("slurm: resumed the node"); }, 5s));
  EXPECT_EQ(agent->Kill(SIGTERM), 0) << "the agent must exit cleanly on SIGTERM";
}

// A job submitted with --no-requeue is signalled and then left to end; it is never requeued.
TEST_F(SlurmTest, AJobThatDoesNotAllowRequeueIsSignalledAndLeftRunning) {
  const std::string job = SubmitJob(/*requeue=*/false);
  auto agent = StartAgent();
  InjectXid(79);
  ASSERT_TRUE(Eventually([&] { return Lines("signals") >= 1; }, 10s)) << "no USR1 reached the job";
  auto left = agent->WaitLog(
      [](const auto& j) { return j.value("msg", "").find("left to end") != std::string::npos; },
      15s);
  ASSERT_TRUE(left) << "the agent did not say the job is left to end";
  EXPECT_EQ(JobState(job), "RUNNING");
  EXPECT_EQ(Restarts(job), 0);
  EXPECT_EQ(agent->Kill(SIGTERM), 0) << "the agent must exit cleanly on SIGTERM";
}

// A node an administrator drained keeps its state and reason: gpuheal checkpoints the jobs but
// never rewrites the reason (and so never resumes the node later).
TEST_F(SlurmTest, AnAdministratorsDrainIsLeftAlone) {
  const std::string job = SubmitJob();
  Sh(fmt::format("scontrol update nodename={} state=drain reason='hw swap ticket 4711'", kNode));
  ASSERT_EQ(NodeReason(), "hw swap ticket 4711");
  auto agent = StartAgent();
  InjectXid(79);
  auto said = agent->WaitLog(
      [](const auto& j) {
        return j.value("msg", "").find("already drained or down by someone else") !=
               std::string::npos;
      },
      10s);
  ASSERT_TRUE(said) << "the agent did not see the administrator's drain";
  EXPECT_EQ((*said)["reason"], "hw swap ticket 4711");
  EXPECT_TRUE(Eventually([&] { return Lines("signals") >= 1; }, 5s)) << "no USR1 reached the job";
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(NodeReason(), "hw swap ticket 4711");
  EXPECT_EQ(agent->Kill(SIGTERM), 0) << "the agent must exit cleanly on SIGTERM";
}

// A transient fault (soft lockups escalated by repetition, cleared by the quiet period): gpuheal
// drains and, when the fault clears, resumes the node and the requeued job runs again. With an
// administrator's drain over gpuheal's, the quiet period resumes nothing.
TEST_F(SlurmTest, RecoveryResumesOnlyGpuhealsOwnDrain) {
  const std::string job = SubmitJob();
  auto agent = StartAgent(
      "escalation: {count: 2, window: 1h}\n"
      "recovery: {quiet_period: 6s}\n");
  InjectSoftLockup();
  std::this_thread::sleep_for(2100ms);  // a second incident, not a line of the first
  InjectSoftLockup();
  ASSERT_TRUE(Eventually([] { return NodeReason().starts_with("gpuheal: KernelSoftLockup"); }, 10s))
      << NodeState() << " " << NodeReason();
  ASSERT_TRUE(Eventually([&] { return Restarts(job) == 1; }, 15s))
      << Sh("scontrol show job " + job);
  // The fault is quiet: resumed, and the requeued job starts again (after Slurm's requeue delay,
  // cred_expire in scripts/slurm.sh).
  ASSERT_TRUE(Eventually([] { return NodeReason().empty() || NodeReason() == "none"; }, 15s))
      << NodeState() << " " << NodeReason();
  auto resumed = agent->WaitLog(
      [](const auto& j) { return j.value("msg", "").starts_with("slurm: resumed the node"); }, 5s);
  EXPECT_TRUE(resumed);
  EXPECT_TRUE(Eventually([&] { return Lines("starts") >= 2; }, 30s))
      << "the requeued job did not run again: " << Sh("squeue -o '%i %T %r'");

  // Again, but an administrator takes the node over while gpuheal's drain is on.
  InjectSoftLockup();
  std::this_thread::sleep_for(2100ms);
  InjectSoftLockup();
  ASSERT_TRUE(Eventually([] { return NodeReason().starts_with("gpuheal: KernelSoftLockup"); }, 10s))
      << NodeState() << " " << NodeReason();
  Sh(fmt::format("scontrol update nodename={} state=drain reason='keep out: bios update'", kNode));
  std::this_thread::sleep_for(8s);  // past the quiet period
  EXPECT_EQ(NodeReason(), "keep out: bios update");
  EXPECT_NE(NodeState(), "idle");
  EXPECT_EQ(agent->Kill(SIGTERM), 0) << "the agent must exit cleanly on SIGTERM";
}

// slurmctld gone: the agent still detects, says slurmctld is unreachable, and drains the node as
// soon as slurmctld is back.
TEST_F(SlurmTest, ADrainWaitsForSlurmctldAndHappensWhenItIsBack) {
  auto agent = StartAgent();
  const std::string pid = Sh("cat " + dir_ + "/cluster/slurmctld.pid");
  ASSERT_FALSE(pid.empty());
  Sh("kill " + pid);
  ASSERT_TRUE(Eventually([&] { return Sh("kill -0 " + pid + " 2>&1; echo $?") != "0"; }, 10s));
  InjectXid(79);
  auto warned = agent->WaitLog(
      [](const auto& j) { return j.value("msg", "").starts_with("slurm: slurmctld"); }, 15s);
  EXPECT_TRUE(warned) << "no word of slurmctld being unreachable";
  Sh(fmt::format("slurmctld -f {} ", conf_));
  EXPECT_TRUE(Eventually([] { return NodeReason().starts_with("gpuheal: NvidiaXID79Error"); }, 60s))
      << NodeState() << " " << NodeReason();
  EXPECT_EQ(agent->Kill(SIGTERM), 0) << "the agent must exit cleanly on SIGTERM";
}

// The drill on a Slurm cluster of its own: both scenarios end ok, their timelines in order.
TEST_F(SlurmTest, DrillBackendSlurmRunsBothScenarios) {
  for (const std::string scenario : {"single", "transient"}) {
    int rc = -1;
    const std::string out =
        Sh(fmt::format("{} drill --backend slurm --scenario {} --json --work-dir {}/drill-{} "
                       "2>{}/drill-{}.err",
                       GPUHEAL_BIN, scenario, work_, scenario, work_, scenario),
           &rc);
    const auto j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out << Sh("cat " + work_ + "/drill-" + scenario + ".err");
    EXPECT_EQ(rc, 0) << j.dump(2);
    EXPECT_EQ(j.value("ok", false), true) << j.dump(2);
    const auto& t = j["timeline_ms"];
    ASSERT_TRUE(t.contains("slurm_drained")) << j.dump(2);
    ASSERT_TRUE(t.contains("slurm_signalled")) << j.dump(2);
    ASSERT_TRUE(t.contains("slurm_requeued")) << j.dump(2);
    EXPECT_LT(t["slurm_drained"]["p50"].get<double>(), t["slurm_requeued"]["p50"].get<double>());
    if (scenario == "transient") {
      ASSERT_TRUE(t.contains("slurm_resumed")) << j.dump(2);
      EXPECT_TRUE(t.contains("slurm_job_running_again")) << j.dump(2);
    }
  }
}

}  // namespace
}  // namespace gpuheal
