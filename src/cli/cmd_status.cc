// gpuheal status: the fleet's health as the agents report it, from the Node objects: the five
// domain conditions, the reasons of the unhealthy ones and the GPUs they name; then the
// controller's side: pools, standbys, repairs in flight, infrastructure incidents and the circuit
// breaker.

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/commands.h"
#include "cli/table.h"
#include "controller/policy.h"
#include "core/gpu_at_risk.h"
#include "core/keys.h"
#include "core/pci.h"
#include "core/reasons.h"
#include "core/severity.h"
#include "kube/client.h"

namespace gpuheal::cli {
namespace {

struct StatusArgs {
  std::string kubeconfig;
  std::string output = "table";
  std::string selector;
  bool summary_only = false;
  std::string pool_label = std::string(keys::kDefaultPoolLabel);
  std::string lease_namespace = "gpuheal-system", lease_name = "gpuheal-controller";
  // The controller's policy (its pools' standby targets): NAMESPACE/NAME of the ConfigMap the
  // manifests and the chart mount, key policy.yaml.
  std::string policy_configmap = "gpuheal-system/gpuheal-controller-policy";
};

// The controller's policy from its ConfigMap, or why it could not be read.
Result<controller::Policy> ReadPolicy(kube::Client& client, const std::string& configmap) {
  const auto slash = configmap.find('/');
  const std::string ns = configmap.substr(0, slash), name = configmap.substr(slash + 1);
  auto r = client.Get(fmt::format("/api/v1/namespaces/{}/configmaps/{}", ns, name));
  if (!r) return r.error();
  if (!r->ok()) return Error{"ConfigMap " + configmap + ": " + r->Describe()};
  const auto cm = nlohmann::json::parse(r->body, nullptr, false);
  if (!cm.is_object() || !cm.contains("data") || !cm["data"].is_object() ||
      !cm["data"].contains("policy.yaml") || !cm["data"]["policy.yaml"].is_string())
    return Error{"ConfigMap " + configmap + " has no data policy.yaml"};
  return controller::ParsePolicy(cm["data"]["policy.yaml"].get<std::string>(),
                                 "ConfigMap " + configmap + " policy.yaml");
}

bool Tainted(const kube::Node& n, std::string_view key) {
  return std::any_of(n.taints.begin(), n.taints.end(),
                     [&](const kube::Taint& t) { return t.key == key; });
}

// The fleet as the controller sees it: per pool its nodes in service, quarantined and standing
// by; the repairs in flight (open NodeRepair records) and the failure domains whose incident holds
// their remediation (status.incident); the circuit breaker, from the last of the
// controller's CircuitBreakerOpened / CircuitBreakerClosed Events on its Lease.
nlohmann::ordered_json Summary(kube::Client& client, const std::vector<kube::Node>& nodes,
                               const StatusArgs& a) {
  nlohmann::ordered_json out;
  std::map<std::string, std::array<int, 5>>
      pools;  // nodes, in service, quarantined, standby, unhealthy
  for (const auto& n : nodes) {
    auto pool = n.meta.labels.find(a.pool_label);
    if (pool == n.meta.labels.end())
      pool = n.meta.labels.find(std::string(keys::kKarpenterPoolLabel));
    auto& p = pools[pool == n.meta.labels.end() ? "-" : pool->second];
    const bool quarantined = Tainted(n, keys::kFaultTaint);
    const bool standby = Tainted(n, keys::kStandbyTaint);
    const bool unhealthy = std::any_of(n.conditions.begin(), n.conditions.end(), [](const auto& c) {
      return IsDomain(c.type) && c.status == "False";
    });
    ++p[0];
    if (!quarantined && !standby && !n.unschedulable) ++p[1];
    if (quarantined) ++p[2];
    if (standby) ++p[3];
    if (unhealthy) ++p[4];
  }
  // Each pool's standby target (pools.standby), from the controller's policy.
  const auto policy = ReadPolicy(client, a.policy_configmap);
  if (!policy) out["policy_error"] = policy.error().message;
  out["pools"] = nlohmann::ordered_json::array();
  for (const auto& [name, c] : pools) {
    nlohmann::ordered_json target;  // null: no target, or the policy is not known
    if (policy)
      if (const auto size = policy->StandbySizeFor(name)) target = *size;
    out["pools"].push_back({{"pool", name},
                            {"nodes", c[0]},
                            {"in_service", c[1]},
                            {"quarantined", c[2]},
                            {"standby", c[3]},
                            {"standby_target", target},
                            {"unhealthy", c[4]}});
  }
  out["repairs_in_flight"] = nlohmann::ordered_json::array();
  std::map<std::string, std::vector<std::string>> incidents;  // domain -> held nodes
  auto repairs = client.ListAll<kube::NodeRepair>(std::string(kube::kNodeRepairsPath),
                                                  kube::DecodeNodeRepairList);
  if (!repairs) {
    out["repairs_error"] = repairs.error().message;
  } else {
    std::sort(repairs->items.begin(), repairs->items.end(),
              [](const auto& x, const auto& y) { return x.meta.name < y.meta.name; });
    for (const auto& r : repairs->items) {
      if (r.phase == "Recovered" || r.phase == "Replaced" || r.phase == "Failed") continue;
      auto since = r.phase_times.find(r.phase);
      out["repairs_in_flight"].push_back(
          {{"node", r.node},
           {"record", r.meta.name},
           {"phase", r.phase},
           {"reason", r.reason},
           {"since", since == r.phase_times.end() ? "" : since->second},
           {"incident", r.incident},
           {"gate", r.gate}});
      if (!r.incident.empty()) incidents[r.incident].push_back(r.node);
    }
  }
  out["incidents"] = nlohmann::ordered_json::array();
  for (const auto& [domain, held] : incidents)
    out["incidents"].push_back({{"domain", domain}, {"held_nodes", held}});
  nlohmann::ordered_json breaker = {{"state", "closed"}, {"since", ""}};
  auto events = client.Get(fmt::format(
      "/api/v1/namespaces/{}/events?fieldSelector={}", a.lease_namespace,
      kube::UrlEncode("involvedObject.kind=Lease,involvedObject.name=" + a.lease_name)));
  if (!events || !events->ok()) {
    breaker["state"] = "unknown";
    breaker["error"] = events ? events->Describe() : events.error().message;
  } else {
    const auto list = nlohmann::json::parse(events->body, nullptr, false);
    std::pair<std::string, long long> last{"", -1};
    std::string last_reason;
    if (list.is_object() && list.contains("items") && list["items"].is_array()) {
      for (const auto& e : list["items"]) {
        const std::string reason = e.value("reason", "");
        if (reason != reason::kBreakerOpened && reason != reason::kBreakerClosed) continue;
        long long rv = 0;
        try {
          rv = std::stoll(e["metadata"].value("resourceVersion", "0"));
        } catch (...) {
        }
        std::pair<std::string, long long> at{e.value("lastTimestamp", ""), rv};
        if (at > last) {
          last = at;
          last_reason = reason;
        }
      }
    }
    if (last_reason == reason::kBreakerOpened) breaker["state"] = "open";
    breaker["since"] = last.first;
  }
  out["breaker"] = breaker;
  return out;
}

void PrintSummary(const nlohmann::ordered_json& s) {
  // STANDBY: the pool's standbys over its target (pools.standby), "-" without one.
  std::cout << fmt::format("\n{:<20}  {:>5}  {:>10}  {:>11}  {:>7}  {:>9}\n", "POOL", "NODES",
                           "IN SERVICE", "QUARANTINED", "STANDBY", "UNHEALTHY");
  for (const auto& p : s["pools"]) {
    const std::string standby =
        fmt::format("{}/{}", p["standby"].get<int>(),
                    p["standby_target"].is_number() ? std::to_string(p["standby_target"].get<int>())
                                                    : std::string("-"));
    std::cout << fmt::format("{:<20}  {:>5}  {:>10}  {:>11}  {:>7}  {:>9}\n",
                             p["pool"].get<std::string>(), p["nodes"].get<int>(),
                             p["in_service"].get<int>(), p["quarantined"].get<int>(), standby,
                             p["unhealthy"].get<int>());
  }
  if (s.contains("policy_error"))
    std::cout << "  (standby targets unknown: " << s["policy_error"].get<std::string>() << ")\n";
  std::cout << "\nREPAIRS IN FLIGHT: " << s["repairs_in_flight"].size() << "\n";
  if (s.contains("repairs_error")) {
    std::cout << "  (cannot list NodeRepairs: " << s["repairs_error"].get<std::string>() << ")\n";
  }
  for (const auto& r : s["repairs_in_flight"]) {
    const std::string gate = r["gate"].get<std::string>();
    std::cout << fmt::format("  {}  {}  {}  {}  since {}{}\n", r["node"].get<std::string>(),
                             r["phase"].get<std::string>(), r["reason"].get<std::string>(),
                             r["record"].get<std::string>(), r["since"].get<std::string>(),
                             gate.empty() ? "" : "  held by the " + gate + " gate");
  }
  std::cout << "\nINFRASTRUCTURE INCIDENTS: " << s["incidents"].size() << "\n";
  for (const auto& i : s["incidents"]) {
    std::string held;
    for (const auto& n : i["held_nodes"]) held += (held.empty() ? "" : ", ") + n.get<std::string>();
    std::cout << fmt::format("  {}  remediation held on {} node(s): {}\n",
                             i["domain"].get<std::string>(), i["held_nodes"].size(), held);
  }
  const auto& b = s["breaker"];
  std::cout << "\nCIRCUIT BREAKER: " << b["state"].get<std::string>();
  if (!b["since"].get<std::string>().empty())
    std::cout << " since " << b["since"].get<std::string>();
  if (b.contains("error")) std::cout << " (" << b["error"].get<std::string>() << ")";
  std::cout << "\n";
}

// Bus ids ("dddd:bb:dd") named after "GPU " in a condition message.
std::vector<std::string> GpusIn(const std::string& msg) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (size_t at = msg.find("GPU "); at != std::string::npos; at = msg.find("GPU ", at + 4)) {
    auto id = ParsePciPrefix(std::string_view(msg).substr(at + 4));
    if (id && seen.insert(id->id).second) out.push_back(id->id);
  }
  return out;
}

}  // namespace

void RegisterStatus(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<StatusArgs>();
  CLI::App* cmd = app.add_subcommand(
      "status", "Nodes with their five gpuheal domain conditions and affected GPUs");
  cmd->add_option("--kubeconfig", args->kubeconfig,
                  "Kubeconfig (default $KUBECONFIG, then ~/.kube/config)");
  cmd->add_option("-o,--output", args->output, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  cmd->add_option("-l,--selector", args->selector,
                  "Label selector for the nodes, e.g. gpuheal.io/pool=a");
  cmd->add_flag("--summary", args->summary_only,
                "Only the summary: pools, repairs in flight, incidents, the circuit breaker");
  cmd->add_option("--pool-label", args->pool_label,
                  "Node label naming the pool (falls back to karpenter.sh/nodepool)")
      ->capture_default_str();
  cmd->add_option("--lease-namespace", args->lease_namespace,
                  "Namespace of the controller's Lease (its breaker Events)")
      ->capture_default_str();
  cmd->add_option("--lease-name", args->lease_name, "Name of the controller's Lease")
      ->capture_default_str();
  cmd->add_option("--policy-configmap", args->policy_configmap,
                  "NAMESPACE/NAME of the ConfigMap holding the controller's policy.yaml (each "
                  "pool's standby target)")
      ->capture_default_str();
  cmd->callback([args, &exit_code] {
    if (const auto slash = args->policy_configmap.find('/');
        slash == std::string::npos || slash == 0 || slash + 1 == args->policy_configmap.size() ||
        args->policy_configmap.find('/', slash + 1) != std::string::npos) {
      std::cerr << "gpuheal status: --policy-configmap " << args->policy_configmap
                << ": give NAMESPACE/NAME, e.g. gpuheal-system/gpuheal-controller-policy\n";
      exit_code = kExitUsage;
      return;
    }
    auto cfg = kube::LoadKubeconfig(args->kubeconfig);
    if (!cfg) {
      std::cerr << "gpuheal status: " << cfg.error().message << "\n";
      exit_code = kExitUsage;
      return;
    }
    auto client = kube::Client::Create(std::move(*cfg));
    if (!client) {
      std::cerr << "gpuheal status: " << client.error().message << "\n";
      exit_code = kExitUsage;
      return;
    }
    std::string path = kube::NodePath();
    if (!args->selector.empty()) path += "?labelSelector=" + kube::UrlEncode(args->selector);
    auto nodes = (*client)->ListAll<kube::Node>(path, kube::DecodeNodeList);
    if (!nodes) {
      std::cerr << "gpuheal status: " << nodes.error().message << "\n";
      exit_code = kExitFailure;
      return;
    }
    std::sort(nodes->items.begin(), nodes->items.end(),
              [](const kube::Node& a, const kube::Node& b) { return a.meta.name < b.meta.name; });
    nlohmann::ordered_json json = nlohmann::ordered_json::array();
    std::vector<std::vector<std::string>> rows = {{"NODE", "GPU", "KERNEL", "NETWORK", "STORAGE",
                                                   "RUNTIME", "GPUS AFFECTED", "REASONS",
                                                   "AT RISK"}};
    for (const auto& n : nodes->items) {
      nlohmann::ordered_json j = {{"node", n.meta.name}, {"unschedulable", n.unschedulable}};
      std::vector<std::string> row = {n.meta.name};
      std::vector<std::string> reasons, gpus;
      nlohmann::ordered_json conds = nlohmann::ordered_json::object();
      for (Condition c : kAllConditions) {
        const std::string type(ToString(c));
        const kube::NodeCondition* found = nullptr;
        for (const auto& nc : n.conditions) {
          if (nc.type == type) found = &nc;
        }
        if (!found) {
          row.push_back("-");
          continue;
        }
        conds[type] = {{"status", found->status},
                       {"reason", found->reason},
                       {"message", found->message},
                       {"lastTransitionTime", found->last_transition_time}};
        row.push_back(found->status == "True"    ? "ok"
                      : found->status == "False" ? "FAULT"
                                                 : found->status);
        if (found->status == "False") {
          reasons.push_back(found->reason);
          for (auto& g : GpusIn(found->message)) gpus.push_back(g);
        }
      }
      j["conditions"] = conds;
      j["gpus_affected"] = gpus;
      // The agent's GPUs at risk (precursor signals), when it publishes them.
      std::string risk;
      if (auto a = n.meta.annotations.find(std::string(keys::kGpuAtRisk));
          a != n.meta.annotations.end()) {
        if (auto g = ParseAtRisk(a->second)) {
          nlohmann::ordered_json at_risk = nlohmann::ordered_json::object();
          for (const auto& [pci, e] : *g) {
            at_risk[pci] = e.signals;
            risk += (risk.empty() ? "" : ",") + pci;
          }
          j["gpus_at_risk"] = at_risk;
        }
      }
      json.push_back(j);
      std::string g, r;
      for (const auto& x : gpus) g += (g.empty() ? "" : ",") + x;
      for (const auto& x : reasons) r += (r.empty() ? "" : ",") + x;
      row.push_back(g.empty() ? "-" : g);
      row.push_back(r.empty() ? "-" : r);
      row.push_back(risk.empty() ? "-" : risk);
      rows.push_back(row);
    }
    if (args->summary_only) {
      const auto summary = Summary(**client, nodes->items, *args);
      if (args->output == "json") {
        std::cout << summary.dump(2) << "\n";
      } else {
        PrintSummary(summary);
      }
      exit_code = kExitOk;
      return;
    }
    if (args->output == "json") {
      std::cout << json.dump(2) << "\n";
    } else {
      PrintTable(rows);
      PrintSummary(Summary(**client, nodes->items, *args));
    }
    exit_code = kExitOk;
  });
}

}  // namespace gpuheal::cli
