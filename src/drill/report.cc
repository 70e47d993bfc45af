#include "drill/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gpuheal::drill {

bool RunResult::ok() const {
  return !checks.empty() &&
         std::all_of(checks.begin(), checks.end(), [](const Check& c) { return c.ok; });
}

bool Report::ok() const {
  return !interrupted && runs > 0 && !checks.empty() &&
         std::all_of(checks.begin(), checks.end(), [](const Check& c) { return c.ok; });
}

const std::vector<StepInfo>& Steps() {
  static const std::vector<StepInfo> steps = {
      {"detected", "agent detected the fault"},
      {"gpu_fault_published", "GPU fault on the Node"},
      {"condition", "NodeCondition False"},
      {"taint", "taint applied"},
      {"standby_released", "standby node released"},
      {"checkpoint_requested", "checkpoint requested"},
      {"checkpoint_done", "checkpoint done"},
      {"first_eviction", "first eviction"},
      {"last_eviction", "last eviction"},
      {"workload_stopped", "kubelet stopped the workload"},
      {"replacement_created", "replacement pods created"},
      {"replacement_scheduled", "replacement pods scheduled"},
      {"replacement_running", "replacement pods Running"},
      {"capacity_restored", "capacity back to 100%"},
      {"service_first_error", "service: first failed request"},
      {"service_last_error", "service: last failed request"},
      {"training_checkpoint", "training: checkpoint written"},
      {"training_resumed", "training: rank resumed"},
      {"service_restored", "service: capacity back"},
      {"power_off", "BMC: power Off"},
      {"node_down", "node down"},
      {"power_on", "BMC: power On"},
      {"node_booted", "node booted"},
      {"owner_deleted", "owner deleted"},
      {"node_deleted", "faulty machine removed"},
      {"replacement_launched", "replacement machine launched"},
      {"replacement_node_registered", "replacement node registered"},
      {"replacement_node_linked", "replacement linked (nodeRef)"},
      {"gpu_recovery_requested", "GPU recovery requested"},
      {"gpu_recovered", "GPU reset and verified"},
      {"controller_killed", "controller SIGKILLed"},
      {"controller_leader", "new controller leading"},
      {"agent_killed", "agent SIGKILLed"},
      {"agent_restarted", "agent restarted"},
      {"condition_cleared", "NodeCondition True again"},
      {"released", "node released"},
      {"at_risk", "GPU at risk"},
      {"cordoned", "node cordoned"},
      {"uncordoned", "node uncordoned"},
      {"fatal_replayed", "fatal fault replayed"},
      {"outside_remediating", "repair outside the rack"},
      {"incident_held", "incident holds the rack"},
      {"incident_released", "incident released by hand"},
      {"repair_detected", "repair: Detected"},
      {"repair_quarantined", "repair: Quarantined"},
      {"repair_checkpointrequested", "repair: CheckpointRequested"},
      {"repair_draining", "repair: Draining"},
      {"repair_drained", "repair: Drained"},
      {"repair_remediating", "repair: Remediating"},
      {"repair_recovered", "repair: Recovered"},
      {"repair_replaced", "repair: Replaced"},
      {"repair_failed", "repair: Failed"},
      {"repair_blocked", "repair: Blocked"},
      {"slurm_drained", "Slurm: node DRAIN"},
      {"slurm_signalled", "Slurm: signal at batch step"},
      {"slurm_requeued", "Slurm: job requeued"},
      {"slurm_resumed", "Slurm: node resumed"},
      {"slurm_job_running_again", "Slurm: job running again"},
  };
  return steps;
}

std::string StepLabel(const std::string& key) {
  for (const auto& s : Steps()) {
    if (key == s.key) return s.label;
  }
  return key;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

Report Summarise(const std::string& scenario, const std::vector<RunResult>& runs,
                 bool interrupted) {
  Report r;
  r.scenario = scenario;
  r.runs = static_cast<int>(runs.size());
  r.interrupted = interrupted;
  std::map<std::string, std::vector<double>> values;
  std::vector<double> writes;
  for (const auto& run : runs)
    writes.insert(writes.end(), run.api_write_ms.begin(), run.api_write_ms.end());
  if (!writes.empty()) {
    r.api_write = {Percentile(writes, 50), Percentile(writes, 99),
                   *std::max_element(writes.begin(), writes.end()), writes.size()};
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    for (const auto& [k, v] : runs[i].steps_ms) values[k].push_back(v);
    for (const auto& c : runs[i].checks) {
      auto it = std::find_if(r.checks.begin(), r.checks.end(),
                             [&](const Check& x) { return x.name == c.name; });
      const std::string detail =
          runs.size() > 1 && !c.ok ? fmt::format("run {}: {}", i + 1, c.detail) : c.detail;
      if (it == r.checks.end()) {
        r.checks.push_back({c.name, c.ok, detail});
      } else if (it->ok && !c.ok) {
        it->ok = false;
        it->detail = detail;
      } else if (it->ok) {
        it->detail = detail;
      }
    }
  }
  for (const auto& run : runs) {
    if (run.service) r.service.push_back(*run.service);
    if (run.training) r.training.push_back(*run.training);
  }
  for (auto& [k, v] : values) {
    r.timeline[k] = {Percentile(v, 50), Percentile(v, 99), *std::max_element(v.begin(), v.end()),
                     v.size()};
  }
  return r;
}

namespace {
double Round(double ms) { return std::round(ms * 10) / 10; }

std::vector<std::string> OrderedSteps(const Report& r) {
  std::vector<std::string> keys;
  for (const auto& s : Steps()) {
    if (r.timeline.count(s.key)) keys.push_back(s.key);
  }
  for (const auto& [k, v] : r.timeline) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  // In the order they happened (p50), the catalogue order breaking ties.
  std::stable_sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) {
    return r.timeline.at(a).p50 < r.timeline.at(b).p50;
  });
  return keys;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}
}  // namespace

nlohmann::ordered_json ToJson(const Report& r) {
  nlohmann::ordered_json j;
  j["scenario"] = r.scenario;
  if (!r.workload.empty()) j["workload"] = r.workload;
  j["runs"] = r.runs;
  j["ok"] = r.ok();
  if (r.interrupted) j["interrupted"] = true;
  if (!r.peers.empty()) {
    j["peers"] = nlohmann::ordered_json::object();
    for (const auto& [name, p] : r.peers)
      j["peers"][name] = {{"module", p.module}, {"version", p.version}};
  }
  j["checks"] = nlohmann::ordered_json::array();
  for (const auto& c : r.checks)
    j["checks"].push_back({{"name", c.name}, {"ok", c.ok}, {"detail", c.detail}});
  j["timeline_ms"] = nlohmann::ordered_json::object();
  for (const auto& k : OrderedSteps(r)) {
    const auto& s = r.timeline.at(k);
    j["timeline_ms"][k] = {{"p50", Round(s.p50)}, {"p99", Round(s.p99)}, {"runs", s.runs}};
  }
  if (r.api_write.runs > 0) {
    j["baseline_ms"]["api_write_seen"] = {{"p50", Round(r.api_write.p50)},
                                          {"p99", Round(r.api_write.p99)},
                                          {"samples", r.api_write.runs}};
  }
  if (!r.service.empty()) j["service"] = ServiceJson(r.service);
  if (!r.training.empty()) j["training"] = TrainingJson(r.training);
  return j;
}

nlohmann::ordered_json ServiceJson(const std::vector<ServiceFigures>& runs) {
  // Over runs: counts summed, the error window at its worst, latencies at the worst run's.
  nlohmann::ordered_json j;
  ServiceFigures t;
  for (const auto& s : runs) {
    t.requests += s.requests;
    t.errors += s.errors;
    t.errors_after_restored += s.errors_after_restored;
    t.error_window_ms = std::max(t.error_window_ms, s.error_window_ms);
    t.p50_ms = std::max(t.p50_ms, s.p50_ms);
    t.p99_ms = std::max(t.p99_ms, s.p99_ms);
    t.baseline_p99_ms = std::max(t.baseline_p99_ms, s.baseline_p99_ms);
  }
  j["requests"] = t.requests;
  j["errors"] = t.errors;
  j["error_window_ms"] = Round(t.error_window_ms);
  j["p50_ms"] = Round(t.p50_ms);
  j["p99_ms"] = Round(t.p99_ms);
  j["baseline_p99_ms"] = Round(t.baseline_p99_ms);
  j["errors_after_restored"] = t.errors_after_restored;
  j["runs"] = nlohmann::ordered_json::array();
  for (const auto& s : runs) {
    j["runs"].push_back({{"requests", s.requests},
                         {"errors", s.errors},
                         {"error_window_ms", Round(s.error_window_ms)},
                         {"p50_ms", Round(s.p50_ms)},
                         {"p99_ms", Round(s.p99_ms)},
                         {"baseline_p99_ms", Round(s.baseline_p99_ms)}});
  }
  return j;
}

nlohmann::ordered_json TrainingJson(const std::vector<TrainingFigures>& runs) {
  // Over runs: the work lost at its worst, the periodic-only loss on average (it depends on
  // where in its interval the fault fell).
  nlohmann::ordered_json j;
  TrainingFigures t;
  t.resumed = true;
  t.work_lost_s = 0;
  bool unmeasured = false;
  double periodic = 0;
  int periodic_n = 0;
  for (const auto& s : runs) {
    t.steps_done += s.steps_done;
    unmeasured = unmeasured || s.work_lost_s < 0;
    t.work_lost_s = std::max(t.work_lost_s, s.work_lost_s);
    t.checkpoint_ms = std::max(t.checkpoint_ms, s.checkpoint_ms);
    t.resumed = t.resumed && s.resumed;
    if (s.periodic_only_work_lost_s >= 0) {
      periodic += s.periodic_only_work_lost_s;
      ++periodic_n;
    }
  }
  j["steps_done"] = t.steps_done;
  j["work_lost_s"] = unmeasured ? nlohmann::ordered_json()
                                : nlohmann::ordered_json(std::round(t.work_lost_s * 100) / 100);
  j["checkpoint_ms"] = Round(t.checkpoint_ms);
  j["resumed"] = t.resumed;
  j["periodic_only_work_lost_s"] =
      periodic_n ? nlohmann::ordered_json(std::round(periodic / periodic_n * 100) / 100)
                 : nlohmann::ordered_json();
  int stalled = 0;
  for (const auto& s : runs) stalled += s.stalled_ranks;
  j["stalled_ranks"] = stalled;
  j["runs"] = nlohmann::ordered_json::array();
  for (const auto& s : runs) {
    nlohmann::ordered_json r = {
        {"steps_done", s.steps_done},
        {"work_lost_s",
         s.work_lost_s < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(s.work_lost_s)},
        {"checkpoint_ms", Round(s.checkpoint_ms)},
        {"resumed", s.resumed},
        {"ranks", s.ranks},
        {"stalled_ranks", s.stalled_ranks},
        {"periodic_only_work_lost_s", s.periodic_only_work_lost_s < 0
                                          ? nlohmann::ordered_json()
                                          : nlohmann::ordered_json(s.periodic_only_work_lost_s)}};
    if (!s.detail.empty()) r["detail"] = s.detail;
    j["runs"].push_back(r);
  }
  return j;
}

std::string ToText(const Report& r) {
  std::string out = fmt::format("\nscenario {}{}: {} run{}\n", r.scenario,
                                r.workload.empty() ? "" : " under the " + r.workload + " workload",
                                r.runs, r.runs == 1 ? "" : "s");
  for (const auto& [name, p] : r.peers)
    out += fmt::format("  beside {}: {} {}\n", name, p.module, p.version);
  if (!r.timeline.empty()) {
    // The runtime scenario's fault is a frozen container runtime, not a kernel line.
    const std::string head = r.scenario == "runtime" ? "step (T+ms from the runtime's freeze)"
                                                     : "step (T+ms from the kernel line)";
    out += r.runs > 1 ? fmt::format("  {:<34} {:>10} {:>10}\n", head, "p50", "p99")
                      : fmt::format("  {:<34} {:>10}\n", head, "ms");
    for (const auto& k : OrderedSteps(r)) {
      const auto& s = r.timeline.at(k);
      out += r.runs > 1 ? fmt::format("  {:<34} {:>10.1f} {:>10.1f}\n", StepLabel(k), s.p50, s.p99)
                        : fmt::format("  {:<34} {:>10.1f}\n", StepLabel(k), s.p50);
    }
  }
  if (r.api_write.runs > 0) {
    out += fmt::format(
        "  baseline, same run: one API write seen through a watch: p50 {:.1f} ms, p99 {:.1f} ms "
        "({} samples)\n",
        r.api_write.p50, r.api_write.p99, r.api_write.runs);
  }
  if (!r.service.empty()) {
    const auto j = ServiceJson(r.service);
    out += fmt::format(
        "  service: {} requests from the kernel line, {} failed ({} after capacity was back); "
        "the last failed answer T+{:.1f} ms; latency p50 {:.1f} ms, p99 {:.1f} ms through the "
        "failover (same load before the fault: p99 {:.1f} ms)\n",
        j["requests"].get<int>(), j["errors"].get<int>(), j["errors_after_restored"].get<int>(),
        j["error_window_ms"].get<double>(), j["p50_ms"].get<double>(), j["p99_ms"].get<double>(),
        j["baseline_p99_ms"].get<double>());
  }
  if (!r.training.empty()) {
    const auto j = TrainingJson(r.training);
    auto num = [](const nlohmann::ordered_json& v) {
      return v.is_number() ? fmt::format("{:.2f} s", v.get<double>()) : std::string("unmeasured");
    };
    const double ckpt = j["checkpoint_ms"].get<double>();
    const int stalled = j["stalled_ranks"].get<int>();
    out += fmt::format(
        "  training: work lost {} ({}); without the request, periodic checkpoints every {} s "
        "only: {} lost{}\n",
        num(j["work_lost_s"]),
        ckpt > 0 ? fmt::format("checkpoint on gpuheal's request: {:.0f} ms to write, {}", ckpt,
                               j["resumed"].get<bool>() ? "the replacement resumed from it"
                                                        : "not resumed from it")
                 : std::string("no checkpoint on request: from the last periodic one"),
        kTrainEverySeconds, num(j["periodic_only_work_lost_s"]),
        stalled ? fmt::format("; {} rank(s) stalled, their repair held", stalled) : "");
  }
  out += "checks:\n";
  for (const auto& c : r.checks)
    out += fmt::format("  [{}] {}: {}\n", c.ok ? "ok" : "FAIL", c.name, c.detail);
  if (r.interrupted) out += "  interrupted: the drill did not finish\n";
  out += fmt::format("verdict: {}\n", r.ok() ? "ok" : "FAILED");
  return out;
}

std::string ToSvg(const Report& r) {
  const auto keys = OrderedSteps(r);
  const int row = 26, left = 250, width = 560, top = 50;
  const int height = top + row * static_cast<int>(keys.size()) + 50;
  double max_ms = 10;
  for (const auto& k : keys) max_ms = std::max(max_ms, r.timeline.at(k).p99);
  const double decades = std::ceil(std::log10(max_ms));  // axis: 0.1 ms .. 10^decades ms
  auto x = [&](double ms) {
    const double v = std::log10(std::max(ms, 0.1)) + 1;  // 0.1 ms at the axis' start
    return left + static_cast<int>(v / (decades + 1) * width);
  };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">gpuheal drill: {} ({} run{}, "
      "{})</text>\n"
      "<text x=\"10\" y=\"40\" fill=\"#555\">T+ms from the kernel line, log scale; bar: p50, tick: "
      "p99</text>\n",
      left + width + 90, height, Escape(r.scenario), r.runs, r.runs == 1 ? "" : "s",
      r.ok() ? "ok" : "FAILED");
  for (int d = -1; d <= static_cast<int>(decades); ++d) {
    const double ms = std::pow(10.0, d);
    const int gx = x(ms);
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#ddd\"/>\n", gx,
                     top - 5, top + row * static_cast<int>(keys.size()));
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#555\">{}</text>\n", gx,
                     top + row * static_cast<int>(keys.size()) + 16,
                     ms < 1      ? "0.1 ms"
                     : ms < 1000 ? fmt::format("{:.0f} ms", ms)
                                 : fmt::format("{:.0f} s", ms / 1000));
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto& st = r.timeline.at(keys[i]);
    const int y = top + static_cast<int>(i) * row;
    const int x50 = x(st.p50), x99 = x(st.p99);
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 8, y + 15,
                     Escape(StepLabel(keys[i])));
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"16\" fill=\"{}\"/>\n", left,
                     y + 3, std::max(1, x50 - left),
                     keys[i].starts_with("repair_") ? "#8da0cb" : "#66c2a5");
    if (r.runs > 1)
      s += fmt::format(
          "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#333\" "
          "stroke-width=\"2\"/>\n",
          x99, y + 1, y + 21);
    s += fmt::format("<text x=\"{}\" y=\"{}\">{:.1f} ms</text>\n", std::max(x50, x99) + 6, y + 15,
                     st.p50);
  }
  s += "</svg>\n";
  return s;
}

}  // namespace gpuheal::drill
