#pragma once
// The agent's Slurm backend (docs/slurm.md): what the Kubernetes reporter and the controller do
// for a Kubernetes node, done for the agent's own Slurm node through slurmctld.
//
//   - A node-level fault (one that holds a domain condition False) drains the node with a reason
//     of gpuheal's (slurm/reason.h), then gives its running batch jobs the checkpoint window: the
//     checkpoint signal to each batch step at once, and when the window ends, a requeue of each
//     job that allows it (the others are left to end).
//   - A fault of one GPU drains the node too (its reason names the GPU): Slurm 22.05 cannot take
//     one GPU of a node out of service (it refuses to change a gres count whose GPUs have device
//     files), and its running jobs finish (no signal, no requeue).
//   - When the recovery rules clear every fault, the node is resumed, but only when the reason it
//     is drained with is gpuheal's: an administrator's drain (or one gpuheal's drain was replaced
//     by) is never undone, and a node an administrator drained is never re-reasoned.
//
// Runs on a thread of its own so that the kernel-log loop never waits for slurmctld: the loop
// hands it the latest desired state, the reporter reconciles the node with it, re-reads the node
// every `recheck` (someone may resume a node whose fault is still active: it is drained again),
// and while slurmctld is unreachable retries with backoff.

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "agent/active_faults.h"
#include "agent/config.h"
#include "serve/metrics.h"
#include "slurm/client.h"
#include "slurm/reason.h"

namespace gpuheal {

// What the node's Slurm state should be: drained with `reason`, or healthy (no reason).
struct SlurmDesired {
  std::optional<slurm::DrainReason> reason;
  bool node_level = false;  // checkpoint and requeue the node's jobs
  bool operator==(const SlurmDesired&) const = default;
};

// From the agent's active faults: the worst node-level fault (its condition False), else the
// worst fault of one GPU, names the reason; the others are counted in "(+N more)".
SlurmDesired DesiredSlurmState(const ActiveFaults& active, const MonitorSwitches& enabled);

class SlurmReporter {
 public:
  // `opts.node_name` is the node's resolved Slurm NodeName (the agent fills it in).
  SlurmReporter(std::unique_ptr<slurm::Api> api, SlurmConfig opts, Metrics& metrics);
  ~SlurmReporter();
  void Start();
  void Stop();

  // Called by the agent's loop; never blocks on slurmctld.
  void SetDesired(SlurmDesired d);

  // One reconciliation: reads the node, drains/resumes it, signals/requeues its jobs. Returns when
  // it wants to run again even if nothing changes.
  std::chrono::steady_clock::time_point Step();

  bool api_ok() const;
  std::string last_error() const;

 private:
  void Run();
  void Fail(const std::string& what);
  // The checkpoint window's actions due now; false when a request failed (retried with backoff).
  bool Checkpoint(std::chrono::steady_clock::time_point now,
                  std::chrono::steady_clock::time_point& next);

  std::unique_ptr<slurm::Api> api_;
  SlurmConfig opts_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  SlurmDesired desired_;
  uint64_t desired_gen_ = 0;
  bool api_ok_ = false;
  std::string last_error_;

  // Reporter thread only.
  uint64_t seen_gen_ = 0;
  int failures_ = 0;
  std::mt19937_64 rng_;
  std::string said_;  // the last "left alone" said, so it is said once
  // The checkpoint window of the current node-level incident.
  std::optional<std::chrono::steady_clock::time_point> window_start_;
  bool window_done_ = false;
  std::set<uint32_t> signalled_;
  std::thread thread_;

  Counter& drains_;
  Counter& resumes_;
  Counter& signals_;
  Counter& requeues_;
  Counter& failures_total_;
  Gauge& api_up_;
};

}  // namespace gpuheal
