#include "controller/steps.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "core/time.h"

namespace gpuheal::controller {
namespace {

constexpr std::array<std::string_view, kAllSteps.size()> kNames = {
    "Cordoned",
    "StandbyPromoted",
    "DeviceTaintRuleCreated",
    "DeviceTaintRulesRemoved",
    "GPURecoveryRequested",
    "DiagnosticRequested",
    "DiagnosticEnded",
    "RungStarted",
    "RungFailed",
    "BMCResetSent",
    "ReplacementSource",
    "HeldByMachineHealthCheck",
    "OwnerDeleted",
    "AwaitingReplacement",
};

// What follows `prefix` in `s`, when `s` starts with it.
std::optional<std::string_view> After(std::string_view s, std::string_view prefix) {
  if (!s.starts_with(prefix)) return std::nullopt;
  return s.substr(prefix.size());
}

// "N PROVIDER <verb> at TIME..." (the rung actions): N, PROVIDER and TIME.
struct RungWords {
  int64_t rung = 0;
  std::string provider, at;
};
std::optional<RungWords> ParseRungWords(std::string_view rest, std::string_view verb) {
  RungWords w;
  const auto space = rest.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const auto num = rest.substr(0, space);
  if (std::from_chars(num.data(), num.data() + num.size(), w.rung).ec != std::errc() || w.rung < 1)
    return std::nullopt;
  rest.remove_prefix(space + 1);
  const std::string middle = " " + std::string(verb) + " at ";
  const auto at = rest.find(middle);
  if (at == std::string_view::npos) return std::nullopt;
  w.provider = std::string(rest.substr(0, at));
  rest.remove_prefix(at + middle.size());
  // The time runs to the first ": " (a failure's reason follows) or the end.
  const auto colon = rest.find(": ");
  w.at = std::string(rest.substr(0, colon));
  return w;
}

}  // namespace

std::string_view ToString(Step s) { return kNames[static_cast<size_t>(s)]; }

std::optional<Step> ParseStep(std::string_view kind) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == kind) return kAllSteps[i];
  }
  return std::nullopt;
}

nlohmann::json StepsJson(const std::vector<kube::RepairStep>& steps) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : steps) {
    nlohmann::json step = {{"kind", s.kind}, {"at", s.at}};
    if (s.rung > 0) step["rung"] = s.rung;
    if (!s.detail.empty()) step["detail"] = s.detail;
    if (!s.uid.empty()) step["uid"] = s.uid;
    out.push_back(std::move(step));
  }
  return out;
}

bool MigrateActions(kube::NodeRepair& r) {
  if (!r.steps.empty()) return false;
  // The repair's start: the time of a step whose action named none.
  std::string began;
  for (const auto& [phase, at] : r.phase_times) {
    const auto t = kube::ParseTime(at), b = kube::ParseTime(began);
    if (t && (!b || *t < *b)) began = at;
  }
  std::vector<kube::RepairStep> steps;
  auto add = [&](Step kind, std::string at, std::string detail = "", int64_t rung = 0,
                 std::string uid = "") {
    steps.push_back({std::string(ToString(kind)), at.empty() ? began : std::move(at), rung,
                     std::move(detail), std::move(uid)});
  };
  int64_t rung_now = 0;  // the rung the actions last said started
  bool any_rung = false;
  for (const std::string& a : r.actions) {
    std::optional<std::string_view> rest;
    if (a.starts_with("cordoned")) {
      const auto gpu = a.find(": GPU ");
      const auto end = a.rfind(" at risk");
      add(Step::kCordoned, "",
          gpu != std::string::npos && end != std::string::npos && end > gpu + 6
              ? a.substr(gpu + 6, end - gpu - 6)
              : "");
    } else if ((rest = After(a, "promoted standby "))) {
      add(Step::kStandbyPromoted, "", std::string(*rest));
    } else if ((rest = After(a, "DeviceTaintRule "))) {
      add(Step::kDeviceTaintRuleCreated, "", std::string(rest->substr(0, rest->find(':'))));
    } else if (a.starts_with("removed DeviceTaintRule")) {
      add(Step::kDeviceTaintRulesRemoved, "");
    } else if ((rest = After(a, "requested GPU recovery of "))) {
      add(Step::kGpuRecoveryRequested, "",
          std::string(rest->substr(0, rest->find(" from the node's agent"))));
    } else if ((rest = After(a, "diagnostic "))) {
      // "diagnostic NAME requested at TIME", "diagnostic NAME done: HOW..."
      const auto requested = rest->find(" requested at ");
      const auto done = rest->find(" done: ");
      if (requested != std::string_view::npos) {
        add(Step::kDiagnosticRequested, std::string(rest->substr(requested + 14)),
            std::string(rest->substr(0, requested)));
      } else if (done != std::string_view::npos) {
        const auto how = rest->substr(done + 7);
        add(Step::kDiagnosticEnded, "",
            how.starts_with("Succeeded")       ? "Succeeded"
            : how.starts_with("Failed")        ? "Failed"
            : how.starts_with("not requested") ? "NotRequested"
                                               : "TimedOut");
      }
    } else if ((rest = After(a, "rung "))) {
      any_rung = true;
      if (auto w = ParseRungWords(*rest, "started")) {
        rung_now = w->rung;
        add(Step::kRungStarted, w->at, w->provider, w->rung);
      } else if (auto f = ParseRungWords(*rest, "failed")) {
        add(Step::kRungFailed, f->at, f->provider, f->rung);
      }
    } else if ((rest = After(a, "BMC accepted "))) {
      // "BMC accepted TYPE for PATH (power was STATE) at TIME"
      const auto at = rest->rfind(" at ");
      add(Step::kBmcResetSent,
          at == std::string_view::npos ? "" : std::string(rest->substr(at + 4)),
          std::string(rest->substr(0, rest->find(' '))), std::max<int64_t>(rung_now, 1));
    } else if ((rest = After(a, "the replacement is the node of a new "))) {
      // "Machine with KEY=VALUE in namespace NS" or "Karpenter NodeClaim"
      if (auto m = After(*rest, "Machine with ")) {
        const auto in = m->rfind(" in namespace ");
        if (in != std::string_view::npos)
          add(Step::kReplacementSource, "",
              "Machine " + std::string(m->substr(in + 14)) + " " + std::string(m->substr(0, in)));
      } else if (*rest == "Karpenter NodeClaim") {
        add(Step::kReplacementSource, "", "NodeClaim");
      }
    } else if ((rest = After(a, "held: MachineHealthCheck "))) {
      add(Step::kHeldByMachineHealthCheck, "", std::string(rest->substr(0, rest->find(' '))));
    } else if ((rest = After(a, "deleted "))) {
      add(Step::kOwnerDeleted, "", std::string(*rest));
    } else if ((rest = After(a, "awaiting a replacement in pool \""))) {
      // "awaiting a replacement in pool \"POOL\" for node uid UID since TIME"
      const auto pool_end = rest->find("\" for node uid ");
      const auto since = rest->rfind(" since ");
      const size_t uid_at = pool_end + 15;  // after "\" for node uid "
      if (pool_end != std::string_view::npos && since != std::string_view::npos &&
          since >= uid_at) {
        add(Step::kAwaitingReplacement, std::string(rest->substr(since + 7)),
            std::string(rest->substr(0, pool_end)), 0,
            std::string(rest->substr(uid_at, since - uid_at)));
      }
    }
  }
  // A record from before rungs were recorded: rung 1 started when it reached Remediating.
  if (!any_rung && r.rung_index == 0 && !r.rung.empty()) {
    if (auto it = r.phase_times.find("Remediating"); it != r.phase_times.end())
      add(Step::kRungStarted, it->second, r.rung, 1);
  }
  if (steps.empty()) return false;
  r.steps = std::move(steps);
  return true;
}

}  // namespace gpuheal::controller
