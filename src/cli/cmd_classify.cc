// gpuheal classify [FILE...]: one JSON line per fault found in kernel log text.

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>

#include "agent/config.h"
#include "cli/commands.h"
#include "core/fault_json.h"
#include "parse/classifier.h"

namespace gpuheal::cli {
namespace {

// A kernel record is at most ~1 KiB (PRINTK_MESSAGE_MAX), so a real fault line is never cut;
// the bound keeps one huge line from costing its size in memory.
constexpr size_t kMaxLineBytes = 64 * 1024;

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
    for (const std::string& note : npd->notes)
      std::cerr << "gpuheal classify: note: " << note << "\n";
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
  std::vector<char> buf(kMaxLineBytes + 1);  // + getline's terminating NUL
  auto run = [&](std::istream& in, const std::string& name) {
    size_t n = 0;
    for (;;) {
      in.getline(buf.data(), static_cast<std::streamsize>(buf.size()));
      size_t len = static_cast<size_t>(in.gcount());
      if (len == 0 && in.eof()) break;
      if (in.bad()) break;
      const bool cut = in.fail() && !in.eof();  // the line filled the buffer without its end
      if (cut) {
        in.clear();
        in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
      } else if (!in.eof()) {
        --len;  // gcount counted the newline
      }
      ++n;
      if (cut) {
        std::cerr << fmt::format(
            "gpuheal classify: {}:{}: line longer than {} KiB; classified its first {} KiB, "
            "skipped the rest\n",
            name, n, kMaxLineBytes / 1024, kMaxLineBytes / 1024);
      }
      faults.clear();
      (*classifier)->ClassifyLine(std::string_view(buf.data(), len), n, faults);
      for (const Fault& f : faults) {
        auto j = ToJson(f);
        if (args.files.size() > 1) j["file"] = name;
        if (cut) j["truncated"] = true;
        out += ToJsonLine(j);
        out.push_back('\n');
      }
      if (out.size() > 64 * 1024) {
        std::cout << out;
        out.clear();
      }
      if (in.eof()) break;
    }
    return !in.bad();
  };
  if (args.files.empty() || (args.files.size() == 1 && args.files[0] == "-")) {
    if (!run(std::cin, "-")) {
      std::cout << out << std::flush;
      std::cerr << "gpuheal classify: cannot read stdin\n";
      return kExitFailure;
    }
  } else {
    for (const std::string& f : args.files) {
      std::error_code ec;
      if (std::filesystem::is_directory(f, ec)) {
        std::cout << out << std::flush;
        std::cerr << fmt::format(
            "gpuheal classify: {}: is a directory; name the log files in it instead\n", f);
        return kExitUsage;
      }
      std::ifstream in(f);
      if (!in) {
        std::cout << out << std::flush;
        std::cerr << fmt::format("gpuheal classify: {}: cannot open file\n", f);
        return kExitUsage;
      }
      if (!run(in, f)) {
        std::cout << out << std::flush;
        std::cerr << fmt::format("gpuheal classify: {}: cannot read file\n", f);
        return kExitFailure;
      }
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
