// gpuheal explain xid N | xid --all | reasons | contracts

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/fault_json.h"
#include "core/reasons.h"
#include "core/xid_catalog.h"

namespace gpuheal::cli {
namespace {

std::string_view ActionMeaning(Action a) {
  switch (a) {
    case Action::kLog:
      return "metric and log line only";
    case Action::kEvent:
      return "Kubernetes Event; counted for escalation";
    case Action::kResetGpu:
      return "drain this GPU (no new work), let running work finish within a bound, reset it, verify";
    case Action::kQuarantine:
      return "taint NoSchedule and cordon the node, checkpoint window, evict, reboot or replace";
    case Action::kIsolate:
      return "taint NoExecute, short checkpoint window, evict, out-of-band reboot or replace";
  }
  return "";
}

nlohmann::ordered_json XidJson(const XidInfo& x) {
  nlohmann::ordered_json j;
  j["xid"] = x.xid;
  j["mnemonic"] = x.mnemonic;
  j["description"] = x.description;
  j["nvidia_bucket"] = ToString(x.bucket);
  j["severity"] = ToString(x.severity);
  j["action"] = ToString(DefaultAction(x.severity));
  j["condition"] = ToString(Condition::kAcceleratedHardwareReady);
  j["reason"] = reason::XidReason(x.xid, x.severity);
  j["deviation"] = x.deviation.empty() ? nlohmann::ordered_json(nullptr)
                                       : nlohmann::ordered_json(x.deviation);
  j["escalation"] = EscalationRuleOf(x);
  j["consequence"] = ConsequenceRuleOf(x.xid);
  return j;
}

std::string XidText(const XidInfo& x) {
  const Action a = DefaultAction(x.severity);
  std::string out = fmt::format("Xid {}  {}\n", x.xid, x.mnemonic);
  out += fmt::format("  description:   {}\n", x.description);
  out += fmt::format("  NVIDIA bucket: {}\n", ToString(x.bucket));
  out += fmt::format("  severity:      {}\n", ToString(x.severity));
  out += fmt::format("  action:        {} ({})\n", ToString(a), ActionMeaning(a));
  out += fmt::format("  condition:     {}\n", ToString(Condition::kAcceleratedHardwareReady));
  out += fmt::format("  reason:        {}\n", reason::XidReason(x.xid, x.severity));
  out += fmt::format("  deviation:     {}\n",
                     x.deviation.empty() ? "none (follows NVIDIA's bucket)" : x.deviation);
  out += fmt::format("  escalation:    {}\n", EscalationRuleOf(x));
  out += fmt::format("  consequence:   {}\n", ConsequenceRuleOf(x.xid));
  if (x.xid == 154) {
    out += "  note:          severity follows the recovery action in the line: none=info, GPU "
           "reset/drain=critical, node reboot=fatal\n";
  }
  if (x.bucket == Bucket::kWorkflowNvlink5Err) {
    out += "  note:          a line marked Nonfatal is a warning; the subcode is bits 20-25 of the "
           "first register\n";
  }
  return out;
}

std::string XidMarkdown() {
  std::string out =
      "| Xid | Mnemonic | NVIDIA bucket | gpuheal severity | default action | reason |\n"
      "|---:|---|---|---|---|---|\n";
  for (const XidInfo& x : AllXids()) {
    out += fmt::format("| {} | {} | {} | {}{} | {} | {} |\n", x.xid, x.mnemonic, ToString(x.bucket),
                       ToString(x.severity), x.deviation.empty() ? "" : " †",
                       ToString(DefaultAction(x.severity)), reason::XidReason(x.xid, x.severity));
  }
  out += "\n† deviates from the bucket's severity:\n\n";
  for (const XidInfo& x : AllXids()) {
    if (!x.deviation.empty()) out += fmt::format("- **Xid {}** → {}: {}\n", x.xid, ToString(x.severity), x.deviation);
  }
  return out;
}

std::string ReasonsMarkdown() {
  std::string out = "| Reason | Condition | Meaning |\n|---|---|---|\n";
  for (const auto& r : reason::FixedReasons()) {
    out += fmt::format("| `{}` | {} | {} |\n", r.name, ToString(r.condition), r.meaning);
  }
  out += "| `NvidiaXID<N>Error` | AcceleratedHardwareReady | Xid N at fatal or catastrophic severity |\n";
  out += "| `NvidiaXID<N>Warning` | AcceleratedHardwareReady | Xid N at info, warn or critical severity (an Event) |\n";
  out += "| `NvidiaSXID<N>Error` | AcceleratedHardwareReady | NVSwitch SXid N marked Fatal |\n";
  out += "| `NvidiaSXID<N>Warning` | AcceleratedHardwareReady | NVSwitch SXid N marked Non-fatal |\n";
  return out;
}

struct ExplainArgs {
  int xid = 0;
  bool all = false;
  bool json = false;
  bool markdown = false;
};

}  // namespace

void RegisterExplain(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("explain", "Explain catalog entries and public contracts");
  cmd->require_subcommand(1);
  auto args = std::make_shared<ExplainArgs>();

  CLI::App* xid = cmd->add_subcommand("xid", "An Xid's catalog entry: mnemonic, NVIDIA's "
                                              "resolution, gpuheal's severity and action");
  xid->add_option("N", args->xid, "Xid number");
  xid->add_flag("--all", args->all, "Every Xid in the catalog");
  xid->add_flag("--json", args->json, "JSON output");
  xid->add_flag("--markdown", args->markdown, "Markdown table (with --all; docs/xid.md)");
  xid->callback([args, &exit_code] {
    if (args->all) {
      if (args->markdown) {
        std::cout << XidMarkdown();
      } else if (!args->json) {
        std::cout << "catalog: NVIDIA Xid catalog, Xids 1-" << AllXids().size()
                  << " (Ampere and newer); a newer Xid is reported as a warning\n\n";
        for (const XidInfo& x : AllXids()) std::cout << XidText(x) << "\n";
      } else {
        nlohmann::ordered_json arr = nlohmann::ordered_json::array();
        for (const XidInfo& x : AllXids()) arr.push_back(XidJson(x));
        std::cout << ToJsonLine(arr) << "\n";
      }
      exit_code = kExitOk;
      return;
    }
    const XidInfo* x = FindXid(args->xid);
    if (!x) {
      std::cerr << fmt::format(
          "gpuheal explain xid: Xid {} is not in the catalog (it defines 1-{}); "
          "the agent still reports it, as a warning\n",
          args->xid, AllXids().size());
      exit_code = kExitUsage;
      return;
    }
    std::cout << (args->json ? ToJsonLine(XidJson(*x)) + "\n" : XidText(*x));
    exit_code = kExitOk;
  });

  CLI::App* reasons = cmd->add_subcommand("reasons", "Every reason code and its condition");
  reasons->callback([&exit_code] {
    std::cout << ReasonsMarkdown();
    exit_code = kExitOk;
  });

  CLI::App* contracts =
      cmd->add_subcommand("contracts", "The public contract listing the golden test guards");
  contracts->callback([&exit_code] {
    std::cout << reason::ContractListing();
    exit_code = kExitOk;
  });
}

}  // namespace gpuheal::cli
