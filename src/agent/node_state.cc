#include "agent/node_state.h"

#include <fmt/format.h>

#include "core/reasons.h"

namespace gpuheal {
namespace {
// The driver prints Xid 79 and "GPU has fallen off the bus" together; within this window the
// second line is the same event, not a repetition.
constexpr auto kSameEventWindow = std::chrono::seconds(10);
// Bound on remembered keys: a storm of distinct devices must not grow memory without limit.
constexpr size_t kMaxKeys = 4096;
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
  if (now - last_prune_ < std::chrono::seconds(60) && history_.size() < kMaxKeys) return;
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
  if (recent_.size() >= kMaxKeys) recent_.clear();
  if (history_.size() >= kMaxKeys) history_.clear();  // degrade to no escalation, never to OOM
}

void NodeState::Remember(const Fault& f, Clock::time_point at) {
  if (f.xid == 79 && !f.pci.empty() && (f.kind == FaultKind::kXid || f.kind == FaultKind::kGpuFallenOffBus)) {
    lost_[f.pci] = {at, f.source};
  }
}

std::optional<Fault> NodeState::Observe(Fault f, Clock::time_point now, Merge* merge) {
  Prune(now);
  const std::string key = KeyOf(f);
  if (f.xid == 79 && !f.pci.empty() &&
      (f.kind == FaultKind::kXid || f.kind == FaultKind::kGpuFallenOffBus)) {
    auto it = lost_.find(f.pci);
    if (it != lost_.end() && now - it->second.at <= kSameEventWindow) {
      if (merge && it->second.source != f.source) *merge = {key, it->second.source};
      return std::nullopt;
    }
    lost_[f.pci] = {now, f.source};
  }
  // One fault seen through two channels; repeats within one channel still count (escalation).
  if (auto it = recent_.find(key); it != recent_.end() && now - it->second.at <= kSameEventWindow &&
                                   it->second.source != f.source) {
    if (merge) *merge = {key, it->second.source};
    return std::nullopt;
  }
  recent_[key] = {now, f.source};
  auto& q = history_[key];
  q.push_back(now);
  while (!q.empty() && now - q.front() > policy_.window) q.pop_front();
  // Bounded per key: the count saturates rather than the deque growing under a flood.
  while (q.size() > std::max<size_t>(static_cast<size_t>(policy_.count) * 4, 256)) q.pop_front();
  f.count = static_cast<int>(q.size());
  if (policy_.enabled && f.severity > Severity::kInfo && f.severity < policy_.severity &&
      *f.count >= policy_.count) {
    f.severity = policy_.severity;
    f.action = DefaultAction(f.severity);
    f.reason = reason::WithSeverity(f.reason, f.severity);
    f.escalated = true;
  }
  return f;
}

}  // namespace gpuheal
