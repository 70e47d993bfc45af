// `gpuheal drill --backend slurm`: the agent's Slurm backend rehearsed on a real Slurm cluster
// started here (scripts/slurm.sh: munged, slurmctld, slurmd on loopback, this machine the compute
// node) with the fault written to this machine's /dev/kmsg. Root.

#include "drill/slurm_drill.h"

#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/child.h"
#include "drill/inject.h"
#include "slurm/client.h"
#include "slurm/reason.h"

namespace gpuheal::drill {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kWindow = 5s;  // the checkpoint window the drill's agent is given

int CountLines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string l; std::getline(in, l);) ++n;
  return n;
}

bool FileHas(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);)
    if (l.find(needle) != std::string::npos) return true;
  return false;
}

class SlurmDrill {
 public:
  SlurmDrill(const DrillOptions& o, const std::atomic<bool>& interrupted)
      : o_(o), interrupted_(interrupted) {}
  ~SlurmDrill() { Cleanup(); }

  Result<Report> Run() {
    if (auto s = Setup(); !s) return s.error();
    std::vector<RunResult> runs;
    for (int i = 0; i < o_.repeat && !interrupted_; ++i) {
      if (o_.repeat > 1) Say(fmt::format("\nrun {}/{}\n", i + 1, o_.repeat));
      auto r = OneRun(i + 1);
      if (!r) return r.error();
      runs.push_back(std::move(*r));
    }
    return Summarise("slurm " + o_.scenario, runs, interrupted_.load());
  }

 private:
  void Say(const std::string& s) {
    if (o_.live) o_.live(s);
  }

  Status Setup() {
    if (o_.work_dir.empty()) {
      char tmpl[] = "/tmp/gpuheal-drill-XXXXXX";
      if (!mkdtemp(tmpl)) return Error{"cannot create a work directory in /tmp"};
      work_ = tmpl;
    } else {
      work_ = o_.work_dir;
      std::filesystem::create_directories(work_);
    }
    cluster_ = work_ + "/slurm";
    Say("starting a Slurm cluster (munged, slurmctld, slurmd; this machine the compute node) in " +
        cluster_ + "\n");
    const std::string log = work_ + "/slurm-up.log";
    auto child = Child::Spawn({"/bin/bash", o_.source_dir + "/scripts/slurm.sh", "up", "--dir",
                               cluster_, "--gpus", std::to_string(o_.gpus)},
                              log, log);
    if (!child) return child.error();
    int rc = -1;
    while ((rc = (*child)->Wait(200ms)) < 0) {
      if (interrupted_) {
        (*child)->Stop(2s);
        return Error{"interrupted while the Slurm cluster was starting"};
      }
    }
    started_ = true;
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with("SLURM_CONF=")) conf_ = line.substr(11);
      if (line.starts_with("SLURM_NODE=")) node_ = line.substr(11);
    }
    if (rc != 0 || conf_.empty() || node_.empty())
      return Error{fmt::format("the Slurm cluster did not start (exit {}); its log: {}", rc, log)};
    auto api = slurm::OpenLibslurm("", conf_);
    if (!api) return api.error();
    api_ = std::move(*api);
    return Status::Ok();
  }

  void Cleanup() {
    agent_.reset();
    if (!started_ || o_.keep) {
      if (o_.keep && started_)
        Say(
            fmt::format("kept: the Slurm cluster (SLURM_CONF={}) and {}; stop it with "
                        "scripts/slurm.sh down --dir {}\n",
                        conf_, work_, cluster_));
      return;
    }
    const std::string log = work_ + "/slurm-down.log";
    if (auto c = Child::Spawn(
            {"/bin/bash", o_.source_dir + "/scripts/slurm.sh", "down", "--dir", cluster_}, log,
            log)) {
      (*c)->Wait(60s);
    }
    if (o_.work_dir.empty()) std::filesystem::remove_all(work_);
    started_ = false;
  }

  // Waits for `pred` up to `timeout`, polling every 10 ms; false when it did not hold.
  template <typename Pred>
  bool WaitFor(Pred pred, std::chrono::milliseconds timeout) {
    const auto until = Clock::now() + timeout;
    while (!interrupted_) {
      if (pred()) return true;
      if (Clock::now() > until) return false;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  Result<RunResult> OneRun(int n) {
    const bool transient = o_.scenario == "transient";
    const std::string dir = fmt::format("{}/run-{}", work_, n);
    std::filesystem::create_directories(dir);
    RunResult r;
    // The node idle, as an operator leaves it between drills.
    if (auto node = api_->GetNode(node_); node && (node->drain || node->down)) {
      if (auto s = api_->Resume(node_); !s) return s.error();
    }
    if (!WaitFor(
            [&] {
              auto node = api_->GetNode(node_);
              return node && !node->drain && !node->down;
            },
            30s))
      return Error{"the Slurm node did not return to service before the run"};

    const std::string cfg = dir + "/agent.yaml";
    std::ofstream(cfg) << "kmsg_start: end\n"
                       << "monitors: {storage: false, network: false, runtime: false}\n"
                       << "previous_boot: {enabled: false}\n"
                       << "nvidia: {nvml: false}\n"
                       << "slurm:\n"
                       << "  conf: " << conf_ << "\n"
                       << "  checkpoint_signal: USR1\n"
                       << "  checkpoint_window: " << kWindow.count() << "s\n"
                       << "  recheck_period: 1s\n"
                       << (transient ? "escalation: {count: 2, window: 1h}\n"
                                       "recovery: {quiet_period: 8s}\n"
                                     : "");
    const std::string agent_out = dir + "/agent.out", agent_log = dir + "/agent.log";
    auto agent = Child::Spawn({o_.self, "agent", "--slurm", "--node-name", node_, "--config", cfg,
                               "--state-dir", dir + "/state", "--listen", "", "--accept-injected"},
                              agent_out, agent_log);
    if (!agent) return agent.error();
    agent_ = std::move(*agent);
    if (!WaitFor([&] { return FileHas(agent_log, "\"agent started\""); }, 15s))
      return Error{"the agent did not start; its log: " + agent_log};

    // The workload: a batch job on one GPU that checkpoints on USR1 (it records the signal; bash
    // runs the trap as soon as the signal interrupts its `wait`).
    const std::string starts = dir + "/starts", signals = dir + "/signals";
    const std::string script = fmt::format(
        "#!/bin/bash\ntrap 'echo usr1 >> {}' USR1\necho start >> {}\n"
        "while true; do sleep 1 & wait $!; done\n",
        signals, starts);
    auto job = api_->SubmitBatch("gpuheal-drill", script, dir, 1, /*requeue=*/true);
    if (!job) return job.error();
    if (!WaitFor([&] { return CountLines(starts) >= 1; }, 30s))
      return Error{fmt::format("job {} did not start on {}", *job, node_)};
    Say(fmt::format("job {} running on {}; writing the fault into /dev/kmsg\n", *job, node_));

    std::vector<std::string> lines;
    std::string want_code;
    if (transient) {
      // A soft lockup is a warning; a second incident (more than 2 s after the first, or it is a
      // line of the first) escalates it to fatal: the timeline starts at that second line.
      if (auto s = WriteKmsg("/dev/kmsg",
                             {"watchdog: BUG: soft lockup - CPU#1 stuck for 23s! [train:4242]"});
          !s)
        return s.error();
      Say("  a first soft lockup (a warning); the second, 2.1 s later, escalates it\n");
      std::this_thread::sleep_for(2100ms);
      lines = {"watchdog: BUG: soft lockup - CPU#1 stuck for 49s! [train:4242]"};
      want_code = "KernelSoftLockup";
    } else {
      InjectSpec spec;
      spec.xid = o_.xid > 0 ? o_.xid : 79;
      spec.pid = "4242";
      spec.name = "train";
      lines = InjectMessages(spec);
      want_code = fmt::format("NvidiaXID{}Error", spec.xid);
    }
    // What the agent printed before the fault (the transient scenario's first warning) is not
    // its detection.
    const auto out_before =
        std::filesystem::exists(agent_out) ? std::filesystem::file_size(agent_out) : 0;
    const auto t0 = Clock::now();
    if (auto s = WriteKmsg("/dev/kmsg", lines); !s) return s.error();
    auto ms = [&] { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); };
    auto mark = [&](const char* step) {
      if (r.steps_ms.contains(step)) return;
      r.steps_ms[step] = ms();
      Say(fmt::format("  T+{:>8.1f} ms  {}\n", r.steps_ms[step], StepLabel(step)));
    };
    std::string reason;
    bool resumed_seen = false;
    const auto until = t0 + o_.run_timeout;
    while (!interrupted_ && Clock::now() < until) {
      if (!r.steps_ms.contains("detected") && std::filesystem::exists(agent_out) &&
          std::filesystem::file_size(agent_out) > out_before)
        mark("detected");
      auto node = api_->GetNode(node_);
      if (node && (node->drain || node->down) && slurm::IsGpuhealReason(node->reason)) {
        if (!r.steps_ms.contains("slurm_drained")) reason = node->reason;
        mark("slurm_drained");
      }
      if (CountLines(signals) >= 1) mark("slurm_signalled");
      auto j = api_->GetJob(*job);
      if (j && j->restarts >= 1) mark("slurm_requeued");
      if (transient && r.steps_ms.contains("slurm_drained") && node && !node->drain &&
          !node->down) {
        mark("slurm_resumed");
        resumed_seen = true;
      }
      if (transient && CountLines(starts) >= 2) mark("slurm_job_running_again");
      if (!transient && r.steps_ms.contains("slurm_requeued") &&
          ms() > r.steps_ms["slurm_requeued"] + 2000)
        break;
      if (transient && r.steps_ms.contains("slurm_job_running_again")) break;
      std::this_thread::sleep_for(10ms);
    }
    const auto parsed = slurm::ParseReason(reason);
    r.checks.push_back({"drained with gpuheal's reason", parsed && parsed->code == want_code,
                        reason.empty() ? "the node was not drained by gpuheal" : reason});
    const bool signalled = r.steps_ms.contains("slurm_signalled");
    const bool requeued = r.steps_ms.contains("slurm_requeued");
    r.checks.push_back(
        {"checkpoint signal reached the batch step before the requeue",
         signalled && (!requeued || r.steps_ms["slurm_signalled"] < r.steps_ms["slurm_requeued"]),
         signalled ? fmt::format("USR1 at T+{:.0f} ms", r.steps_ms["slurm_signalled"])
                   : "no USR1 reached the job"});
    const double window_ms = std::chrono::duration<double, std::milli>(kWindow).count();
    r.checks.push_back({"job requeued at the end of the checkpoint window",
                        requeued && r.steps_ms["slurm_requeued"] >= window_ms,
                        requeued ? fmt::format("requeued at T+{:.0f} ms; window {:.0f} ms",
                                               r.steps_ms["slurm_requeued"], window_ms)
                                 : "the job was not requeued"});
    if (transient) {
      r.checks.push_back({"node resumed when the fault cleared", resumed_seen,
                          resumed_seen ? "resumed by gpuheal" : "still drained"});
      r.checks.push_back({"requeued job running again",
                          r.steps_ms.contains("slurm_job_running_again"),
                          fmt::format("{} start(s)", CountLines(starts))});
    } else {
      auto node = api_->GetNode(node_);
      const bool still = node && node->drain && slurm::IsGpuhealReason(node->reason);
      r.checks.push_back({"node stays drained until its reboot", still,
                          still ? "an Xid of this kind clears with a reboot with the GPU present"
                                : "no longer drained by gpuheal"});
    }
    agent_->Stop(5s);
    agent_.reset();
    if (auto s = api_->Cancel(*job); !s) Say("  note: " + s.error().message + "\n");
    return r;
  }

  const DrillOptions& o_;
  const std::atomic<bool>& interrupted_;
  std::string work_, cluster_, conf_, node_;
  bool started_ = false;
  std::unique_ptr<slurm::Api> api_;
  std::unique_ptr<Child> agent_;
};

}  // namespace

const std::vector<std::string>& SlurmScenarios() {
  static const std::vector<std::string> s = {"single", "transient"};
  return s;
}

Result<Report> RunSlurmDrill(const DrillOptions& opts, const std::atomic<bool>& interrupted) {
  SlurmDrill d(opts, interrupted);
  return d.Run();
}

}  // namespace gpuheal::drill
