// The gates that hold every disruptive step (never the quarantine): the pause, the attempt cap,
// the cluster circuit breaker and the per-pool share of nodes out of service; and the one that
// holds node-level remediation alone: an infrastructure incident of the node's failure domain.

#include <fmt/format.h>

#include <cmath>
#include <iterator>

#include "controller/repair.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/reasons.h"
#include "core/time.h"

namespace gpuheal::controller {

using std::chrono::duration_cast;

void Repairer::CheckBreakerKey(SysTime now) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!breaker_open_ || lease_name_.empty() || now - breaker_key_checked_ < std::chrono::seconds(2))
    return;
  breaker_key_checked_ = now;
  lock.unlock();
  auto res = api_.Get(kube::LeasePath(lease_namespace_, lease_name_));
  if (!res || !res->ok()) return;
  auto lease = kube::DecodeLease(res->body);
  if (!lease) return;
  auto it = lease->meta.annotations.find(std::string(keys::kBreakerReset));
  if (it == lease->meta.annotations.end()) return;
  auto at = kube::ParseTime(it->second);
  if (!at) {
    Log("warn", "ignoring an unreadable circuit breaker key: it must be an RFC 3339 UTC time",
        {{"annotation", keys::kBreakerReset}, {"value", it->second.substr(0, 64)}});
    return;
  }
  lock.lock();
  breaker_reset_at_ = std::max(breaker_reset_at_, *at);
}

void Repairer::LeaseEvent(const std::string& type, const std::string& reason,
                          const std::string& msg) {
  if (lease_name_.empty()) return;
  Enqueue(
      {{"Lease", "coordination.k8s.io/v1", lease_namespace_, lease_name_, ""}, type, reason, msg});
}

namespace {

// By GateResult::Kind: the gate's name in status.gate (a public contract), and the words its
// message begins with.
struct GateWords {
  std::string_view name, words;
};
constexpr GateWords kGateWords[] = {
    {"", ""},
    {"paused", "paused"},
    {"attempt-cap", "HardwareInspection"},
    {"breaker", "circuit breaker open"},
    {"pool", "pool gate"},
    {"incident", "infrastructure incident"},
};
static_assert(std::size(kGateWords) == static_cast<size_t>(GateResult::Kind::kIncident) + 1);

}  // namespace

std::string_view ToString(GateResult::Kind k) { return kGateWords[static_cast<size_t>(k)].words; }

std::string_view GateName(GateResult::Kind k) { return kGateWords[static_cast<size_t>(k)].name; }

void Repairer::Held(const kube::Node& node, RepairRecord& r, const GateResult& held) {
  if (r.cr.message != held.why) {
    metrics_
        .GetCounter("gpuheal_controller_blocked_total", kBlockedHelp,
                    {{"gate", std::string(ToString(held.kind))}})
        .Inc();
    Event(node, "Warning", std::string(reason::kRepairBlocked), held.why);
  }
  r.Message(held.why);
  r.Gate(GateName(held.kind));
  if (held.kind == GateResult::Kind::kAttemptCap) r.Phase("Blocked", clock_.Now());
}

GateResult Repairer::Gate(const kube::Node& node, int attempts, bool pool_gate) {
  using K = GateResult::Kind;
  const auto held = [](K kind, std::string detail) {
    return GateResult{kind, fmt::format("{}: {}", ToString(kind), detail), ""};
  };
  const auto now = clock_.Now();
  auto paused = node.meta.labels.find(std::string(keys::kPausedLabel));
  if (policy_.paused || (paused != node.meta.labels.end() && paused->second == "true")) {
    return held(K::kPaused, "disruptive actions are held (gpuheal.io/paused)");
  }
  if (attempts > policy_.max_repairs) {
    return held(
        K::kAttemptCap,
        fmt::format("{} repairs within {} h exceed the cap of {}; left quarantined", attempts,
                    duration_cast<std::chrono::hours>(policy_.repairs_window).count(),
                    policy_.max_repairs));
  }
  // Circuit breaker: a correlated event (many GPU nodes unhealthy within the window) is more
  // likely a shared cause (driver rollout, fabric, power) than bad hardware.
  CheckBreakerKey(now);
  std::unique_lock<std::mutex> lock(mu_);
  const SysTime acknowledged = breaker_reset_at_;
  lock.unlock();
  // The breaker counts the cluster's GPU nodes (an index's size) and visits the faulty ones.
  const size_t gpu_nodes = world_.GpuNodes();
  size_t recent = 0;
  world_.EachFaultyNode([&](const kube::Node& n) {
    if (n.gpu_capacity <= 0) return;
    auto nf = FaultOf(n);
    if (nf && now - nf->since <= policy_.breaker_window && nf->since > acknowledged) ++recent;
  });
  const std::string why =
      fmt::format("{} of {} GPU nodes turned unhealthy within {} s (limit {:.0f}%)", recent,
                  gpu_nodes, duration_cast<std::chrono::seconds>(policy_.breaker_window).count(),
                  policy_.breaker_share * 100);
  lock.lock();
  const bool was_open = breaker_open_;
  bool by_hand = false;
  if (gpu_nodes > 0 &&
      static_cast<double>(recent) > policy_.breaker_share * static_cast<double>(gpu_nodes)) {
    breaker_last_over_ = now;
    if (!breaker_open_) {
      breaker_opened_at_ = now;
      breaker_trips_->Inc();
    }
    breaker_open_ = true;
  } else if (breaker_open_ && (now - breaker_last_over_ >= policy_.breaker_quiet ||
                               acknowledged >= breaker_opened_at_)) {
    by_hand = acknowledged >= breaker_opened_at_;
    breaker_open_ = false;
  }
  metrics_
      .GetGauge("gpuheal_controller_breaker_open",
                "1 while the cluster circuit breaker holds evictions and remediation")
      .Set(breaker_open_ ? 1 : 0);
  const bool open = breaker_open_;
  lock.unlock();
  if (open != was_open) {
    Log(open ? "warn" : "info", open ? "circuit breaker opened" : "circuit breaker closed",
        {{"why", why}});
    LeaseEvent(open ? "Warning" : "Normal",
               std::string(open ? reason::kBreakerOpened : reason::kBreakerClosed),
               open      ? "evictions and remediation held: " + why
               : by_hand ? "closed by hand (" + std::string(keys::kBreakerReset) + ")"
                         : "closed after a quiet period: " + why);
  }
  if (open) return held(K::kBreaker, why);
  if (!pool_gate) return {};
  // Pool gate: count as Karpenter does, every unhealthy node of the pool (out of service: a
  // node-level fault; a GPU-level one leaves the node in service).
  const std::string pool = PoolOf(node, policy_);
  size_t pool_size = 0, pool_unhealthy = 0;
  world_.EachPoolNode(policy_, pool, [&](const kube::Node& n) {
    ++pool_size;
    if (FaultOf(n, false)) ++pool_unhealthy;
  });
  const size_t allowed = policy_.PoolAllowance(pool_size);
  if (pool_unhealthy > allowed) {
    return held(K::kPool,
                fmt::format("{} of {} nodes in pool \"{}\" unhealthy, at most {} repaired at once",
                            pool_unhealthy, pool_size, pool, allowed));
  }
  return {};
}

GateResult Repairer::IncidentGate(const kube::Node& node) {
  if (policy_.failure_domains.labels.empty()) return {};
  // Only nodes with a fault can make an incident: the faulty nodes, not the cluster, are copied.
  std::vector<kube::Node> faulty;
  world_.EachFaultyNode([&](const kube::Node& n) { faulty.push_back(n); });
  const std::vector<Incident> now_open = FindIncidents(faulty, policy_.failure_domains);
  std::vector<Incident> began, ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, Incident> open;
    for (const auto& inc : now_open) {
      if (!incidents_.count(inc.Domain())) began.push_back(inc);
      open.emplace(inc.Domain(), inc);
    }
    for (const auto& [domain, inc] : incidents_) {
      if (!open.count(domain)) ended.push_back(inc);
    }
    incidents_ = std::move(open);
  }
  incidents_open_->Set(static_cast<double>(now_open.size()));
  for (const auto& inc : began) {
    incidents_total_->Inc();
    const std::string why = inc.Describe(policy_.failure_domains);
    Log("warn", "infrastructure incident", {{"domain", inc.Domain()}, {"why", why}});
    LeaseEvent("Warning", std::string(reason::kIncidentOpened), why);
    for (const auto& name : inc.nodes) {
      if (auto n = world_.node(name))
        Event(*n, "Warning", std::string(reason::kIncidentOpened), why);
    }
  }
  for (const auto& inc : ended) {
    const std::string why = fmt::format(
        "{}: fewer than {} node(s) with faults that count; node-level remediation "
        "goes on",
        inc.Domain(), policy_.failure_domains.nodes);
    Log("info", "infrastructure incident ended", {{"domain", inc.Domain()}});
    LeaseEvent("Normal", std::string(reason::kIncidentClosed), why);
  }
  if (auto inc = IncidentOf(node, now_open)) {
    return GateResult{GateResult::Kind::kIncident,
                      fmt::format("{}: {}", ToString(GateResult::Kind::kIncident),
                                  inc->Describe(policy_.failure_domains)),
                      inc->Domain()};
  }
  return {};
}

}  // namespace gpuheal::controller
