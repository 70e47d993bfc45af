#include "controller/budget_backoff.h"

#include <algorithm>
#include <string_view>

namespace gpuheal::controller {

std::string BudgetBackoff::BudgetName(const kube::ApiStatus& status) {
  constexpr std::string_view kPrefix = "The disruption budget ";
  for (const auto& c : status.causes) {
    if (c.type != "DisruptionBudget") continue;
    std::string_view m = c.message;
    if (!m.starts_with(kPrefix)) continue;
    m.remove_prefix(kPrefix.size());
    const size_t end = m.find(' ');
    if (end == 0) continue;
    return std::string(m.substr(0, end));
  }
  return "";
}

std::optional<BudgetBackoff::SysTime> BudgetBackoff::Wait(const std::string& pod, SysTime now) {
  std::lock_guard lock(mu_);
  const auto pb = pod_budget_.find(pod);
  if (pb == pod_budget_.end()) return std::nullopt;
  const auto it = budgets_.find(pb->second);
  if (it == budgets_.end()) {  // its budget had room since: forget the pod
    pod_budget_.erase(pb);
    return std::nullopt;
  }
  auto& b = it->second;
  if (now < b.until) return b.until;
  // This caller probes; the budget's other pods wait for its answer (Refused or Evicted) for
  // at most one more delay.
  b.until = now + b.delay;
  return std::nullopt;
}

std::string BudgetBackoff::Refused(const std::string& pod, const kube::ApiStatus& status,
                                   SysTime now) {
  const std::string name = BudgetName(status);
  const size_t slash = pod.find('/');
  const std::string key =
      name.empty() ? "" : (slash == std::string::npos ? "" : pod.substr(0, slash + 1)) + name;
  std::lock_guard lock(mu_);
  if (key.empty()) return key;
  Prune(now);
  pod_budget_[pod] = key;
  auto& b = budgets_[key];
  auto delay = b.delay.count() == 0 ? kFirst : std::min(b.delay * 2, kMax);
  delay = std::max(delay, std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::seconds(status.retry_after_seconds)));
  b.delay = delay;
  b.until = std::max(b.until, now + delay);
  return key;
}

std::optional<BudgetBackoff::SysTime> BudgetBackoff::HeldUntil(const std::string& pod) {
  std::lock_guard lock(mu_);
  const auto pb = pod_budget_.find(pod);
  if (pb == pod_budget_.end()) return std::nullopt;
  const auto it = budgets_.find(pb->second);
  if (it == budgets_.end()) return std::nullopt;
  return it->second.until;
}

std::string BudgetBackoff::BudgetOf(const std::string& pod) {
  std::lock_guard lock(mu_);
  const auto pb = pod_budget_.find(pod);
  return pb == pod_budget_.end() ? "" : pb->second;
}

void BudgetBackoff::Prune(SysTime now) {
  constexpr size_t kPrunePast = 4096;  // pods remembered before old budgets are forgotten
  if (pod_budget_.size() < kPrunePast) return;
  const auto stale = now - 4 * kMax;
  for (auto it = budgets_.begin(); it != budgets_.end();) {
    it = it->second.until < stale ? budgets_.erase(it) : std::next(it);
  }
  for (auto it = pod_budget_.begin(); it != pod_budget_.end();) {
    it = budgets_.count(it->second) ? std::next(it) : pod_budget_.erase(it);
  }
}

void BudgetBackoff::Join(const std::string& pod, const std::string& budget) {
  std::lock_guard lock(mu_);
  if (budgets_.count(budget)) pod_budget_[pod] = budget;
}

void BudgetBackoff::Evicted(const std::string& pod) {
  std::lock_guard lock(mu_);
  const auto pb = pod_budget_.find(pod);
  if (pb == pod_budget_.end()) return;
  budgets_.erase(pb->second);
  pod_budget_.erase(pb);
}

}  // namespace gpuheal::controller
