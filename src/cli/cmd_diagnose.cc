// Diagnostic bundles and repairs from the command line (docs/diagnostics.md, docs/cli.md):
//   gpuheal diagnose NODE [--upload-url URL]   a NodeDiagnostic request, followed to its end
//   gpuheal bundle [--output F]                 the same bundle of this host, without Kubernetes
//   gpuheal repairs [--node N]                  the NodeRepair records and their timelines
// The binary answers as the kubectl plugin kubectl-gpuheal too (main.cc): `kubectl gpuheal
// diagnose NODE`, `kubectl gpuheal repairs`, `kubectl gpuheal status`, `kubectl gpuheal explain`.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/boot_id.h"
#include "agent/config.h"
#include "agent/diag_bundle.h"
#include "agent/diag_collectors.h"
#include "cli/commands.h"
#include "cli/table.h"
#include "controller/steps.h"
#include "core/time.h"
#include "core/yaml_fields.h"
#include "kube/client.h"

namespace gpuheal::cli {
namespace {

using namespace std::chrono_literals;

std::string Host() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  std::string h = buf;
  return h.substr(0, h.find('.'));
}

// "node-a-20261204t051700" style: a DNS subdomain name from a node name and the time.
std::string RequestName(const std::string& node) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dt%H%M%S", &tm);
  std::string base = node.substr(0, 200);
  std::transform(base.begin(), base.end(), base.begin(), ::tolower);
  return base + "-" + stamp;
}

void PrintCollectors(const nlohmann::json& collectors) {
  std::vector<std::vector<std::string>> rows = {{"COLLECTOR", "FILES", "BYTES", "MS", "NOTE"}};
  for (const auto& c : collectors) {
    std::string note = c.value("error", "");
    if (c.value("truncated", false)) note = "truncated" + (note.empty() ? "" : "; " + note);
    rows.push_back({c.value("name", ""), std::to_string(c.value("files", 0)),
                    std::to_string(c.value("bytes", 0)), std::to_string(c.value("durationMs", 0)),
                    note.empty() ? "-" : note});
  }
  PrintTable(rows, "  ");
}

std::vector<std::string> SplitList(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (const auto& s : in) {
    size_t start = 0;
    while (start <= s.size()) {
      size_t comma = s.find(',', start);
      if (comma == std::string::npos) comma = s.size();
      if (comma > start) out.push_back(s.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return out;
}

Result<std::unique_ptr<kube::Client>> Connect(const std::string& kubeconfig) {
  auto cfg = kube::LoadKubeconfig(kubeconfig);
  if (!cfg) return Error{cfg.error().message, ErrorCode::kUsage};
  auto client = kube::Client::Create(std::move(*cfg));
  if (!client) return Error{client.error().message, ErrorCode::kUsage};
  return std::move(*client);
}

struct DiagnoseArgs {
  std::string node, kubeconfig, upload_url, name, timeout = "120s", output = "text";
  std::vector<std::string> include, exclude;
  bool no_wait = false;
};

void RegisterDiagnose(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<DiagnoseArgs>();
  CLI::App* cmd = app.add_subcommand(
      "diagnose",
      "Ask NODE's agent for a diagnostic bundle (a NodeDiagnostic request) and follow it");
  cmd->add_option("node", a->node, "The node")->required();
  cmd->add_option("--upload-url", a->upload_url,
                  "HTTP(S) PUT target of the bundle, e.g. an S3 presigned URL (default: the "
                  "bundle stays on the node for the agent's retention time)");
  cmd->add_option("--include", a->include, "Only these collectors (comma-separated)");
  cmd->add_option("--exclude", a->exclude, "Every collector but these (comma-separated)");
  cmd->add_option("--name", a->name, "The request's name (default NODE-<UTC time>)");
  cmd->add_option("--timeout", a->timeout, "How long to follow the request (default 120s)");
  cmd->add_flag("--no-wait", a->no_wait, "Create the request and return");
  cmd->add_option("--kubeconfig", a->kubeconfig,
                  "Kubeconfig (default $KUBECONFIG, then ~/.kube/config)");
  cmd->add_option("-o,--output", a->output, "text or json (the request's final status)")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->callback([a, &exit_code] {
    const char* me = "gpuheal diagnose";
    const auto timeout = ParseDuration(a->timeout);
    if (!timeout || timeout->count() <= 0) {
      std::cerr << me << ": --timeout " << a->timeout << ": not a duration (e.g. 120s)\n";
      exit_code = kExitUsage;
      return;
    }
    const auto include = SplitList(a->include), exclude = SplitList(a->exclude);
    if (auto sel = SelectCollectors(include, exclude); !sel) {
      std::cerr << me << ": " << sel.error().message << "\n";
      exit_code = kExitUsage;
      return;
    }
    if (!a->upload_url.empty() && a->upload_url.rfind("http://", 0) != 0 &&
        a->upload_url.rfind("https://", 0) != 0) {
      std::cerr << me << ": --upload-url must be an http:// or https:// URL\n";
      exit_code = kExitUsage;
      return;
    }
    auto client = Connect(a->kubeconfig);
    if (!client) {
      std::cerr << me << ": " << client.error().message << "\n";
      exit_code = kExitUsage;
      return;
    }
    kube::Client& c = **client;
    auto node = c.Get(kube::NodePath(a->node));
    if (!node || node->status == 404) {
      std::cerr << me << ": node " << a->node << " "
                << (node ? "does not exist" : node.error().message) << "\n";
      exit_code = node ? kExitUsage : kExitFailure;
      return;
    }
    const std::string name = a->name.empty() ? RequestName(a->node) : a->name;
    nlohmann::json spec = {{"nodeName", a->node}};
    if (!a->upload_url.empty()) spec["upload"] = {{"url", a->upload_url}};
    if (!include.empty()) spec["include"] = include;
    if (!exclude.empty()) spec["exclude"] = exclude;
    auto created =
        c.Create(std::string(kube::kNodeDiagnosticsPath), {{"apiVersion", "gpuheal.io/v1alpha1"},
                                                           {"kind", "NodeDiagnostic"},
                                                           {"metadata", {{"name", name}}},
                                                           {"spec", spec}});
    if (!created || !created->ok()) {
      std::cerr << me << ": cannot create NodeDiagnostic " << name << ": "
                << (created ? created->Describe() : created.error().message) << "\n";
      if (created && created->status == 404)
        std::cerr << me
                  << ": is the NodeDiagnostic CRD installed? kubectl apply -f "
                     "deploy/crds/nodediagnostics.yaml\n";
      exit_code = kExitFailure;
      return;
    }
    if (a->output == "text") std::cout << "nodediagnostic/" << name << " created\n" << std::flush;
    if (a->no_wait) {
      exit_code = kExitOk;
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + *timeout;
    std::string last_phase;
    nlohmann::json status;
    while (true) {
      auto r = c.Get(std::string(kube::kNodeDiagnosticsPath) + "/" + name);
      if (r && r->ok()) {
        const auto j = nlohmann::json::parse(r->body, nullptr, false);
        status =
            j.is_object() ? j.value("status", nlohmann::json::object()) : nlohmann::json::object();
        const std::string phase = status.value("phase", "Pending");
        if (phase != last_phase && a->output == "text") {
          std::cout << phase
                    << (status.contains("message") ? ": " + status.value("message", "")
                                                   : std::string())
                    << "\n"
                    << std::flush;
        }
        last_phase = phase;
        if (phase == "Succeeded" || phase == "Failed") break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        std::cerr << me << ": " << name << " still "
                  << (last_phase.empty() ? "Pending" : last_phase) << " after " << a->timeout
                  << (last_phase.empty() || last_phase == "Pending"
                          ? " (is gpuheal's agent running on " + a->node + "?)"
                          : "")
                  << "\n";
        exit_code = kExitFailure;
        return;
      }
      std::this_thread::sleep_for(200ms);
    }
    if (a->output == "json") {
      std::cout << nlohmann::json{{"name", name}, {"status", status}}.dump(2) << "\n";
    } else {
      PrintCollectors(status.value("collectors", nlohmann::json::array()));
      const auto b = status.value("bundle", nlohmann::json::object());
      if (!b.empty()) {
        std::cout << fmt::format("bundle: {} bytes, sha256 {}\n", b.value("size", 0),
                                 b.value("sha256", ""));
        if (b.contains("location")) std::cout << "location: " << b.value("location", "") << "\n";
        std::cout << "on the node: " << b.value("nodePath", "") << "\n";
      }
    }
    exit_code = last_phase == "Succeeded" ? kExitOk : kExitFailure;
  });
}

struct BundleArgs {
  std::string config, output;
  std::vector<std::string> include, exclude;
  std::string timeout;
};

void RegisterBundle(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<BundleArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bundle",
      "Write this host's diagnostic bundle (the collectors of a NodeDiagnostic) to a file");
  cmd->add_option("--config", a->config, "Agent config (YAML) whose paths and switches to use");
  cmd->add_option("-f,--output", a->output,
                  "The bundle's file (default gpuheal-bundle-<host>-<UTC time>.tar.gz)");
  cmd->add_option("--include", a->include, "Only these collectors (comma-separated)");
  cmd->add_option("--exclude", a->exclude, "Every collector but these (comma-separated)");
  cmd->add_option("--collector-timeout", a->timeout,
                  "Each collector's deadline (default diagnostics.collector_timeout, 5s)");
  cmd->callback([a, &exit_code] {
    const char* me = "gpuheal bundle";
    AgentConfig cfg;
    if (!a->config.empty()) {
      auto c = LoadAgentConfig(a->config);
      if (!c) {
        std::cerr << me << ": " << c.error().message << "\n";
        exit_code = kExitUsage;
        return;
      }
      cfg = std::move(*c);
    }
    if (!a->timeout.empty()) {
      const auto t = ParseDuration(a->timeout);
      if (!t || t->count() <= 0) {
        std::cerr << me << ": --collector-timeout " << a->timeout << ": not a duration\n";
        exit_code = kExitUsage;
        return;
      }
      cfg.diagnostics.collector_timeout = *t;
    }
    auto names = SelectCollectors(SplitList(a->include), SplitList(a->exclude));
    if (!names) {
      std::cerr << me << ": " << names.error().message << "\n";
      exit_code = kExitUsage;
      return;
    }
    std::string out = a->output;
    if (out.empty()) {
      out = "gpuheal-bundle-" + RequestName(Host()) + ".tar.gz";
    }
    CollectContext ctx = ContextFor(cfg);
    ctx.boot_id = ReadBootId();
    ctx.agent_state = {{"version", GPUHEAL_VERSION},
                       {"note", "written by gpuheal bundle, not by a running agent"},
                       {"config_file", a->config},
                       {"state_dir", cfg.state_dir}};
    const auto started = std::chrono::steady_clock::now();
    auto results = RunCollectors(ctx, *names);
    Redactor().Apply(results);
    BundleHeader h{Host(), "", GPUHEAL_VERSION, kube::MicroTime(std::chrono::system_clock::now())};
    auto info = WriteBundle(out, h, std::move(results), cfg.diagnostics.max_bytes);
    if (!info) {
      std::cerr << me << ": " << info.error().message << "\n";
      exit_code = kExitFailure;
      return;
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - started)
                        .count();
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& c : info->manifest["collectors"]) {
      rows.push_back({{"name", c["name"]},
                      {"files", c["files"].size()},
                      {"bytes", c["bytes"]},
                      {"durationMs", c["duration_ms"]},
                      {"truncated", c["truncated"]},
                      {"error", c["error"]}});
    }
    PrintCollectors(rows);
    std::cout << fmt::format("{}: {} bytes, sha256 {}, built in {} ms\n", out, info->size,
                             info->sha256, ms);
    exit_code = kExitOk;
  });
}

struct RepairsArgs {
  std::string kubeconfig, node, output = "table";
};

void RegisterRepairs(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<RepairsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "repairs", "The controller's NodeRepair records: fault, phase, rung and timeline");
  cmd->add_option("--node", a->node, "Only this node's");
  cmd->add_option("--kubeconfig", a->kubeconfig,
                  "Kubeconfig (default $KUBECONFIG, then ~/.kube/config)");
  cmd->add_option("-o,--output", a->output, "table, timeline or json")
      ->check(CLI::IsMember({"table", "timeline", "json"}));
  cmd->callback([a, &exit_code] {
    const char* me = "gpuheal repairs";
    auto client = Connect(a->kubeconfig);
    if (!client) {
      std::cerr << me << ": " << client.error().message << "\n";
      exit_code = kExitUsage;
      return;
    }
    auto list = (*client)->ListAll<kube::NodeRepair>(std::string(kube::kNodeRepairsPath),
                                                     kube::DecodeNodeRepairList);
    if (!list) {
      std::cerr << me << ": " << list.error().message << "\n";
      exit_code = kExitFailure;
      return;
    }
    std::vector<kube::NodeRepair> items;
    for (auto& r : list->items) {
      if (a->node.empty() || r.node == a->node) items.push_back(std::move(r));
    }
    std::sort(items.begin(), items.end(), [](const auto& x, const auto& y) {
      return x.meta.creation_timestamp != y.meta.creation_timestamp
                 ? x.meta.creation_timestamp < y.meta.creation_timestamp
                 : x.meta.name < y.meta.name;
    });
    // Phases in the order they were reached.
    auto timeline = [](const kube::NodeRepair& r) {
      std::vector<std::pair<std::string, std::string>> t(r.phase_times.begin(),
                                                         r.phase_times.end());
      std::sort(t.begin(), t.end(),
                [](const auto& x, const auto& y) { return x.second < y.second; });
      return t;
    };
    if (a->output == "json") {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& r : items) {
        nlohmann::json phases = nlohmann::json::array();
        for (const auto& [p, t] : timeline(r)) phases.push_back({{"phase", p}, {"time", t}});
        out.push_back({{"name", r.meta.name},
                       {"node", r.node},
                       {"condition", r.condition},
                       {"reason", r.reason},
                       {"severity", r.severity},
                       {"phase", r.phase},
                       {"rung", r.rung},
                       {"attempts", r.attempts},
                       {"timeline", phases},
                       {"actions", r.actions},
                       {"steps", gpuheal::controller::StepsJson(r.steps)},
                       {"evicted_pods", r.evicted_pods},
                       {"replacement", r.replacement},
                       {"message", r.message}});
      }
      std::cout << out.dump(2) << "\n";
      exit_code = kExitOk;
      return;
    }
    std::vector<std::vector<std::string>> rows = {
        {"NAME", "NODE", "REASON", "SEVERITY", "PHASE", "RUNG", "STARTED", "MESSAGE"}};
    for (const auto& r : items) {
      rows.push_back({r.meta.name, r.node, r.reason, r.severity, r.phase,
                      r.rung.empty() ? "-" : r.rung, r.meta.creation_timestamp,
                      r.message.empty() ? "-" : r.message});
    }
    PrintTable(rows);
    if (a->output == "timeline") {
      for (const auto& r : items) {
        std::cout << "\n" << r.meta.name << " (" << r.node << ", " << r.reason << ")\n";
        const auto t = timeline(r);
        const auto first = t.empty() ? std::nullopt : kube::ParseTime(t.front().second);
        for (const auto& [p, at] : t) {
          const auto when = kube::ParseTime(at);
          const long long ms =
              first && when
                  ? std::chrono::duration_cast<std::chrono::milliseconds>(*when - *first).count()
                  : 0;
          std::cout << fmt::format("  T+{:>8} ms  {:<20} {}\n", ms, p, at);
        }
        for (const auto& act : r.actions) std::cout << "  action: " << act << "\n";
      }
    }
    exit_code = kExitOk;
  });
}

}  // namespace

void RegisterDiagnostics(CLI::App& app, int& exit_code) {
  RegisterDiagnose(app, exit_code);
  RegisterBundle(app, exit_code);
  RegisterRepairs(app, exit_code);
}

}  // namespace gpuheal::cli
