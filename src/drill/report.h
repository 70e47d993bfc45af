#pragma once
// What a drill found: each run's timeline (ms after the kernel line) and checks, and their
// summary over runs: p50/p99 per step, one verdict per check. Rendered as text, as the `--json`
// object (docs/drill.md) and as an SVG chart.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gpuheal::drill {

struct Check {
  std::string name;
  bool ok = false;
  std::string detail;
};

// What a service's clients saw in one run (the service scenario): requests sent at a fixed rate
// to the Service's ready endpoints from before the fault until after its replacement ran.
struct ServiceFigures {
  int requests = 0, errors = 0;   // from the kernel line on
  int errors_after_restored = 0;  // failed requests due after the replacement pods were Running
  double error_window_ms = 0;     // the kernel line to the last failed answer (0: none failed)
  double p50_ms = 0, p99_ms = 0;  // latency from the kernel line to the replacement Running
  double baseline_p99_ms = 0;     // the same load before the fault, same run
  int baseline_requests = 0;
  int64_t first_error_us = 0, last_error_us = 0;  // when the first / last failed answer came
};

// What the training run lost in one run (the training scenario). `work_lost_s`: the faulty
// node's trainer's steps that its replacement did not resume, and its step in progress;
// `periodic_only_work_lost_s`: the same for the trainer beside it that ignores gpuheal's request.
struct TrainingFigures {
  int64_t steps_done = 0;    // steps the faulty node's trainer completed before the fault
  double work_lost_s = -1;   // -1: not measured (detail says why)
  double checkpoint_ms = 0;  // the requested checkpoint's write
  bool resumed = false;      // its replacement resumed from that checkpoint
  double periodic_only_work_lost_s = -1;
  int64_t checkpoint_us = 0, resumed_us = 0;  // when: the requested checkpoint, the resumption
  int ranks = 0;                              // ranks of the job on a faulty GPU
  int stalled_ranks = 0;  // of those, ranks no process took over (their repair held)
  std::string detail;
};

struct RunResult {
  std::map<std::string, double> steps_ms;  // step -> ms after the kernel line
  std::vector<Check> checks;
  // Measured in the same run, before the fault: one write to the API server (a Node annotation
  // patch) until the drill's watch delivers it, the unit every step above is made of.
  std::vector<double> api_write_ms;
  std::optional<ServiceFigures> service;
  std::optional<TrainingFigures> training;
  bool ok() const;
};

struct StepStats {
  double p50 = 0, p99 = 0, max = 0;
  size_t runs = 0;  // runs that reached the step
};

struct Report {
  std::string scenario;
  std::string workload;  // --workload under the scenario ("" without one)
  int runs = 0;
  bool interrupted = false;
  std::vector<Check> checks;  // merged over runs: ok only when ok in every run
  std::map<std::string, StepStats> timeline;
  StepStats api_write;  // the baseline: one API write seen through a watch
  // The external controllers that ran beside gpuheal (e.g. "karpenter"): their Go module and
  // version ("unknown" when the drill ran in a cluster it did not start).
  struct Peer {
    std::string module, version;
  };
  std::map<std::string, Peer> peers;
  std::vector<ServiceFigures> service;    // each run's (the service scenario)
  std::vector<TrainingFigures> training;  // each run's (the training scenario)
  bool ok() const;
};

// The steps in the order they happen, with the words the timeline shows for each.
struct StepInfo {
  const char* key;
  const char* label;
};
const std::vector<StepInfo>& Steps();
std::string StepLabel(const std::string& key);

// Nearest-rank percentile of `v` (unsorted; empty gives 0).
double Percentile(std::vector<double> v, double p);

Report Summarise(const std::string& scenario, const std::vector<RunResult>& runs, bool interrupted);
nlohmann::ordered_json ToJson(const Report& r);
// The `service` and `training` objects of --json (docs/drill.md), over runs.
nlohmann::ordered_json ServiceJson(const std::vector<ServiceFigures>& runs);
nlohmann::ordered_json TrainingJson(const std::vector<TrainingFigures>& runs);
// The training scenario's periodic checkpoint interval.
inline constexpr int kTrainEverySeconds = 5;
std::string ToText(const Report& r);
// One bar per step from the kernel line to its p50 (a tick at p99), on a log time axis.
std::string ToSvg(const Report& r);

}  // namespace gpuheal::drill
