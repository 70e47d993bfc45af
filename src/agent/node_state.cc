#include "agent/node_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "core/reasons.h"
#include "core/xid_catalog.h"

namespace gpuheal {
namespace {
// The driver prints Xid 79 and "GPU has fallen off the bus" together; within this window the
// second line is the same event, not a repetition. Also the cross-source window (kmsg and NVML).
constexpr auto kSameEventWindow = std::chrono::seconds(10);
// "Within seconds": how far back a line looks for the Xid it follows from (Xid 45, Xid 43).
constexpr auto kConsequenceWindow = std::chrono::seconds(10);
// Lines that name no process join an incident this soon after its first line (one fault prints
// a line per SM, per engine, per channel: 8 Xid 13 lines in one second).
constexpr auto kBurstWindow = std::chrono::seconds(2);
// Lines of one process join its incident while they keep coming this often.
constexpr auto kProcessWindow = std::chrono::minutes(10);
// Bounds: a storm of distinct devices, processes or GPUs must not grow memory without limit.
constexpr size_t kMaxKeys = 4096;
constexpr size_t kMaxEvidence = 4096;
constexpr size_t kMaxOpenPerKey = 64;
constexpr size_t kMaxRecentPerGpu = 64;
// Evidence items an escalated event lists: with 500 programs failing on one GPU the list made
// every event line ~35 KB, and its serialisation the largest cost of a fault's detection.
constexpr size_t kMaxEvidenceShown = 10;

// At most kMaxEvidenceShown items: the oldest ones, how many more there were, and the newest.
std::vector<std::string> Shown(std::vector<std::string> items) {
  if (items.size() <= kMaxEvidenceShown) return items;
  const size_t head = kMaxEvidenceShown - 2;
  std::vector<std::string> out(std::make_move_iterator(items.begin()),
                               std::make_move_iterator(items.begin() + head));
  out.push_back(fmt::format("... {} more", items.size() - head - 1));
  out.push_back(std::move(items.back()));
  return out;
}

bool HardwareSignal(const Fault& f) {
  if (f.pci.empty()) return false;
  if (f.kind == FaultKind::kXid && f.xid) return HardwareSignalXid(*f.xid);
  return f.reason == reason::kNvidiaDoubleBitError || f.reason == reason::kNvidiaRowRemapPending ||
         f.reason == reason::kNvidiaRowRemapFailure ||
         f.reason == reason::kNvidiaRetiredPagesPending ||
         f.reason == reason::kNvidiaSingleBitErrorStorm;
}

bool Application(const Fault& f) {
  return f.kind == FaultKind::kXid && f.xid && !f.pci.empty() &&
         ApplicationXid(*f.xid, f.pid.has_value() || !f.process.empty());
}

std::string IncidentKey(const std::string& key, const Fault& f) {
  if (!f.gpu_instance && !f.compute_instance) return key;
  return fmt::format("{}/gi{}/ci{}", key, f.gpu_instance.value_or(-1),
                     f.compute_instance.value_or(-1));
}

template <typename T>
void Bound(std::deque<T>& q, size_t max) {
  while (q.size() > max) q.pop_front();
}

}  // namespace

std::string NodeState::KeyOf(const Fault& f) {
  switch (f.kind) {
    case FaultKind::kXid:
    case FaultKind::kGpuFallenOffBus:
      return fmt::format("xid/{}/{}", f.xid.value_or(0), f.pci);
    case FaultKind::kSxid:
      return fmt::format("sxid/{}/{}", f.sxid.value_or(0), f.pci);
    case FaultKind::kGpuHealth:
      return fmt::format("gpu/{}/{}/{}", f.reason, f.pci, f.device);
    default:
      return fmt::format("{}/{}/{}", f.condition, f.reason, f.device);
  }
}

void NodeState::Prune(Clock::time_point now) {
  if (now - last_prune_ < std::chrono::seconds(60) && history_.size() < kMaxKeys &&
      open_.size() < kMaxKeys)
    return;
  last_prune_ = now;
  for (auto it = history_.begin(); it != history_.end();) {
    auto& q = it->second;
    while (!q.empty() && now - q.front() > policy_.window) q.pop_front();
    it = q.empty() ? history_.erase(it) : std::next(it);
  }
  for (auto* m : {&lost_, &recent_}) {
    for (auto it = m->begin(); it != m->end();) {
      it = now - it->second.at > kSameEventWindow ? m->erase(it) : std::next(it);
    }
  }
  for (auto it = open_.begin(); it != open_.end();) {
    auto& v = it->second;
    std::erase_if(v, [&](const Incident& i) { return now - i.last > kProcessWindow; });
    it = v.empty() ? open_.erase(it) : std::next(it);
  }
  for (auto it = recent_xids_.begin(); it != recent_xids_.end();) {
    auto& q = it->second;
    while (!q.empty() && now - q.front().at > kConsequenceWindow) q.pop_front();
    it = q.empty() ? recent_xids_.erase(it) : std::next(it);
  }
  for (auto* q : {&app_, &hardware_}) {
    while (!q->empty() && now - q->front().at > policy_.window) q->pop_front();
  }
  // Degrade to no escalation and no incident grouping, never to OOM.
  if (recent_.size() >= kMaxKeys) recent_.clear();
  if (history_.size() >= kMaxKeys) history_.clear();
  if (open_.size() >= kMaxKeys) open_.clear();
  if (recent_xids_.size() >= kMaxKeys) recent_xids_.clear();
}

void NodeState::Remember(const Fault& f, Clock::time_point at) {
  if (f.xid == 79 && !f.pci.empty() &&
      (f.kind == FaultKind::kXid || f.kind == FaultKind::kGpuFallenOffBus)) {
    lost_[f.pci] = {at, f.source, f.incident};
  }
}

std::optional<int> NodeState::ConsequenceOf(const Fault& f, Clock::time_point now) const {
  if (f.xid != 45 && f.xid != 43) return std::nullopt;
  auto it = recent_xids_.find(f.pci);
  if (it == recent_xids_.end()) return std::nullopt;
  for (auto r = it->second.rbegin(); r != it->second.rend(); ++r) {
    if (now - r->at > kConsequenceWindow) break;
    // Xid 45, "preemptive cleanup, due to previous errors": not solo, it follows the other Xid.
    if (f.xid == 45 && r->xid != 45) return r->xid;
    // Xid 43, "GPU stopped processing": the channel of a process that just faulted stops too.
    if (f.xid == 43 && (r->xid == 13 || r->xid == 31 || r->xid == 45)) {
      const bool same = f.pid && r->pid ? *f.pid == *r->pid
                                        : f.channel && r->channel && *f.channel == *r->channel;
      if (same) return r->xid;
    }
  }
  return std::nullopt;
}

NodeState::Incident* NodeState::OpenIncident(const std::string& key, const Fault& f,
                                             Clock::time_point now) {
  auto it = open_.find(key);
  if (it == open_.end()) return nullptr;
  for (auto i = it->second.rbegin(); i != it->second.rend(); ++i) {
    if (f.pid && i->pid) {
      // Two processes are two faults, however close together; one process's lines are one.
      if (*f.pid == *i->pid && f.process == i->process && now - i->last <= kProcessWindow)
        return &*i;
    } else if (now - i->first <= kBurstWindow) {
      return &*i;
    }
  }
  return nullptr;
}

std::string NodeState::NewIncidentId(const std::string& key) {
  // Wall-clock milliseconds keep ids apart across restarts; the counter within one process.
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  return fmt::format("{}@{}.{}", key, ms, ++incidents_);
}

void NodeState::Raise(Fault& f, std::string rule, std::vector<std::string> evidence) const {
  f.severity = policy_.severity;
  f.action = DefaultAction(f.severity);
  f.reason = reason::WithSeverity(f.reason, f.severity);
  f.escalated = true;
  f.escalation = Fault::Escalation{std::move(rule), Shown(std::move(evidence))};
}

void NodeState::Escalate(Fault& f, Clock::time_point now) {
  const bool app = Application(f);
  const bool eligible =
      policy_.enabled && f.severity > Severity::kInfo && f.severity < policy_.severity;
  auto within = [&](const GpuEvidence& e) { return now - e.at <= policy_.window; };
  if (eligible && app) {
    // The GPU itself showed a memory fault: an application fault there is evidence against it.
    std::vector<std::string> hw;
    for (const GpuEvidence& e : hardware_) {
      if (within(e) && e.pci == f.pci)
        hw.push_back(fmt::format("{} on GPU {} (incident {})", e.what, e.pci, e.incident));
    }
    if (policy_.hardware_signal && !hw.empty()) {
      Raise(f, "hardware_signal", std::move(hw));
    } else {
      // Different programs fail the same way on one GPU while the others stay clean.
      std::set<std::string> names;
      std::vector<std::string> workloads;
      bool others_clean = true;
      for (const GpuEvidence& e : app_) {
        if (!within(e) || e.xid != *f.xid) continue;
        if (e.pci != f.pci) {
          others_clean = false;
        } else if (!e.what.empty() && names.insert(e.what.substr(0, e.what.find(" pid="))).second) {
          workloads.push_back(fmt::format("{} (incident {})", e.what, e.incident));
        }
      }
      const std::string self = fmt::format("process={}", f.process);
      if (!f.process.empty() && names.insert(self).second) {
        workloads.push_back(
            fmt::format("{} pid={} (incident {})", self, f.pid.value_or(0), f.incident));
      }
      if (others_clean && static_cast<int>(workloads.size()) >= policy_.distinct_workloads) {
        Raise(f, "distinct_workloads", std::move(workloads));
      }
    }
  } else if (eligible) {
    const int count = f.count.value_or(0);
    if (count >= policy_.count) {
      Raise(
          f, "repeated_incidents",
          {fmt::format("{} incidents of {} within {}s", count, KeyOf(f), policy_.window.count())});
    }
  }
  if (app) {
    const std::string what = f.process.empty()
                                 ? std::string()
                                 : fmt::format("process={} pid={}", f.process, f.pid.value_or(0));
    app_.push_back({now, f.pci, *f.xid, what, f.incident});
    Bound(app_, kMaxEvidence);
  }
  if (HardwareSignal(f)) {
    hardware_.push_back({now, f.pci, f.xid.value_or(0), f.reason, f.incident});
    Bound(hardware_, kMaxEvidence);
  }
}

std::optional<Fault> NodeState::Observe(Fault f, Clock::time_point now, Merge* merge) {
  Prune(now);
  const std::string key = KeyOf(f);
  const bool gpu_lost = f.xid == 79 && !f.pci.empty() &&
                        (f.kind == FaultKind::kXid || f.kind == FaultKind::kGpuFallenOffBus);
  if (gpu_lost) {
    auto it = lost_.find(f.pci);
    if (it != lost_.end() && now - it->second.at <= kSameEventWindow) {
      if (it->second.source != f.source) {
        if (merge) *merge = {key, it->second.source};
        return std::nullopt;
      }
      // One loss of the GPU: the driver's text after Xid 79 follows it; a second Xid 79 repeats it.
      f.incident = it->second.incident;
      if (f.kind == FaultKind::kGpuFallenOffBus) {
        f.consequence_of = 79;
      } else {
        f.repeat_of = it->second.incident;
      }
      return f;
    }
  }
  // One fault seen through two channels; repeats within one channel are incidents or repeats.
  if (auto it = recent_.find(key); it != recent_.end() && now - it->second.at <= kSameEventWindow &&
                                   it->second.source != f.source) {
    if (merge) *merge = {key, it->second.source};
    return std::nullopt;
  }
  recent_[key] = {now, f.source, {}};

  if (f.kind == FaultKind::kXid && f.xid && !f.pci.empty()) {
    if (!f.consequence_of) f.consequence_of = ConsequenceOf(f, now);
    auto& q = recent_xids_[f.pci];
    q.push_back({now, *f.xid, f.pid, f.channel});
    Bound(q, kMaxRecentPerGpu);
    if (f.consequence_of) return f;
  }

  const std::string ikey = IncidentKey(key, f);
  if (Incident* inc = OpenIncident(ikey, f, now)) {
    inc->last = now;
    const Fault& d = inc->decided;
    f.incident = inc->id;
    f.repeat_of = inc->id;
    f.severity = d.severity;
    f.reason = d.reason;
    f.action = d.action;
    f.escalated = d.escalated;
    f.escalation = d.escalation;
    f.count = d.count;
    return f;
  }

  f.incident = NewIncidentId(key);
  auto& q = history_[key];
  q.push_back(now);
  while (!q.empty() && now - q.front() > policy_.window) q.pop_front();
  // Bounded per key: the count saturates rather than the deque growing under a flood.
  while (q.size() > std::max<size_t>(static_cast<size_t>(policy_.count) * 4, 256)) q.pop_front();
  f.count = static_cast<int>(q.size());
  if (gpu_lost) lost_[f.pci] = {now, f.source, f.incident};
  Escalate(f, now);
  auto& open = open_[ikey];
  open.push_back({f.incident, f.pid, f.process, now, now, f});
  if (open.size() > kMaxOpenPerKey) open.erase(open.begin());
  return f;
}

}  // namespace gpuheal
