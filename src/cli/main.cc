// gpuheal: self-healing for GPU nodes. One binary, several roles (see `gpuheal --help`).

#include <CLI/CLI.hpp>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"

int main(int argc, char** argv) {
  // Installed (or linked) as kubectl-gpuheal, the binary is a kubectl plugin: `kubectl gpuheal
  // diagnose NODE`, `kubectl gpuheal status`, `kubectl gpuheal repairs`, `kubectl gpuheal explain`.
  const char* slash = argc > 0 ? std::strrchr(argv[0], '/') : nullptr;
  const std::string self = argc > 0 ? (slash ? slash + 1 : argv[0]) : "gpuheal";
  const bool plugin = self == "kubectl-gpuheal";
  CLI::App app{"gpuheal: detect GPU node faults from the kernel log and the NVIDIA driver",
               plugin ? "kubectl gpuheal" : "gpuheal"};
  app.set_version_flag("--version", std::string("gpuheal ") + GPUHEAL_VERSION);
  app.require_subcommand(1);
  int exit_code = gpuheal::cli::kExitOk;
  // Every subcommand, in the order of `gpuheal --help`, with the names each registers.
  struct Command {
    std::vector<std::string_view> names;
    void (*add)(CLI::App&, int&);
  };
  const std::vector<Command> commands = {
      {{"classify"}, gpuheal::cli::RegisterClassify},
      {{"explain"}, gpuheal::cli::RegisterExplain},
      {{"inject"}, gpuheal::cli::RegisterInject},
      {{"agent"}, gpuheal::cli::RegisterAgent},
      {{"status"}, gpuheal::cli::RegisterStatus},
      {{"nvml-check"}, gpuheal::cli::RegisterNvmlCheck},
      {{"controller"}, gpuheal::cli::RegisterController},
      {{"sim"}, gpuheal::cli::RegisterSim},
      {{"drill"}, gpuheal::cli::RegisterDrill},
      {{"cleanup"}, gpuheal::cli::RegisterCleanup},
      {{"bmc"}, gpuheal::cli::RegisterBmc},
      {{"diagnose", "bundle", "repairs"}, gpuheal::cli::RegisterDiagnostics},
  };
  // A command line that starts with a subcommand's name registers that subcommand alone: building
  // every command's options runs (and keeps resident) code of the whole binary, which a node's
  // agent, started as `gpuheal agent ...`, never needs. Anything else (`--help`, `--version`, an
  // unknown name, `explain`, whose `flags` lists every command) registers them all, so what
  // CLI11 prints and accepts is the same either way.
  const std::string_view first = argc > 1 ? argv[1] : "";
  const Command* only = nullptr;
  for (const Command& c : commands) {
    for (std::string_view n : c.names) {
      if (n == first && n != "explain") only = &c;
    }
  }
  for (const Command& c : commands) {
    if (only == nullptr || only == &c) c.add(app, exit_code);
  }
  // `gpuheal explain flags`: every subcommand's flags, the CLI contract the golden test guards.
  if (only == nullptr) {
    app.get_subcommand("explain")
        ->add_subcommand("flags", "Every command's flags (the CLI contract)")
        ->callback([&app, &exit_code] {
          std::function<void(const CLI::App*, const std::string&)> walk =
              [&walk](const CLI::App* a, const std::string& path) {
                for (const CLI::Option* o : a->get_options()) {
                  std::string names;
                  for (const auto& n : o->get_lnames()) names += " --" + n;
                  for (const auto& n : o->get_snames()) names += " -" + n;
                  if (names.empty()) names = " <" + o->get_name() + ">";
                  std::cout << path << names << "\n";
                }
                for (const CLI::App* sub : a->get_subcommands({})) {
                  walk(sub, path + " " + sub->get_name());
                }
              };
          walk(&app, "gpuheal");
          exit_code = gpuheal::cli::kExitOk;
        });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return gpuheal::cli::kExitUsage;  // every usage error exits 2, whatever CLI11's own code
  }
  return exit_code;
}
