#pragma once
// What a drill found: each run's timeline (ms after the kernel line) and checks, and their
// summary over runs: p50/p99 per step, one verdict per check. Rendered as text, as the `--json`
// object (docs/drill.md) and as an SVG chart.

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpuheal::drill {

struct Check {
  std::string name;
  bool ok = false;
  std::string detail;
};

struct RunResult {
  std::map<std::string, double> steps_ms;  // step -> ms after the kernel line
  std::vector<Check> checks;
  // Measured in the same run, before the fault: one write to the API server (a Node annotation
  // patch) until the drill's watch delivers it, the unit every step above is made of.
  std::vector<double> api_write_ms;
  bool ok() const;
};

struct StepStats {
  double p50 = 0, p99 = 0, max = 0;
  size_t runs = 0;  // runs that reached the step
};

struct Report {
  std::string scenario;
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
std::string ToText(const Report& r);
// One bar per step from the kernel line to its p50 (a tick at p99), on a log time axis.
std::string ToSvg(const Report& r);

}  // namespace gpuheal::drill
