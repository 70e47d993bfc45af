#pragma once
// `gpuheal agent`: kernel log -> classifier -> node state -> reporters: JSON lines on stdout,
// /metrics and /healthz, and (without --standalone) the Kubernetes reporter: the node's domain
// conditions from the active faults, warn/critical faults as Events. Event-driven: the loop
// sleeps in epoll until the kernel has a record.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/active_faults.h"
#include "agent/background_saver.h"
#include "agent/config.h"
#include "agent/dcgm_monitor.h"
#include "agent/diag_service.h"
#include "agent/domain_monitors.h"
#include "agent/event_loop.h"
#include "agent/kmsg_cursor.h"
#include "agent/kube_reporter.h"
#include "agent/line_writer.h"
#include "agent/monitor_queue.h"
#include "agent/node_state.h"
#include "agent/nvml_monitor.h"
#include "agent/precursors.h"
#include "agent/slurm_reporter.h"
#include "agent/state_file.h"
#include "core/clock.h"
#include "core/recovery_request.h"
#include "kube/informer.h"
#include "parse/classifier.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "sources/kernel_log.h"
#include "sources/kmsg_doorbell.h"
#include "sources/kmsg_reader.h"
#include "sources/pod_resources.h"

namespace gpuheal {

// What the agent talks to, injected: the binary passes the real ones, tests fakes.
struct AgentPorts {
  // With a Kubernetes API the agent also reports to Kubernetes through a KubeReporter.
  std::unique_ptr<kube::Api> api;
  KubeReporterOptions reporter;
  // The watch of this agent's own Node (GPU recovery requests); null: none.
  std::unique_ptr<kube::Api> watch_api;
  // NodeDiagnostic requests for this node (docs/diagnostics.md); null: none answered. Secrets:
  // literal values no bundle may carry (the API token).
  std::unique_ptr<kube::Api> diagnostics_api;
  std::vector<std::string> diagnostics_secrets;
  // The kernel log; null: config.kmsg_path opened with KmsgReader.
  std::unique_ptr<KernelLog> kernel_log;
  // With a Slurm client the agent drains, checkpoints and resumes its Slurm node (docs/slurm.md).
  std::unique_ptr<slurm::Api> slurm;  // configured by AgentConfig::slurm
  // Time for every decision of the agent and its reporter; null: the system's.
  const Clock* clock = nullptr;
};

class StandaloneAgent {
 public:
  // Config errors (bad NPD rules, unusable state dir, kernel log that cannot be opened) come back
  // as errors; the caller exits 2 for them.
  static Result<std::unique_ptr<StandaloneAgent>> Create(AgentConfig config, int out_fd,
                                                         AgentPorts ports = {});
  ~StandaloneAgent();

  // Runs until SIGINT/SIGTERM or Stop(). Returns the process exit code.
  int Run();
  void Stop() { loop_->Stop(); }
  int http_port() const { return http_ ? http_->port() : 0; }

 private:
  explicit StandaloneAgent(AgentConfig config, int out_fd);
  Status Init();
  // Init's phases, in its order.
  Status OpenClassifier();  // the xid overrides and NPD rules
  Status OpenState();       // the state directory, the kernel log, its cursor, the active faults
  void CreateReporters();   // metrics, the Kubernetes and Slurm reporters (not started)
  Status OpenLoop();        // the event loop, signals, the output writer, the kernel log's wake-ups
  Status AddMonitors();    // self-check, quiet period, NVML/DCGM, the domain monitors, PodResources
  Status StartServices();  // the reporters, the Node watch, diagnostics, the HTTP endpoint
  void LogStarted();
  void OnKmsgReadable();
  void OnDoorbell();
  // kmsg_bpf: loads the doorbell and watches it, or says once why not.
  Status SetUpDoorbell();
  void ProcessRecord(std::string_view raw);
  // One fault from any source (kernel log, NVML, sysfs): escalation and de-duplication, output,
  // active faults, Events, and the GPU recovery policy.
  void HandleFault(Fault f, uint64_t detected_usec);
  // A domain monitor's full report of what `source` observes now: new faults are raised, faults
  // no longer observed are cleared (recovery rule while-observed).
  void ReportObserved(const std::string& source, std::vector<Fault> faults);
  Status StartDomainMonitors();
  // An OOM kill: KernelOOMKillStorm when kernel.oom_storm_count kills fall within the window.
  std::optional<Fault> CountOomKill(const Fault& kill);
  void OnGpuActionStep(const GpuActionStep& s);
  // The controller's GPU recovery request on this Node (Kubernetes mode).
  void OnNodeAnnotations(const std::map<std::string, std::string>& annotations);
  void PublishRecoveryStatus();
  void SaveHandledRequest();
  bool Enabled(const Fault& f) const;
  void Emit(const Fault& f, uint64_t detected_usec);
  // Saves the cursor as far as it may go: not past a record whose lines are still queued for
  // stdout or whose faults are not saved yet.
  void SaveCursor();
  // A cursor of this boot ahead of the kernel's newest record is discarded (said once).
  void ValidateCursor();
  std::string Health() const;
  // Active faults changed (observed or cleared): hand the conditions over; saved by FlushState.
  void ActiveFaultsChanged(int64_t detected_usec);
  // The GPU-level faults as published: each with the pods holding its GPU where the kubelet's
  // PodResources says (asked when a GPU joins the set, and on the refresh timer).
  GpuFaults GpuFaultsToPublish();
  void RefreshGpuHolders();
  void CheckQuietFaults();
  // The GPUs at risk changed: their annotation, metric and log line.
  void AtRiskChanged();
  // Group commit: saves the active faults changed since the last call (write, rename, fsync),
  // then the cursor. A failed write leaves the cursor where it was.
  void FlushState();
  // Accounts for a write to the state directory: says once when it starts failing and when it
  // works again; false when it failed.
  bool StateWrite(const Status& s, std::string_view what);

  AgentConfig config_;
  int out_fd_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<MonitorQueue> monitors_;
  std::unique_ptr<NvmlMonitor> nvml_;                // null when NVML is off or absent
  std::unique_ptr<DcgmMonitor> dcgm_;                // null unless nvidia.dcgm.enabled
  std::unique_ptr<LinkMonitor> link_monitor_;        // null when monitors.network is off
  std::unique_ptr<MountMonitor> mount_monitor_;      // null when monitors.storage is off
  std::unique_ptr<RuntimeMonitor> runtime_monitor_;  // null when monitors.runtime is off

  // Which pods hold the faulty GPUs (the kubelet's PodResources; null: never asked).
  std::unique_ptr<PodResourcesClient> pod_resources_;
  std::map<std::string, std::vector<GpuHolder>> gpu_holders_;  // by bus id, as last asked
  bool gpu_holders_known_ = false;     // the last answer was read and every GPU device mapped
  std::set<std::string> holders_for_;  // the faulty GPUs when last asked
  std::string holders_error_;          // the last failure, said once until it changes
  int holders_timer_ = -1;

  std::thread previous_boot_;  // the previous boot's crash, read once at start (joined at the end)
  std::deque<int64_t> oom_kills_;  // unix seconds of recent OOM kills
  int64_t last_oom_storm_ = 0;
  std::unique_ptr<Classifier> classifier_;
  std::unique_ptr<KernelLog> reader_;
  // Wakes the loop when the kernel stores a record (null: /dev/kmsg's own, tick-late wake-up).
  std::unique_ptr<KmsgDoorbell> doorbell_;
  std::string kmsg_wakeup_ = "kmsg";  // "bpf" with the doorbell; fixed once Init has run
  Counter* rings_ = nullptr;
  int doorbell_pause_timer_ = -1;  // re-arms the doorbell after a pause in a flood
  // The durable save of the active faults runs on the saver's thread while the loop runs; the
  // cursor stays before the first unsaved fault until the save is done (SaveCursor).
  void SaveActiveInBackground();
  void OnActiveSaved(const Status& s);
  std::unique_ptr<BackgroundSaver> saver_;  // made in Init
  bool save_in_flight_ = false;             // loop thread
  bool loop_running_ = false;               // saves go to the saver only while the loop runs
  int last_drained_ = 0;                    // records the last OnKmsgReadable() read
  std::unique_ptr<StateFile> state_;
  NodeState node_state_;
  Metrics metrics_;
  std::unique_ptr<HttpServer> http_;
  int signal_fd_ = -1;

  std::string boot_id_;
  KmsgCursor cursor_;  // loop thread
  bool batch_faults_ = false;
  int64_t last_save_usec_ = 0;
  int64_t last_flush_usec_ = 0;
  int flush_timer_ = -1;  // the group commit's deadline
  bool flush_armed_ = false;
  std::vector<Fault> faults_;
  ActiveFaults active_;
  PrecursorTracker precursors_;
  std::string active_path_;
  bool active_dirty_ = false;
  std::string state_error_;  // empty while the state directory takes writes
  mutable std::mutex health_mu_;
  std::string health_state_error_;  // state_error_ for the HTTP thread
  Gauge* state_writable_ = nullptr;
  Counter* state_write_errors_ = nullptr;
  SystemClock system_clock_;
  // Every time the agent decides by (the quiet period, the OOM-storm window, precursor expiry,
  // the repeat window of NodeState) is this clock's: tests step a fake one.
  const Clock* clock_ = &system_clock_;
  int64_t UnixNow() const { return std::chrono::system_clock::to_time_t(clock_->Now()); }
  std::unique_ptr<kube::Api> kube_client_;  // handed to reporter_ in Init()
  KubeReporterOptions reporter_options_;
  std::unique_ptr<KubeReporter> reporter_;
  std::unique_ptr<slurm::Api> slurm_client_;  // handed to slurm_ in Init()
  std::unique_ptr<SlurmReporter> slurm_;
  std::unique_ptr<kube::Api> watch_client_;  // the watch of this agent's own Node
  std::unique_ptr<kube::Informer<kube::Node>> node_watch_;
  std::unique_ptr<kube::Api> diag_client_;  // handed to diagnostics_ in Init()
  std::vector<std::string> diag_secrets_;
  std::unique_ptr<DiagnosticService> diagnostics_;
  // The agent collector's state for a bundle, built on the loop thread.
  nlohmann::json DiagnosticState() const;
  std::deque<std::string> recent_faults_;  // the last faults' JSON lines, newest last
  std::string handled_request_id_, handled_request_raw_;  // at most once per id (persisted)
  std::string requests_path_;
  RecoveryStatus request_status_;

  std::atomic<bool> reader_ok_{true};
  std::atomic<int> reader_errno_{0};

  Counter* records_ = nullptr;
  Gauge* gpus_at_risk_ = nullptr;  // created at start: 0 until precursors say otherwise
  Counter* lost_ = nullptr;
  Counter* overruns_ = nullptr;
  Counter* ignored_ = nullptr;
  Counter* duplicates_ = nullptr;
  Counter* output_dropped_ = nullptr;
  std::unique_ptr<LineWriter> output_;  // stdout, through a bounded queue
  Histogram* latency_ = nullptr;
};

}  // namespace gpuheal
