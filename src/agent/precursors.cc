#include "agent/precursors.h"

#include <vector>

namespace gpuheal {

bool PrecursorTracker::Observe(const Fault& f, SysTime now) {
  if (!config_.enabled || f.Follower() || f.pci.empty()) return false;
  const std::string signal(PrecursorSignalOf(f));
  if (signal.empty() || !config_.thresholds.count(signal)) return false;
  seen_[f.pci][signal].push_back(now);
  return Update(f.pci, now);
}

bool PrecursorTracker::Expire(SysTime now) {
  std::vector<std::string> gpus;
  for (const auto& [pci, signals] : seen_) gpus.push_back(pci);
  bool changed = false;
  for (const auto& pci : gpus) {
    changed |= Update(pci, now);
    if (seen_[pci].empty()) seen_.erase(pci);
  }
  return changed;
}

bool PrecursorTracker::ClearGpu(const std::string& pci) {
  seen_.erase(pci);
  return at_risk_.erase(pci) > 0;
}

bool PrecursorTracker::Update(const std::string& pci, SysTime now) {
  auto& signals = seen_[pci];
  std::map<std::string, int64_t> over;
  for (auto it = signals.begin(); it != signals.end();) {
    auto& times = it->second;
    while (!times.empty() && now - times.front() > config_.window) times.pop_front();
    if (times.empty()) {
      it = signals.erase(it);
      continue;
    }
    if (static_cast<int64_t>(times.size()) >= config_.thresholds.at(it->first))
      over[it->first] = static_cast<int64_t>(times.size());
    ++it;
  }
  auto cur = at_risk_.find(pci);
  const bool was = cur != at_risk_.end();
  if (over.empty()) {
    if (!was) return false;
    at_risk_.erase(cur);
    return true;
  }
  if (was && cur->second.signals == over) return false;
  AtRiskGpu& g = at_risk_[pci];
  if (!was) g.since = std::chrono::time_point_cast<std::chrono::seconds>(now);
  g.signals = std::move(over);
  return true;
}

}  // namespace gpuheal
