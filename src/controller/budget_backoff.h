#pragma once
// Evictions refused by a PodDisruptionBudget (429) are retried per budget, not per node or per
// controller: every node's record that holds a pod of a full budget would otherwise ask the API
// server again every few seconds, each refusal a read of the budget. The first refusal of a pod
// names its budget (the Status cause the API server sends); from then on the pods known to be
// under that budget wait for one probe per budget, whose delay doubles with each refusal
// (kFirst, 2x, ... kMax, at least the server's retryAfterSeconds) and resets when an eviction
// under the budget goes through. Pods of other budgets, and pods not yet refused, are not held.
// Thread-safe: the controller's workers reconcile different nodes at once.

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "kube/objects.h"

namespace gpuheal::controller {

class BudgetBackoff {
 public:
  using SysTime = std::chrono::system_clock::time_point;
  static constexpr std::chrono::milliseconds kFirst{1000};
  static constexpr std::chrono::milliseconds kMax{16000};

  // When `pod` ("namespace/name") may next be evicted, if it must wait; nullopt: evict now. A
  // caller told "now" for a pod under a held budget takes that budget's probe: the others wait.
  std::optional<SysTime> Wait(const std::string& pod, SysTime now);

  // The Eviction API refused `pod` with 429 and this Status: its budget ("namespace/name", ""
  // when the Status names none) is held. Returns the budget's key.
  std::string Refused(const std::string& pod, const kube::ApiStatus& status, SysTime now);

  // `pod` is under `budget` ("namespace/name"), which is held: it waits with the budget's pods.
  void Join(const std::string& pod, const std::string& budget);

  // `pod` was evicted: its budget, if known, has room again.
  void Evicted(const std::string& pod);

  // The budget ("namespace/name") a refusal tied `pod` to, "" if none.
  std::string BudgetOf(const std::string& pod);

  // Until when `pod`'s budget is held (nullopt: not held), without taking its probe.
  std::optional<SysTime> HeldUntil(const std::string& pod);

  // The budget a refusal's Status names ("" if none): the name in the message of its cause of
  // type "DisruptionBudget" ("The disruption budget NAME needs 2 healthy pods ...").
  static std::string BudgetName(const kube::ApiStatus& status);

 private:
  struct Budget {
    SysTime until{};
    std::chrono::milliseconds delay{0};  // the last wait; 0: not held
  };
  // Forgets the pods of budgets not held for a while (pods deleted by others never report).
  void Prune(SysTime now);

  std::mutex mu_;
  std::map<std::string, std::string> pod_budget_;  // pod -> budget key
  std::map<std::string, Budget> budgets_;
};

}  // namespace gpuheal::controller
