// The diagnostic before remediation (policy diagnostics; docs/diagnostics.md): a delete-node, a
// power cycle or an operator's command destroys the node's kernel buffer and driver state, so
// before the first of them the controller asks the node's agent for a bundle: a NodeDiagnostic
// named like the NodeRepair record, uploaded to the policy's URL. The repair waits for it at most
// diagnostics.timeout, then goes on either way; the record's actions say what happened.

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>

#include "controller/repair.h"
#include "core/log.h"
#include "core/time.h"

namespace gpuheal::controller {

using std::chrono::milliseconds;

namespace {

bool DestroysEvidence(Provider p) {
  return p == Provider::kDeleteNode || p == Provider::kRedfish || p == Provider::kExec;
}

std::string CompactTime(std::chrono::system_clock::time_point t) {
  const std::time_t s = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace

std::optional<Next> Repairer::AttachDiagnostic(const kube::Node& node, RepairRecord& r,
                                               SysTime now) {
  if (policy_.diagnostics_url_template.empty() || dry_run_) return std::nullopt;
  // Only before the ladder's first act: after it the evidence is gone.
  if (r.cr.rung_index > 0 || r.RungStarted()) return std::nullopt;
  const auto rungs = policy_.LadderFor(r.cr.severity);
  if (std::none_of(rungs.begin(), rungs.end(), DestroysEvidence)) return std::nullopt;
  const std::string name = r.cr.meta.name;
  const std::string done = "diagnostic " + name + " done";
  if (name.empty() || r.Done(Step::kDiagnosticEnded)) return std::nullopt;
  const std::optional<SysTime> since = r.StartedAt(Step::kDiagnosticRequested);
  // How it ended: the step (machine) and the action (people).
  auto ended = [&](std::string_view how, const std::string& words) {
    r.Record(Step::kDiagnosticEnded, now, std::string(how));
    r.Action(words);
  };
  const std::string path = std::string(kube::kNodeDiagnosticsPath) + "/" + name;
  if (!since) {
    const std::string url = policy_.DiagnosticsUrl(node.meta.name, name, CompactTime(now));
    auto created = api_.Create(
        std::string(kube::kNodeDiagnosticsPath),
        {{"apiVersion", "gpuheal.io/v1alpha1"},
         {"kind", "NodeDiagnostic"},
         {"metadata", {{"name", name}}},
         {"spec", {{"nodeName", node.meta.name}, {"upload", {{"url", url}}}, {"repair", name}}}});
    if (!created || (!created->ok() && created->status != 409)) {
      const std::string why = created ? created->Describe() : created.error().message;
      Log("warn", "controller: cannot request the diagnostic before remediation",
          {{"node", node.meta.name}, {"repair", name}, {"error", why}});
      ended("NotRequested",
            fmt::format("{}: not requested ({}); remediating without it", done, why));
      return std::nullopt;
    }
    r.Record(Step::kDiagnosticRequested, now, name);
    r.Action("diagnostic " + name + " requested at " + kube::MicroTime(now));
    r.Message(
        fmt::format("diagnostic bundle before remediation: nodediagnostic/{} (waiting up to "
                    "{} s)",
                    name, policy_.diagnostics_timeout.count() / 1000));
    return milliseconds(250);
  }
  std::string phase, message, location;
  if (auto got = api_.Get(path); got && got->ok()) {
    auto d = kube::DecodeNodeDiagnostic(got->body);
    if (d) {
      phase = d->phase;
      message = d->message;
      location = d->bundle_location;
    }
  }
  if (phase == "Succeeded") {
    ended("Succeeded", fmt::format("{}: Succeeded, bundle at {}", done,
                                   location.empty() ? "the node" : location));
    return std::nullopt;
  }
  if (phase == "Failed") {
    ended("Failed", fmt::format("{}: Failed ({}); remediating without it", done, message));
    return std::nullopt;
  }
  if (now - *since >= policy_.diagnostics_timeout) {
    ended("TimedOut", fmt::format("{}: not finished within {} s (phase {}); remediating without it",
                                  done, policy_.diagnostics_timeout.count() / 1000,
                                  phase.empty() ? "Pending" : phase));
    return std::nullopt;
  }
  return milliseconds(250);
}

}  // namespace gpuheal::controller
