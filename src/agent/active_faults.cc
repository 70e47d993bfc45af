#include "agent/active_faults.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "agent/node_state.h"
#include "core/condition_decision.h"
#include "core/file.h"
#include "core/reasons.h"
#include "core/time.h"
#include "core/xid_catalog.h"

namespace gpuheal {
namespace {

bool IsGpuFault(const Fault& f) {
  return f.kind == FaultKind::kXid || f.kind == FaultKind::kGpuFallenOffBus ||
         f.kind == FaultKind::kSxid || f.kind == FaultKind::kGpuHealth;
}

std::string Describe(const ActiveFault& a, const std::map<std::string, std::string>& gpu_notes) {
  const Fault& f = a.fault;
  std::string what;
  if (f.xid) {
    what = fmt::format("Xid {}", *f.xid);
    if (const XidInfo* info = FindXid(*f.xid)) what += fmt::format(" ({})", info->description);
  } else if (f.sxid) {
    what = fmt::format("SXid {}", *f.sxid);
  } else if (reason::IsObserved(f.reason) && !f.message.empty()) {
    // A domain monitor's own description of the state it observes (no kernel text in it).
    what = f.message;
  } else {
    what = f.reason;
  }
  std::string where;
  if (!f.pci.empty()) {
    where = "GPU " + f.pci;
    if (!f.uuid.empty()) where += " (" + f.uuid + ")";
    if (auto n = gpu_notes.find(f.pci); n != gpu_notes.end()) where += " [" + n->second + "]";
  } else if (!f.device.empty()) {
    where = f.device;
  }
  std::string s = where.empty() ? what : where + ": " + what;
  const std::string escalated =
      !f.escalated
          ? std::string()
          : fmt::format(" (escalated: {})", f.escalation ? f.escalation->rule : "repetition");
  s += fmt::format(", {}{}, seen {} time{} since {}", f.reason, escalated, a.count,
                   a.count == 1 ? "" : "s",
                   kube::RfcTime(std::chrono::system_clock::from_time_t(a.first_seen_unix)));
  if (a.sources.size() > 1) s += fmt::format(" (reported by {})", fmt::join(a.sources, " and "));
  return s;
}

}  // namespace

bool WorstFirst(const ActiveFault* a, const ActiveFault* b) {
  if (a->fault.severity != b->fault.severity) return a->fault.severity > b->fault.severity;
  if (a->first_seen_unix != b->first_seen_unix) return a->first_seen_unix < b->first_seen_unix;
  return a->key < b->key;
}

RecoveryRule RecoveryRuleOf(const Fault& f) {
  if (f.escalated) {
    // Raised on evidence of the GPU's own memory fault: it clears as that fault does (a new boot
    // with the GPU present, or a verified reset), not by going quiet, which a quarantined GPU is.
    if (f.escalation && f.escalation->rule == "hardware_signal" && !f.pci.empty()) {
      return RecoveryRule::kRebootWithGpuPresent;
    }
    return RecoveryRule::kQuietPeriod;  // a repeating warning: it stops, it clears
  }
  if (IsGpuFault(f))
    return f.pci.empty() ? RecoveryRule::kReboot : RecoveryRule::kRebootWithGpuPresent;
  const std::string& r = f.reason;
  if (reason::IsObserved(r)) return RecoveryRule::kWhileObserved;
  if (r == reason::kKernelHungTask || r == reason::kKernelSoftLockup ||
      r == reason::kKernelRcuStall || r == reason::kNetworkLinkDown ||
      r == reason::kNetworkTxTimeout) {
    return RecoveryRule::kQuietPeriod;
  }
  return RecoveryRule::kReboot;
}

std::string_view ToString(RecoveryRule r) {
  switch (r) {
    case RecoveryRule::kRebootWithGpuPresent:
      return "reboot-with-gpu-present";
    case RecoveryRule::kReboot:
      return "reboot";
    case RecoveryRule::kQuietPeriod:
      return "quiet-period";
    case RecoveryRule::kWhileObserved:
      return "while-observed";
  }
  return "reboot";
}

bool ActiveFaults::Observe(const Fault& f, int64_t now_unix, const std::string& boot_id) {
  // Fatal or worse holds a condition False; a critical fault of one GPU is held too (published in
  // gpuheal.io/gpu-faults for the controller's GPU-level rung) but flips no condition.
  const bool gpu_level = f.severity == Severity::kCritical && IsGpuFault(f) && !f.pci.empty();
  if (f.severity < Severity::kFatal && !gpu_level) return false;
  const std::string key = NodeState::KeyOf(f);
  auto [it, inserted] = faults_.try_emplace(key);
  ActiveFault& a = it->second;
  const bool worse = inserted || f.severity > a.fault.severity;
  if (inserted) {
    a.key = key;
    a.first_seen_unix = now_unix;
  }
  if (std::find(a.sources.begin(), a.sources.end(), f.source) == a.sources.end())
    a.sources.push_back(f.source);
  if (worse) a.fault = f;
  if (a.fault.uuid.empty() && !f.uuid.empty()) a.fault.uuid = f.uuid;
  a.count = std::max<int64_t>(a.count + 1, f.count.value_or(0));
  a.last_seen_unix = now_unix;
  a.boot_id = boot_id;
  return true;  // the count is in the message
}

bool ActiveFaults::AddSource(const std::string& key, const std::string& source) {
  auto it = faults_.find(key);
  if (it == faults_.end()) return false;
  auto& v = it->second.sources;
  if (std::find(v.begin(), v.end(), source) != v.end()) return false;
  v.push_back(source);
  return true;
}

bool ActiveFaults::SetGpuNote(const std::string& pci, const std::string& note) {
  auto it = gpu_notes_.find(pci);
  if (note.empty()) {
    if (it == gpu_notes_.end()) return false;
    gpu_notes_.erase(it);
    return true;
  }
  if (it != gpu_notes_.end() && it->second == note) return false;
  gpu_notes_[pci] = note;
  return true;
}

std::vector<ActiveFault> ActiveFaults::ClearAfterReboot(
    const std::string& boot_id, const std::function<bool(const std::string&)>& gpu_present) {
  std::vector<ActiveFault> cleared;
  for (auto it = faults_.begin(); it != faults_.end();) {
    const ActiveFault& a = it->second;
    const bool older_boot = a.boot_id != boot_id;
    const bool clears =
        older_boot && (RecoveryRuleOf(a.fault) != RecoveryRule::kRebootWithGpuPresent ||
                       gpu_present(a.fault.pci));
    if (clears) {
      cleared.push_back(a);
      it = faults_.erase(it);
    } else {
      ++it;
    }
  }
  return cleared;
}

std::vector<ActiveFault> ActiveFaults::ClearObserved(const std::string& source,
                                                     const std::vector<std::string>& current) {
  std::vector<ActiveFault> cleared;
  for (auto it = faults_.begin(); it != faults_.end();) {
    const ActiveFault& a = it->second;
    if (RecoveryRuleOf(a.fault) == RecoveryRule::kWhileObserved && a.fault.source == source &&
        std::find(current.begin(), current.end(), a.key) == current.end()) {
      cleared.push_back(a);
      it = faults_.erase(it);
    } else {
      ++it;
    }
  }
  return cleared;
}

std::vector<ActiveFault> ActiveFaults::ClearQuiet(int64_t now_unix,
                                                  std::chrono::seconds quiet_period) {
  std::vector<ActiveFault> cleared;
  for (auto it = faults_.begin(); it != faults_.end();) {
    const ActiveFault& a = it->second;
    if (RecoveryRuleOf(a.fault) == RecoveryRule::kQuietPeriod &&
        now_unix - a.last_seen_unix >= quiet_period.count()) {
      cleared.push_back(a);
      it = faults_.erase(it);
    } else {
      ++it;
    }
  }
  return cleared;
}

std::vector<ActiveFault> ActiveFaults::ClearGpu(const std::string& pci) {
  std::vector<ActiveFault> cleared;
  for (auto it = faults_.begin(); it != faults_.end();) {
    if (IsGpuFault(it->second.fault) && it->second.fault.pci == pci) {
      cleared.push_back(it->second);
      it = faults_.erase(it);
    } else {
      ++it;
    }
  }
  return cleared;
}

size_t ActiveFaults::ConditionFaults() const {
  size_t n = 0;
  for (const auto& [k, a] : faults_) n += a.fault.severity >= Severity::kFatal;
  return n;
}

GpuFaults ActiveFaults::GpuLevel() const {
  GpuFaults out;
  for (const auto& [k, a] : faults_) {
    if (!IsGpuFault(a.fault) || a.fault.pci.empty()) continue;
    GpuFaultEntry e;
    e.severity = a.fault.severity;
    e.reason = a.fault.reason;
    e.xid = a.fault.xid.value_or(0);
    e.since = std::chrono::system_clock::from_time_t(a.first_seen_unix);
    e.count = std::max<int64_t>(1, a.count);
    auto [it, inserted] = out.try_emplace(a.fault.pci, e);
    // The worst fault of the GPU; among equals the earliest.
    if (!inserted && (e.severity > it->second.severity ||
                      (e.severity == it->second.severity && e.since < it->second.since))) {
      it->second = e;
    }
  }
  return out;
}

std::vector<DesiredCondition> ActiveFaults::Conditions(const MonitorSwitches& enabled) const {
  std::vector<DesiredCondition> out;
  for (Condition c : kAllConditions) {
    if (!enabled.On(c)) continue;
    const std::string type(ToString(c));
    std::vector<const ActiveFault*> mine;
    for (const auto& [k, a] : faults_) {
      if (a.fault.condition == type && a.fault.severity >= Severity::kFatal) mine.push_back(&a);
    }
    if (mine.empty()) {
      out.push_back({type, "True", std::string(reason::HealthyReason(c)), ""});
      continue;
    }
    // Worst first; among equals, the earliest.
    std::sort(mine.begin(), mine.end(), WorstFirst);
    // The decision first (core/condition_decision.h): the controller acts on the agent's severity
    // and action, overrides and escalations included, not on its own reading of the reason.
    std::string msg = DecisionPrefix({mine[0]->fault.severity, mine[0]->fault.action}) +
                      Describe(*mine[0], gpu_notes_);
    if (mine.size() > 1) {
      msg += "; also: ";
      for (size_t i = 1; i < mine.size(); ++i) {
        if (i > 1) msg += "; ";
        std::string next = Describe(*mine[i], gpu_notes_);
        if (msg.size() + next.size() > 1000) {
          msg += fmt::format("and {} more", mine.size() - i);
          break;
        }
        msg += next;
      }
    }
    out.push_back({type, "False", mine[0]->fault.reason, msg});
  }
  return out;
}

nlohmann::json ActiveFaults::ToJson() const {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& [k, a] : faults_) {
    const Fault& f = a.fault;
    nlohmann::json j = {{"key", a.key},
                        {"kind", std::string(ToString(f.kind))},
                        {"severity", std::string(ToString(f.severity))},
                        {"action", std::string(ToString(f.action))},
                        {"condition", f.condition},
                        {"reason", f.reason},
                        {"message", f.message},
                        {"count", a.count},
                        {"first_seen_unix", a.first_seen_unix},
                        {"last_seen_unix", a.last_seen_unix},
                        {"boot_id", a.boot_id}};
    if (f.xid) j["xid"] = *f.xid;
    if (f.sxid) j["sxid"] = *f.sxid;
    if (!f.pci.empty()) j["pci"] = f.pci;
    if (!f.uuid.empty()) j["uuid"] = f.uuid;
    if (!f.device.empty()) j["device"] = f.device;
    if (f.escalated) j["escalated"] = true;
    if (f.escalation) j["escalation_rule"] = f.escalation->rule;
    if (!f.incident.empty()) j["incident"] = f.incident;
    if (!a.sources.empty()) j["sources"] = a.sources;
    arr.push_back(std::move(j));
  }
  return {{"version", 1}, {"active_faults", arr}};
}

Result<ActiveFaults> ActiveFaults::FromJson(const nlohmann::json& j) {
  ActiveFaults out;
  try {
    if (j.value("version", 0) != 1) return Error{"unknown version"};
    for (const auto& e : j.at("active_faults")) {
      ActiveFault a;
      a.key = e.at("key").get<std::string>();
      Fault& f = a.fault;
      const std::string kind = e.at("kind").get<std::string>();
      bool kind_ok = false;
      for (FaultKind k : {FaultKind::kXid, FaultKind::kGpuFallenOffBus, FaultKind::kSxid,
                          FaultKind::kKernel, FaultKind::kStorage, FaultKind::kNetwork,
                          FaultKind::kRule, FaultKind::kGpuHealth, FaultKind::kRuntime}) {
        if (ToString(k) == kind) {
          f.kind = k;
          kind_ok = true;
        }
      }
      auto sev = ParseSeverity(e.at("severity").get<std::string>());
      if (!kind_ok || !sev) return Error{"active fault " + a.key + ": bad kind or severity"};
      f.severity = *sev;
      // The action decided when the fault was seen (a config override included): a restarted agent
      // reports the same decision. Files from before it was kept: the severity's default.
      const auto action = e.contains("action") ? ParseAction(e["action"].get<std::string>())
                                               : DefaultAction(f.severity);
      if (!action) return Error{"active fault " + a.key + ": bad action"};
      f.action = *action;
      f.condition = e.at("condition").get<std::string>();
      f.reason = e.at("reason").get<std::string>();
      f.message = e.value("message", "");
      if (e.contains("xid")) f.xid = e["xid"].get<int>();
      if (e.contains("sxid")) f.sxid = e["sxid"].get<int>();
      f.pci = e.value("pci", "");
      f.uuid = e.value("uuid", "");
      f.device = e.value("device", "");
      f.escalated = e.value("escalated", false);
      if (e.contains("escalation_rule"))
        f.escalation = Fault::Escalation{e["escalation_rule"].get<std::string>(), {}};
      f.incident = e.value("incident", "");
      if (e.contains("sources")) a.sources = e["sources"].get<std::vector<std::string>>();
      if (!a.sources.empty()) f.source = a.sources.front();
      a.count = e.at("count").get<int64_t>();
      a.first_seen_unix = e.at("first_seen_unix").get<int64_t>();
      a.last_seen_unix = e.at("last_seen_unix").get<int64_t>();
      a.boot_id = e.at("boot_id").get<std::string>();
      out.faults_[a.key] = std::move(a);
    }
  } catch (const nlohmann::json::exception& e) {
    return Error{std::string("malformed: ") + e.what()};
  }
  return out;
}

std::string ActiveFaults::Serialize() const { return ToJson().dump() + "\n"; }

Status ActiveFaults::Write(const std::string& path, const std::string& text) {
  return WriteFileAtomic(path, text);
}

Status ActiveFaults::Sync(const std::string& path) {
  for (const std::string& p : {path, std::filesystem::path(path).parent_path().string()}) {
    const int fd = open(p.empty() ? "." : p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Error{fmt::format("{}: {}", p, std::strerror(errno))};
    const int rc = fsync(fd);
    const int err = errno;
    close(fd);
    if (rc != 0) return Error{fmt::format("fsync {}: {}", p, std::strerror(err))};
  }
  return Status::Ok();
}

Result<ActiveFaults> ActiveFaults::Load(const std::string& path) {
  if (!std::filesystem::exists(path)) return ActiveFaults{};
  auto text = ReadWholeFile(path);
  if (!text) return Error{path + ": cannot read"};
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return Error{path + ": not JSON"};
  auto r = FromJson(j);
  if (!r) return Error{path + ": " + r.error().message};
  return r;
}

bool GpuPresent(const std::string& pci, const std::string& sysfs_pci_devices) {
  if (pci.empty()) return false;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(sysfs_pci_devices, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > pci.size() && name.compare(0, pci.size(), pci) == 0 &&
        name[pci.size()] == '.')
      return true;
  }
  return false;
}

}  // namespace gpuheal
