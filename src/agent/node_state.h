#pragma once
// The node's fault memory: groups lines into incidents, recognises lines NVIDIA documents as the
// consequence of another fault, and decides escalation from evidence (docs/xid.md). Owned by the
// agent's event-loop thread.

#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/config.h"
#include "core/fault.h"

namespace gpuheal {

class NodeState {
 public:
  using Clock = std::chrono::steady_clock;

  explicit NodeState(EscalationPolicy policy) : policy_(policy) {}

  // Records `f` seen at `now` and returns it with what the node state decided: its incident, and
  // `repeat_of` when the line repeats an open incident (the same Xid on the same GPU and MIG
  // instance from the same process, or within the burst window when a line names no process),
  // `consequence_of` when it follows another fault (Xid 45 after another Xid on that GPU; Xid 43
  // after Xid 13, 31 or 45 of the same process or channel; the fallen-off-the-bus text after
  // Xid 79), and the escalation when a rule raised its severity. A line that repeats or follows
  // adds no action of its own; it is still reported.
  // The same fault from a second source (kernel log and NVML) within seconds is one fault:
  // nullopt, and `merge` (when given) says which fault it joined.
  struct Merge {
    std::string key;
    std::string first_source;
  };
  std::optional<Fault> Observe(Fault f, Clock::time_point now, Merge* merge = nullptr);

  // A fault reported before a restart (the saved active faults), last seen at `at`: a line of the
  // same driver message read after the restart (Xid 79's companion "fallen off the bus" line,
  // when the agent was killed between the two) follows it instead of being a new fault.
  void Remember(const Fault& f, Clock::time_point at);

  size_t tracked_keys() const { return history_.size(); }

  // The escalation key: Xid (or SXid) and GPU for driver faults, reason and device otherwise.
  static std::string KeyOf(const Fault& f);

 private:
  struct Seen {
    Clock::time_point at;
    std::string source;
    std::string incident;
  };
  struct Incident {
    std::string id;
    std::optional<int> pid;
    std::string process;
    Clock::time_point first;
    Clock::time_point last;
    Fault decided;  // severity, reason, action and escalation of the incident's first line
  };
  // A line of an Xid recently seen on a GPU, for the consequence rules.
  struct RecentXid {
    Clock::time_point at;
    int xid;
    std::optional<int> pid;
    std::optional<unsigned> channel;
  };
  // An application-attributed incident, or a hardware signal, on a GPU within the window.
  struct GpuEvidence {
    Clock::time_point at;
    std::string pci;
    int xid = 0;
    std::string what;  // "process=python3 pid=870" or the hardware signal's reason
    std::string incident;
  };

  void Prune(Clock::time_point now);
  std::optional<int> ConsequenceOf(const Fault& f, Clock::time_point now) const;
  Incident* OpenIncident(const std::string& key, const Fault& f, Clock::time_point now);
  std::string NewIncidentId(const std::string& key);
  void Escalate(Fault& f, Clock::time_point now);
  void Raise(Fault& f, std::string rule, std::vector<std::string> evidence) const;

  EscalationPolicy policy_;
  // Key -> start times of its incidents within the window (the count).
  std::map<std::string, std::deque<Clock::time_point>> history_;
  // Bus id -> when its GPU was last reported lost (Xid 79 or a fallen-off line), and by what.
  std::map<std::string, Seen> lost_;
  // Key -> when and by which source it was last reported (cross-source de-duplication).
  std::map<std::string, Seen> recent_;
  // Incident key (KeyOf + MIG instance) -> incidents still open for repeats.
  std::map<std::string, std::vector<Incident>> open_;
  std::map<std::string, std::deque<RecentXid>> recent_xids_;  // bus id -> recent Xid lines
  std::deque<GpuEvidence> app_;       // application-attributed Xid incidents
  std::deque<GpuEvidence> hardware_;  // hardware signals
  uint64_t incidents_ = 0;
  Clock::time_point last_prune_{};
};

}  // namespace gpuheal
