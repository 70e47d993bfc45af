// `gpuheal drill` end to end on a real control plane with kube-controller-manager and
// kube-scheduler: each scenario is run as a user runs it (the binary, a small cluster) and must
// pass its own checks with the steps of its timeline in order; Ctrl-C cleans up what the drill
// started; the first run starts its own control plane, as `make drill` does.

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "kube_test_util.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using gpuheal::testing::ControlPlaneEnv;
using gpuheal::testing::Eventually;
using nlohmann::json;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The drill as a child process, its stdout and stderr in files.
class DrillProcess {
 public:
  explicit DrillProcess(std::vector<std::string> args) {
    char tmpl[] = "/tmp/gpuheal-drilltest-XXXXXX";
    dir_ = mkdtemp(tmpl);
    work_ = dir_ + "/work";
    args.insert(args.begin(), {GPUHEAL_BIN, "drill", "--work-dir", work_});
    pid_ = fork();
    if (pid_ == 0) {
      const int out = open((dir_ + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = open((dir_ + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(out, STDOUT_FILENO);
      dup2(err, STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~DrillProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }
  // Waits for the exit; its code, or -1 past the timeout (then killed).
  int Wait(std::chrono::seconds timeout = 300s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int st = 0;
    while (waitpid(pid_, &st, WNOHANG) != pid_) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &st, 0);
        pid_ = -1;
        return -1;
      }
      std::this_thread::sleep_for(50ms);
    }
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  void Signal(int sig) { kill(pid_, sig); }
  bool WaitErr(const std::string& text, std::chrono::seconds timeout) {
    return Eventually([&] { return err().find(text) != std::string::npos; }, timeout);
  }
  std::string out() const { return Slurp(dir_ + "/out"); }
  std::string err() const { return Slurp(dir_ + "/err"); }
  // What to show when a test fails: the drill's output and its processes' logs.
  std::string Explain() const {
    std::string s = "stdout:\n" + out() + "\nstderr:\n" + err();
    for (const char* f : {"/controller.log", "/drill.log"}) {
      std::string log = Slurp(work_ + f);
      if (log.size() > 6000) log = log.substr(log.size() - 6000);
      s += std::string("\n") + f + " (tail):\n" + log;
    }
    return s;
  }
  const std::string& work() const { return work_; }
  const std::string& dir() const { return dir_; }

 private:
  pid_t pid_ = -1;
  std::string dir_, work_;
};

class DrillTest : public ::testing::Test {
 protected:
  void SetUp() override { client_ = gpuheal::testing::AdminClient(); }

  // Runs a scenario on the shared control plane with a small cluster; returns the --json report.
  json Run(const std::string& scenario, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--kubeconfig", ControlPlaneEnv::kubeconfig(), "--scenario",
                                     scenario, "--json"};
    if (std::find(extra.begin(), extra.end(), "--nodes") == extra.end())
      args.insert(args.end(), {"--nodes", "4"});
    args.insert(args.end(), extra.begin(), extra.end());
    DrillProcess d(args);
    const int rc = d.Wait();
    const json report = json::parse(d.out(), nullptr, false);
    EXPECT_EQ(rc, 0) << d.Explain();
    EXPECT_TRUE(report.is_object() && report.value("ok", false)) << d.Explain();
    EXPECT_TRUE(d.err().find(scenario == "runtime" ? "runtime frozen" : "kernel line") !=
                std::string::npos)
        << "the timeline goes to stderr with --json\n"
        << d.Explain();
    return report.is_object() ? report : json::object();
  }

  // The steps are present and happened in this order (p50 of each).
  static void ExpectInOrder(const json& report, const std::vector<std::string>& steps) {
    const json& t = report.value("timeline_ms", json::object());
    double last = 0;
    for (const auto& s : steps) {
      ASSERT_TRUE(t.contains(s)) << s << " missing: " << report.dump(2);
      const double v = t[s]["p50"].get<double>();
      EXPECT_GE(v, last) << s << " before the step that precedes it: " << report.dump(2);
      EXPECT_GE(t[s]["p99"].get<double>(), v);
      last = v;
    }
  }

  static bool CheckOk(const json& report, const std::string& name) {
    for (const auto& c : report.value("checks", json::array())) {
      if (c["name"] == name) return c["ok"].get<bool>();
    }
    return false;
  }

  // Simulated nodes the drill registered whose name starts with `prefix`.
  int SimNodes() {
    auto r = client_->Get("/api/v1/nodes?labelSelector=gpuheal.io%2Fsim%3Dtrue");
    if (!r || !r->ok()) return -1;
    return static_cast<int>(json::parse(r->body)["items"].size());
  }

  std::unique_ptr<kube::Client> client_;
};

// What `make drill` runs: no kubeconfig, so the drill starts (and stops) its own control plane.
// With --keep it holds everything until Ctrl-C, which then stops that control plane too and
// keeps its components' logs in the work directory.
TEST_F(DrillTest, SingleStartsItsOwnControlPlaneAndRecovers) {
  DrillProcess d({"--nodes", "4", "--json", "--chart", "chart.svg", "--keep"});
  ASSERT_TRUE(d.WaitErr("Press Ctrl-C to clean up", 240s)) << d.Explain();
  const std::string cp = d.work() + "/control-plane";
  EXPECT_TRUE(std::filesystem::exists(cp + "/pids")) << "--keep leaves the control plane running";
  d.Signal(SIGINT);
  const int rc = d.Wait();
  const json report = json::parse(d.out(), nullptr, false);
  ASSERT_EQ(rc, 0) << d.Explain();
  ASSERT_TRUE(report.is_object()) << d.Explain();
  EXPECT_EQ(report["scenario"], "single");
  EXPECT_EQ(report["runs"], 1);
  EXPECT_TRUE(report["ok"].get<bool>());
  ExpectInOrder(report, {"detected", "condition", "taint", "first_eviction", "replacement_created",
                         "replacement_scheduled", "replacement_running", "capacity_restored"});
  ExpectInOrder(report, {"taint", "standby_released", "replacement_scheduled"});
  ExpectInOrder(report,
                {"repair_quarantined", "repair_draining", "repair_drained", "repair_remediating"});
  for (const char* c :
       {"quarantined", "pods evicted", "standby released", "replacements Running elsewhere",
        "capacity restored", "one repair, each pod evicted once"}) {
    EXPECT_TRUE(CheckOk(report, c)) << c << ": " << report.dump(2);
  }
  // The chart (relative to the drill's working directory, here the test's).
  const std::string svg = Slurp("chart.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("replacement pods Running"), std::string::npos);
  std::filesystem::remove("chart.svg");
  // Nothing it started outlives it: its control plane lived under its work directory.
  // ('[/]tmp...': a pattern that does not match the shell running pgrep)
  const std::string pattern = "'[/]" + d.work().substr(1) + "'";
  EXPECT_TRUE(Eventually(
      [&] { return std::system(("pgrep -f " + pattern + " >/dev/null").c_str()) != 0; }, 10s))
      << "processes left running under " << d.work();
  for (const char* log : {"/kube-scheduler.log", "/kube-controller-manager.log",
                          "/kube-apiserver.log", "/etcd.log"}) {
    EXPECT_TRUE(std::filesystem::exists(cp + log)) << log;
  }
  EXPECT_FALSE(std::filesystem::exists(cp + "/etcd")) << "only the logs are kept";
  EXPECT_FALSE(std::filesystem::exists(cp + "/pki"));
}

TEST_F(DrillTest, RepeatGivesPercentilesOverFreshClusters) {
  const json r = Run("single", {"--repeat", "2"});
  EXPECT_EQ(r["runs"], 2);
  ExpectInOrder(r, {"detected", "condition", "taint", "replacement_running"});
  EXPECT_EQ(r["timeline_ms"]["taint"]["runs"], 2);
  EXPECT_EQ(SimNodes(), 0) << "each run's nodes are removed";
}

TEST_F(DrillTest, PdbHoldsTheSecondEvictionUntilAReplicaIsHealthyElsewhere) {
  const json r = Run("pdb");
  EXPECT_TRUE(CheckOk(r, "budget held the second eviction")) << r.dump(2);
  ExpectInOrder(
      r, {"taint", "checkpoint_requested", "checkpoint_done", "first_eviction", "last_eviction"});
}

// The workload's users: a service's clients through Xid 79 (real HTTP servers, balanced over the
// Service's ready endpoints), and a training job through Xid 48 (real training loops, one that
// checkpoints when gpuheal asks and one that does not).
TEST_F(DrillTest, ServiceClientsSeeTheFaultyEndpointGoAndNoErrorAfterTheFailover) {
  const json r = Run("service");
  for (const char* c : {"service answered after the failover", "service measured",
                        "capacity restored", "replacements Running elsewhere"})
    EXPECT_TRUE(CheckOk(r, c)) << c << ": " << r.dump(2);
  ASSERT_TRUE(r.contains("service")) << r.dump(2);
  const json& s = r["service"];
  EXPECT_GT(s["requests"].get<int>(), 100) << s;
  EXPECT_EQ(s["errors_after_restored"], 0) << s;
  EXPECT_GT(s["baseline_p99_ms"].get<double>(), 0) << s;
  if (s["errors"].get<int>() > 0) {
    // The faulty node's server failed once its GPU was lost, and stopped being asked once its
    // endpoint left the Service: the last failure came before the replacement ran.
    ExpectInOrder(r, {"service_first_error", "service_last_error", "replacement_running"});
  }
}

TEST_F(DrillTest, TrainingLosesAStepWithTheCheckpointRequestAndMoreWithoutIt) {
  const json r = Run("training");
  for (const char* c :
       {"checkpoint on gpuheal's request", "periodic-only trainer measured", "capacity restored"})
    EXPECT_TRUE(CheckOk(r, c)) << c << ": " << r.dump(2);
  ASSERT_TRUE(r.contains("training")) << r.dump(2);
  const json& t = r["training"];
  EXPECT_TRUE(t["resumed"].get<bool>()) << t;
  EXPECT_LE(t["work_lost_s"].get<double>(), 0.15) << t;
  EXPECT_GE(t["periodic_only_work_lost_s"].get<double>(), 0) << t;
  ExpectInOrder(r, {"taint", "checkpoint_requested", "training_checkpoint", "training_resumed"});
}

TEST_F(DrillTest, FlapIsReleasedWithoutRemediation) {
  const json r = Run("flap");
  EXPECT_TRUE(CheckOk(r, "no remediation")) << r.dump(2);
  ExpectInOrder(r, {"condition", "taint", "condition_cleared", "released", "repair_recovered"});
  EXPECT_FALSE(r["timeline_ms"].contains("repair_remediating"));
}

TEST_F(DrillTest, CorrelatedFaultsAreHeldByTheGates) {
  // 4 + 2 standby GPU nodes: the default (2 faulty, > 30%) trips the breaker.
  const json r = Run("correlated");
  EXPECT_TRUE(CheckOk(r, "gates held")) << r.dump(2);
  EXPECT_FALSE(r["timeline_ms"].contains("repair_draining")) << r.dump(2);
  // Two faulty nodes of one pool of 3 (at most 1 at once), the breaker not tripped (2 of 10).
  const json p =
      Run("correlated", {"--nodes", "8", "--pools", "1", "--standby", "2", "--fault-nodes", "2"});
  EXPECT_TRUE(CheckOk(p, "gates held")) << p.dump(2);
}

// Xid 79 (catastrophic) with the breaker tripped: gpuheal's NoExecute would have Kubernetes' taint
// manager delete every pod of the faulty nodes past the breaker. The check counts pods removed by
// anyone, so it passes only when the taint waits for the gates (NoSchedule meanwhile).
TEST_F(DrillTest, CorrelatedCatastrophicFaultsAreHeldByTheGatesToo) {
  const json r = Run("correlated", {"--xid", "79"});
  EXPECT_TRUE(CheckOk(r, "gates held")) << r.dump(2);
  EXPECT_FALSE(r["timeline_ms"].contains("first_eviction"))
      << "no pod of a faulty node taken away: " << r.dump(2);
}

// Four nodes of one rack and a fifth elsewhere lose their GPUs at once: one infrastructure
// incident holds the rack's remediation while its nodes are quarantined and drained, the fifth is
// remediated, and the operator's release lets the rack's go on.
TEST_F(DrillTest, RackIncidentHoldsTheRackAndRepairsTheNodeElsewhere) {
  const json r = Run("rack", {"--nodes", "8"});
  for (const char* c : {"quarantined", "one incident held the rack", "rack drained meanwhile",
                        "node outside the rack repaired", "operator release"}) {
    EXPECT_TRUE(CheckOk(r, c)) << c << ": " << r.dump(2);
  }
  ExpectInOrder(r, {"taint", "outside_remediating", "incident_held", "incident_released",
                    "repair_remediating"});
}

// A recorded incident replayed: a precursor (Xid 63) marks the GPU at risk; the node is drained at
// its pod's checkpoint and the GPU reset through the NVML double before the fatal Xid 48 on the
// same GPU is replayed, which is still quarantined.
TEST_F(DrillTest, PredictiveDrainsAtTheCheckpointBeforeTheReplayedFatalFault) {
  const json r =
      Run("predictive", {"--nvml-double", NVML_DOUBLE, "--nvml-double-ctl", NVML_DOUBLE_CTL});
  for (const char* c :
       {"GPU at risk", "drained at the boundary", "GPU reset", "drained before the fatal fault",
        "capacity cost", "fatal fault still quarantined"}) {
    EXPECT_TRUE(CheckOk(r, c)) << c << ": " << r.dump(2);
  }
  ExpectInOrder(
      r, {"detected", "at_risk", "cordoned", "checkpoint_requested", "checkpoint_done",
          "gpu_recovery_requested", "gpu_recovered", "uncordoned", "fatal_replayed", "taint"});
  // The eviction and the recovery request are seen through two watches (pods, nodes) that may
  // deliver them a moment out of order; the reset's answer comes a round trip to the agent later.
  ExpectInOrder(r, {"checkpoint_done", "last_eviction", "gpu_recovered"});
}

// One GPU of a node whose pods hold one GPU each through DRA claims (kube-scheduler allocates
// them from the workload's ResourceClaimTemplate): that device is tainted, its pod alone is
// evicted after its checkpoint, the scheduler gives the tainted device to no claim (the evicted
// pod's replacement waits for it), the agent resets the GPU through the NVML double, and the node
// is never tainted.
TEST_F(DrillTest, GpuScopedEvictsOnlyThePodOfTheFaultyGpu) {
  const json r =
      Run("gpu-scoped", {"--nvml-double", NVML_DOUBLE, "--nvml-double-ctl", NVML_DOUBLE_CTL});
  for (const char* c :
       {"one GPU's pod evicted", "other GPUs' pods untouched", "device tainted, then released",
        "tainted GPU not allocated", "GPU reset", "node never tainted"}) {
    EXPECT_TRUE(CheckOk(r, c)) << c << ": " << r.dump(2);
  }
  ExpectInOrder(r, {"detected", "checkpoint_requested", "gpu_recovery_requested", "gpu_recovered",
                    "repair_recovered"});
  // Eviction and request are seen through two watches that may deliver them out of order.
  ExpectInOrder(r, {"checkpoint_requested", "first_eviction", "gpu_recovered"});
}

// The node is replaced, not repaired: delete-node deletes its Karpenter NodeClaim or Cluster API
// Machine, and the repair ends Replaced only once the new node is Ready with its agent's
// condition True, naming it in status.replacement. The provisioners are the real controllers:
// Karpenter with its kwok cloud provider (control-plane.sh --with-karpenter) launches the faulty
// node for the workload's last pods and, after gpuheal's deletion, the replacement for the
// evicted ones; Cluster API's core manager with the docker provider's inMemory backend
// (control-plane.sh --with-capi) runs the MachineDeployment whose machine the fault hits, and
// its MachineSet controller creates the replacement Machine. The sim is their kubelet; the new
// NodeClaim's or Machine's creator is the peer's controller, not the drill.
TEST_F(DrillTest, ReplaceKarpenterAndCapiEndWhenTheNewNodeJoins) {
  for (const std::string scenario : {"replace-karpenter", "replace-capi"}) {
    SCOPED_TRACE(scenario);
    const json r = Run(scenario);
    EXPECT_TRUE(CheckOk(r, "owner deleted by gpuheal")) << r.dump(2);
    EXPECT_TRUE(CheckOk(r, "replacement joined")) << r.dump(2);
    EXPECT_TRUE(CheckOk(r, "capacity restored")) << r.dump(2);
    const json peers = r.value("peers", json::object());
    if (scenario == "replace-karpenter") {
      EXPECT_TRUE(CheckOk(r, "replacement created by karpenter")) << r.dump(2);
      const json peer = peers.value("karpenter", json::object());
      EXPECT_EQ(peer.value("module", ""), "sigs.k8s.io/karpenter") << r.dump(2);
      EXPECT_TRUE(peer.value("version", "").starts_with("v1.")) << r.dump(2);
      // Karpenter launches for the evicted pods while the drain runs: the launch may come
      // before or after gpuheal's deletion, and the Replaced phase (the replacement is there
      // already) within milliseconds of the deletion, seen by two different means.
      ExpectInOrder(r, {"detected", "condition", "taint", "repair_remediating", "owner_deleted"});
      ExpectInOrder(r, {"repair_remediating", "repair_replaced"});
      ExpectInOrder(r, {"first_eviction", "replacement_launched", "replacement_node_registered"});
      // The sim let go of its nodes; Karpenter terminates them (its finalizer) as they go.
      EXPECT_TRUE(Eventually([&] { return SimNodes() == 0; }, 60s))
          << "the run's nodes, Karpenter's included, are removed: " << SimNodes() << " left";
    } else {
      EXPECT_TRUE(CheckOk(r, "replacement created by cluster-api")) << r.dump(2);
      const json core = peers.value("cluster-api", json::object());
      EXPECT_EQ(core.value("module", ""), "sigs.k8s.io/cluster-api") << r.dump(2);
      EXPECT_TRUE(core.value("version", "").starts_with("v1.")) << r.dump(2);
      EXPECT_EQ(peers.value("cluster-api-provider-docker", json::object()).value("module", ""),
                "sigs.k8s.io/cluster-api/test")
          << r.dump(2);
      // The MachineSet controller replaces the Machine once the old one is gone; the Machine
      // controller links the new Node after it registered, and gpuheal may count it as the
      // replacement before or after that link.
      ExpectInOrder(r, {"detected", "condition", "taint", "repair_remediating", "owner_deleted",
                        "node_deleted", "replacement_launched", "replacement_node_registered",
                        "repair_replaced"});
      ExpectInOrder(r, {"replacement_node_registered", "replacement_node_linked"});
      EXPECT_TRUE(Eventually([&] { return SimNodes() == 0; }, 60s))
          << "the replacement node is removed with the run's nodes: " << SimNodes() << " left";
      // The drill deletes the run's Cluster at the end, and Cluster API its Machines.
      std::string machines;
      EXPECT_TRUE(Eventually(
          [&] {
            auto m = client_->Get("/apis/cluster.x-k8s.io/v1beta2/machines");
            machines = m && m->ok() ? m->body : "(unreadable)";
            return m && m->ok() && json::parse(m->body)["items"].empty();
          },
          60s))
          << "the drill's Machines are deleted with its Cluster: " << machines;
    }
  }
  std::string left;
  EXPECT_TRUE(Eventually(
      [&] {
        auto claims =
            client_->Get("/apis/karpenter.sh/v1/nodeclaims?labelSelector=gpuheal.io%2Fdrill");
        left = claims && claims->ok() ? claims->body : "(unreadable)";
        return claims && claims->ok() && json::parse(claims->body)["items"].empty();
      },
      60s))
      << "the drill's NodeClaims are deleted (with its NodePool): " << left;
}

// The ladder's BMC rung: the standby promoted at quarantine, then the node power-cycled through
// its BMC (the sushy-tools emulator, a real Redfish service); the drill plays the machine (its
// agent stops at power off, a new boot's agent starts at power on), and the node, its fault
// cleared, is released as the pool's standby. The node also plays a compromised one: its own
// gpuheal.io/bmc-endpoint names a decoy, which must receive nothing.
TEST_F(DrillTest, BmcPowerCyclesTheNodeOnceAndItReturnsAsTheStandby) {
  const json r = Run("bmc");
  EXPECT_TRUE(CheckOk(r, "one power cycle through the BMC")) << r.dump(2);
  EXPECT_TRUE(CheckOk(r, "node back as the pool's standby")) << r.dump(2);
  // The node's own annotation named a decoy as its BMC: it received no connection.
  EXPECT_TRUE(CheckOk(r, "a compromised node asks for the fleet's BMC password: held"))
      << r.dump(2);
  ExpectInOrder(
      r, {"detected", "taint", "standby_released", "repair_remediating", "power_off", "node_down",
          "power_on", "node_booted", "condition_cleared", "released", "repair_recovered"});
  EXPECT_EQ(SimNodes(), 0);
}

TEST_F(DrillTest, ControllerCrashMidDrainCompletesTheRepairOnce) {
  const json r = Run("controller-crash");
  EXPECT_TRUE(CheckOk(r, "one repair, each pod evicted once")) << r.dump(2);
  ExpectInOrder(r, {"repair_checkpointrequested", "controller_killed", "controller_leader",
                    "repair_remediating"});
}

TEST_F(DrillTest, AgentRestartLosesNothingAndRepeatsNothing) {
  const json r = Run("agent-restart");
  EXPECT_TRUE(CheckOk(r, "nothing lost")) << r.dump(2);
  EXPECT_TRUE(CheckOk(r, "nothing reported twice")) << r.dump(2);
  ExpectInOrder(r, {"detected", "agent_killed", "agent_restarted", "repair_remediating"});
}

TEST_F(DrillTest, CriticalRecoversTheGpuAndTheNodeStaysSchedulable) {
  const json r =
      Run("critical", {"--nvml-double", NVML_DOUBLE, "--nvml-double-ctl", NVML_DOUBLE_CTL});
  EXPECT_TRUE(CheckOk(r, "node stayed schedulable")) << r.dump(2);
  ExpectInOrder(r, {"detected", "gpu_fault_published", "gpu_recovery_requested", "gpu_recovered",
                    "repair_recovered"});
  EXPECT_FALSE(r["timeline_ms"].contains("taint"));
}

// --workload: the scenarios under what users run. critical resets the GPU under a server that
// nobody evicted (no holders known): its readiness probe takes it out of the Service, its
// liveness probe restarts it, and the restart on the reset GPU serves again.
TEST_F(DrillTest, CriticalUnderAServiceEndsItsErrorsAndGetsItsCapacityBack) {
  const json r = Run("critical", {"--nvml-double", NVML_DOUBLE, "--nvml-double-ctl",
                                  NVML_DOUBLE_CTL, "--workload", "service", "--nodes", "2"});
  for (const char* c : {"service errors ended", "service answered after the failover",
                        "service measured", "GPU-level repair", "node stayed schedulable"})
    EXPECT_TRUE(CheckOk(r, c)) << c << ": " << r.dump(2);
  EXPECT_EQ(r.value("workload", ""), "service");
  ASSERT_TRUE(r.contains("service")) << r.dump(2);
  EXPECT_GT(r["service"]["errors"].get<int>(), 0) << "the server failed once its GPU was lost";
  ExpectInOrder(r,
                {"service_first_error", "gpu_recovered", "service_last_error", "service_restored"});
}

// correlated with the breaker open: the held nodes keep their trainers, which stall.
TEST_F(DrillTest, CorrelatedUnderTrainingStallsTheRanksOfTheHeldNodes) {
  const json r = Run("correlated", {"--workload", "training"});
  for (const char* c : {"gates held", "training measured", "periodic-only trainer measured"})
    EXPECT_TRUE(CheckOk(r, c)) << c << ": " << r.dump(2);
  ASSERT_TRUE(r.contains("training")) << r.dump(2);
  EXPECT_EQ(r["training"]["stalled_ranks"], 4) << "two of each Deployment, on the two held nodes";
  EXPECT_TRUE(r["training"]["work_lost_s"].is_null()) << r["training"];
}

// gpu-scoped: the trainer holding the faulty GPU checkpoints on request and is evicted alone.
TEST_F(DrillTest, GpuScopedUnderTrainingCheckpointsThePodOfTheGpu) {
  const json r = Run("gpu-scoped", {"--nvml-double", NVML_DOUBLE, "--nvml-double-ctl",
                                    NVML_DOUBLE_CTL, "--workload", "training", "--nodes", "2"});
  for (const char* c : {"checkpoint on gpuheal's request", "one GPU's pod evicted",
                        "other GPUs' pods untouched", "GPU reset"})
    EXPECT_TRUE(CheckOk(r, c)) << c << ": " << r.dump(2);
  ASSERT_TRUE(r.contains("training")) << r.dump(2);
  EXPECT_EQ(r["training"]["runs"][0]["ranks"], 1);
  EXPECT_LE(r["training"]["work_lost_s"].get<double>(), 0.15) << r["training"];
}

// runtime: a real containerd plays the node's runtime and is frozen (SIGSTOP); CRI Status misses
// its deadline, ContainerRuntimeReady turns False and the node is repaired like a hardware fault.
TEST_F(DrillTest, RuntimeFreezeQuarantinesAndRepairsTheNode) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run containerd";
  const json r = Run("runtime");
  ExpectInOrder(r, {"detected", "condition", "taint", "first_eviction", "replacement_running",
                    "capacity_restored"});
  ExpectInOrder(r,
                {"repair_quarantined", "repair_draining", "repair_drained", "repair_remediating"});
  for (const char* c : {"fault detected", "quarantined", "pods evicted", "standby released",
                        "capacity restored", "one repair, each pod evicted once"}) {
    EXPECT_TRUE(CheckOk(r, c)) << c << ": " << r.dump(2);
  }
  // The drill's containerd is gone with it.
  EXPECT_TRUE(Eventually(
      [] { return std::system("pgrep -f '[c]ontainerd --config /tmp/gpuheal-drill' >/dev/null"); },
      10s));
}

// --real-kmsg: the faulty node's agent reads this machine's /dev/kmsg and the fault goes through
// the kernel; killed and restarted, the agent resumes from its saved cursor.
TEST_F(DrillTest, AgentRestartThroughTheRealKernelLog) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to write /dev/kmsg";
  const json r = Run("agent-restart", {"--real-kmsg"});
  EXPECT_TRUE(CheckOk(r, "nothing reported twice")) << r.dump(2);
  EXPECT_TRUE(CheckOk(r, "nothing lost")) << r.dump(2);
  ExpectInOrder(r, {"detected", "condition", "taint", "replacement_running"});
}

TEST_F(DrillTest, CtrlCCleansUpMidRunAndAfterKeep) {
  {
    DrillProcess d({"--kubeconfig", ControlPlaneEnv::kubeconfig(), "--nodes", "4"});
    ASSERT_TRUE(d.WaitErr("", 1s));
    ASSERT_TRUE(Eventually([&] { return d.out().find("kernel line") != std::string::npos; }, 120s))
        << d.Explain();
    d.Signal(SIGINT);
    EXPECT_EQ(d.Wait(60s), 130) << d.Explain();
    EXPECT_EQ(SimNodes(), 0) << "the interrupted run's nodes are removed";
  }
  {
    DrillProcess d({"--kubeconfig", ControlPlaneEnv::kubeconfig(), "--nodes", "4", "--keep"});
    ASSERT_TRUE(Eventually(
        [&] { return d.out().find("Press Ctrl-C to clean up") != std::string::npos; }, 120s))
        << d.Explain();
    EXPECT_EQ(SimNodes(), 6) << "--keep leaves the simulated cluster running";
    std::this_thread::sleep_for(1s);
    EXPECT_EQ(SimNodes(), 6);
    d.Signal(SIGINT);
    EXPECT_EQ(d.Wait(60s), 0) << d.Explain();
    EXPECT_EQ(SimNodes(), 0);
  }
}

// `make drill DRILL_ARGS=--real-node`: this machine as the faulty node (containerd and a kubelet,
// control-plane.sh up --with-node), the workload's pod stopped by the real kubelet, its
// replacement on a simulated node.
TEST_F(DrillTest, RealNodeStopsTheWorkloadInContainerdAndRunsItElsewhere) {
  if (geteuid() != 0) GTEST_SKIP() << "a real node needs root";
  DrillProcess d({"--real-node", "--nodes", "2", "--pools", "1", "--json"});
  const int rc = d.Wait(300s);
  const json report = json::parse(d.out(), nullptr, false);
  ASSERT_EQ(rc, 0) << d.Explain();
  ASSERT_TRUE(report.is_object()) << d.Explain();
  EXPECT_TRUE(report["ok"].get<bool>()) << report.dump(2);
  ExpectInOrder(report, {"condition", "first_eviction", "workload_stopped"});
  ExpectInOrder(report, {"taint", "replacement_running"});
  for (const char* c : {"quarantined", "kubelet stopped the workload",
                        "replacement Running elsewhere", "repair recorded"}) {
    EXPECT_TRUE(CheckOk(report, c)) << c << ": " << report.dump(2);
  }
  const std::string pattern = "'[/]" + d.work().substr(1) + "'";
  EXPECT_TRUE(Eventually(
      [&] { return std::system(("pgrep -f " + pattern + " >/dev/null").c_str()) != 0; }, 10s))
      << "processes left running under " << d.work();
}

TEST_F(DrillTest, BadOptionsAreUsageErrors) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--scenario", "meteor"},
           {"--fault-nodes", "3"},
           {"--nodes", "1", "--pools", "2"},
           {"--scenario", "correlated", "--nodes", "4", "--fault-nodes", "5"},
           {"--kubeconfig", "/nonexistent"},
           {"--real-kmsg", "--scenario", "critical"},
           {"--real-kmsg", "--scenario", "runtime"},
           {"--real-node", "--scenario", "pdb"},
           {"--real-node", "--repeat", "2"},
           {"--scenario", "service", "--workload-bin", "/nonexistent"},
           {"--scenario", "training", "--real-kmsg"},
           {"--scenario", "pdb", "--workload", "service"},
           {"--scenario", "training", "--workload", "training"},
           {"--workload", "batch"},
           {"--scenario", "critical", "--workload", "training", "--workload-bin",
            "/nonexistent"}}) {
    DrillProcess d(args);
    EXPECT_EQ(d.Wait(60s), 2) << args[0] << " " << args[1] << "\n" << d.Explain();
    EXPECT_FALSE(d.err().empty());
  }
}

}  // namespace
}  // namespace gpuheal

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Karpenter's controller with its kwok provider (replace-karpenter), and Cluster API's core
  // manager with its docker provider (replace-capi), run beside the cluster.
  ::testing::AddGlobalTestEnvironment(
      new gpuheal::testing::ControlPlaneEnv(true, {}, "--with-karpenter --with-capi"));
  return RUN_ALL_TESTS();
}
