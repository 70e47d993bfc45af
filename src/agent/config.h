#pragma once
// The agent's YAML config. Every key is validated: unknown keys and bad values are errors that
// name file:line:column and say what is accepted. docs/config.md documents each key.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/precursors.h"
#include "core/result.h"
#include "core/severity.h"
#include "core/yaml_fields.h"
#include "parse/classifier.h"

namespace gpuheal {

// When a fault is raised to `severity` (docs/xid.md, "Escalation"). Repetition counts incidents,
// not lines. An Xid NVIDIA attributes to the application never escalates on repeats of one
// program: only when `distinct_workloads` different processes hit it on one GPU within `window`
// while the node's other GPUs stay clean of it, or when the same GPU showed a hardware signal
// (a memory error Xid, pending or failed row remapping, a double-bit error) within `window`.
// Other faults escalate after `count` incidents of the same fault within `window`. Faults
// already at or above `severity` are unaffected; info never escalates.
struct EscalationPolicy {
  bool enabled = true;
  int count = 5;
  std::chrono::seconds window = std::chrono::hours(24);
  Severity severity = Severity::kFatal;
  int distinct_workloads = 3;
  bool hardware_signal = true;
};

// Monitors that can be switched off, each owning one condition domain's sources.
struct MonitorSwitches {
  bool nvidia = true;   // AcceleratedHardwareReady: Xid, SXid, fallen off the bus
  bool kernel = true;   // KernelReady
  bool storage = true;  // StorageReady
  bool network = true;  // NetworkingReady
  bool runtime = true;  // ContainerRuntimeReady: the CRI runtime monitor
  // Whether the monitor of condition domain `c` is on.
  bool On(Condition c) const {
    switch (c) {
      case Condition::kAcceleratedHardwareReady:
        return nvidia;
      case Condition::kKernelReady:
        return kernel;
      case Condition::kNetworkingReady:
        return network;
      case Condition::kStorageReady:
        return storage;
      case Condition::kContainerRuntimeReady:
        return runtime;
    }
    return true;
  }
};

// The domain monitors beyond the kernel log (docs/domains.md). Each is a state the agent
// observes; its faults clear when the state is healthy again.
struct NetworkMonitorConfig {
  // Interfaces watched through rtnetlink (fnmatch patterns): the high-speed fabric.
  std::vector<std::string> interfaces = {"ib*"};
  std::vector<std::string> required;  // names that must exist (missing at start is a fault)
  int flap_count = 3;                 // carrier losses within flap_window: an Event
  std::chrono::milliseconds flap_window = std::chrono::minutes(5);
  std::string infiniband_sysfs = "/sys/class/infiniband";  // RDMA ports (mlx5_*, EFA); "" off
  std::chrono::milliseconds infiniband_period = std::chrono::seconds(10);
};

struct StorageMonitorConfig {
  // Paths whose filesystems must stay writable and answer a stat within stat_timeout.
  std::vector<std::string> paths = {"/var/lib/kubelet"};
  std::chrono::milliseconds stat_timeout = std::chrono::seconds(5);
  std::chrono::milliseconds period = std::chrono::seconds(30);
  std::string mountinfo = "/proc/self/mountinfo";
};

struct RuntimeMonitorConfig {
  std::string endpoint = "unix:///run/containerd/containerd.sock";  // the CRI socket
  std::chrono::milliseconds timeout = std::chrono::seconds(5);      // per Status call
  std::chrono::milliseconds period = std::chrono::seconds(10);
  bool network_ready = true;  // NetworkReady false is a fault too
};

struct PreviousBootConfig {
  bool enabled = true;
  std::string pstore = "/sys/fs/pstore";
  std::string journal = "/var/log/journal";  // persistent journal directory; "" off
};

struct KernelMonitorConfig {
  int oom_storm_count = 10;  // OOM kills within oom_storm_window: KernelOOMKillStorm
  std::chrono::milliseconds oom_storm_window = std::chrono::minutes(5);
};

// The NVIDIA driver API sources and the agent's GPU-level actions (docs/config.md, nvidia:).
struct NvidiaConfig {
  enum class Use { kAuto, kOn, kOff };
  Use nvml = Use::kAuto;  // auto: use NVML when the library loads, say once when it does not
  std::string nvml_library = "libnvidia-ml.so.1";
  std::chrono::milliseconds poll_period = std::chrono::seconds(60);
  std::optional<int> expected_gpus;  // NvidiaDeviceCountMismatch when fewer are visible
  std::string sysfs_pci_devices = "/sys/bus/pci/devices";
  unsigned temperature_limit = 0;  // degrees C; 0: each GPU's slowdown threshold
  unsigned long long nvlink_errors_per_poll = 100;
  unsigned long long corrected_ecc_per_poll = 100;
  // Policy: drain and reset a GPU when a critical fault (action reset-gpu) names it.
  bool reset_on_critical = false;
  std::chrono::milliseconds drain_timeout =
      std::chrono::minutes(5);  // wait for compute processes to end
  std::vector<std::string> reset_command = {"nvidia-smi", "--gpu-reset", "-i", "{bus_id}"};
  std::chrono::milliseconds reset_timeout = std::chrono::minutes(2);
  // DCGM (optional).
  bool dcgm = false;
  std::string dcgm_library = "libdcgm.so.4";
  std::string dcgm_address;  // empty: embedded host engine
  std::chrono::milliseconds dcgm_health_period = std::chrono::seconds(60);
};

// Which pods hold a faulty GPU (docs/config.md, pod_resources:): the kubelet's PodResources API,
// asked when a GPU-level fault appears and while one is active; the answer goes into
// gpuheal.io/gpu-faults ("pods") so that the controller evicts just those pods.
struct PodResourcesConfig {
  std::string socket = "/var/lib/kubelet/pod-resources/kubelet.sock";  // "": never asked
  std::vector<std::string> resources = {"nvidia.com/*"};  // fnmatch patterns of GPU resources
  std::chrono::milliseconds timeout = std::chrono::milliseconds(500);  // per List call
  std::chrono::milliseconds refresh = std::chrono::seconds(10);  // while a GPU fault is active
};

// The Slurm backend (docs/slurm.md): the agent drains, checkpoints and resumes its own Slurm
// node through slurmctld instead of reporting to Kubernetes.
struct SlurmConfig {
  std::string conf;  // slurm.conf; "": libslurm's default ($SLURM_CONF, else /etc/slurm/slurm.conf)
  std::string library = "libslurm.so.38";
  std::string node_name;       // "": this host's name up to the first dot
  int checkpoint_signal = 10;  // SIGUSR1 to each batch step on a node-level fault; 0: none
  std::chrono::milliseconds checkpoint_window = std::chrono::seconds(30);
  bool requeue = true;  // at the window's end, requeue the jobs that allow it
  bool resume = true;   // resume gpuheal's own drain when the faults clear
  std::chrono::milliseconds recheck_period = std::chrono::seconds(30);
  // While slurmctld does not answer, retries back off from the first to the second (not read from
  // the config file).
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff = std::chrono::seconds(30);
};

// Diagnostic bundles (docs/diagnostics.md): what the agent collects for a NodeDiagnostic request
// (Kubernetes mode) or `gpuheal bundle`, off the detection path.
struct DiagnosticsConfig {
  bool enabled = true;  // Kubernetes mode: answer this node's NodeDiagnostic requests
  std::string dir;      // where bundles are built and kept; "": <state_dir>/diagnostics
  std::chrono::milliseconds retention = std::chrono::minutes(10);  // then the bundle is deleted
  int64_t max_bytes = 50LL * 1024 * 1024;  // the bundle's files together, before compression
  std::chrono::milliseconds collector_timeout = std::chrono::seconds(5);  // each collector's
  std::chrono::milliseconds upload_timeout = std::chrono::seconds(60);    // each PUT attempt's
  int upload_attempts = 3;  // transport errors, 5xx and 429 are retried; other 4xx are final
  std::string nvidia_smi = "nvidia-smi";  // `nvidia-smi -q` when it is on PATH; "" never
  std::string kubelet_healthz = "http://127.0.0.1:10248/healthz";  // "" never asked
};

struct AgentConfig {
  // Where the agent reports: Kubernetes (the default), nowhere but stdout and /metrics
  // (--standalone), or Slurm (--slurm).
  enum class Backend { kKubernetes, kStandalone, kSlurm };
  Backend backend = Backend::kKubernetes;
  SlurmConfig slurm;
  std::string kmsg_path = "/dev/kmsg";
  std::string state_dir = "/var/lib/gpuheal";
  bool accept_injected = false;
  // Where a first start (no cursor saved in this boot) begins: the whole kernel buffer, so that
  // faults from before the agent ran are reported, or only records written from now on (a drill
  // on a machine whose buffer holds old injected faults).
  bool kmsg_from_end = false;
  // The kernel-log doorbell (src/sources/kmsg_doorbell.h): wake on a BPF ring buffer at once
  // instead of at the kernel's next tick. auto: when it loads, say once why not otherwise;
  // true: the agent does not start without it; false: never tried.
  enum class Bpf { kAuto, kOn, kOff };
  Bpf kmsg_bpf = Bpf::kAuto;
  std::string listen = "127.0.0.1:9464";  // /metrics and /healthz; empty disables
  std::string
      listen_origin;  // where `listen` was set ("agent.yaml:3:9: ", "--listen: "), for errors
  std::map<int, XidOverride> xid_overrides;
  EscalationPolicy escalation;
  std::vector<std::string> npd_rule_files;
  MonitorSwitches monitors;
  NetworkMonitorConfig network;
  StorageMonitorConfig storage;
  RuntimeMonitorConfig runtime;
  PreviousBootConfig previous_boot;
  KernelMonitorConfig kernel;
  std::chrono::milliseconds self_check_period = std::chrono::seconds(60);
  // A transient fault (docs/recovery.md) clears after this long without a repeat.
  std::chrono::milliseconds quiet_period = std::chrono::minutes(10);
  // Kubernetes mode: lastHeartbeatTime of the agent's conditions is refreshed this often.
  std::chrono::milliseconds heartbeat_period = std::chrono::minutes(5);
  NvidiaConfig nvidia;
  PodResourcesConfig pod_resources;
  DiagnosticsConfig diagnostics;
  PrecursorConfig predictive;  // precursor signals per GPU: GPUs at risk (gpuheal.io/gpu-at-risk)
  // Not from YAML: the file it was read from ("" when none), for diagnostic bundles.
  std::string config_file;
  // Not from YAML: an agent hosted in another process (gpuheal sim) leaves SIGINT/SIGTERM to its
  // host, which stops it with Stop().
  bool own_signals = true;
  // Not from YAML: the network, storage, runtime and previous-boot monitors watch this host; an
  // agent hosted for a simulated node (gpuheal sim) has no host of its own and turns them off.
  bool domain_monitors = true;
};

Result<AgentConfig> LoadAgentConfig(const std::string& path);
// "auto", "true"/"on", "false"/"off": the values of kmsg_bpf and --kmsg-bpf.
std::optional<AgentConfig::Bpf> ParseKmsgBpf(std::string_view v);
Result<AgentConfig> ParseAgentConfig(std::string_view yaml, const std::string& source);

}  // namespace gpuheal
