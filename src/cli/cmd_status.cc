// gpuheal status: the fleet's health as the agents report it, from the Node objects: the five
// domain conditions, the reasons of the unhealthy ones and the GPUs they name.

#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/commands.h"
#include "core/pci.h"
#include "core/severity.h"
#include "kube/client.h"

namespace gpuheal::cli {
namespace {

struct StatusArgs {
  std::string kubeconfig;
  std::string output = "table";
  std::string selector;
};

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
  cmd->callback([args, &exit_code] {
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
    std::vector<std::vector<std::string>> rows = {
        {"NODE", "GPU", "KERNEL", "NETWORK", "STORAGE", "RUNTIME", "GPUS AFFECTED", "REASONS"}};
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
      json.push_back(j);
      std::string g, r;
      for (const auto& x : gpus) g += (g.empty() ? "" : ",") + x;
      for (const auto& x : reasons) r += (r.empty() ? "" : ",") + x;
      row.push_back(g.empty() ? "-" : g);
      row.push_back(r.empty() ? "-" : r);
      rows.push_back(row);
    }
    if (args->output == "json") {
      std::cout << json.dump(2) << "\n";
    } else {
      std::vector<size_t> width(rows[0].size(), 0);
      for (const auto& row : rows) {
        for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
      }
      for (const auto& row : rows) {
        std::string line;
        for (size_t i = 0; i < row.size(); ++i) {
          line += i + 1 == row.size() ? row[i] : fmt::format("{:<{}}  ", row[i], width[i]);
        }
        std::cout << line << "\n";
      }
    }
    exit_code = kExitOk;
  });
}

}  // namespace gpuheal::cli
