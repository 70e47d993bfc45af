// `gpuheal sim`: simulated GPU nodes (the kubelet's side of the API) for tests, drills and scale
// runs. docs/sim.md.

#include <signal.h>

#include <iostream>
#include <memory>

#include "agent/config.h"
#include "cli/commands.h"
#include "core/log.h"
#include "kube/client.h"
#include "kube/kube_config.h"
#include "sim/sim.h"

namespace gpuheal::cli {

void RegisterSim(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<sim::SimOptions>();
  auto kubeconfig = std::make_shared<std::string>();
  auto durations = std::make_shared<std::array<std::string, 4>>();
  CLI::App* cmd = app.add_subcommand(
      "sim", "Simulated GPU nodes (kubelet stand-ins) for tests, drills and scale runs");
  cmd->add_option("--kubeconfig", *kubeconfig,
                  "Kubeconfig of the cluster to register the nodes in (required)")
      ->required();
  cmd->add_option("--nodes", o->nodes, "GPU nodes in service, spread over the pools (default 16)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--pools", o->pools, "Pools (label gpuheal.io/pool) (default 2)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--standby", o->standby_per_pool,
                  "Standby nodes per pool, tainted gpuheal.io/standby (default 1)")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--gpus", o->gpus_per_node, "nvidia.com/gpu capacity of each node (default 8)")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--prefix", o->prefix, "Node name prefix: <prefix>-<pool>-<i> (default sim)");
  cmd->add_option("--lease-period", (*durations)[0],
                  "Node Lease renewal period (default 10s, as kubelet)");
  cmd->add_option("--status-period", (*durations)[1],
                  "Ready condition heartbeat period (default 60s)");
  cmd->add_option("--checkpoint-delay", (*durations)[2],
                  "How long a workload takes to answer gpuheal.io/checkpoint-requested (default "
                  "500ms; 'never')");
  cmd->add_option("--max-termination", (*durations)[3],
                  "Cap on a deleted pod's grace period (default 2s)");
  cmd->add_option("--api-threads", o->api_threads, "Threads making the API calls (default 4)")
      ->check(CLI::Range(1, 64));
  cmd->add_flag("--keep", o->keep_nodes, "Leave the nodes registered on exit");
  cmd->add_flag(
      "--agents", o->agents,
      "Run a gpuheal agent per node in this process, reading the node's simulated kernel log "
      "(<state-dir>/<node>/kmsg; write to it with `gpuheal inject --node`)");
  cmd->add_option(
      "--real-kmsg", o->real_kmsg_node,
      "With --agents: this node's agent reads the machine's real /dev/kmsg (new records only, "
      "injected "
      "ones acted on), so `gpuheal inject --xid N` faults it through the kernel (root)");
  cmd->add_option("--adopt", o->adopt_selector,
                  "Also be the kubelet of the nodes a provisioner registers that match this label "
                  "selector (e.g. karpenter.sh/nodepool for Karpenter's kwok provider), from "
                  "the moment each appears");
  cmd->add_flag("--process-runtime", o->process_runtime,
                "Run the containers of pods annotated sim.gpuheal.io/runtime=process as processes "
                "of this host, each pod at an address of its own on the loopback interface "
                "(root; docs/sim.md)");
  cmd->add_option(
      "--state-dir", o->state_dir,
      "Per-node agent state, kernel log FIFOs and fault lines (default /tmp/gpuheal-sim)");
  cmd->callback([o, kubeconfig, durations, &exit_code] {
    std::chrono::milliseconds* fields[] = {&o->lease_period, &o->status_period,
                                           &o->checkpoint_delay, &o->max_termination};
    const char* names[] = {"--lease-period", "--status-period", "--checkpoint-delay",
                           "--max-termination"};
    for (int i = 0; i < 4; ++i) {
      const std::string& v = (*durations)[i];
      if (v.empty()) continue;
      if (i == 2 && v == "never") {
        o->checkpoint_delay = std::chrono::milliseconds(-1);
        continue;
      }
      auto d = ParseDuration(v);
      if (!d || d->count() < (i == 2 || i == 3 ? 0 : 1)) {
        std::cerr << "gpuheal sim: " << names[i] << " " << v
                  << ": not a duration (e.g. 10s, 500ms)\n";
        exit_code = kExitUsage;
        return;
      }
      *fields[i] = *d;
    }
    if (!o->real_kmsg_node.empty() && !o->agents) {
      std::cerr << "gpuheal sim: --real-kmsg " << o->real_kmsg_node << " needs --agents\n";
      exit_code = kExitUsage;
      return;
    }
    auto cfg = kube::LoadKubeconfig(*kubeconfig);
    if (!cfg) {
      std::cerr << "gpuheal sim: " << cfg.error().message << "\n";
      exit_code = kExitUsage;
      return;
    }
    cfg->user_agent = "gpuheal-sim/" GPUHEAL_VERSION;
    cfg->qps = 0;  // a fleet of kubelets: each would have its own limit
    o->agent_kube = *cfg;
    o->agent_kube.timeout = std::chrono::seconds(10);
    auto watch = kube::Client::Create(*cfg);
    auto client = kube::Client::Create(std::move(*cfg));
    if (!client || !watch) {
      std::cerr << "gpuheal sim: " << (client ? watch.error().message : client.error().message)
                << "\n";
      exit_code = kExitUsage;
      return;
    }
    // Signals are blocked before any thread starts, so that they reach sigwait below.
    const sigset_t mask = BlockStopSignals();
    auto s = sim::Sim::Start(std::move(*client), std::move(*watch), *o);
    if (!s) {
      std::cerr << "gpuheal " << s.error().message << "\n";
      // Options that name no node are the user's to fix; the rest is the cluster's answer.
      exit_code = s.error().code == ErrorCode::kUsage ? kExitUsage : kExitFailure;
      return;
    }
    nlohmann::ordered_json started;
    started["sim"] = "started";
    nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
    for (const auto& n : (*s)->nodes()) {
      nodes.push_back({{"name", n.name}, {"pool", n.pool}, {"standby", n.standby}, {"ip", n.ip}});
    }
    started["nodes"] = nodes;
    std::cout << started.dump() << std::endl;
    Log("info", "sim started", {{"nodes", (*s)->nodes().size()}});
    int sig = 0;
    sigwait(&mask, &sig);
    const auto st = (*s)->stats();
    s->reset();  // stops; deletes the nodes unless --keep
    Log("info", "sim stopped",
        {{"pods_started", st.pods_started},
         {"pods_deleted", st.pods_deleted},
         {"checkpoints", st.checkpoints},
         {"lease_renewals", st.lease_renewals},
         {"api_errors", st.api_errors}});
    exit_code = kExitOk;
  });
}

}  // namespace gpuheal::cli
