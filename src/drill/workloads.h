#pragma once
// What users feel through a failover (docs/drill.md, the service and training scenarios): the
// workloads that run as real processes on the simulated nodes (tools/workload through
// `gpuheal sim`'s process runtime), the load a service's clients send it, and what each run
// measured: the service's errors and latency, the training run's lost work.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/result.h"
#include "drill/report.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/kube_config.h"

namespace gpuheal::drill {

// The workload objects (a namespace's contents, created in order) of the two scenarios. Their
// pods carry sim.gpuheal.io/runtime=process and run `workload_bin`; every GPU of the `nodes`
// GPU nodes of `pools` is taken.
struct WorkloadSpec {
  std::string ns, workload_bin;
  std::vector<std::string> pools;  // values of gpuheal.io/pool the pods may run in
  int nodes = 0, gpus = 8;
  std::string checkpoint_dir;  // training: shared by the trainers (hostPath semantics)
  // Non-empty: each pod holds one GPU through a claim of this DeviceClass (a ResourceClaimTemplate
  // `gpu` in the namespace, allocated by kube-scheduler), every GPU of the nodes taken.
  std::string dra_class;
};
// `serve`: one 8-GPU pod per node (with DRA: one pod per GPU) behind the Service `serve` (port
// 8080), readiness-probed every second (three failures: not ready) and liveness-probed (three
// failures: restarted).
std::vector<nlohmann::json> ServiceObjects(const WorkloadSpec& w);
// `trainer` and `trainer-periodic`: one pod of each per node (GPUs halved, anti-affinity), each
// Deployment behind its own budget of one. `trainer` checkpoints when gpuheal asks and on its
// periodic schedule; `trainer-periodic` only on the schedule (the same fault without gpuheal's
// request, in the same run). With DRA: `trainer` alone, one pod per GPU. A rank whose GPU has been
// lost kTrainLostExitSeconds exits (a collective's watchdog), and is restarted in its pod.
std::vector<nlohmann::json> TrainingObjects(const WorkloadSpec& w);
// The training loop's cadence in the drill.
inline constexpr int kTrainStepMs = 100;
inline constexpr int kTrainCheckpointMs = 50;
inline constexpr int kTrainLostExitSeconds = 10;

// One request of the load: when it was due (µs since the epoch; latency counts from then, so a
// stalled sender is not hidden), how long its answer took, the HTTP status (0: no answer).
struct LoadSample {
  int64_t due_us = 0;
  double ms = 0;
  int status = 0;
  bool ok() const { return status >= 200 && status < 300; }
};

// A service's clients, as a mesh sidecar balances them: `rate` GET / a second, round robin over
// the endpoints the Service's EndpointSlices list as ready, from the moment Start returns until
// Stop. A request that finds no ready endpoint counts as an error (status 0, 0 ms).
class LoadGenerator {
 public:
  static Result<std::unique_ptr<LoadGenerator>> Start(const kube::Config& cfg,
                                                      const std::string& ns,
                                                      const std::string& service, int rate);
  ~LoadGenerator();
  int ReadyEndpoints() const;
  // Whether an endpoint at `ip` is listed ready.
  bool ListsReady(const std::string& ip) const;
  // Begins sending (endpoints are watched from Start on).
  void Go();
  void Stop();
  std::vector<LoadSample> Samples() const;
  struct Slice;  // an EndpointSlice's ready endpoints

 private:
  LoadGenerator() = default;
  void Dispatch();
  void Worker();
  std::optional<std::string> NextEndpoint();  // "ip:port"

  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<kube::Informer<Slice>> slices_;
  int rate_ = 100;
  std::atomic<bool> stop_{false};
  std::thread dispatcher_;
  std::vector<std::thread> workers_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int64_t> due_;  // requests due, not yet taken by a worker
  std::vector<LoadSample> samples_;
  size_t rr_ = 0;
};

// A GET / on ip:port with a 2 s deadline: the HTTP status, 0 when there was no answer.
int HttpGetStatus(const std::string& endpoint);

// The service's figures of one run. `t0_us`: the kernel line; `restored_us`: the replacement
// pods Running (the failover's end).
ServiceFigures SummariseService(const std::vector<LoadSample>& samples, int64_t t0_us,
                                int64_t restored_us);

// The training run's figures from the trainers' slot logs (dir/<deployment>/slot-<k>.jsonl): the
// slot of each pod that ran on a faulty GPU and the process that took its place (its
// replacement, or the same pod's container restarted). `faulty_pods`: those pods' names, by
// Deployment. A synchronous job resumes from the checkpoint every rank has, so the figures are
// its worst rank's; a rank no process has taken over yet is counted in `stalled_ranks`.
TrainingFigures SummariseTraining(const std::string& checkpoint_dir,
                                  const std::multimap<std::string, std::string>& faulty_pods);

}  // namespace gpuheal::drill
