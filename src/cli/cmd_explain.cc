// gpuheal explain xid N | xid --all | reasons | contracts

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/fault_json.h"
#include "core/nvlink5.h"
#include "core/reasons.h"
#include "core/sxid_catalog.h"
#include "core/xid_catalog.h"
#include "slurm/reason.h"

namespace gpuheal::cli {
namespace {

std::string_view ActionMeaning(Action a) {
  switch (a) {
    case Action::kLog:
      return "metric and log line only";
    case Action::kEvent:
      return "Kubernetes Event; counted for escalation";
    case Action::kResetGpu:
      return "drain this GPU (no new work), let running work finish within a bound, reset it, "
             "verify";
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
  j["deviation"] =
      x.deviation.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(x.deviation);
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
    out +=
        "  note:          severity follows the recovery action in the line: none=info, GPU "
        "reset/drain=critical, node reboot=fatal\n";
  }
  if (x.bucket == Bucket::kWorkflowNvlink5Err) {
    out +=
        "  note:          severity from NVIDIA's decode sheet by unit, subcode (bits 20-25 of the "
        "first "
        "register) and error status (the second): RESET_GPU=critical, XID_154_EVAL=warn, "
        "IGNORE=info "
        "(warn where the sheet calls the row fatal); the Fatal/Nonfatal word only for registers "
        "the sheet "
        "lacks\n";
    for (const Nvlink5Row& r : Nvlink5Rows()) {
      if (r.xid != x.xid) continue;
      out += fmt::format("    {} v1 {} v2 {} status 0x{:x}: {} ({}; {})\n", r.unit, r.pattern_v1,
                         r.pattern_v2, r.status, ToString(r.resolution), r.nvidia_severity,
                         r.investigatory);
    }
  }
  return out;
}

std::string Nvlink5Markdown() {
  std::string out =
      "| Xid | unit | IntrInfo (pre-R575) | IntrInfo (R575+) | error status | NVIDIA | sheet "
      "severity | gpuheal |\n"
      "|---:|---|---|---|---|---|---|---|\n";
  for (const Nvlink5Row& r : Nvlink5Rows()) {
    Nvlink5Registers regs;
    // Any IntrInfo the row's pattern accepts: its fixed bits.
    for (size_t i = 0; i < 32; ++i) {
      if (r.pattern_v1[i] == '1') regs.intrinfo |= uint32_t{1} << (31 - i);
    }
    regs.status = r.status;
    const auto d = DecideNvlink5(r.xid, regs);
    out += fmt::format("| {} | {} | `{}` | `{}` | 0x{:x} | {}{} | {} | {} |\n", r.xid, r.unit,
                       r.pattern_v1, r.pattern_v2, r.status, ToString(r.resolution),
                       r.second_action_reset ? " (then RESET_GPU)" : "", r.nvidia_severity,
                       d ? ToString(d->severity) : "?");
  }
  return out;
}

std::string SxidMarkdown() {
  std::string out =
      "| SXid | NVIDIA class | NVIDIA action | gpuheal severity | default action | reason |\n"
      "|---:|---|---|---|---|---|\n";
  for (const SxidInfo& s : AllSxids()) {
    out += fmt::format("| {} | {} | {} | {} | {} | {} |\n", s.sxid, ToString(s.cls),
                       s.nvidia_action, ToString(s.severity), ToString(DefaultAction(s.severity)),
                       reason::SxidReason(s.sxid, s.severity));
  }
  return out;
}

std::string SxidText(const SxidInfo& s) {
  const Action a = DefaultAction(s.severity);
  std::string out = fmt::format("SXid {}\n", s.sxid);
  out += fmt::format("  NVIDIA class:  {}\n", ToString(s.cls));
  out += fmt::format("  NVIDIA action: {}\n", s.nvidia_action);
  out += fmt::format("  severity:      {} ({})\n", ToString(s.severity), s.why);
  out += fmt::format("  action:        {} ({})\n", ToString(a), ActionMeaning(a));
  out += fmt::format("  condition:     {}\n", ToString(Condition::kAcceleratedHardwareReady));
  out += fmt::format("  reason:        {}\n", reason::SxidReason(s.sxid, s.severity));
  return out;
}

nlohmann::ordered_json SxidJson(const SxidInfo& s) {
  nlohmann::ordered_json j;
  j["sxid"] = s.sxid;
  j["nvidia_class"] = ToString(s.cls);
  j["nvidia_action"] = s.nvidia_action;
  j["severity"] = ToString(s.severity);
  j["why"] = s.why;
  j["action"] = ToString(DefaultAction(s.severity));
  j["condition"] = ToString(Condition::kAcceleratedHardwareReady);
  j["reason"] = reason::SxidReason(s.sxid, s.severity);
  return j;
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
    if (!x.deviation.empty())
      out += fmt::format("- **Xid {}** → {}: {}\n", x.xid, ToString(x.severity), x.deviation);
  }
  out +=
      "\n## NVLink5 decode (Xids 144–150)\n\n"
      "NVIDIA's \"Xid 144-150 Decode\" sheet, one row per sheet row. Patterns are bit 31 first, "
      "`-` for any bit; "
      "bits 20–25 are the subcode, the low bits the unit. The error status is the line's second "
      "register. "
      "A line whose registers match no row keeps its Fatal (critical) or Nonfatal (warn) word and "
      "says so in "
      "`decode`.\n\n";
  out += Nvlink5Markdown();
  out +=
      "\n## NVSwitch SXids\n\n"
      "NVIDIA's Fabric Manager User Guide classifies each SXid (non-fatal, fatal, always fatal) "
      "with an action. "
      "Non-fatal SXids are warnings, except 19084, whose action resets every GPU and NVSwitch; "
      "fatal ones "
      "take the node's GPUs out (quarantine); always-fatal ones need a host restart (isolate). An "
      "SXid the "
      "tables omit keeps the line's word: Fatal is fatal, Non-fatal a warning. `gpuheal explain "
      "sxid N` "
      "prints one.\n\n";
  out += SxidMarkdown();
  return out;
}

std::string ReasonsMarkdown() {
  std::string out = "| Reason | Condition | Meaning |\n|---|---|---|\n";
  for (const auto& r : reason::FixedReasons()) {
    out += fmt::format("| `{}` | {} | {} |\n", r.name, ToString(r.condition), r.meaning);
  }
  out +=
      "| `NvidiaXID<N>Error` | AcceleratedHardwareReady | Xid N at fatal or catastrophic severity "
      "|\n";
  out +=
      "| `NvidiaXID<N>Warning` | AcceleratedHardwareReady | Xid N at info, warn or critical "
      "severity (an Event) |\n";
  out +=
      "| `NvidiaSXID<N>Error` | AcceleratedHardwareReady | NVSwitch SXid N at fatal or "
      "catastrophic severity (NVIDIA's SXid tables) |\n";
  out +=
      "| `NvidiaSXID<N>Warning` | AcceleratedHardwareReady | NVSwitch SXid N at a lower severity "
      "(an Event) |\n";
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

  CLI::App* xid = cmd->add_subcommand("xid",
                                      "An Xid's catalog entry: mnemonic, NVIDIA's "
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
        std::cout << "catalog: " << CatalogCoverage() << "\n\n";
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
          "gpuheal explain xid: Xid {} is not in the catalog ({}); "
          "the agent still reports it, as a warning\n",
          args->xid, CatalogCoverage());
      exit_code = kExitUsage;
      return;
    }
    std::cout << (args->json ? ToJsonLine(XidJson(*x)) + "\n" : XidText(*x));
    exit_code = kExitOk;
  });

  auto sx = std::make_shared<ExplainArgs>();
  CLI::App* sxid =
      cmd->add_subcommand("sxid",
                          "An NVSwitch SXid's entry: NVIDIA's class and action, gpuheal's "
                          "severity and action");
  sxid->add_option("N", sx->xid, "SXid number");
  sxid->add_flag("--all", sx->all, "Every SXid NVIDIA's tables list");
  sxid->add_flag("--json", sx->json, "JSON output");
  sxid->callback([sx, &exit_code] {
    if (sx->all) {
      if (sx->json) {
        nlohmann::ordered_json arr = nlohmann::ordered_json::array();
        for (const SxidInfo& s : AllSxids()) arr.push_back(SxidJson(s));
        std::cout << ToJsonLine(arr) << "\n";
      } else {
        for (const SxidInfo& s : AllSxids()) std::cout << SxidText(s) << "\n";
      }
      exit_code = kExitOk;
      return;
    }
    const SxidInfo* s = FindSxid(sx->xid);
    if (!s) {
      std::cerr << fmt::format(
          "gpuheal explain sxid: SXid {} is not in NVIDIA's SXid tables; the agent still reports "
          "it: a line "
          "marked Fatal as fatal, Non-fatal as a warning (`gpuheal explain sxid --all` lists the "
          "tables)\n",
          sx->xid);
      exit_code = kExitUsage;
      return;
    }
    std::cout << (sx->json ? ToJsonLine(SxidJson(*s)) + "\n" : SxidText(*s));
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
    std::cout << reason::ContractListing() << slurm::ReasonContractListing();
    exit_code = kExitOk;
  });
}

}  // namespace gpuheal::cli
