// The standby provider. Promotion (gpuheal.io/standby removed from a healthy standby node of the
// same pool) happens at quarantine, not after the toleration window: it only adds capacity, so
// the pods evicted from the faulty node have somewhere to run at once, and no gate holds it (it
// disrupts nothing). The remediation is that the standby has the node's place until the node
// recovers; the release then makes the recovered node the pool's standby.

#include "controller/remediator.h"
#include "core/keys.h"
#include "core/reasons.h"

namespace gpuheal::controller {
namespace {

using std::chrono::milliseconds;
using SysTime = std::chrono::system_clock::time_point;

class Standby final : public Remediator {
 public:
  explicit Standby(RepairContext& ctx) : ctx_(ctx) {}

  Next AtQuarantine(const kube::Node& node, const NodeFault& /*f*/, RepairRecord& r,
                    SysTime now) override {
    return Promote(node, r, now);
  }

  Next Remediate(const kube::Node& node, const NodeFault& /*f*/, RepairRecord& r,
                 SysTime now) override {
    // Usually promoted at quarantine already; here the remediation is that the standby has the
    // node's place until the node recovers.
    if (!r.Done(Step::kStandbyPromoted)) {
      if (auto retry = Promote(node, r, now)) return retry;
      if (!r.Done(Step::kStandbyPromoted)) return milliseconds(30000);
    }
    if (!r.At("Remediating")) r.Phase("Remediating", now);
    r.Message(
        "drained; a standby node has this node's place, and this node becomes the pool's standby "
        "once it recovers");
    return std::nullopt;
  }

 private:
  Next Promote(const kube::Node& node, RepairRecord& r, SysTime now) {
    if (ctx_.dry_run() || r.Done(Step::kStandbyPromoted)) return std::nullopt;
    const std::string pool = PoolOf(node, ctx_.policy());
    for (const auto& n : ctx_.world().PoolNodes(ctx_.policy(), pool)) {
      if (n.meta.name == node.meta.name || FaultOf(n) || !HasTaint(n, keys::kStandbyTaint, "", ""))
        continue;
      bool released = false;
      auto res = ctx_.api().Update(kube::NodePath(n.meta.name), [&](nlohmann::json& j) {
        nlohmann::json taints = nlohmann::json::array();
        for (const auto& t : j["spec"].value("taints", nlohmann::json::array())) {
          if (t.value("key", "") != keys::kStandbyTaint) taints.push_back(t);
        }
        // Another faulty node of the pool may have taken it meanwhile (read fresh on a conflict).
        released = taints.size() != j["spec"].value("taints", nlohmann::json::array()).size();
        j["spec"]["taints"] = taints;
        return released;
      });
      if (!res || !res->ok()) return milliseconds(2000);
      if (!released) continue;
      r.Record(Step::kStandbyPromoted, now, n.meta.name);
      r.Action("promoted standby " + n.meta.name);
      ctx_.Event(
          node, "Normal", std::string(reason::kStandbyPromoted),
          "standby " + n.meta.name + " promoted; this node becomes the standby once it recovers");
      return std::nullopt;
    }
    r.Message("no ready standby node in pool \"" + pool + "\"");
    return std::nullopt;
  }

  RepairContext& ctx_;
};

}  // namespace

std::unique_ptr<Remediator> MakeStandbyRemediator(RepairContext& ctx) {
  return std::make_unique<Standby>(ctx);
}

}  // namespace gpuheal::controller
