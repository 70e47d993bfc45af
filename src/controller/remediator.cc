#include "controller/remediator.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/reasons.h"

namespace gpuheal::controller {
namespace {

using std::chrono::milliseconds;

// The none provider: quarantined and drained, the node waits for its fault to clear (then the
// release) or for an operator.
class None final : public Remediator {
 public:
  Next Remediate(const kube::Node& /*node*/, const NodeFault& /*f*/, RepairRecord& r,
                 std::chrono::system_clock::time_point /*now*/) override {
    r.Message("quarantined and drained; provider none: waiting for recovery or an operator");
    return std::nullopt;
  }
};

std::unique_ptr<Remediator> Make(Provider p, RepairContext& ctx) {
  switch (p) {
    case Provider::kNone:
      return MakeNoneRemediator();
    case Provider::kStandby:
      return MakeStandbyRemediator(ctx);
    case Provider::kDeleteNode:
      return MakeDeleteNodeRemediator(ctx);
    case Provider::kExec:
      return MakeExecRemediator(ctx);
    case Provider::kRedfish:
      return MakeRedfishRemediator(ctx);
  }
  return MakeNoneRemediator();
}

// The repair ladder: the providers of the fault's severity (policy ladder, else provider alone)
// in order. A rung's provider ends a repair Failed the way it always does; when a rung follows,
// that Failed is turned, before it is written, into the next rung: the record stays
// Remediating with rung and rungIndex moved on and an action saying why. The providers keep
// their at-most-once state per rung (RepairRecord::RungStarted), so a restarted controller
// continues the rung it finds in the record.
class Ladder final : public Remediator, private RepairContext {
 public:
  Ladder(const Policy& policy, RepairContext& ctx) : ctx_(ctx) {
    std::vector<Provider> used = {policy.provider};
    for (const auto& [sev, rungs] : policy.ladder)
      used.insert(used.end(), rungs.begin(), rungs.end());
    for (Provider p : used) {
      if (!subs_.count(p)) subs_[p] = Make(p, *this);
    }
  }

  Next AtQuarantine(const kube::Node& node, const NodeFault& f, RepairRecord& r,
                    std::chrono::system_clock::time_point now) override {
    const auto rungs = Place(r);
    // provider.name standby with a ladder: the standby is promoted at quarantine whatever the
    // rungs (it only adds capacity), and the ladder repairs the node meanwhile; the repaired node
    // then becomes the pool's standby (the release).
    if (ctx_.policy().provider == Provider::kStandby &&
        rungs[r.cr.rung_index] != Provider::kStandby) {
      if (auto retry = subs_.at(Provider::kStandby)->AtQuarantine(node, f, r, now)) return retry;
    }
    return subs_.at(rungs[r.cr.rung_index])->AtQuarantine(node, f, r, now);
  }

  Next Remediate(const kube::Node& node, const NodeFault& f, RepairRecord& r,
                 std::chrono::system_clock::time_point now) override {
    const auto rungs = Place(r);
    const int64_t before = r.cr.rung_index;
    advanced_ = false;
    current_ = &r;
    rungs_ = &rungs;
    now_ = now;
    auto next = subs_.at(rungs[r.cr.rung_index])->Remediate(node, f, r, now);
    if (r.cr.phase == "Failed") Advance(r);  // a Failed not written yet
    current_ = nullptr;
    rungs_ = nullptr;
    if (r.cr.rung_index != before) return milliseconds(0);  // the next rung at once
    return next;
  }

  void Ended(const RepairRecord& r) override {
    for (auto& [p, sub] : subs_) sub->Ended(r);
  }

 private:
  // The rungs for this record's severity, and the record's place on them: as many rungs on as
  // its steps say rungs failed (the steps are the record's durable part; status.rung and
  // rungIndex repeat it for `kubectl get noderepairs`, and an older CRD may prune them).
  std::vector<Provider> Place(RepairRecord& r) const {
    auto rungs = ctx_.policy().LadderFor(r.cr.severity);
    const int64_t last = static_cast<int64_t>(rungs.size()) - 1;
    const auto failed = static_cast<int64_t>(r.All(Step::kRungFailed).size());
    const int64_t at = std::clamp<int64_t>(failed, 0, last);
    if (r.cr.rung_index != at) {
      r.cr.rung_index = at;
      r.dirty = true;
    }
    const std::string name(ToString(rungs[r.cr.rung_index]));
    if (r.cr.rung != name) {
      r.cr.rung = name;
      r.dirty = true;
    }
    // The rung's try of its provider: {redfish: 2} is two rungs of one provider in a row.
    int64_t attempt = 1;
    for (int64_t i = r.cr.rung_index; i > 0 && rungs[i - 1] == rungs[r.cr.rung_index]; --i)
      ++attempt;
    if (r.cr.rung_attempt != attempt) {
      r.cr.rung_attempt = attempt;
      r.dirty = true;
    }
    return rungs;
  }

  // Turns this reconcile's Failed into the next rung, when there is one.
  bool Advance(RepairRecord& r) {
    if (!rungs_ || r.cr.rung_index + 1 >= static_cast<int64_t>(rungs_->size())) return false;
    auto fresh = std::find_if(r.new_phases.begin(), r.new_phases.end(),
                              [](const auto& p) { return p.first == "Failed"; });
    if (fresh == r.new_phases.end()) return false;  // written before: not this reconcile's
    r.new_phases.erase(fresh);
    r.cr.phase_times.erase("Failed");
    const std::string failed = r.cr.rung, why = r.cr.message;
    r.cr.rung_index += 1;
    r.cr.rung = std::string(ToString((*rungs_)[r.cr.rung_index]));
    r.cr.rung_attempt =
        (*rungs_)[r.cr.rung_index] == (*rungs_)[r.cr.rung_index - 1] ? r.cr.rung_attempt + 1 : 1;
    r.cr.phase = "Remediating";
    r.Record(Step::kRungFailed, now_, failed, r.cr.rung_index);
    r.Action(fmt::format("rung {} {} failed at {}: {}; next: rung {} {}", r.cr.rung_index, failed,
                         kube::MicroTime(now_), why, r.cr.rung_index + 1, r.cr.rung));
    r.Message(fmt::format("rung {} ({}) failed; rung {} ({}) next", r.cr.rung_index, failed,
                          r.cr.rung_index + 1, r.cr.rung));
    advanced_ = true;
    r.dirty = true;
    return true;
  }

  // RepairContext for the providers: the ladder's own, around the controller's.
  kube::Api& api() override { return ctx_.api(); }
  const World& world() const override { return ctx_.world(); }
  const Policy& policy() const override { return ctx_.policy(); }
  bool dry_run() const override { return ctx_.dry_run(); }
  void Event(const kube::Node& node, const std::string& type, const std::string& reason,
             const std::string& message) override {
    if (advanced_ && reason == reason::kRemediationFailed && current_) {
      // The rung failed, the repair did not: say which rung comes next.
      advanced_ = false;
      ctx_.Event(node, "Warning", reason, current_->cr.message);
      return;
    }
    ctx_.Event(node, type, reason, message);
  }
  bool WriteStatus(RepairRecord& r) override {
    if (&r == current_ && r.cr.phase == "Failed") Advance(r);
    return ctx_.WriteStatus(r);
  }
  bool ReserveStandby(const std::string& pool, const std::string& node, int size) override {
    return ctx_.ReserveStandby(pool, node, size);
  }
  void UnreserveStandby(const std::string& pool, const std::string& node) override {
    ctx_.UnreserveStandby(pool, node);
  }

  RepairContext& ctx_;
  std::map<Provider, std::unique_ptr<Remediator>> subs_;
  // The reconcile in progress. Remediate runs on one worker per node at a time, but workers
  // reconcile different nodes at once: these belong to the calling thread.
  static thread_local RepairRecord* current_;
  static thread_local const std::vector<Provider>* rungs_;
  static thread_local std::chrono::system_clock::time_point now_;
  static thread_local bool advanced_;
};

thread_local RepairRecord* Ladder::current_ = nullptr;
thread_local const std::vector<Provider>* Ladder::rungs_ = nullptr;
thread_local std::chrono::system_clock::time_point Ladder::now_{};
thread_local bool Ladder::advanced_ = false;

}  // namespace

std::unique_ptr<Remediator> MakeNoneRemediator() { return std::make_unique<None>(); }

std::unique_ptr<Remediator> MakeRemediator(const Policy& policy, RepairContext& ctx) {
  return std::make_unique<Ladder>(policy, ctx);
}

}  // namespace gpuheal::controller
