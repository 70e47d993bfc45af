// gpuheal agent: the node daemon. --standalone: without Kubernetes; otherwise it also reports the
// node's domain conditions and Events to the API server.

#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <memory>

#include "agent/config.h"
#include "agent/standalone_agent.h"
#include "cli/commands.h"
#include "core/listen_address.h"
#include "core/log.h"
#include "kube/client.h"
#include "slurm/client.h"

namespace gpuheal::cli {
namespace {
struct AgentArgs {
  bool standalone = false;
  bool slurm = false;
  std::string config;
  std::string kmsg;
  std::string state_dir;
  std::string listen;
  bool accept_injected = false;
  std::string node_name;
  std::string kubeconfig;
  std::string nvml_library;
  std::string kmsg_bpf;
};
}  // namespace

void RegisterAgent(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<AgentArgs>();
  CLI::App* cmd = app.add_subcommand(
      "agent", "Node daemon: watch the kernel log event-driven and report GPU and node faults");
  cmd->add_flag(
      "--standalone", args->standalone,
      "Without Kubernetes: print fault events as JSON lines, serve /metrics and /healthz");
  cmd->add_flag("--slurm", args->slurm,
                "Report to Slurm instead of Kubernetes: drain, checkpoint, requeue and resume this "
                "Slurm node through slurmctld (docs/slurm.md)");
  cmd->add_option("--config", args->config, "YAML config file (docs/config.md)");
  cmd->add_option("--kmsg", args->kmsg, "Kernel log device or FIFO (default /dev/kmsg)");
  cmd->add_option("--kmsg-bpf", args->kmsg_bpf,
                  "Wake on the kernel-log doorbell (BPF): auto, true or false (default kmsg_bpf, "
                  "auto)");
  cmd->add_option("--state-dir", args->state_dir,
                  "Where the agent keeps its cursor "
                  "(default /var/lib/gpuheal)");
  cmd->add_option("--listen", args->listen,
                  "host:port for /metrics and /healthz (default 127.0.0.1:9464; port 0 picks one; "
                  "'' disables)");
  cmd->add_flag("--accept-injected", args->accept_injected,
                "Act on records written from user space (drills); events say \"injected\": true");
  cmd->add_option("--node-name", args->node_name,
                  "The Node this agent reports for (default $NODE_NAME, set from the downward "
                  "API); with --slurm, its Slurm NodeName (default slurm.node_name, else the "
                  "host name)");
  cmd->add_option("--kubeconfig", args->kubeconfig,
                  "Kubeconfig for out-of-cluster use (default: in-cluster service account)");
  cmd->add_option("--nvml-library", args->nvml_library,
                  "NVML library to load (default $GPUHEAL_NVML_LIBRARY, else nvidia.nvml_library, "
                  "libnvidia-ml.so.1)");
  cmd->callback([args, cmd, &exit_code] {
    // One malloc arena: the agent allocates little, and each thread's arena of its own (glibc
    // makes up to 8 per core) keeps its first pages resident for good. MALLOC_ARENA_MAX in the
    // environment still decides when set.
    if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 1);
    std::unique_ptr<kube::Client> kube_client, watch_client, diag_client;
    std::vector<std::string> diag_secrets;
    KubeReporterOptions ro;
    if (args->standalone && args->slurm) {
      std::cerr << "gpuheal agent: --standalone and --slurm name two backends; give one\n";
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
    // The flags choose the backend over the file's `backend:`.
    if (args->standalone) cfg.backend = AgentConfig::Backend::kStandalone;
    if (args->slurm) cfg.backend = AgentConfig::Backend::kSlurm;
    const bool to_kube = cfg.backend == AgentConfig::Backend::kKubernetes;
    const bool to_slurm = cfg.backend == AgentConfig::Backend::kSlurm;
    std::string node_name = args->node_name;
    if (to_kube) {
      if (node_name.empty() && std::getenv("NODE_NAME")) node_name = std::getenv("NODE_NAME");
      if (node_name.empty()) {
        std::cerr
            << "gpuheal agent: no node name: give --node-name or set NODE_NAME (in a DaemonSet, "
               "from fieldRef spec.nodeName), or run --standalone without Kubernetes\n";
        exit_code = kExitUsage;
        return;
      }
    } else if (!args->kubeconfig.empty() || (!to_slurm && !args->node_name.empty())) {
      std::cerr << "gpuheal agent: --node-name and --kubeconfig are for reporting to Kubernetes; "
                   "drop them or drop "
                << (to_slurm ? "--slurm (or backend: slurm)" : "--standalone") << "\n";
      exit_code = kExitUsage;
      return;
    }
    if (to_slurm) {
      if (node_name.empty()) node_name = cfg.slurm.node_name;
      if (node_name.empty()) {
        char host[256] = {};
        if (gethostname(host, sizeof host - 1) == 0) node_name = host;
        node_name = node_name.substr(0, node_name.find('.'));
      }
      if (node_name.empty()) {
        std::cerr << "gpuheal agent: no Slurm node name: give --node-name or slurm.node_name\n";
        exit_code = kExitUsage;
        return;
      }
    }
    // Flags override the file.
    if (!args->kmsg.empty()) cfg.kmsg_path = args->kmsg;
    if (!args->state_dir.empty()) cfg.state_dir = args->state_dir;
    if (cmd->count("--kmsg-bpf")) {
      const auto b = ParseKmsgBpf(args->kmsg_bpf);
      if (!b) {
        std::cerr << "gpuheal agent: --kmsg-bpf must be auto, true or false, not \""
                  << args->kmsg_bpf << "\"\n";
        exit_code = kExitUsage;
        return;
      }
      cfg.kmsg_bpf = *b;
    }
    if (cmd->count("--listen")) {
      if (auto a = ParseListenAddress(args->listen); !args->listen.empty() && !a) {
        std::cerr << "gpuheal agent: --listen: " << a.error().message << "\n";
        exit_code = kExitUsage;
        return;
      }
      cfg.listen = args->listen;
      cfg.listen_origin = "--listen: ";
    }
    if (args->accept_injected) cfg.accept_injected = true;
    // One rule (docs/nvml.md): the flag and $GPUHEAL_NVML_LIBRARY name the library and make NVML
    // required, but never switch on what the config switched off. The flag against
    // `nvidia.nvml: false` is a contradiction (exit 2); the variable, often set for a whole
    // environment, is left unused and said so.
    const bool nvml_off = cfg.nvidia.nvml == NvidiaConfig::Use::kOff;
    if (!args->nvml_library.empty()) {
      if (nvml_off) {
        std::cerr << "gpuheal agent: --nvml-library " << args->nvml_library
                  << " contradicts nvidia.nvml: false in " << args->config
                  << ": drop the flag, or set nvidia.nvml to auto or true\n";
        exit_code = kExitUsage;
        return;
      }
      cfg.nvidia.nvml_library = args->nvml_library;
      cfg.nvidia.nvml = NvidiaConfig::Use::kOn;
    } else if (const char* lib = std::getenv("GPUHEAL_NVML_LIBRARY"); lib && *lib) {
      if (nvml_off) {
        Log("info",
            "GPUHEAL_NVML_LIBRARY is set but nvidia.nvml is false in the config: NVML stays off",
            {{"GPUHEAL_NVML_LIBRARY", lib}});
      } else {
        cfg.nvidia.nvml_library = lib;
        cfg.nvidia.nvml = NvidiaConfig::Use::kOn;
      }
    }
    if (to_kube) {
      auto kcfg = args->kubeconfig.empty() ? kube::InClusterConfig()
                                           : kube::LoadKubeconfig(args->kubeconfig);
      if (!kcfg) {
        std::cerr << "gpuheal agent: " << kcfg.error().message << "\n";
        exit_code = kExitUsage;
        return;
      }
      kcfg->user_agent = "gpuheal-agent/" GPUHEAL_VERSION;
      kcfg->timeout = std::chrono::seconds(10);
      // A second connection for the watch of this Node (GPU recovery requests): a long watch must
      // never hold up a status write.
      auto watch = kube::Client::Create(*kcfg);
      // And one for NodeDiagnostic requests (watch and status writes), with the secrets a
      // bundle must never carry: the token and the client key.
      if (cfg.diagnostics.enabled) {
        if (auto diag = kube::Client::Create(*kcfg)) diag_client = std::move(*diag);
        if (kcfg->token) {
          if (auto t = kcfg->token->Get()) diag_secrets.push_back(*t);
        }
        if (!kcfg->client_key_pem.empty()) diag_secrets.push_back(kcfg->client_key_pem);
      }
      auto client = kube::Client::Create(std::move(*kcfg));
      if (!client) {
        std::cerr << "gpuheal agent: " << client.error().message << "\n";
        exit_code = kExitUsage;
        return;
      }
      ro.node_name = node_name;
      ro.heartbeat = cfg.heartbeat_period;
      kube_client = std::move(*client);
      if (watch) watch_client = std::move(*watch);
    }
    AgentPorts ports;
    if (to_slurm) {
      auto api = slurm::OpenLibslurm(cfg.slurm.library, cfg.slurm.conf);
      if (!api) {
        std::cerr << "gpuheal agent: " << api.error().message << "\n";
        exit_code = api.error().code == ErrorCode::kUsage ? kExitUsage : 1;
        return;
      }
      ports.slurm = std::move(*api);
      cfg.slurm.node_name = node_name;
    }
    ports.api = std::move(kube_client);
    ports.reporter = ro;
    ports.watch_api = std::move(watch_client);
    ports.diagnostics_api = std::move(diag_client);
    ports.diagnostics_secrets = std::move(diag_secrets);
    auto agent = StandaloneAgent::Create(std::move(cfg), STDOUT_FILENO, std::move(ports));
    if (!agent) {
      std::cerr << "gpuheal agent: " << agent.error().message << "\n";
      exit_code = kExitUsage;
      return;
    }
    exit_code = (*agent)->Run();
  });
}

}  // namespace gpuheal::cli
