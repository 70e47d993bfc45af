#include "agent/slurm_reporter.h"

#include <algorithm>
#include <vector>

#include "core/log.h"
#include "kube/backoff.h"

namespace gpuheal {
namespace {

Counter& ActionCounter(Metrics& metrics, const char* action) {
  return metrics.GetCounter("gpuheal_slurm_actions_total",
                            "Actions on the node's Slurm state and jobs", {{"action", action}});
}

}  // namespace

SlurmDesired DesiredSlurmState(const ActiveFaults& active, const MonitorSwitches& enabled) {
  std::vector<const ActiveFault*> node_level, gpu_level;
  for (const auto& [k, a] : active.all()) {
    const auto domain = ParseCondition(a.fault.condition);
    if (a.fault.severity >= Severity::kFatal && (!domain || enabled.On(*domain))) {
      node_level.push_back(&a);
    } else if (a.fault.severity < Severity::kFatal && !a.fault.pci.empty()) {
      // Below fatal, the active set holds only critical faults of one GPU.
      gpu_level.push_back(&a);
    }
  }
  std::sort(node_level.begin(), node_level.end(), WorstFirst);
  std::sort(gpu_level.begin(), gpu_level.end(), WorstFirst);
  SlurmDesired d;
  const ActiveFault* top = !node_level.empty()  ? node_level[0]
                           : !gpu_level.empty() ? gpu_level[0]
                                                : nullptr;
  if (top == nullptr) return d;
  d.node_level = !node_level.empty();
  slurm::DrainReason r;
  r.code = top->fault.reason;
  r.gpu = top->fault.pci;
  r.message = top->fault.message;
  r.more = static_cast<int>(node_level.size() + gpu_level.size()) - 1;
  d.reason = std::move(r);
  return d;
}

SlurmReporter::SlurmReporter(std::unique_ptr<slurm::Api> api, SlurmConfig opts, Metrics& metrics)
    : api_(std::move(api)),
      opts_(std::move(opts)),
      rng_(std::random_device{}()),
      drains_(ActionCounter(metrics, "drain")),
      resumes_(ActionCounter(metrics, "resume")),
      signals_(ActionCounter(metrics, "signal")),
      requeues_(ActionCounter(metrics, "requeue")),
      failures_total_(
          metrics.GetCounter("gpuheal_slurm_failures_total", "slurmctld requests that failed")),
      api_up_(metrics.GetGauge("gpuheal_slurm_up", "1 when the last slurmctld request succeeded")) {
}

SlurmReporter::~SlurmReporter() { Stop(); }

void SlurmReporter::Start() {
  thread_ = std::thread([this] { Run(); });
}

void SlurmReporter::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SlurmReporter::SetDesired(SlurmDesired d) {
  {
    std::lock_guard lock(mu_);
    if (d == desired_) return;
    desired_ = std::move(d);
    ++desired_gen_;
  }
  cv_.notify_all();
}

bool SlurmReporter::api_ok() const {
  std::lock_guard lock(mu_);
  return api_ok_;
}

std::string SlurmReporter::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

void SlurmReporter::Run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    const auto next = Step();
    lock.lock();
    cv_.wait_until(lock, next, [&] { return stop_ || desired_gen_ != seen_gen_; });
  }
}

void SlurmReporter::Fail(const std::string& what) {
  failures_total_.Inc();
  api_up_.Set(0);
  {
    std::lock_guard lock(mu_);
    const bool first = api_ok_ || last_error_ != what;
    api_ok_ = false;
    last_error_ = what;
    if (first) Log("warn", "slurm: " + what, {{"node", opts_.node_name}});
  }
  ++failures_;
}

std::chrono::steady_clock::time_point SlurmReporter::Step() {
  SlurmDesired want;
  {
    std::lock_guard lock(mu_);
    want = desired_;
    seen_gen_ = desired_gen_;
  }
  const auto now = std::chrono::steady_clock::now();
  // After Fail(): the same backoff as the Kubernetes reporter's, from the failures so far.
  auto retry = [&] {
    return now + kube::JitteredBackoff(opts_.initial_backoff, opts_.max_backoff,
                                       std::max(failures_ - 1, 0), rng_);
  };
  auto node = api_->GetNode(opts_.node_name);
  if (!node) {
    Fail(node.error().message);
    return retry();
  }
  const bool drained = node->drain || node->down;
  const bool ours = slurm::IsGpuhealReason(node->reason);
  auto next = now + opts_.recheck_period;
  if (want.reason) {
    const std::string reason = slurm::FormatReason(*want.reason);
    if (drained && !ours) {
      const std::string said = node->state + "|" + node->reason;
      if (said_ != said) {
        said_ = said;
        Log("info",
            "slurm: the node is already drained or down by someone else; gpuheal leaves its state "
            "and reason alone",
            {{"node", opts_.node_name},
             {"state", node->state},
             {"reason", node->reason},
             {"fault", reason}});
      }
    } else if (!drained || node->reason != reason) {
      if (auto s = api_->Drain(opts_.node_name, reason); !s) {
        Fail(s.error().message);
        return retry();
      }
      drains_.Inc();
      Log("info", drained ? "slurm: drain reason updated" : "slurm: drained the node",
          {{"node", opts_.node_name}, {"reason", reason}});
    }
    if (want.node_level && !Checkpoint(now, next)) return retry();
  } else {
    window_start_.reset();
    window_done_ = false;
    signalled_.clear();
    said_.clear();
    if (drained && ours && opts_.resume) {
      if (auto s = api_->Resume(opts_.node_name); !s) {
        Fail(s.error().message);
        return retry();
      }
      resumes_.Inc();
      Log("info", "slurm: resumed the node: its faults have cleared",
          {{"node", opts_.node_name}, {"was", node->reason}});
    }
  }
  {
    std::lock_guard lock(mu_);
    if (!api_ok_ && !last_error_.empty())
      Log("info", "slurm: slurmctld answers again", {{"node", opts_.node_name}});
    api_ok_ = true;
    last_error_.clear();
  }
  failures_ = 0;
  api_up_.Set(1);
  return next;
}

bool SlurmReporter::Checkpoint(std::chrono::steady_clock::time_point now,
                               std::chrono::steady_clock::time_point& next) {
  if (window_done_) return true;
  if (!window_start_) window_start_ = now;
  auto jobs = api_->JobsOn(opts_.node_name);
  if (!jobs) {
    Fail(jobs.error().message);
    return false;
  }
  const bool window_over = now >= *window_start_ + opts_.checkpoint_window;
  bool ok = true;
  for (const auto& j : *jobs) {
    if (!j.running || !j.batch) continue;
    if (opts_.checkpoint_signal > 0 && !signalled_.contains(j.id) && !window_over) {
      if (auto s = api_->SignalBatch(j.id, opts_.checkpoint_signal); !s) {
        Fail(s.error().message);
        ok = false;  // tried again at the retry, while the window lasts
        continue;
      }
      signals_.Inc();
      signalled_.insert(j.id);
      Log("info", "slurm: checkpoint signal sent to the job's batch step",
          {{"node", opts_.node_name},
           {"job", j.id},
           {"signal", opts_.checkpoint_signal},
           {"window_ms", opts_.checkpoint_window.count()}});
    }
    if (!window_over) continue;
    if (opts_.requeue && j.requeue) {
      if (auto s = api_->Requeue(j.id); !s) {
        Fail(s.error().message);
        ok = false;  // a job still running is requeued at the retry
        continue;
      }
      requeues_.Inc();
      Log("info", "slurm: requeued the job at the end of its checkpoint window",
          {{"node", opts_.node_name}, {"job", j.id}});
    } else {
      Log("info",
          opts_.requeue ? "slurm: the job does not allow requeueing; it is left to end"
                        : "slurm: requeueing is off (slurm.requeue); the job is left to end",
          {{"node", opts_.node_name}, {"job", j.id}});
    }
  }
  if (!ok) return false;
  if (window_over) {
    window_done_ = true;
  } else {
    next = std::min(next, *window_start_ + opts_.checkpoint_window);
  }
  return true;
}

}  // namespace gpuheal
