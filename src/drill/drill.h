#pragma once
// `gpuheal drill`: a self-healing rehearsal on a real control plane (started here, or reused with
// --kubeconfig). It installs the CRD, RBAC and policy from deploy/, runs the real controller as a
// process, a simulated GPU cluster with a real agent per node (gpuheal sim), and a Deployment of
// GPU pods behind a PodDisruptionBudget; then it writes a fault into one node's kernel log and
// watches the recovery through the API, each step timed from the kernel line. Each scenario
// ends with checks and a verdict (docs/drill.md).

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

#include "core/result.h"
#include "drill/report.h"

namespace gpuheal::drill {

struct DrillOptions {
  std::string scenario = "single";     // single correlated flap pdb controller-crash agent-restart
                                       // critical runtime replace-karpenter replace-capi bmc
                                       // rack predictive gpu-scoped service training
  std::string backend = "kubernetes";  // or slurm (src/drill/slurm_drill.h)
  std::string kubeconfig;  // empty: start a local control plane (scripts/control-plane.sh)
  std::string source_dir;  // where deploy/ and scripts/ are
  std::string self;        // this gpuheal binary: the controller and agents run from it
  int xid = 0;             // 0: the scenario's own (docs/drill.md)
  int nodes = 16, pools = 2, gpus = 8, standby = 1;
  int fault_nodes = 0;  // correlated: 0 picks the fewest that trip the circuit breaker
  int repeat = 1;
  // The target's agent reads this machine's /dev/kmsg (from its end, accepting injected records)
  // and the fault is written there: the path runs through the real kernel. Root.
  bool real_kmsg = false;
  // The faulty node is this machine as a real node (control-plane.sh up --with-node): the
  // workload runs in its containerd, its agent reports with the kubelet's credentials and reads
  // /dev/kmsg, where the fault is written; the replacement runs on a simulated node. Root.
  bool real_node = false;
  bool keep = false;
  std::string work_dir;  // default: a new /tmp/gpuheal-drill-XXXXXX
  std::chrono::milliseconds run_timeout{90000};
  // --peer-crds, kept so that scripts passing it still run: ignored (the replace-* scenarios run
  // the peers' own controllers, and control-plane.sh installs their CRDs with them).
  std::string peer_crds;
  // bmc: the Redfish BMC emulator (sushy-emulator from scripts/build-bmc-emulator.sh's
  // virtualenv) that plays the faulty node's BMC. Empty: $GPUHEAL_SUSHY_EMULATOR, else that
  // script is run.
  std::string bmc_emulator;
  std::string nvml_double,
      nvml_double_ctl;  // critical: the simulated node's GPUs (test/nvml_double)
  // service, training: tools/workload's program, which the sim's process runtime runs as the
  // workload's containers (a real HTTP server, a real training loop).
  std::string workload_bin;
  // --workload: service or training run under single, correlated, critical or gpu-scoped (the
  // service and training scenarios are single's and pdb's fault with their own).
  std::string workload;
  // The timeline as it happens, and progress. The drill sends its processes' and its hosted
  // agents' logs (stderr) to <work-dir>/drill.log meanwhile.
  std::function<void(const std::string&)> live;
};

// containerd's path (PATH, then /usr/sbin and /sbin), "" when absent: the runtime scenario's.
std::string FindContainerd();

// The known scenarios, for the CLI's check and its help.
const std::vector<std::string>& Scenarios();

// Runs the drill. An error is a drill that could not be set up (exit 2 for bad options is the
// caller's; a failed check is in the report, not an error). `interrupted` (Ctrl-C) ends it early:
// everything started is cleaned up either way, unless `keep`.
Result<Report> RunDrill(const DrillOptions& opts, const std::atomic<bool>& interrupted);

}  // namespace gpuheal::drill
