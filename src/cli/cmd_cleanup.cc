// gpuheal cleanup: takes gpuheal off a cluster's nodes, as the Helm chart's pre-delete hook does
// before `helm uninstall` removes the rest. Optionally first stops gpuheal's own workloads (the
// controller Deployment, the agent DaemonSet) and waits for their pods to be gone, so that nothing
// writes a node again behind it. Then, on every node: gpuheal's taints (gpuheal.io/gpu-fault,
// gpuheal.io/standby), every gpuheal.io/ annotation, the cordon gpuheal set (only that one: the
// gpuheal.io/cordoned annotation says so) and the agent's five condition types. Labels are the
// operator's (pool, opt-out, pause) and stay.

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cli/commands.h"
#include "core/keys.h"
#include "core/severity.h"
#include "kube/client.h"

namespace gpuheal::cli {
namespace {

using std::chrono::steady_clock;

struct CleanupArgs {
  std::string kubeconfig;
  std::string stop_namespace;
  std::string stop_selector;
  int timeout_s = 180;
  bool dry_run = false;
};

bool IsGpuhealKey(const std::string& key) { return key.rfind("gpuheal.io/", 0) == 0; }

struct Counts {
  int nodes_changed = 0, taints = 0, annotations = 0, cordons = 0, conditions = 0;
};

// Removes gpuheal's taints, annotations and cordon from one Node object; counts what it removed.
bool StripNode(nlohmann::json& n, Counts* c) {
  bool changed = false;
  auto& spec = n["spec"];
  if (spec.contains("taints") && spec["taints"].is_array()) {
    nlohmann::json kept = nlohmann::json::array();
    for (const auto& t : spec["taints"]) {
      const std::string key = t.value("key", "");
      if (key == keys::kFaultTaint || key == keys::kStandbyTaint) {
        ++c->taints;
        changed = true;
      } else {
        kept.push_back(t);
      }
    }
    spec["taints"] = kept;
  }
  auto& meta = n["metadata"];
  if (meta.contains("annotations") && meta["annotations"].is_object()) {
    auto& ann = meta["annotations"];
    if (ann.contains(std::string(keys::kCordonedAnnotation))) {
      spec["unschedulable"] = false;  // only a cordon gpuheal set is lifted
      ++c->cordons;
    }
    for (auto it = ann.begin(); it != ann.end();) {
      if (IsGpuhealKey(it.key())) {
        it = ann.erase(it);
        ++c->annotations;
        changed = true;
      } else {
        ++it;
      }
    }
  }
  return changed;
}

// Deletes the Deployments and DaemonSets matching the selector in the namespace and waits until
// none of their pods is left.
bool StopWorkloads(kube::Api& api, const CleanupArgs& a) {
  const std::string sel = "?labelSelector=" + kube::UrlEncode(a.stop_selector);
  for (const char* kind : {"deployments", "daemonsets"}) {
    const std::string coll = fmt::format("/apis/apps/v1/namespaces/{}/{}", a.stop_namespace, kind);
    auto list = api.Get(coll + sel);
    if (!list || !list->ok()) {
      std::cerr << "gpuheal cleanup: list " << coll << ": "
                << (list ? list->Describe() : list.error().message) << "\n";
      return false;
    }
    for (const auto& item : nlohmann::json::parse(list->body).value("items", nlohmann::json())) {
      const std::string name = item["metadata"].value("name", "");
      if (a.dry_run) {
        std::cout << "would delete " << kind << "/" << name << "\n";
        continue;
      }
      auto r = api.Delete(coll + "/" + name);
      if (!r || (!r->ok() && r->status != 404)) {
        std::cerr << "gpuheal cleanup: delete " << kind << "/" << name << ": "
                  << (r ? r->Describe() : r.error().message) << "\n";
        return false;
      }
      std::cout << "deleted " << kind << "/" << name << "\n";
    }
  }
  if (a.dry_run) return true;
  const auto deadline = steady_clock::now() + std::chrono::seconds(a.timeout_s);
  const std::string pods = kube::PodPath(a.stop_namespace) + sel;
  std::set<std::string> gone_said;
  for (;;) {
    auto r = api.Get(pods);
    if (r && r->ok()) {
      const auto items = nlohmann::json::parse(r->body).value("items", nlohmann::json::array());
      // A pod bound to a node that is gone has no kubelet to stop it: it stays Terminating until
      // kube-controller-manager's pod garbage collector force-deletes it (40 s and more), and the
      // namespace's deletion after `helm uninstall` waits for it. Such a pod is deleted at once
      // (no grace period: nothing runs it), as the garbage collector would.
      size_t left = 0;
      std::map<std::string, bool> gone;  // node -> its Node object is gone (one GET a node a pass)
      for (const auto& p : items) {
        const nlohmann::json meta = p.value("metadata", nlohmann::json::object());
        const std::string node = p.value("spec", nlohmann::json::object()).value("nodeName", "");
        if (!node.empty()) {
          auto [it, fresh] = gone.try_emplace(node, false);
          if (fresh) {
            auto n = api.Get(kube::NodePath(node));
            it->second = n && n->status == 404;
          }
          if (it->second) {
            const std::string name = meta.value("name", "");
            auto d =
                api.Delete(kube::PodPath(a.stop_namespace, name), meta.value("uid", ""), "", 0);
            if (d && (d->ok() || d->status == 404) && gone_said.insert(name).second)
              std::cout << "deleted pod/" << name << " (its node " << node << " is gone)\n";
            continue;
          }
        }
        ++left;
      }
      if (left == 0) return true;
      if (steady_clock::now() > deadline) {
        std::cerr << "gpuheal cleanup: " << left << " pod(s) matching " << a.stop_selector
                  << " still exist in " << a.stop_namespace << " after " << a.timeout_s
                  << " s; nodes left unchanged\n";
        return false;
      }
    } else if (steady_clock::now() > deadline) {
      std::cerr << "gpuheal cleanup: list " << pods << ": "
                << (r ? r->Describe() : r.error().message) << "\n";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

int Run(const CleanupArgs& a) {
  if (a.stop_namespace.empty() != a.stop_selector.empty()) {
    std::cerr << "gpuheal cleanup: --stop-namespace and --stop-selector go together (the "
                 "namespace of gpuheal's workloads and a label selector matching them)\n";
    return kExitUsage;
  }
  // In a pod (the Helm hook's Job) without --kubeconfig: the service account.
  auto cfg = a.kubeconfig.empty() && std::getenv("KUBERNETES_SERVICE_HOST") != nullptr
                 ? kube::InClusterConfig()
                 : kube::LoadKubeconfig(a.kubeconfig);
  if (!cfg) {
    std::cerr << "gpuheal cleanup: " << cfg.error().message << "\n";
    return kExitUsage;
  }
  auto client = kube::Client::Create(std::move(*cfg));
  if (!client) {
    std::cerr << "gpuheal cleanup: " << client.error().message << "\n";
    return kExitUsage;
  }
  kube::Api& api = **client;
  if (!a.stop_namespace.empty() && !StopWorkloads(api, a)) return kExitFailure;

  auto nodes = api.ListAll<kube::Node>(kube::NodePath(), kube::DecodeNodeList);
  if (!nodes) {
    std::cerr << "gpuheal cleanup: " << nodes.error().message << "\n";
    return kExitFailure;
  }
  Counts total;
  int failed = 0;
  for (const auto& node : nodes->items) {
    Counts c;
    nlohmann::json conditions_patch = nlohmann::json::array();
    for (const auto& cond : node.conditions) {
      if (IsDomain(cond.type)) {
        conditions_patch.push_back({{"type", cond.type}, {"$patch", "delete"}});
        ++c.conditions;
      }
    }
    if (a.dry_run) {
      nlohmann::json copy = {{"metadata", {{"annotations", node.meta.annotations}}},
                             {"spec", {{"taints", nlohmann::json::array()}}}};
      for (const auto& t : node.taints) copy["spec"]["taints"].push_back({{"key", t.key}});
      StripNode(copy, &c);
    } else {
      Counts attempt;  // counted on the last (successful) try only
      auto r = api.Update(kube::NodePath(node.meta.name), [&](nlohmann::json& n) {
        attempt = Counts{};
        return StripNode(n, &attempt);
      });
      if (!r || (!r->ok() && r->status != 404)) {
        std::cerr << "gpuheal cleanup: node " << node.meta.name << ": "
                  << (r ? r->Describe() : r.error().message) << "\n";
        ++failed;
        continue;
      }
      c.taints = attempt.taints;
      c.annotations = attempt.annotations;
      c.cordons = attempt.cordons;
      if (!conditions_patch.empty()) {
        auto s =
            api.Patch(kube::NodePath(node.meta.name) + "/status", kube::PatchType::kStrategicMerge,
                      {{"status", {{"conditions", conditions_patch}}}});
        if (!s || (!s->ok() && s->status != 404)) {
          std::cerr << "gpuheal cleanup: node " << node.meta.name
                    << " status: " << (s ? s->Describe() : s.error().message) << "\n";
          ++failed;
          continue;
        }
      }
    }
    if (c.taints + c.annotations + c.cordons + c.conditions > 0) {
      ++total.nodes_changed;
      std::cout << fmt::format(
          "{}{}: {} taint(s), {} annotation(s), {} cordon(s), {} condition(s)\n",
          a.dry_run ? "would clean " : "", node.meta.name, c.taints, c.annotations, c.cordons,
          c.conditions);
    }
    total.taints += c.taints;
    total.annotations += c.annotations;
    total.cordons += c.cordons;
    total.conditions += c.conditions;
  }
  std::cout << fmt::format(
      "cleanup: {} of {} node(s) {}: {} taint(s), {} annotation(s), {} cordon(s), {} "
      "condition(s){}\n",
      total.nodes_changed, nodes->items.size(), a.dry_run ? "to clean" : "cleaned", total.taints,
      total.annotations, total.cordons, total.conditions,
      failed ? fmt::format("; {} node(s) failed", failed) : "");
  return failed ? kExitFailure : kExitOk;
}

}  // namespace

void RegisterCleanup(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CleanupArgs>();
  CLI::App* cmd = app.add_subcommand(
      "cleanup",
      "Remove gpuheal's taints, annotations, cordons and conditions from every node (the Helm "
      "chart's pre-delete hook)");
  cmd->add_option("--kubeconfig", args->kubeconfig,
                  "Kubeconfig (default: in a pod the service account, else $KUBECONFIG, then "
                  "~/.kube/config)");
  cmd->add_option("--stop-namespace", args->stop_namespace,
                  "First delete gpuheal's Deployments and DaemonSets in this namespace ...");
  cmd->add_option("--stop-selector", args->stop_selector,
                  "... those matching this label selector, and wait until their pods are gone");
  cmd->add_option("--timeout", args->timeout_s, "Seconds to wait for those pods (default 180)")
      ->check(CLI::Range(1, 3600));
  cmd->add_flag("--dry-run", args->dry_run, "Print what would change; change nothing");
  cmd->callback([args, &exit_code] { exit_code = Run(*args); });
}

}  // namespace gpuheal::cli
