// The delete-node provider: deletes the node's owner (a Cluster API Machine or a Karpenter
// NodeClaim, proven from the owner's side) so that its provisioner replaces the machine, or the
// Node object itself when nothing owns it. At most once: the uid precondition, and a 404 is done.
// It defers to the owner's own rules: a Machine a MachineHealthCheck selects is left to it, and
// karpenter.sh/do-not-disrupt=true (on the Node or its NodeClaim) holds the deletion.
//
// Deleting is half of it: the repair stays Remediating until a replacement joins the node's pool
// (a node created since the repair began, Ready, the fault's condition True, no fault of its own;
// when an owner was deleted, the node of its provisioner's new Machine or NodeClaim: the step
// ReplacementSource),
// which the controller marks with gpuheal.io/replaces (one replacement per repair, claimed with
// an optimistic-concurrency update) and, while the pool has fewer standbys than pools.standby,
// makes the pool's standby. No replacement within provider.replacement_timeout: Failed.

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "controller/remediator.h"
#include "core/keys.h"
#include "core/reasons.h"
#include "core/time.h"
#include "kube/selector.h"

namespace gpuheal::controller {
namespace {

using std::chrono::milliseconds;
using SysTime = std::chrono::system_clock::time_point;

// A Node's owner, proven from the owner's side: the Node's own annotations are written by an
// identity the agent shares, so they only say where to look, never what to delete.
struct Owner {
  std::string path, uid, what;  // path "": no owner; the Node object itself is deleted
  std::string unproven;         // set: the Node names an owner that does not name it back
  bool gone = false;            // unproven because the named owner does not exist (404)
  std::string held;             // set: the owner is proven, but another party decides (why)
  std::string held_by_mhc;      // NAMESPACE/NAME: the MachineHealthCheck that decides
  // Where the owner's replacement comes from, the step ReplacementSource's detail: "" (no owner,
  // or a Machine no MachineSet keeps), "Machine NAMESPACE KEY=VALUE" (Cluster API: the owner's
  // MachineDeployment, else its MachineSet, makes the new Machine), or "NodeClaim" (Karpenter
  // launches for the evicted pods). Without it (the Node object itself was deleted) any node
  // that joins the pool counts.
  std::string source;
};

constexpr std::string_view kSourceMachine = "Machine ";
constexpr std::string_view kSourceNodeClaim = "NodeClaim";

// The source in words, for the record's actions.
std::string SourceWords(const std::string& source) {
  if (source == kSourceNodeClaim) return "the replacement is the node of a new Karpenter NodeClaim";
  const std::string rest = source.substr(kSourceMachine.size());
  const auto space = rest.find(' ');
  return fmt::format("the replacement is the node of a new Machine with {} in namespace {}",
                     rest.substr(space + 1), rest.substr(0, space));
}

// The version of Cluster API's group that gpuheal reads: v1beta2 where the group serves it (its
// storage version since Cluster API v1.11, so no conversion webhook stands between gpuheal and
// the Machine, and no deprecation warning), else v1beta1. A group that is not served at all gets
// v1beta2: the Machine's read then answers 404 like any Machine that does not exist. nullopt:
// the API server could not tell (ask again).
std::optional<std::string> CapiVersion(kube::Api& client) {
  auto res = client.Get("/apis/cluster.x-k8s.io");
  if (!res || res->status == 429 || res->status >= 500) return std::nullopt;
  if (!res->ok()) return "v1beta2";
  const auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_object() && j.contains("versions") && j["versions"].is_array()) {
    for (const auto& v : j["versions"]) {
      if (v.is_object() && v.value("version", "") == "v1beta2") return "v1beta2";
    }
  }
  return "v1beta1";
}

// nullopt: the API server could not tell (ask again).
std::optional<Owner> OwnerOf(kube::Api& client, const kube::Node& node) {
  Owner o;
  auto field = [](const nlohmann::json& j, std::initializer_list<const char*> path) {
    const nlohmann::json* cur = &j;
    for (const char* k : path) {
      if (!cur->is_object() || !cur->contains(k)) return std::string();
      cur = &(*cur)[k];
    }
    return cur->is_string() ? cur->get<std::string>() : std::string();
  };
  auto machine = node.meta.annotations.find(std::string(kube::kCapiMachineAnnotation));
  auto ns = node.meta.annotations.find(std::string(kube::kCapiNamespaceAnnotation));
  if (machine != node.meta.annotations.end() && ns != node.meta.annotations.end()) {
    const auto version = CapiVersion(client);
    if (!version) return std::nullopt;
    o.path = fmt::format("/apis/cluster.x-k8s.io/{}/namespaces/{}/machines/{}", *version,
                         ns->second, machine->second);
    o.what = fmt::format("Cluster API Machine {}/{}", ns->second, machine->second);
    auto res = client.Get(o.path);
    if (!res || res->status == 429 || res->status >= 500) return std::nullopt;
    if (!res->ok()) {
      o.gone = res->status == 404;
      o.unproven = o.gone ? "it does not exist" : "it cannot be read: " + res->Describe();
      return o;
    }
    const auto j = nlohmann::json::parse(res->body, nullptr, false);
    const std::string ref = field(j, {"status", "nodeRef", "name"});
    if (ref != node.meta.name) {
      o.unproven =
          ref.empty() ? "its status.nodeRef names no node" : "its status.nodeRef names node " + ref;
      return o;
    }
    o.uid = field(j, {"metadata", "uid"});
    // The MachineSet that keeps this Machine's count makes its replacement: under a
    // MachineDeployment the deployment's label (it survives a rollout's new MachineSet).
    for (const char* key : {"cluster.x-k8s.io/deployment-name", "cluster.x-k8s.io/set-name"}) {
      const std::string value = field(j, {"metadata", "labels", key});
      if (value.empty()) continue;
      o.source = fmt::format("{}{} {}={}", kSourceMachine, ns->second, key, value);
      break;
    }
    // A MachineHealthCheck that selects this Machine remediates it by its own rules: deleting the
    // Machine too would race it. The node stays quarantined and drained; the MHC acts.
    auto mhcs = client.Get(fmt::format(
        "/apis/cluster.x-k8s.io/{}/namespaces/{}/machinehealthchecks", *version, ns->second));
    if (!mhcs || (!mhcs->ok() && mhcs->status != 404)) return std::nullopt;
    if (mhcs->ok()) {
      const auto list = nlohmann::json::parse(mhcs->body, nullptr, false);
      std::map<std::string, std::string> labels;
      if (j.contains("metadata") && j["metadata"].contains("labels") &&
          j["metadata"]["labels"].is_object()) {
        for (const auto& [k, v] : j["metadata"]["labels"].items()) {
          if (v.is_string()) labels[k] = v.get<std::string>();
        }
      }
      const std::string cluster = field(j, {"spec", "clusterName"});
      if (list.is_object() && list.contains("items") && list["items"].is_array()) {
        for (const auto& mhc : list["items"]) {
          if (field(mhc, {"spec", "clusterName"}) != cluster || !mhc.contains("spec") ||
              !mhc["spec"].contains("selector"))
            continue;
          auto match = kube::SelectorMatches(mhc["spec"]["selector"], labels);
          if (match && *match) {
            o.held_by_mhc = ns->second + "/" + field(mhc, {"metadata", "name"});
            o.held = fmt::format(
                "held: MachineHealthCheck {} selects this node's Machine and remediates it: the "
                "node stays quarantined and drained, gpuheal does not delete the Machine",
                o.held_by_mhc);
            break;
          }
        }
      }
    }
    return o;
  }
  auto list = client.Get("/apis/karpenter.sh/v1/nodeclaims");
  if (!list || (!list->ok() && list->status != 404))
    return std::nullopt;  // cannot tell whether Karpenter owns it
  const auto j = list->ok() ? nlohmann::json::parse(list->body, nullptr, false) : nlohmann::json();
  if (!j.is_object() || !j.contains("items") || !j["items"].is_array()) return o;
  for (const auto& item : j["items"]) {
    const std::string name = field(item, {"metadata", "name"});
    const std::string provider_id = field(item, {"status", "providerID"});
    if (name.empty()) continue;
    if (field(item, {"status", "nodeName"}) == node.meta.name ||
        (!provider_id.empty() && provider_id == node.provider_id)) {
      o.path = "/apis/karpenter.sh/v1/nodeclaims/" + name;
      o.what = "Karpenter NodeClaim " + name;
      o.uid = field(item, {"metadata", "uid"});
      o.source = std::string(kSourceNodeClaim);
      // Karpenter's own opt-out of disruption, on the Node or its NodeClaim: respected.
      const std::string key(kube::kKarpenterDoNotDisrupt);
      auto on_node = node.meta.annotations.find(key);
      const bool node_says = on_node != node.meta.annotations.end() && on_node->second == "true";
      const bool claim_says = item.contains("metadata") &&
                              item["metadata"].contains("annotations") &&
                              field(item, {"metadata", "annotations", key.c_str()}) == "true";
      if (node_says || claim_says) {
        o.held = fmt::format(
            "held: {}=true on {}: its NodeClaim is not deleted; remove the annotation to let the "
            "replacement go on",
            key, node_says ? "the Node" : "NodeClaim " + name);
      }
      return o;
    }
  }
  return o;
}

// The step that opens the wait (AwaitingReplacement: the pool, the replaced Node's uid, since
// when), written once the deletion went through.
constexpr milliseconds kReplacementRecheck{10000};

struct Awaiting {
  std::string pool, uid;
  SysTime since;
};

std::optional<Awaiting> AwaitingOf(const RepairRecord& r) {
  const auto* s = r.Last(Step::kAwaitingReplacement);
  if (!s) return std::nullopt;
  auto t = kube::ParseTime(s->at);
  if (!t) return std::nullopt;
  return Awaiting{s->detail, s->uid, *t};
}

// The nodes that may be the replacement by the record's ReplacementSource: those named (nodeRef,
// nodeName, providerID) by the provisioner's objects created since `after`. nullopt: the record
// names no provisioner (any node counts); an error: they could not be listed now.
Result<std::optional<std::set<std::string>>> LinkedNodes(kube::Api& client, const RepairRecord& r,
                                                         const std::vector<kube::Node>& nodes,
                                                         SysTime after) {
  const auto* step = r.Last(Step::kReplacementSource);
  const std::string source = step ? step->detail : "";
  if (source.empty()) return std::optional<std::set<std::string>>();
  std::string path;
  if (source.starts_with(kSourceMachine)) {
    // "Machine NAMESPACE KEY=VALUE"
    const std::string rest = source.substr(kSourceMachine.size());
    const auto space = rest.find(' ');
    if (space == std::string::npos) return std::optional<std::set<std::string>>();
    const auto version = CapiVersion(client);
    if (!version) return Error{"the Cluster API group's versions could not be read"};
    path = fmt::format("/apis/cluster.x-k8s.io/{}/namespaces/{}/machines?labelSelector={}",
                       *version, rest.substr(0, space), kube::UrlEncode(rest.substr(space + 1)));
  } else if (source == kSourceNodeClaim) {
    path = "/apis/karpenter.sh/v1/nodeclaims";
  } else {
    return std::optional<std::set<std::string>>();
  }
  auto res = client.Get(path);
  if (!res || !res->ok()) return Error{path + ": " + (res ? res->Describe() : res.error().message)};
  const auto list = nlohmann::json::parse(res->body, nullptr, false);
  std::map<std::string, std::string> by_provider_id;
  for (const auto& n : nodes) {
    if (!n.provider_id.empty()) by_provider_id[n.provider_id] = n.meta.name;
  }
  std::set<std::string> out;
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array()) return {out};
  for (const auto& item : list["items"]) {
    if (!item.is_object()) continue;
    const auto meta = item.value("metadata", nlohmann::json::object());
    const auto created = kube::ParseTime(meta.value("creationTimestamp", ""));
    if (!created || *created < after || meta.contains("deletionTimestamp")) continue;
    const auto status = item.value("status", nlohmann::json::object());
    // Machine: status.nodeRef.name, spec.providerID; NodeClaim: status.nodeName, .providerID.
    const auto ref = status.value("nodeRef", nlohmann::json::object());
    for (const std::string& name :
         {ref.is_object() ? ref.value("name", "") : std::string(), status.value("nodeName", "")}) {
      if (!name.empty()) out.insert(name);
    }
    for (const std::string& id :
         {item.value("spec", nlohmann::json::object()).value("providerID", ""),
          status.value("providerID", "")}) {
      if (auto it = by_provider_id.find(id); !id.empty() && it != by_provider_id.end())
        out.insert(it->second);
    }
  }
  return {out};
}

void StartAwaiting(const Policy& policy, const kube::Node& node, RepairRecord& r, SysTime now) {
  const std::string pool = PoolOf(node, policy);
  r.Record(Step::kAwaitingReplacement, now, pool, 0, node.meta.uid);
  r.Action(fmt::format("awaiting a replacement in pool \"{}\" for node uid {} since {}", pool,
                       node.meta.uid, kube::MicroTime(now)));
}

class DeleteNode final : public Remediator {
 public:
  explicit DeleteNode(RepairContext& ctx) : ctx_(ctx) {}
  Next Remediate(const kube::Node& node, const NodeFault& f, RepairRecord& r, SysTime now) override;

 private:
  RepairContext& ctx_;
};

Next DeleteNode::Remediate(const kube::Node& node, const NodeFault& /*f*/, RepairRecord& r,
                           SysTime now) {
  r.Phase("Remediating", now);
  if (AwaitingOf(r)) return AwaitReplacement(ctx_, r, now);
  // The owner, when there is one, so that its controller replaces the machine; else the Node
  // object itself. Deleted at most once (uid precondition; 404 is done).
  const bool deleted_before = r.Done(Step::kOwnerDeleted);
  auto owner = OwnerOf(ctx_.api(), node);
  if (!owner) return milliseconds(2000);
  if (owner->gone && r.Done(Step::kHeldByMachineHealthCheck)) {
    // The MachineHealthCheck this repair deferred to deleted the Machine: its replacement runs.
    r.Action("the Machine is gone: its MachineHealthCheck remediated the node");
    if (ctx_.policy().replacement_timeout.count() > 0) {
      StartAwaiting(ctx_.policy(), node, r, now);
      return AwaitReplacement(ctx_, r, now);
    }
    r.Phase("Replaced", now);
    r.Message("the MachineHealthCheck deleted the node's Machine: its provisioner replaces it");
    return std::nullopt;
  }
  // Which provisioner's new object the replacement must be, once (the MachineHealthCheck's
  // remediation below finds the Machine gone: recorded while it was there).
  if (!owner->source.empty() && owner->unproven.empty() && !r.Done(Step::kReplacementSource)) {
    r.Record(Step::kReplacementSource, now, owner->source);
    r.Action(SourceWords(owner->source));
  }
  if (owner->unproven.empty() && !owner->held.empty()) {
    if (!owner->held_by_mhc.empty())
      r.Record(Step::kHeldByMachineHealthCheck, now, owner->held_by_mhc);
    r.Action(owner->held);
    r.Message(owner->held);
    return milliseconds(30000);
  }
  if (!owner->unproven.empty() && !(owner->gone && deleted_before)) {
    // A Node that names an owner which does not name it back: deleting that owner could replace
    // another node's machine, and deleting just the Node object would not replace this one.
    const std::string why = fmt::format("the Node names {} ({}), but {}", owner->what,
                                        kube::kCapiMachineAnnotation, owner->unproven);
    r.Action("did not delete " + owner->what + ": ownership not proven");
    r.Phase("Failed", now, "owner not proven: " + why);
    r.Message("owner not proven: " + why + "; the node stays quarantined until an operator looks");
    ctx_.Event(node, "Warning", std::string(reason::kRemediationFailed), r.cr.message);
    return std::nullopt;
  }
  if (owner->path.empty()) {
    owner->path = kube::NodePath(node.meta.name);
    owner->uid = node.meta.uid;
    owner->what = "the Node object";
  }
  r.Record(Step::kOwnerDeleted, now, owner->what);
  r.Action("deleted " + owner->what);
  ctx_.WriteStatus(r);
  if (!owner->gone) {
    auto res = ctx_.api().Delete(owner->path, owner->uid);
    if (!res || (!res->ok() && res->status != 404)) return milliseconds(2000);
  }
  if (ctx_.policy().replacement_timeout.count() > 0) {
    StartAwaiting(ctx_.policy(), node, r, now);
    return AwaitReplacement(ctx_, r, now);
  }
  r.Phase("Replaced", now);
  r.Message("deleted " + owner->what + ": its provisioner replaces the node");
  return std::nullopt;
}

}  // namespace

bool AwaitingReplacement(const RepairRecord& r) { return AwaitingOf(r).has_value(); }

Next AwaitReplacement(RepairContext& ctx, RepairRecord& r, SysTime now) {
  const auto w = AwaitingOf(r);
  if (!w || Terminal(r.cr.phase)) return std::nullopt;
  const Policy& policy = ctx.policy();
  const std::string& condition = r.cr.condition;
  // A node that joined since the repair began, not only since the deletion: a provisioner that
  // launches for pending pods (Karpenter) brings the new machine up while the drain evicts them,
  // before the deletion. creationTimestamp has whole seconds: compared at that resolution, a node
  // created in the second the repair began counts, one created a second earlier (the pool's
  // standby, say) does not.
  const SysTime joined_after =
      std::chrono::floor<std::chrono::seconds>(std::min(w->since, r.Began().value_or(w->since)));
  std::vector<kube::Node> nodes = ctx.world().PoolNodes(policy, w->pool);
  const int standbys = StandbysOf(nodes, policy, w->pool);
  const auto size = policy.StandbySizeFor(w->pool);
  // The oldest candidate first: the first node the provisioner brought up for this pool.
  std::sort(nodes.begin(), nodes.end(), [](const kube::Node& a, const kube::Node& b) {
    return std::tie(a.meta.creation_timestamp, a.meta.name) <
           std::tie(b.meta.creation_timestamp, b.meta.name);
  });
  const auto deadline = w->since + policy.replacement_timeout;
  // Only a node of the provisioner's new Machine or NodeClaim, when the record names one: never
  // a node that happens to join the pool meanwhile (an operator's, another pool's scale-up).
  // Listed once per look, and only when a node could be the replacement.
  std::optional<Result<std::optional<std::set<std::string>>>> linked;
  std::string unlisted;  // why the provisioner's objects could not be listed
  const std::string replaces(keys::kReplaces);
  for (const auto& n : nodes) {
    if (n.meta.uid == w->uid || n.meta.deleting || PoolOf(n, policy) != w->pool) continue;
    const auto created = kube::ParseTime(n.meta.creation_timestamp);
    if (!created || *created < joined_after) continue;
    if (!ConditionIs(n, "Ready", "True") ||
        (!condition.empty() && !ConditionIs(n, condition, "True")))
      continue;
    if (FaultOf(n) || HasTaint(n, keys::kFaultTaint, "", "")) continue;
    auto claimed = n.meta.annotations.find(replaces);
    if (claimed != n.meta.annotations.end() && claimed->second != r.cr.meta.name) continue;
    if (!linked) linked = LinkedNodes(ctx.api(), r, nodes, joined_after);
    if (!*linked) {
      unlisted = (*linked).error().message;
      break;
    }
    if (**linked && !(**linked)->count(n.meta.name)) continue;
    const bool standby = size && !HasTaint(n, keys::kStandbyTaint, "", "") &&
                         ctx.ReserveStandby(w->pool, n.meta.name, *size);
    bool ours = true;
    if (!ctx.dry_run()) {
      // The claim: another repair of the pool may be taking the same node (read fresh on a
      // conflict); a node replaces one.
      auto res = ctx.api().Update(kube::NodePath(n.meta.name), [&](nlohmann::json& j) {
        auto& ann = j["metadata"]["annotations"];
        if (ann.is_object() && ann.contains(replaces) && ann[replaces] != r.cr.meta.name) {
          ours = false;
          return false;
        }
        ours = true;
        ann[replaces] = r.cr.meta.name;
        if (standby) {
          auto& taints = j["spec"]["taints"];
          if (!taints.is_array()) taints = nlohmann::json::array();
          if (std::none_of(taints.begin(), taints.end(), [](const nlohmann::json& t) {
                return t.value("key", "") == keys::kStandbyTaint;
              })) {
            taints.push_back(
                {{"key", keys::kStandbyTaint}, {"value", "true"}, {"effect", "NoSchedule"}});
          }
        }
        return true;
      });
      if (!res || !res->ok()) {
        if (standby) ctx.UnreserveStandby(w->pool, n.meta.name);
        return milliseconds(1000);
      }
    }
    // (Nothing written in a dry run, or the node is another repair's: no standby of ours.)
    if (standby && (ctx.dry_run() || !ours)) ctx.UnreserveStandby(w->pool, n.meta.name);
    if (!ours) continue;
    r.cr.replacement = n.meta.name;
    r.dirty = true;
    const std::string what =
        standby ? fmt::format("; it is the pool's standby ({} of {})", standbys + 1, *size) : "";
    r.Action(fmt::format("replacement {} joined pool \"{}\" at {}{}", n.meta.name, w->pool,
                         kube::MicroTime(now), what));
    r.Phase("Replaced", now,
            fmt::format("replacement {} joined pool \"{}\", Ready with {} True{}", n.meta.name,
                        w->pool, condition.empty() ? "its conditions" : condition, what));
    r.Message(fmt::format("replaced by {}{}", n.meta.name, what));
    return std::nullopt;
  }
  if (now >= deadline) {
    const std::string why = fmt::format(
        "no replacement joined pool \"{}\" within {} s of the deletion (Ready, {} True){}; look at "
        "the provisioner (Karpenter, Cluster API) and its events",
        w->pool,
        std::chrono::duration_cast<std::chrono::seconds>(policy.replacement_timeout).count(),
        condition.empty() ? "no fault" : condition,
        unlisted.empty() ? "" : "; the provisioner's objects could not be listed: " + unlisted);
    r.Phase("Failed", now, why);
    r.Message(why);
    return std::nullopt;
  }
  r.Message(fmt::format(
      "deleted; waiting until {} for a replacement to join pool \"{}\" (Ready, {} True){}",
      kube::RfcTime(deadline), w->pool, condition.empty() ? "no fault" : condition,
      unlisted.empty() ? "" : "; the provisioner's objects could not be listed: " + unlisted));
  if (!unlisted.empty()) return std::min(milliseconds(2000), Until(now, deadline));
  // A node that may be the replacement wakes the record when it joins or changes (controller.cc);
  // the look every 10 s only covers an event the watch did not deliver.
  return std::min(kReplacementRecheck, Until(now, deadline));
}

std::unique_ptr<Remediator> MakeDeleteNodeRemediator(RepairContext& ctx) {
  return std::make_unique<DeleteNode>(ctx);
}

}  // namespace gpuheal::controller
