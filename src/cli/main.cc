// gpuheal: self-healing for GPU nodes. One binary, several roles (see `gpuheal --help`).

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"gpuheal: detect GPU node faults from the kernel log and the NVIDIA driver"};
  app.set_version_flag("--version", std::string("gpuheal ") + GPUHEAL_VERSION);
  app.require_subcommand(1);
  int exit_code = gpuheal::cli::kExitOk;
  gpuheal::cli::RegisterClassify(app, exit_code);
  gpuheal::cli::RegisterExplain(app, exit_code);
  gpuheal::cli::RegisterInject(app, exit_code);
  gpuheal::cli::RegisterAgent(app, exit_code);
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
