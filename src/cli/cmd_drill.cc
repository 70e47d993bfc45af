// gpuheal drill: a self-healing rehearsal with the T+ms timeline from the kernel line to the
// replacement pods Running (docs/drill.md).

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "drill/drill.h"
#include "drill/slurm_drill.h"
#include "kube/client.h"
#include "kube/kube_config.h"

namespace gpuheal::cli {

namespace {
std::string SelfPath() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}
}  // namespace

void RegisterDrill(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<drill::DrillOptions>();
  auto json_out = std::make_shared<bool>(false);
  auto chart = std::make_shared<std::string>();
  auto timeout = std::make_shared<int>(90);
  o->source_dir = GPUHEAL_SOURCE_DIR;
  CLI::App* cmd = app.add_subcommand(
      "drill",
      "Rehearse a GPU fault end to end: a local control plane, the controller, simulated GPU nodes "
      "with real "
      "agents, a fault in one node's kernel log, and the T+ms timeline of the recovery");
  std::string scenarios;
  for (const auto& s : drill::Scenarios()) scenarios += (scenarios.empty() ? "" : ", ") + s;
  std::vector<std::string> all_scenarios = drill::Scenarios();
  for (const auto& s : drill::SlurmScenarios()) {
    if (std::find(all_scenarios.begin(), all_scenarios.end(), s) == all_scenarios.end())
      all_scenarios.push_back(s);
  }
  cmd->add_option("--scenario", o->scenario,
                  "What to rehearse: " + scenarios +
                      " (default single); with --backend slurm: single, transient")
      ->check(CLI::IsMember(all_scenarios));
  cmd->add_option("--backend", o->backend,
                  "Where the agent reports: kubernetes (default), or slurm: a Slurm cluster on "
                  "loopback (scripts/slurm.sh) with this machine as its node, the fault in "
                  "/dev/kmsg (root; docs/slurm.md)")
      ->check(CLI::IsMember({"kubernetes", "slurm"}));
  cmd->add_option("--kubeconfig", o->kubeconfig,
                  "Drill in this cluster instead of starting a local control plane (it needs "
                  "kube-scheduler and "
                  "kube-controller-manager; the drill registers simulated nodes in it)");
  cmd->add_option(
         "--xid", o->xid,
         "The Xid to inject (default: the scenario's; single: 79, GPU has fallen off the bus)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--nodes", o->nodes, "GPU nodes in service (default 16)")
      ->check(CLI::Range(1, 5000));
  cmd->add_option("--pools", o->pools, "Node pools (default 2)")->check(CLI::Range(1, 100));
  cmd->add_option("--gpus", o->gpus, "GPUs per node (default 8)")->check(CLI::Range(2, 64));
  cmd->add_option("--standby", o->standby, "Standby nodes per pool (default 1)")
      ->check(CLI::Range(0, 100));
  cmd->add_option(
         "--fault-nodes", o->fault_nodes,
         "correlated: nodes faulted at once (default: the fewest that trip the circuit breaker)")
      ->check(CLI::Range(1, 5000));
  cmd->add_option("--repeat", o->repeat,
                  "Runs, each on a fresh simulated cluster: p50/p99 of each step (default 1)")
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--real-kmsg", o->real_kmsg,
                "The faulty node's agent reads this machine's /dev/kmsg and the fault is written "
                "there (root; not "
                "with correlated or critical)");
  cmd->add_flag("--real-node", o->real_node,
                "The faulty node is this machine as a real Kubernetes node (control-plane.sh up "
                "--with-node: containerd and a kubelet): the workload runs in containerd, the "
                "node's agent reports with the kubelet's credentials, the fault is written into "
                "/dev/kmsg (root; single scenario, local control plane, one run)");
  cmd->add_flag("--json", *json_out,
                "Print one JSON object (docs/drill.md) on stdout; the timeline goes to stderr");
  cmd->add_option("--chart", *chart, "Also write the timeline as an SVG chart to this file");
  cmd->add_flag(
      "--keep", o->keep,
      "Leave everything running after the drill to explore with kubectl; Ctrl-C cleans up");
  cmd->add_option("--work-dir", o->work_dir,
                  "Logs, policy and simulated kernel logs (default: a new /tmp/gpuheal-drill-*)");
  cmd->add_option(
      "--source-dir", o->source_dir,
      "A gpuheal checkout: deploy/ and scripts/control-plane.sh (default: the one built from)");
  cmd->add_option(
      "--peer-crds", o->peer_crds,
      "Deprecated, ignored: replace-karpenter and replace-capi run Karpenter's and Cluster "
      "API's own controllers, whose CRDs the control plane installs with them");
  cmd->add_option("--bmc-emulator", o->bmc_emulator,
                  "bmc: the Redfish emulator that plays the node's BMC (sushy-emulator; default: "
                  "$GPUHEAL_SUSHY_EMULATOR, else scripts/build-bmc-emulator.sh installs it)");
  cmd->add_option("--nvml-double", o->nvml_double,
                  "critical: the NVML test double that plays the simulated node's GPUs (default: "
                  "the build's test/libnvml_double.so)");
  cmd->add_option("--nvml-double-ctl", o->nvml_double_ctl,
                  "critical: the double's reset tool, run as the node's GPU reset command "
                  "(default: the build's test/nvml_double_ctl)");
  cmd->add_option("--workload", o->workload,
                  "single, correlated, critical, gpu-scoped: run the scenario under a service's "
                  "load or a training job (real processes) and measure what its users saw")
      ->check(CLI::IsMember({"service", "training"}));
  cmd->add_option("--workload-bin", o->workload_bin,
                  "service, training: the test workloads' program, run on the simulated nodes by "
                  "the sim's process runtime (default: gpuheal-workload beside this binary)");
  cmd->add_option("--timeout", *timeout,
                  "Seconds a run may take from the fault to its last step (default 90)")
      ->check(CLI::Range(5, 3600));
  cmd->callback([o, json_out, chart, timeout, &exit_code] {
    o->self = SelfPath();
    const std::string build_dir = std::filesystem::path(o->self).parent_path().string();
    if (o->nvml_double.empty()) o->nvml_double = build_dir + "/test/libnvml_double.so";
    if (o->nvml_double_ctl.empty()) o->nvml_double_ctl = build_dir + "/test/nvml_double_ctl";
    if (o->workload_bin.empty()) o->workload_bin = build_dir + "/gpuheal-workload";
    o->run_timeout = std::chrono::seconds(*timeout);
    const auto& slurm_scenarios = drill::SlurmScenarios();
    if (o->backend == "slurm") {
      if (std::find(slurm_scenarios.begin(), slurm_scenarios.end(), o->scenario) ==
          slurm_scenarios.end()) {
        std::cerr << "gpuheal drill: --backend slurm rehearses --scenario single or transient, "
                     "not "
                  << o->scenario << "\n";
        exit_code = kExitUsage;
        return;
      }
      if (!o->kubeconfig.empty() || o->real_node || o->real_kmsg || o->fault_nodes > 0) {
        std::cerr << "gpuheal drill: --kubeconfig, --real-node, --real-kmsg and --fault-nodes are "
                     "for the Kubernetes backend; drop them or drop --backend slurm\n";
        exit_code = kExitUsage;
        return;
      }
      if (access("/dev/kmsg", W_OK) != 0) {
        std::cerr << "gpuheal drill: --backend slurm writes the fault into /dev/kmsg and runs "
                     "slurmd: run as root\n";
        exit_code = kExitUsage;
        return;
      }
      if (access((o->source_dir + "/scripts/slurm.sh").c_str(), R_OK) != 0) {
        std::cerr << "gpuheal drill: no " << o->source_dir
                  << "/scripts/slurm.sh to start a Slurm cluster with: give --source-dir of a "
                     "gpuheal checkout\n";
        exit_code = kExitUsage;
        return;
      }
    } else if (std::find(drill::Scenarios().begin(), drill::Scenarios().end(), o->scenario) ==
               drill::Scenarios().end()) {
      std::cerr << "gpuheal drill: --scenario " << o->scenario << " is for --backend slurm\n";
      exit_code = kExitUsage;
      return;
    }
    if (o->scenario == "correlated" && o->fault_nodes > o->nodes) {
      std::cerr << "gpuheal drill: --fault-nodes " << o->fault_nodes << " is more than --nodes "
                << o->nodes << "\n";
      exit_code = kExitUsage;
      return;
    }
    if (o->scenario != "correlated" && o->fault_nodes > 0) {
      std::cerr << "gpuheal drill: --fault-nodes is for --scenario correlated\n";
      exit_code = kExitUsage;
      return;
    }
    if (o->scenario == "rack" && o->nodes < 8) {
      std::cerr << "gpuheal drill: --scenario rack faults a rack of 4 nodes and one more: give "
                   "--nodes 8 or more (got "
                << o->nodes << ")\n";
      exit_code = kExitUsage;
      return;
    }
    if (o->nodes < o->pools) {
      std::cerr << "gpuheal drill: --nodes " << o->nodes << " is fewer than --pools " << o->pools
                << "\n";
      exit_code = kExitUsage;
      return;
    }
    if (o->scenario == "runtime" && drill::FindContainerd().empty()) {
      std::cerr << "gpuheal drill: the runtime scenario freezes a real containerd: install "
                   "containerd (Debian's package; scripts/setup.sh installs it)\n";
      exit_code = kExitUsage;
      return;
    }
    if (o->real_kmsg &&
        (o->scenario == "correlated" || o->scenario == "critical" || o->scenario == "runtime" ||
         o->scenario == "rack" || o->scenario == "predictive")) {
      std::cerr << "gpuheal drill: --real-kmsg is for one faulty node whose GPUs speak through the "
                   "kernel log: not with --scenario "
                << o->scenario << "\n";
      exit_code = kExitUsage;
      return;
    }
    if (o->real_node && (o->scenario != "single" || !o->kubeconfig.empty() || o->repeat != 1)) {
      std::cerr << "gpuheal drill: --real-node runs the single scenario once, on a local control "
                   "plane it starts: drop --scenario, --kubeconfig and --repeat\n";
      exit_code = kExitUsage;
      return;
    }
    if ((o->real_kmsg || o->real_node) && access("/dev/kmsg", W_OK) != 0) {
      std::cerr << "gpuheal drill: --real-kmsg and --real-node write the fault into /dev/kmsg: run "
                   "as root\n";
      exit_code = kExitUsage;
      return;
    }
    if (!o->kubeconfig.empty()) {
      if (auto cfg = kube::LoadKubeconfig(o->kubeconfig); !cfg) {
        std::cerr << "gpuheal drill: " << cfg.error().message << "\n";
        exit_code = kExitUsage;
        return;
      }
    } else if (access((o->source_dir + "/scripts/control-plane.sh").c_str(), R_OK) != 0) {
      std::cerr << "gpuheal drill: no " << o->source_dir
                << "/scripts/control-plane.sh to start a local control plane "
                << "with: give --kubeconfig of a cluster to drill in, or --source-dir of a gpuheal "
                   "checkout\n";
      exit_code = kExitUsage;
      return;
    }
    if ((o->scenario == "critical" || o->scenario == "predictive" || o->scenario == "gpu-scoped") &&
        (access(o->nvml_double.c_str(), R_OK) != 0 ||
         access(o->nvml_double_ctl.c_str(), X_OK) != 0)) {
      std::cerr << "gpuheal drill: the " << o->scenario
                << " scenario plays the node's GPUs with the NVML test "
                   "double; build it "
                << "(cmake --build build --target nvml_double nvml_double_ctl) or give "
                   "--nvml-double and --nvml-double-ctl "
                << "(looked for " << o->nvml_double << " and " << o->nvml_double_ctl << ")\n";
      exit_code = kExitUsage;
      return;
    }
    if (!o->workload.empty() && o->scenario != "single" && o->scenario != "correlated" &&
        o->scenario != "critical" && o->scenario != "gpu-scoped") {
      std::cerr << "gpuheal drill: --workload runs under --scenario single, correlated, critical "
                   "or gpu-scoped, not "
                << o->scenario
                << " (the service and training scenarios are single's fault with a workload)\n";
      exit_code = kExitUsage;
      return;
    }
    if (o->scenario == "service" || o->scenario == "training" || !o->workload.empty()) {
      if (access(o->workload_bin.c_str(), X_OK) != 0) {
        std::cerr << "gpuheal drill: the " << o->scenario
                  << " scenario runs its workload as real processes: build them (cmake --build "
                     "build --target gpuheal-workload) or give --workload-bin (looked for "
                  << o->workload_bin << ")\n";
        exit_code = kExitUsage;
        return;
      }
      if (geteuid() != 0 || o->real_kmsg) {
        std::cerr << "gpuheal drill: the " << o->scenario
                  << " scenario gives each workload process an address of its own on the loopback "
                     "interface: run as root, without --real-kmsg\n";
        exit_code = kExitUsage;
        return;
      }
    }
    if (!chart->empty()) {
      std::ofstream test(*chart, std::ios::app);
      if (!test) {
        std::cerr << "gpuheal drill: --chart " << *chart << ": cannot write there\n";
        exit_code = kExitUsage;
        return;
      }
    }
    // Ctrl-C and SIGTERM end the drill through its cleanup: blocked before any thread starts, and
    // taken by one thread that sets the flag the drill's waits check.
    const sigset_t mask = BlockStopSignals();
    static std::atomic<bool> interrupted{false};
    std::thread([mask] {
      int sig = 0;
      sigwait(&mask, &sig);
      interrupted = true;
    }).detach();
    const int out_fd = *json_out ? dup(STDERR_FILENO) : STDOUT_FILENO;
    o->live = [out_fd](const std::string& s) {
      size_t off = 0;
      while (off < s.size()) {
        const ssize_t n = write(out_fd, s.data() + off, s.size() - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
    };
    auto report = o->backend == "slurm" ? drill::RunSlurmDrill(*o, interrupted)
                                        : drill::RunDrill(*o, interrupted);
    if (!report) {
      std::cerr << "gpuheal drill: " << report.error().message << "\n";
      exit_code = interrupted ? 130 : kExitFailure;
      return;
    }
    if (*json_out) {
      std::cout << drill::ToJson(*report).dump(2) << std::endl;
    } else {
      std::cout << drill::ToText(*report) << std::flush;
    }
    if (!chart->empty()) {
      std::ofstream(*chart, std::ios::trunc) << drill::ToSvg(*report);
      o->live("chart: " + *chart + "\n");
    }
    exit_code = report->interrupted ? 130 : report->ok() ? kExitOk : kExitFailure;
  });
}

}  // namespace gpuheal::cli
