// gpuheal agent --standalone: the node daemon without Kubernetes.

#include <unistd.h>

#include <iostream>
#include <memory>

#include "agent/standalone_agent.h"
#include "cli/commands.h"
#include "core/config.h"

namespace gpuheal::cli {
namespace {
struct AgentArgs {
  bool standalone = false;
  std::string config;
  std::string kmsg;
  std::string state_dir;
  std::string listen;
  bool accept_injected = false;
};
}  // namespace

void RegisterAgent(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<AgentArgs>();
  CLI::App* cmd = app.add_subcommand(
      "agent", "Node daemon: watch the kernel log event-driven and report GPU and node faults");
  cmd->add_flag("--standalone", args->standalone,
                "Without Kubernetes: print fault events as JSON lines, serve /metrics and /healthz");
  cmd->add_option("--config", args->config, "YAML config file (docs/config.md)");
  cmd->add_option("--kmsg", args->kmsg, "Kernel log device or FIFO (default /dev/kmsg)");
  cmd->add_option("--state-dir", args->state_dir, "Where the agent keeps its cursor "
                                                  "(default /var/lib/gpuheal)");
  cmd->add_option("--listen", args->listen,
                  "host:port for /metrics and /healthz (default 127.0.0.1:9464; port 0 picks one; "
                  "'' disables)");
  cmd->add_flag("--accept-injected", args->accept_injected,
                "Act on records written from user space (drills); events say \"injected\": true");
  cmd->callback([args, cmd, &exit_code] {
    if (!args->standalone) {
      std::cerr << "gpuheal agent: reporting to Kubernetes is not available in this version; run "
                   "`gpuheal agent --standalone`\n";
      exit_code = kExitUsage;
      return;
    }
    AgentConfig cfg;
    if (!args->config.empty()) {
      auto loaded = LoadAgentConfig(args->config);
      if (!loaded) {
        std::cerr << "gpuheal agent: " << loaded.error().message << "\n";
        exit_code = kExitUsage;
        return;
      }
      cfg = std::move(*loaded);
    }
    // Flags override the file.
    if (!args->kmsg.empty()) cfg.kmsg_path = args->kmsg;
    if (!args->state_dir.empty()) cfg.state_dir = args->state_dir;
    if (cmd->count("--listen")) cfg.listen = args->listen;
    if (args->accept_injected) cfg.accept_injected = true;
    auto agent = StandaloneAgent::Create(std::move(cfg), STDOUT_FILENO);
    if (!agent) {
      std::cerr << "gpuheal agent: " << agent.error().message << "\n";
      exit_code = kExitUsage;
      return;
    }
    exit_code = (*agent)->Run();
  });
}

}  // namespace gpuheal::cli
