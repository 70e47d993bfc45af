// The exec provider: runs the operator's command (NODE_NAME and REASON in its environment; it
// may reboot or reimage the node) at most once per repair rung. Remediating and the rung's start
// are written before it runs, so a record whose rung started is one whose command this replica
// ran (its outcome kept until written) or one a predecessor started and died in: that outcome is
// unknown, and the rung ends Failed instead of waiting for ever or running the command again.

#include <fmt/format.h>

#include <map>
#include <mutex>

#include "controller/remediator.h"
#include "core/reasons.h"
#include "core/subprocess.h"

namespace gpuheal::controller {
namespace {

using std::chrono::milliseconds;
using SysTime = std::chrono::system_clock::time_point;

class Exec final : public Remediator {
 public:
  explicit Exec(RepairContext& ctx) : ctx_(ctx) {}

  Next Remediate(const kube::Node& node, const NodeFault& f, RepairRecord& r,
                 SysTime now) override {
    const Policy& policy = ctx_.policy();
    // Taken now: the status write below may move the ladder on to the next rung.
    const std::string key = r.cr.meta.name + "#" + std::to_string(r.cr.rung_index);
    Outcome outcome;
    if (r.RungStarted()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = outcomes_.find(key); it != outcomes_.end()) {
        outcome = it->second;
      } else {
        outcome.action = fmt::format(
            "did not run {} again: a controller stopped while it ran (Remediating since {}), its "
            "outcome unknown",
            policy.exec_command[0],
            r.RungSince() ? kube::MicroTime(*r.RungSince()) : std::string("?"));
        outcome.message =
            "remediation outcome unknown: check the node, then clear the fault or delete this "
            "record";
      }
    } else {
      r.Phase("Remediating", now);
      r.MarkRungStarted(now);
      // Before the command: a crash afterwards must not run it twice.
      if (!ctx_.WriteStatus(r)) return milliseconds(2000);
      auto run = RunArgv(policy.exec_command, policy.exec_timeout,
                         {{"NODE_NAME", node.meta.name}, {"REASON", f.reason}});
      outcome.ok = run && !run->timed_out && run->exit_code == 0;
      outcome.action = fmt::format("ran {}: {}", policy.exec_command[0],
                                   !run             ? run.error().message
                                   : run->timed_out ? "timed out"
                                                    : fmt::format("exit {}", run->exit_code));
      outcome.message = outcome.ok ? "remediation command succeeded" : "remediation command failed";
      std::lock_guard<std::mutex> lock(mu_);
      outcomes_[key] = outcome;
    }
    r.Action(outcome.action);
    r.Phase(outcome.ok ? "Replaced" : "Failed", now);
    r.Message(outcome.message);
    if (!ctx_.WriteStatus(r)) return milliseconds(2000);
    {
      std::lock_guard<std::mutex> lock(mu_);
      outcomes_.erase(key);
    }
    ctx_.Event(node, outcome.ok ? "Normal" : "Warning",
               std::string(outcome.ok ? reason::kRemediated : reason::kRemediationFailed),
               r.cr.message);
    return std::nullopt;
  }

 private:
  struct Outcome {
    bool ok = false;
    std::string action, message;  // for the record
  };
  RepairContext& ctx_;
  std::mutex mu_;  // workers reconcile different nodes at once
  // NodeRepair -> how this replica's command ended, kept until the record says so: a failed
  // status write must not turn a command that ran into one whose outcome is unknown.
  std::map<std::string, Outcome> outcomes_;  // NodeRepair#rung
};

}  // namespace

std::unique_ptr<Remediator> MakeExecRemediator(RepairContext& ctx) {
  return std::make_unique<Exec>(ctx);
}

}  // namespace gpuheal::controller
