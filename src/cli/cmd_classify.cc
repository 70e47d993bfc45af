// gpuheal classify [FILE...]: one JSON line per fault found in kernel log text.

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/classifier.h"
#include "core/config.h"
#include "core/fault_json.h"

namespace gpuheal::cli {
namespace {

struct ClassifyArgs {
  std::vector<std::string> files;
  std::string config;
  std::vector<std::string> npd_rules;
};

int RunClassify(const ClassifyArgs& args) {
  ClassifierOptions opts;
  std::vector<std::string> npd_files = args.npd_rules;
  if (!args.config.empty()) {
    auto cfg = LoadAgentConfig(args.config);
    if (!cfg) {
      std::cerr << "gpuheal classify: " << cfg.error().message << "\n";
      return kExitUsage;
    }
    opts.xid_overrides = cfg->xid_overrides;
    npd_files.insert(npd_files.end(), cfg->npd_rule_files.begin(), cfg->npd_rule_files.end());
  }
  for (const std::string& f : npd_files) {
    auto npd = LoadNpdConfig(f);
    if (!npd) {
      std::cerr << "gpuheal classify: " << npd.error().message << "\n";
      return kExitUsage;
    }
    for (const std::string& note : npd->notes) std::cerr << "gpuheal classify: note: " << note << "\n";
    opts.npd_rules.push_back(std::move(*npd));
  }
  auto classifier = Classifier::Create(std::move(opts));
  if (!classifier) {
    std::cerr << "gpuheal classify: " << classifier.error().message << "\n";
    return kExitUsage;
  }
  std::ios::sync_with_stdio(false);
  std::vector<Fault> faults;
  std::string out;
  auto run = [&](std::istream& in, const std::string& name) {
    std::string line;
    size_t n = 0;
    while (std::getline(in, line)) {
      ++n;
      faults.clear();
      (*classifier)->ClassifyLine(line, n, faults);
      for (const Fault& f : faults) {
        auto j = ToJson(f);
        if (args.files.size() > 1) j["file"] = name;
        out += ToJsonLine(j);
        out.push_back('\n');
      }
      if (out.size() > 64 * 1024) {
        std::cout << out;
        out.clear();
      }
    }
  };
  if (args.files.empty() || (args.files.size() == 1 && args.files[0] == "-")) {
    run(std::cin, "-");
  } else {
    for (const std::string& f : args.files) {
      std::ifstream in(f);
      if (!in) {
        std::cout << out << std::flush;
        std::cerr << fmt::format("gpuheal classify: {}: cannot open file\n", f);
        return kExitUsage;
      }
      run(in, f);
    }
  }
  std::cout << out << std::flush;
  return kExitOk;
}

}  // namespace

void RegisterClassify(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ClassifyArgs>();
  CLI::App* cmd = app.add_subcommand(
      "classify",
      "Classify kernel log text (dmesg, dmesg -T/-x/-r, journalctl -k, syslog, /dev/kmsg records "
      "or bare messages): one JSON line per fault");
  cmd->add_option("files", args->files, "Files to read (stdin when none or '-')");
  cmd->add_option("--config", args->config, "Agent config (xid overrides, npd_rules)");
  cmd->add_option("--npd-rules", args->npd_rules,
                  "node-problem-detector kernel-monitor JSON file (repeatable)");
  cmd->callback([args, &exit_code] { exit_code = RunClassify(*args); });
}

}  // namespace gpuheal::cli
