#pragma once
// The node's fault memory: counts repetitions for escalation and merges the two driver lines
// that report one GPU falling off the bus. Owned by the agent's event-loop thread.

#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "core/config.h"
#include "core/fault.h"

namespace gpuheal {

class NodeState {
 public:
  using Clock = std::chrono::steady_clock;

  explicit NodeState(EscalationPolicy policy) : policy_(policy) {}

  // Records `f` seen at `now`. Returns the fault to report (with count, and severity, reason and
  // action raised when escalation applies), or nullopt when it repeats a fault just reported
  // through another line of the same driver message (Xid 79 and "fallen off the bus").
  // The same fault from a second source (kernel log and NVML) within seconds is one fault: nullopt,
  // and `merge` (when given) says which fault it joined.
  struct Merge {
    std::string key;
    std::string first_source;
  };
  std::optional<Fault> Observe(Fault f, Clock::time_point now, Merge* merge = nullptr);

  // A fault reported before a restart (the saved active faults), last seen at `at`: a line of the
  // same driver message read after the restart (Xid 79's companion "fallen off the bus" line,
  // when the agent was killed between the two) joins it instead of being reported again.
  void Remember(const Fault& f, Clock::time_point at);

  size_t tracked_keys() const { return history_.size(); }

  // The escalation key: Xid (or SXid) and GPU for driver faults, reason and device otherwise.
  static std::string KeyOf(const Fault& f);

 private:
  void Prune(Clock::time_point now);

  EscalationPolicy policy_;
  std::map<std::string, std::deque<Clock::time_point>> history_;
  struct Seen {
    Clock::time_point at;
    std::string source;
  };
  // Bus id -> when its GPU was last reported lost (Xid 79 or a fallen-off line), and by what.
  std::map<std::string, Seen> lost_;
  // Key -> when and by which source it was last reported (cross-source de-duplication).
  std::map<std::string, Seen> recent_;
  Clock::time_point last_prune_{};
};

}  // namespace gpuheal
