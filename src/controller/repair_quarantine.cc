// The quarantine rung: gpuheal's fault taint and a cordon it owns, written at once and undone
// by the release once every domain has been healthy for the probation period.

#include <fmt/format.h>

#include "controller/repair.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/reasons.h"
#include "core/time.h"

namespace gpuheal::controller {
namespace {

using std::chrono::milliseconds;

// `taints` (a Node's spec.taints) with gpuheal's fault taint at value:effect: every other writer's
// taint stays as it is, ours at another severity goes. Returns whether ours was there already.
bool SetFaultTaint(nlohmann::json& taints, const std::string& value, const std::string& effect,
                   std::chrono::system_clock::time_point now) {
  auto field = [](const nlohmann::json& t, const char* k) {
    auto it = t.find(k);
    return it != t.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  nlohmann::json out = nlohmann::json::array();
  bool have = false;
  if (taints.is_array()) {
    for (auto& t : taints) {
      if (!t.is_object() || field(t, "key") != keys::kFaultTaint) {
        out.push_back(std::move(t));
      } else if (field(t, "value") == value && field(t, "effect") == effect) {
        out.push_back(std::move(t));
        have = true;
      }
    }
  }
  if (!have) {
    out.push_back({{"key", keys::kFaultTaint},
                   {"value", value},
                   {"effect", effect},
                   {"timeAdded", kube::RfcTime(now)}});
  }
  taints = std::move(out);
  return have;
}

}  // namespace

bool Repairer::Quarantine(const kube::Node& node, const NodeFault& f, bool may_disrupt) {
  const std::string value(ToString(f.severity));
  const std::string effect = TaintEffectFor(node, f, may_disrupt);
  if (HasTaint(node, keys::kFaultTaint, value, effect) && node.unschedulable) return true;
  if (dry_run_) return true;
  // One write, from the cached Node: its taints are whole in the projection (key, value, effect,
  // timeAdded), and the resourceVersion in the patch makes the API server refuse it (409) if the
  // Node changed since. Quarantine is the latency-critical step; the GET of a read-modify-write
  // would cost a second round trip. On a conflict (or any refusal: a ClusterRole from before
  // gpuheal patched Nodes has no `patch`), the read-modify-write below.
  if (!node.meta.resource_version.empty()) {
    // The cached Node may be the one this replica patched a moment ago (NoSchedule, then
    // NoExecute in the same reconcile): its taints still hold, the version is the one written.
    std::string rv = node.meta.resource_version;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = quarantine_rv_.find(node.meta.name);
      if (it != quarantine_rv_.end() && it->second.first == rv) {
        rv = it->second.second;
      } else if (it != quarantine_rv_.end()) {
        quarantine_rv_.erase(it);  // the cache has moved on
      }
    }
    nlohmann::json taints = nlohmann::json::array();
    for (const auto& t : node.taints) {
      nlohmann::json j = {{"key", t.key}, {"effect", t.effect}};
      if (!t.value.empty()) j["value"] = t.value;
      if (!t.time_added.empty()) j["timeAdded"] = t.time_added;
      taints.push_back(std::move(j));
    }
    SetFaultTaint(taints, value, effect, clock_.Now());
    nlohmann::json patch = {{"metadata", {{"resourceVersion", rv}}},
                            {"spec", {{"taints", taints}}}};
    if (!node.unschedulable) {
      patch["spec"]["unschedulable"] = true;
      patch["metadata"]["annotations"] = {
          {std::string(keys::kCordonedAnnotation), "true"}};  // ours to undo
    }
    auto res = api_.Patch(kube::NodePath(node.meta.name), kube::PatchType::kMerge, patch);
    if (res && res->ok()) {
      const nlohmann::json written = nlohmann::json::parse(res->body, nullptr, false);
      std::string now_rv;
      if (written.is_object() && written.contains("metadata") && written["metadata"].is_object())
        now_rv = written["metadata"].value("resourceVersion", "");
      std::lock_guard<std::mutex> lock(mu_);
      if (now_rv.empty())
        quarantine_rv_.erase(node.meta.name);
      else
        quarantine_rv_[node.meta.name] = {node.meta.resource_version, now_rv};
      return true;
    }
    if (res && res->status != 409) {
      Log("warn",
          "quarantine: the one-write patch was refused; reading and updating the Node instead",
          {{"node", node.meta.name}, {"status", res->status}});
    }
  }
  auto res = api_.Update(kube::NodePath(node.meta.name), [&](nlohmann::json& n) {
    auto& spec = n["spec"];
    nlohmann::json taints = spec.contains("taints") ? spec["taints"] : nlohmann::json::array();
    const bool have = SetFaultTaint(taints, value, effect, clock_.Now());
    const bool cordoned = spec.contains("unschedulable") && spec["unschedulable"].is_boolean() &&
                          spec["unschedulable"].get<bool>();
    if (have && cordoned) return false;
    spec["taints"] = std::move(taints);
    if (!cordoned) {
      spec["unschedulable"] = true;
      n["metadata"]["annotations"][std::string(keys::kCordonedAnnotation)] =
          "true";  // ours to undo
    }
    return true;
  });
  return res && res->ok();
}

Next Repairer::Release(const kube::Node& node, RepairRecord* r) {
  // The node returns as the pool's standby: with pools.standby, while the pool has fewer
  // standbys than that (its own standby taint counted once); without, when a standby took its
  // place.
  bool to_standby = r && r->Done(Step::kStandbyPromoted);
  const std::string pool = PoolOf(node, policy_);
  const auto size = policy_.StandbySizeFor(pool);
  if (size && r) to_standby = ReserveStandby(pool, node.meta.name, *size);
  if (size && to_standby && dry_run_) UnreserveStandby(pool, node.meta.name);
  if (!dry_run_) {
    auto res = api_.Update(kube::NodePath(node.meta.name), [&](nlohmann::json& n) {
      bool changed = false;
      auto& spec = n["spec"];
      nlohmann::json taints = nlohmann::json::array();
      for (const auto& t : spec.value("taints", nlohmann::json::array())) {
        if (t.value("key", "") == keys::kFaultTaint)
          changed = true;
        else
          taints.push_back(t);
      }
      if (to_standby && std::none_of(taints.begin(), taints.end(), [](const nlohmann::json& t) {
            return t.value("key", "") == keys::kStandbyTaint;
          })) {
        // The standby took this node's place: after repair, this node is the pool's standby.
        taints.push_back(
            {{"key", keys::kStandbyTaint}, {"value", "true"}, {"effect", "NoSchedule"}});
        changed = true;
      }
      spec["taints"] = taints;
      auto& ann = n["metadata"]["annotations"];
      if (ann.is_object() && ann.contains(std::string(keys::kCordonedAnnotation))) {
        ann.erase(std::string(keys::kCordonedAnnotation));
        spec["unschedulable"] = false;  // only a cordon we set is lifted
        changed = true;
      }
      return changed;
    });
    if (!res || !res->ok()) {
      if (size && to_standby) UnreserveStandby(pool, node.meta.name);
      return milliseconds(2000);
    }
  }
  Event(node, "Normal", std::string(reason::kReleased),
        std::string("all domains healthy for the probation period: gpuheal's taint and cordon "
                    "removed") +
            (to_standby ? "; the node is the pool's standby" : ""));
  if (r) {
    if (to_standby) r->Action("returned as the pool's standby");
    r->Phase("Recovered", clock_.Now());
    r->Message(to_standby ? "recovered; the pool's standby" : "recovered");
    if (!WriteStatus(*r)) return milliseconds(2000);
  }
  return std::nullopt;
}

bool Repairer::ReserveStandby(const std::string& pool, const std::string& node, int size) {
  // The cache's standbys of the pool, and which of this replica's reservations it shows as
  // standbys already (counted there) or still as not (pending); one pass, nothing copied.
  std::set<std::string> reserved_now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reserved_now = standby_reserved_[pool];
  }
  int cached = 0;
  std::set<std::string> pending;
  world_.EachPoolNode(policy_, pool, [&](const kube::Node& n) {
    const bool standby = HasTaint(n, keys::kStandbyTaint, "", "");
    if (n.meta.name != node && IsStandbyOf(n, policy_, pool)) ++cached;
    if (!standby && n.meta.name != node && reserved_now.count(n.meta.name))
      pending.insert(n.meta.name);
  });
  std::lock_guard<std::mutex> lock(mu_);
  auto& reserved = standby_reserved_[pool];
  // A reservation ends once the cache shows its node as a standby (counted above) or no longer
  // has the node; `node`'s own is decided again. (One made meanwhile by another worker stays.)
  for (auto it = reserved.begin(); it != reserved.end();)
    it = (*it == node || (reserved_now.count(*it) && !pending.count(*it))) ? reserved.erase(it)
                                                                           : std::next(it);
  if (cached + static_cast<int>(reserved.size()) >= size) return false;
  reserved.insert(node);
  return true;
}

void Repairer::UnreserveStandby(const std::string& pool, const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = standby_reserved_.find(pool);
  if (it != standby_reserved_.end()) it->second.erase(node);
}

}  // namespace gpuheal::controller
