// gpuheal bmc status|reset: a node's BMC over Redfish, for operators. A NODE's endpoint and
// credentials are found and checked as the redfish provider finds them (controller/bmc_target.h:
// the endpoints ConfigMap, the allow-list, plain http refused unless allowed), or the BMC is given
// on the command line without a cluster.

#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "bmc/endpoint_policy.h"
#include "bmc/redfish.h"
#include "cli/commands.h"
#include "controller/bmc_target.h"
#include "core/file.h"
#include "core/keys.h"
#include "core/object_names.h"
#include "kube/client.h"
#include "kube/objects.h"

namespace gpuheal::cli {
namespace {

using json = nlohmann::json;
using controller::BmcTarget;

struct BmcArgs {
  std::string node, endpoint, kubeconfig;
  std::string credentials_secret = "gpuheal-system/gpuheal-bmc";
  std::string endpoints_configmap = "gpuheal-system/gpuheal-bmc-endpoints";
  std::vector<std::string> endpoint_sources = {"configmap"};
  std::vector<std::string> allowed_endpoints;
  bool allow_http = false;
  std::string username, password_file;
  std::string ca_file;
  std::string auth = "basic";
  bool insecure = false;
  int timeout_seconds = 10;
  std::string output = "table";
  std::vector<std::string> reset_types = {"PowerCycle", "ForceRestart", "GracefulRestart"};
  bool force = false;
};

// The flags' part of the provider's policy.
Result<controller::Policy::Redfish> RedfishPolicy(const BmcArgs& a) {
  controller::Policy::Redfish p;
  p.credentials_secret = a.credentials_secret;
  p.endpoints_configmap = a.endpoints_configmap;
  p.endpoint_sources.clear();
  for (const auto& s : a.endpoint_sources) {
    auto source = controller::ParseEndpointSource(s);
    if (!source)
      return Error{fmt::format("--endpoint-source {}: configmap or node-annotation", s),
                   ErrorCode::kUsage};
    p.endpoint_sources.push_back(*source);
  }
  for (const char* ref : {"credentials", "endpoints"}) {
    const std::string& v = ref[0] == 'c' ? p.credentials_secret : p.endpoints_configmap;
    const auto slash = v.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == v.size())
      return Error{fmt::format("--{}-{} must be NAMESPACE/NAME", ref,
                               ref[0] == 'c' ? "secret" : "configmap"),
                   ErrorCode::kUsage};
  }
  p.allowed_endpoints = a.allowed_endpoints;
  auto rules = bmc::ParseEndpointRules(a.allowed_endpoints);
  if (!rules) return Error{"--allowed-endpoint: " + rules.error().message, ErrorCode::kUsage};
  p.allowed_endpoint_rules = std::move(*rules);
  p.allow_insecure_http = a.allow_http;
  return p;
}

// Fails with the exit code in `code`.
Result<BmcTarget> Resolve(const BmcArgs& a, bool reset, int* code) {
  *code = kExitUsage;
  if (a.node.empty() == a.endpoint.empty())
    return Error{"name a NODE (its entry in the endpoints ConfigMap) or --endpoint, not both"};
  for (const auto& t : a.reset_types) {
    if (!bmc::IsResetType(t))
      return Error{
          fmt::format("--reset-type {}: not a Redfish ResetType (e.g. PowerCycle, "
                      "ForceRestart, GracefulRestart)",
                      t)};
  }
  GPUHEAL_TRY(policy, RedfishPolicy(a));
  if (!a.username.empty() || !a.password_file.empty()) {
    if (a.username.empty() || a.password_file.empty())
      return Error{"--username and --password-file go together"};
  }
  BmcTarget out;
  std::unique_ptr<kube::Client> client;
  auto need_client = [&]() -> Status {
    if (client) return Status::Ok();
    auto cfg = kube::LoadKubeconfig(a.kubeconfig);
    if (!cfg) return cfg.error();
    auto c = kube::Client::Create(std::move(*cfg));
    if (!c) return c.error();
    client = std::move(*c);
    return Status::Ok();
  };
  if (!a.node.empty()) {
    GPUHEAL_CHECK(need_client());
    *code = kExitFailure;
    auto res = client->Get(kube::NodePath(a.node));
    if (!res) return res.error();
    if (!res->ok()) return Error{fmt::format("node {}: {}", a.node, res->Describe())};
    auto node = kube::DecodeNode(res->body);
    if (!node) return node.error();
    auto target = controller::ResolveBmcEndpoint(*client, policy, *node);
    if (!target) return Error{fmt::format("node {}: {}", a.node, target.error().message)};
    out = std::move(*target);
    if (reset && !a.force) {
      // The repair record is the lock: the controller may be power-cycling this node right now.
      auto repairs = client->Get(
          std::string(kube::kNodeRepairsPath) + "?labelSelector=" +
          kube::UrlEncode(std::string(keys::kRepairNodeLabel) + "=" + NodeLabelValue(a.node)));
      if (repairs && repairs->ok()) {
        if (auto list = kube::DecodeNodeRepairList(repairs->body)) {
          for (const auto& r : list->items) {
            if (r.node == a.node && r.phase == "Remediating") {
              return Error{fmt::format(
                  "NodeRepair {} is Remediating node {}: its reset may be under way; wait for "
                  "it, or pass --force",
                  r.meta.name, a.node)};
            }
          }
        }
      }
    }
  } else {
    out.url = a.endpoint;
    out.source = "--endpoint";
    out.secret = a.credentials_secret;
    auto endpoint = bmc::ParseEndpoint(out.url);
    if (!endpoint) return endpoint.error();
    out.endpoint = *endpoint;
    auto check =
        bmc::CheckEndpoint(out.endpoint, policy.allowed_endpoint_rules, policy.allow_insecure_http);
    if (!check) return Error{check.error().message + " (or pass --allow-insecure-http)"};
    out.check = std::move(*check);
  }
  if (!a.username.empty()) {
    *code = kExitUsage;
    auto pw = ReadWholeFile(a.password_file);
    if (!pw) return Error{fmt::format("--password-file {}: cannot read it", a.password_file)};
    std::string p = *pw;
    while (!p.empty() && (p.back() == '\n' || p.back() == '\r')) p.pop_back();
    out.credentials = {a.username, p};
    return out;
  }
  GPUHEAL_CHECK(need_client());
  *code = kExitFailure;
  GPUHEAL_CHECK(controller::ReadBmcCredentials(*client, out));
  return out;
}

void Run(const BmcArgs& a, bool reset, int& exit_code) {
  const char* cmd = reset ? "gpuheal bmc reset" : "gpuheal bmc status";
  int code = kExitFailure;
  auto target = Resolve(a, reset, &code);
  if (!target) {
    std::cerr << cmd << ": " << target.error().message << "\n";
    exit_code = target.error().code == ErrorCode::kUsage ? kExitUsage : code;
    return;
  }
  if (a.insecure) {
    std::cerr << cmd
              << ": warning: the BMC's certificate is not verified (--insecure-skip-verify)\n";
  }
  if (target->check.http) {
    std::cerr << cmd << ": warning: plain http to " << target->url
              << ": the BMC's user and password cross the network unencrypted\n";
  }
  bmc::ClientOptions options;
  options.auth = a.auth == "session" ? bmc::Auth::kSession : bmc::Auth::kBasic;
  options.ca_file = a.ca_file;
  options.insecure = a.insecure;
  options.timeout = std::chrono::seconds(a.timeout_seconds);
  options.resolve = target->check.resolve;
  bmc::RedfishClient client(target->endpoint, target->credentials, options);
  auto system = client.System();
  if (!system) {
    std::cerr << cmd << ": " << system.error().message << "\n";
    exit_code = kExitFailure;
    return;
  }
  if (!reset) {
    std::string types;
    for (const auto& t : system->reset_types) types += (types.empty() ? "" : ",") + t;
    if (a.output == "json") {
      std::cout << json{{"endpoint", target->url},
                        {"system", system->path},
                        {"name", system->name},
                        {"powerState", system->power_state},
                        {"resetTypes", system->reset_types}}
                       .dump(2)
                << "\n";
    } else {
      std::cout << fmt::format(
          "ENDPOINT  {}\nSYSTEM    {}\nNAME      {}\nPOWER     {}\nRESETS    {}\n", target->url,
          system->path, system->name, system->power_state.empty() ? "-" : system->power_state,
          types.empty() ? "-" : types);
    }
    exit_code = kExitOk;
    return;
  }
  auto type = bmc::ChooseResetType(*system, a.reset_types);
  if (!type) {
    std::cerr << cmd << ": " << type.error().message << "\n";
    exit_code = kExitFailure;
    return;
  }
  if (auto st = client.Reset(*system, *type); !st) {
    std::cerr << cmd << ": " << st.error().message << "\n";
    exit_code = kExitFailure;
    return;
  }
  std::cout << fmt::format("{}: {} accepted by {} (power was {})\n", system->path, *type,
                           target->url,
                           system->power_state.empty() ? "unknown" : system->power_state);
  exit_code = kExitOk;
}

void AddFlags(CLI::App* c, BmcArgs& a, bool reset) {
  c->add_option("node", a.node,
                "The node (its entry in the endpoints ConfigMap names the BMC and, optionally, "
                "the credentials' Secret)");
  c->add_option("--endpoint", a.endpoint,
                "The BMC instead of a node: https://HOST[:PORT][/redfish/v1/Systems/ID]");
  c->add_option("--kubeconfig", a.kubeconfig,
                "Kubeconfig (default $KUBECONFIG, then ~/.kube/config)");
  c->add_option("--credentials-secret", a.credentials_secret,
                "NAMESPACE/NAME of the Secret with username and password")
      ->capture_default_str();
  c->add_option("--endpoints-configmap", a.endpoints_configmap,
                "NAMESPACE/NAME of the ConfigMap mapping node names to BMC endpoints")
      ->capture_default_str();
  c->add_option("--endpoint-source", a.endpoint_sources,
                "Where a NODE's endpoint is read, first found wins (repeatable): configmap, "
                "node-annotation (its gpuheal.io/bmc-endpoint, which its kubelet can write)")
      ->capture_default_str();
  c->add_option("--allowed-endpoint", a.allowed_endpoints,
                "A CIDR or host-name suffix the BMC must lie in (repeatable); none: any");
  c->add_flag("--allow-insecure-http", a.allow_http,
              "Allow a plain http BMC (the password crosses the network unencrypted)");
  c->add_option("--username", a.username, "BMC user (with --password-file; no Secret read)");
  c->add_option("--password-file", a.password_file, "File holding the BMC user's password");
  c->add_option("--ca-file", a.ca_file, "PEM bundle that signs the BMC's certificate");
  c->add_flag("--insecure-skip-verify", a.insecure, "Do not verify the BMC's certificate");
  c->add_option("--auth", a.auth,
                "basic (HTTP basic on each request) or session (a Redfish session, logged out "
                "after; default basic)")
      ->check(CLI::IsMember({"basic", "session"}));
  c->add_option("--timeout", a.timeout_seconds, "Seconds per request")
      ->check(CLI::Range(1, 300))
      ->capture_default_str();
  if (reset) {
    c->add_option("--reset-type", a.reset_types,
                  "Redfish ResetType, most preferred first (repeatable); the first the BMC "
                  "allows is sent")
        ->capture_default_str();
    c->add_flag("--force", a.force, "Reset even while a NodeRepair is Remediating the node");
  } else {
    c->add_option("-o,--output", a.output, "table or json")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
  }
}

}  // namespace

void RegisterBmc(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("bmc", "A node's BMC over Redfish: power state and reset");
  cmd->require_subcommand(1);
  auto status = std::make_shared<BmcArgs>();
  CLI::App* s = cmd->add_subcommand("status", "The node's ComputerSystem: power state, resets");
  AddFlags(s, *status, false);
  s->callback([status, &exit_code] { Run(*status, false, exit_code); });
  auto reset = std::make_shared<BmcArgs>();
  CLI::App* r = cmd->add_subcommand("reset", "Power-cycle the node through its BMC");
  AddFlags(r, *reset, true);
  r->callback([reset, &exit_code] { Run(*reset, true, exit_code); });
}

}  // namespace gpuheal::cli
