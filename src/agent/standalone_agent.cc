#include "agent/standalone_agent.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <future>
#include <random>

#include "agent/boot_id.h"
#include "agent/gpu_holders.h"
#include "core/clock.h"
#include "core/fault_json.h"
#include "core/file.h"
#include "core/log.h"
#include "core/reasons.h"
#include "core/time.h"
#include "parse/line_format.h"

namespace gpuheal {
namespace {

// Records handled per wake-up before the loop serves its other sources (timers, signals).
constexpr int kMaxRecordsPerWake = 4096;
// The doorbell pauses this long after a wake-up that found this many records (bench_kmsg).
constexpr int kDoorbellBusyRecords = 4;
constexpr auto kDoorbellPause = std::chrono::milliseconds(1);
constexpr int64_t kCursorSaveIntervalUsec = 1'000'000;
constexpr int64_t kGroupCommitUsec = 250'000;
// Fault lines queued for a slow stdout reader before lines are dropped (~8,000 lines).
constexpr size_t kOutputQueueBytes = 4 << 20;

const std::vector<double> kLatencyBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                             0.01,   0.025,   0.05,   0.1,   0.5,    1};

}  // namespace

StandaloneAgent::StandaloneAgent(AgentConfig config, int out_fd)
    : config_(std::move(config)),
      out_fd_(out_fd),
      node_state_(config_.escalation),
      precursors_(config_.predictive) {}

StandaloneAgent::~StandaloneAgent() {
  if (saver_) saver_->Stop();
  // Both watches are asked to end together (each notices within about a second), then joined.
  if (node_watch_) node_watch_->RequestStop();
  if (diagnostics_) diagnostics_->RequestStop();
  node_watch_.reset();
  diagnostics_.reset();  // its worker posts to the loop for the agent's state
  dcgm_.reset();         // their threads post to the loop: stop them first
  if (previous_boot_.joinable()) previous_boot_.join();
  runtime_monitor_.reset();
  mount_monitor_.reset();
  link_monitor_.reset();
  nvml_.reset();
  http_.reset();
  if (reporter_) reporter_->Stop();
  if (slurm_) slurm_->Stop();
  if (signal_fd_ >= 0) close(signal_fd_);
}

Result<std::unique_ptr<StandaloneAgent>> StandaloneAgent::Create(AgentConfig config, int out_fd,
                                                                 AgentPorts ports) {
  std::unique_ptr<StandaloneAgent> a(new StandaloneAgent(std::move(config), out_fd));
  a->kube_client_ = std::move(ports.api);
  a->watch_client_ = std::move(ports.watch_api);
  a->diag_client_ = std::move(ports.diagnostics_api);
  a->diag_secrets_ = std::move(ports.diagnostics_secrets);
  a->reporter_options_ = std::move(ports.reporter);
  a->slurm_client_ = std::move(ports.slurm);
  a->reader_ = std::move(ports.kernel_log);
  if (ports.clock) a->clock_ = ports.clock;
  if (auto s = a->Init(); !s) return s.error();
  return a;
}

Status StandaloneAgent::Init() {
  // In this order: the loop exists before anything that posts to it, the signals are blocked
  // before any thread starts, and the reporters get the active faults before they start.
  if (auto s = OpenClassifier(); !s) return s;
  if (auto s = OpenState(); !s) return s;
  CreateReporters();
  if (auto s = OpenLoop(); !s) return s;
  if (auto s = AddMonitors(); !s) return s;
  if (auto s = StartServices(); !s) return s;
  LogStarted();
  return Status::Ok();
}

Status StandaloneAgent::OpenClassifier() {
  ClassifierOptions copts;
  copts.xid_overrides = config_.xid_overrides;
  for (const std::string& path : config_.npd_rule_files) {
    auto npd = LoadNpdConfig(path);
    if (!npd) return npd.error();
    for (const std::string& note : npd->notes) Log("info", note);
    copts.npd_rules.push_back(std::move(*npd));
  }
  auto classifier = Classifier::Create(std::move(copts));
  if (!classifier) return classifier.error();
  classifier_ = std::move(*classifier);
  return Status::Ok();
}

Status StandaloneAgent::OpenState() {
  state_writable_ = &metrics_.GetGauge("gpuheal_state_writable",
                                       "1 while the state directory takes the agent's writes");
  state_writable_->Set(1);
  state_write_errors_ = &metrics_.GetCounter(
      "gpuheal_state_write_errors_total",
      "Failed writes of the cursor or the active faults to the state directory");
  std::string warning;
  auto state = StateFile::Open(config_.state_dir, &warning);
  if (!state) return state.error();
  state_ = std::move(*state);
  if (!warning.empty()) Log("warn", warning);
  // A state directory that takes no writes (read-only, full) is no reason to stop detecting.
  if (!state_->writable()) StateWrite(Error{state_->open_error()}, "cursor");

  if (!reader_) {
    auto reader = KmsgReader::Open(config_.kmsg_path);
    if (!reader) return reader.error();
    reader_ = std::move(*reader);
  }

  boot_id_ = ReadBootId();
  const Cursor& saved = state_->cursor();
  if (saved.valid && saved.boot_id == boot_id_) cursor_.Resume(saved.last_seq);
  // A state file that was there but unreadable is no first start: nothing in the buffer is skipped.
  if (!cursor_.resume_after() && config_.kmsg_from_end && warning.empty()) {
    reader_->SeekEnd();
    Log("info", "first start in this boot: reading new kernel records only (kmsg_start: end)");
  }

  // Active faults survive restarts; a reboot clears those whose recovery rule says so.
  active_path_ = config_.state_dir + "/active-faults.json";
  saver_ = std::make_unique<BackgroundSaver>(
      active_path_, [this](const Status& s) { loop_->Post([this, s] { OnActiveSaved(s); }); });
  auto active = ActiveFaults::Load(active_path_);
  if (active) {
    active_ = std::move(*active);
  } else {
    Log("warn", "active faults unreadable; starting with none",
        {{"error", active.error().message}});
  }
  // A restart between two lines of one driver message must not make the second a new fault.
  for (const auto& [key, a] : active_.all()) {
    const int64_t ago = UnixNow() - a.last_seen_unix;
    if (a.boot_id == boot_id_ && ago >= 0 && ago <= 60)
      node_state_.Remember(a.fault, clock_->Steady() - std::chrono::seconds(ago));
  }
  for (const ActiveFault& a :
       active_.ClearAfterReboot(boot_id_, [](const std::string& pci) { return GpuPresent(pci); })) {
    Log("info", "fault cleared by reboot",
        {{"reason", a.fault.reason}, {"key", a.key}, {"rule", ToString(RecoveryRuleOf(a.fault))}});
  }
  {
    Status saved_active = active_.Save(active_path_);
    if (saved_active) saved_active = ActiveFaults::Sync(active_path_);
    active_dirty_ = !StateWrite(saved_active, "active faults");
  }
  return Status::Ok();
}

void StandaloneAgent::CreateReporters() {
  records_ = &metrics_.GetCounter("gpuheal_kmsg_records_total", "Kernel log records read");
  gpus_at_risk_ = &metrics_.GetGauge(
      "gpuheal_gpus_at_risk",
      "GPUs whose precursor signals reached their thresholds (gpuheal.io/gpu-at-risk)");
  lost_ = &metrics_.GetCounter("gpuheal_kmsg_records_lost_total",
                               "Kernel log records overwritten before they were read");
  overruns_ = &metrics_.GetCounter("gpuheal_kmsg_overruns_total",
                                   "Times the reader was overtaken by the kernel (EPIPE)");
  ignored_ = &metrics_.GetCounter("gpuheal_faults_ignored_untrusted_total",
                                  "Faults in user-space (injected) records not acted on");
  output_dropped_ =
      &metrics_.GetCounter("gpuheal_output_lines_dropped_total",
                           "Fault lines not written because nobody reads the agent's stdout");
  duplicates_ = &metrics_.GetCounter("gpuheal_faults_merged_total",
                                     "Driver lines merged into a fault already reported");
  latency_ =
      &metrics_.GetHistogram("gpuheal_detection_latency_seconds",
                             "Kernel record timestamp to fault event emitted", kLatencyBuckets);
  if (kube_client_)
    reporter_ = std::make_unique<KubeReporter>(std::move(kube_client_), *clock_, reporter_options_,
                                               metrics_);
  if (slurm_client_)
    slurm_ = std::make_unique<SlurmReporter>(std::move(slurm_client_), config_.slurm, metrics_);
  metrics_
      .GetGauge("gpuheal_agent_info", "Agent build and mode",
                {{"version", GPUHEAL_VERSION},
                 {"mode", reporter_ ? "kubernetes"
                          : slurm_  ? "slurm"
                                    : "standalone"}})
      .Set(1);
  metrics_.GetGauge("gpuheal_active_faults", "Faults holding a node condition False")
      .Set(static_cast<double>(active_.ConditionFaults()));
}

Status StandaloneAgent::OpenLoop() {
  auto loop = EventLoop::Create();
  if (!loop) return loop.error();
  loop_ = std::move(*loop);

  // Signals arrive through the loop; block them before any other thread starts.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);
  if (config_.own_signals) {
    signal_fd_ = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (signal_fd_ < 0) return Error{fmt::format("signalfd: {}", std::strerror(errno))};
  }
  // Threads start only now, with the signals blocked: SIGTERM reaches the loop's signalfd.
  output_ =
      std::make_unique<LineWriter>(out_fd_, kOutputQueueBytes, [this] { output_dropped_->Inc(); });
  // Once the lines of a record are out, the cursor may pass it.
  output_->OnDrained([this] { loop_->Post([this] { SaveCursor(); }); });
  if (signal_fd_ >= 0) {
    if (auto s = loop_->Watch(signal_fd_, EPOLLIN, [this](uint32_t) { loop_->Stop(); }); !s)
      return s;
  }
  if (auto s = loop_->Watch(reader_->fd(), EPOLLIN, [this](uint32_t) { OnKmsgReadable(); }); !s) {
    return s;
  }
  if (auto s = SetUpDoorbell(); !s) return s;
  auto flush = loop_->AddTimer([this](uint32_t) {
    flush_armed_ = false;
    FlushState();
  });
  if (!flush) return flush.error();
  flush_timer_ = *flush;
  return Status::Ok();
}

Status StandaloneAgent::AddMonitors() {
  std::random_device rd;
  auto monitors = MonitorQueue::Create(*loop_, (uint64_t{rd()} << 32) | rd());
  if (!monitors) return monitors.error();
  monitors_ = std::move(*monitors);
  Gauge& rss = metrics_.GetGauge("gpuheal_agent_resident_bytes", "Agent resident set size");
  Gauge& cpu = metrics_.GetGauge("gpuheal_agent_cpu_seconds", "Agent user+system CPU time");
  Gauge& up = metrics_.GetGauge("gpuheal_kmsg_reader_up", "1 when the kernel log reader works");
  const long page = sysconf(_SC_PAGESIZE);
  const long hz = sysconf(_SC_CLK_TCK);
  monitors_->Add(std::make_unique<FunctionMonitor>(
      "kmsg-self-check", config_.self_check_period,
      [this, &rss, &cpu, &up, page, hz](ProcCache& c) {
        long size = 0, resident = 0;
        if (sscanf(c.Read("/proc/self/statm").c_str(), "%ld %ld", &size, &resident) == 2) {
          rss.Set(static_cast<double>(resident * page));
        }
        // /proc/self/stat: fields 14 and 15 are utime and stime, after "(comm)".
        const std::string& stat = c.Read("/proc/self/stat");
        const size_t close = stat.rfind(')');
        unsigned long ut = 0, st = 0;
        if (close != std::string::npos &&
            sscanf(stat.c_str() + close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                   &ut, &st) == 2) {
          cpu.Set(static_cast<double>(ut + st) / static_cast<double>(hz));
        }
        // The reader is healthy while its descriptor is open and its last read did not fail.
        const bool fd_ok = fcntl(reader_->fd(), F_GETFL) != -1;
        if (!fd_ok) reader_ok_ = false;
        up.Set(reader_ok_ ? 1 : 0);
      }));

  // Transient faults clear after the quiet period; checked at a tenth of it (at most every 30 s).
  monitors_->Add(std::make_unique<FunctionMonitor>(
      "recovery-quiet-period",
      std::clamp<std::chrono::milliseconds>(config_.quiet_period / 10, std::chrono::seconds(1),
                                            std::chrono::seconds(30)),
      [this](ProcCache&) { CheckQuietFaults(); }));

  if (config_.monitors.nvidia) {
    // The driver channels hand their faults to the same path as the kernel log.
    auto on_fault = [this](Fault f, int64_t detected) {
      HandleFault(std::move(f), static_cast<uint64_t>(detected));
      FlushState();
    };
    auto log = [](std::string_view level, std::string msg, nlohmann::ordered_json fields) {
      Log(level, msg, std::move(fields));
    };
    NvmlMonitor::Sink sink;
    sink.fault = on_fault;
    sink.log = log;
    sink.step = [this](const GpuActionStep& st) { OnGpuActionStep(st); };
    sink.gpu_state = [this](const std::string& pci, const std::string& note) {
      if (active_.SetGpuNote(pci, note)) ActiveFaultsChanged(0);
    };
    nvml_ = NvmlMonitor::Start(config_.nvidia, *loop_, *monitors_, *classifier_, metrics_,
                               std::move(sink));

    DcgmMonitor::Sink dsink;
    dsink.fault = on_fault;
    dsink.log = log;
    // DCGM numbers GPUs in NVML's index order.
    dsink.gpu = [this](unsigned id) {
      return nvml_ ? nvml_->GpuAt(id) : std::pair<std::string, std::string>{};
    };
    dcgm_ = DcgmMonitor::Start(config_.nvidia, *loop_, *monitors_, *classifier_, metrics_,
                               std::move(dsink));
  }

  if (auto s = StartDomainMonitors(); !s) return s;

  // Which pods hold a faulty GPU: the kubelet's PodResources (Kubernetes mode, on a host of its
  // own, with NVML to map device IDs to GPUs).
  if (reporter_ && nvml_ && config_.domain_monitors && !config_.pod_resources.socket.empty()) {
    pod_resources_ = std::make_unique<PodResourcesClient>(config_.pod_resources.socket);
    // The refresh: the faulty GPUs count as not asked about, so publishing asks (once) and
    // re-arms the timer.
    auto t = loop_->AddTimer([this](uint32_t) {
      if (active_.GpuLevel().empty()) return;
      holders_for_.clear();
      reporter_->SetAnnotation(std::string(keys::kGpuFaults),
                               GpuFaultsToJson(GpuFaultsToPublish()));
    });
    if (!t) return t.error();
    holders_timer_ = *t;
  }
  return Status::Ok();
}

Status StandaloneAgent::StartServices() {
  if (reporter_) {
    reporter_->SetConditions(active_.Conditions(config_.monitors));
    reporter_->SetAnnotation(std::string(keys::kGpuFaults), GpuFaultsToJson(GpuFaultsToPublish()));
    reporter_->SetAnnotation(std::string(keys::kGpuAtRisk), AtRiskToJson(precursors_.at_risk()));
    reporter_->Start();
  }
  if (slurm_) {
    slurm_->SetDesired(DesiredSlurmState(active_, config_.monitors));
    slurm_->Start();
  }
  if (reporter_ && watch_client_) {
    requests_path_ = config_.state_dir + "/gpu-recovery.json";
    if (auto text = ReadWholeFile(requests_path_)) {
      const auto j = nlohmann::json::parse(*text, nullptr, false);
      if (j.is_object()) {
        handled_request_id_ = j.value("id", "");
        handled_request_raw_ = j.value("raw", "");
      }
    }
    node_watch_ = std::make_unique<kube::Informer<kube::Node>>(
        *watch_client_,
        kube::NodePath() + "?fieldSelector=metadata.name%3D" + reporter_options_.node_name,
        kube::DecodeNodeList, kube::DecodeNode);
    auto post = [this](const kube::Node& n) {
      loop_->Post([this, ann = n.meta.annotations] { OnNodeAnnotations(ann); });
    };
    // Only a change of the request reaches the loop, not every status write to the Node.
    auto changed = [post](const kube::Node& old_node, const kube::Node& n) {
      const std::string key(kRecoveryRequestAnnotation);
      auto o = old_node.meta.annotations.find(key), c = n.meta.annotations.find(key);
      const bool same = (o == old_node.meta.annotations.end()) == (c == n.meta.annotations.end()) &&
                        (c == n.meta.annotations.end() || o->second == c->second);
      if (!same) post(n);
    };
    node_watch_->SetHandlers({post, changed, nullptr});
    node_watch_->Start();
  }

  if (diag_client_ && config_.diagnostics.enabled && !reporter_options_.node_name.empty()) {
    DiagnosticServiceOptions o;
    o.node_name = reporter_options_.node_name;
    o.config = config_.diagnostics;
    if (o.config.dir.empty()) o.config.dir = config_.state_dir + "/diagnostics";
    o.context = ContextFor(config_);
    o.context.boot_id = boot_id_;
    o.secrets = diag_secrets_;
    o.agent_state = [this]() -> nlohmann::json {
      // Built on the loop thread, which owns the state; a loop that does not answer within a
      // second (stopping) gives a bundle without it.
      auto p = std::make_shared<std::promise<nlohmann::json>>();
      auto fut = p->get_future();
      loop_->Post([this, p] { p->set_value(DiagnosticState()); });
      if (fut.wait_for(std::chrono::seconds(1)) != std::future_status::ready)
        return {{"error", "the agent's loop did not answer within 1 s"}};
      return fut.get();
    };
    diagnostics_ =
        std::make_unique<DiagnosticService>(std::move(diag_client_), std::move(o), metrics_);
    if (auto s = diagnostics_->Start(); !s) return s;
  }

  if (!config_.listen.empty()) {
    auto http = HttpServer::Start(
        config_.listen, metrics_, [this] { return Health(); },
        [this] { return "kmsg wake-up: " + kmsg_wakeup_ + "\n"; });
    if (!http) return Error{config_.listen_origin + http.error().message};
    http_ = std::move(*http);
  }
  return Status::Ok();
}

void StandaloneAgent::LogStarted() {
  nlohmann::ordered_json f;
  f["kmsg"] = config_.kmsg_path;
  f["boot_id"] = boot_id_;
  f["resume_after_seq"] =
      cursor_.resume_after() ? nlohmann::ordered_json(*cursor_.resume_after()) : nullptr;
  f["kmsg_wakeup"] = kmsg_wakeup_;
  f["accept_injected"] = config_.accept_injected;
  f["active_faults"] = active_.all().size();
  if (reporter_) f["node"] = reporter_options_.node_name;
  if (slurm_) f["slurm_node"] = config_.slurm.node_name;
  if (http_) f["listen"] = fmt::format("{}:{}", http_->host(), http_->port());
  Log("info", "agent started", f);
}

std::string StandaloneAgent::Health() const {
  if (!reader_ok_) {
    return fmt::format("kernel log reader failed: {}", std::strerror(reader_errno_.load()));
  }
  if (std::lock_guard<std::mutex> l(health_mu_); !health_state_error_.empty()) {
    return "state directory not writable (" + health_state_error_ +
           "): detection goes on, restarts re-report";
  }
  if (reporter_ && !reporter_->api_ok()) {
    const std::string err = reporter_->last_error();
    return "Kubernetes API not reachable" + (err.empty() ? std::string(" yet") : ": " + err);
  }
  if (slurm_ && !slurm_->api_ok()) {
    const std::string err = slurm_->last_error();
    return "slurmctld not reachable" + (err.empty() ? std::string(" yet") : ": " + err);
  }
  return {};
}

int StandaloneAgent::Run() {
  // Faults already in the kernel buffer for this boot are read on the first wake-up.
  OnKmsgReadable();
  loop_running_ = true;
  loop_->Run();
  loop_running_ = false;
  // A save in flight may not have told the loop: save again, here, on this thread.
  saver_->Stop();
  if (save_in_flight_) {
    save_in_flight_ = false;
    active_dirty_ = true;
  }
  output_->Flush(std::chrono::seconds(1));  // the lines out first: then the cursor may pass them
  FlushState();
  Log("info", "agent stopped");
  return reader_ok_ ? 0 : 1;
}

Status StandaloneAgent::SetUpDoorbell() {
  rings_ = &metrics_.GetCounter("gpuheal_kmsg_doorbell_rings_total",
                                "Wake-ups by the kernel-log doorbell (BPF)");
  const bool kernel = IsKernelKmsgDevice(reader_->fd());
  std::string why;
  if (config_.kmsg_bpf == AgentConfig::Bpf::kOff) {
    why = "kmsg_bpf: false";
  } else if (!kernel) {
    why = config_.kmsg_path + " is not the kernel's /dev/kmsg";
  } else if (auto d = KmsgDoorbell::Open(); d) {
    doorbell_ = std::move(*d);
  } else {
    why = d.error().message;
  }
  if (doorbell_) {
    auto watch = [this] {
      return loop_->Watch(doorbell_->fd(), EPOLLIN, [this](uint32_t) { OnDoorbell(); });
    };
    // After a pause in a flood: ring again, and take what gathered meanwhile.
    auto pause = loop_->AddTimer([this, watch](uint32_t) {
      if (watch()) OnDoorbell();
    });
    if (!pause) return pause.error();
    doorbell_pause_timer_ = *pause;
    if (auto s = watch(); !s) return s;
    kmsg_wakeup_ = "bpf";
  } else if (config_.kmsg_bpf == AgentConfig::Bpf::kOn) {
    return Error{fmt::format(
        "{}; kmsg_bpf is true, so the agent does not start without it (auto falls back to "
        "/dev/kmsg's own wake-up at the kernel's next tick)",
        why)};
  } else if (config_.kmsg_bpf == AgentConfig::Bpf::kAuto && kernel) {
    Log("warn",
        "kernel-log doorbell not used: the agent wakes at the kernel's next tick after a record "
        "(up to 4 ms at CONFIG_HZ=250) instead of at once",
        {{"reason", why}});
  }
  for (const char* source : {"bpf", "kmsg"}) {
    metrics_
        .GetGauge("gpuheal_kmsg_wakeup_source",
                  "1 for what wakes the agent for a kernel record: bpf (the doorbell) or kmsg "
                  "(/dev/kmsg itself, at the kernel's next tick)",
                  {{"source", source}})
        .Set(kmsg_wakeup_ == source ? 1 : 0);
  }
  return Status::Ok();
}

void StandaloneAgent::OnDoorbell() {
  // Take the ring first: a record stored while the buffer drains rings again.
  rings_->Inc(static_cast<double>(doorbell_->Take()));
  if (!reader_ok_) {  // the reader failed (said once, /healthz shows it): nothing to drain
    loop_->Unwatch(doorbell_->fd());
    return;
  }
  OnKmsgReadable();
  // A flood: waking for every few records costs more CPU than it saves time, and a loop that
  // spends its time waking falls behind the kernel's buffer. Let records gather for a moment:
  // the next drain takes them all, and the latency under a flood stays within the pause.
  if (last_drained_ >= kDoorbellBusyRecords) {
    loop_->Unwatch(doorbell_->fd());
    loop_->ArmTimer(doorbell_pause_timer_, kDoorbellPause);
  }
}

void StandaloneAgent::OnKmsgReadable() {
  last_drained_ = 0;
  for (int i = 0; i < kMaxRecordsPerWake; ++i) {
    std::string_view rec;
    switch (reader_->Next(rec)) {
      case KernelLog::Status::kRecord:
        ProcessRecord(rec);
        ++last_drained_;
        continue;
      case KernelLog::Status::kOverrun:
        overruns_->Inc();
        continue;
      case KernelLog::Status::kAgain:
      case KernelLog::Status::kEof:
        i = kMaxRecordsPerWake;
        break;
      case KernelLog::Status::kError:
        if (reader_ok_) {
          reader_errno_ = reader_->last_errno();
          Log("error", "kernel log read failed",
              {{"kmsg", config_.kmsg_path}, {"error", std::strerror(reader_->last_errno())}});
        }
        reader_ok_ = false;
        loop_->Unwatch(reader_->fd());
        i = kMaxRecordsPerWake;
        break;
    }
  }
  ValidateCursor();
  // Group commit: faults are saved (and the cursor moved past them) at most every
  // kGroupCommitUsec, whatever the number of batches; without faults the cursor is saved at most
  // once a second. A save writes every active fault, so with 1,000 GPUs lost in a 100,000
  // records/s flood a save and fsync per batch stalled the reader until the kernel overwrote 370
  // of the Xid records; every 50 ms it still lost 1-29, every 250 ms none (bench_kmsg).
  const int64_t now = MonotonicUsec();
  if (batch_faults_ || active_dirty_) {
    if (now - last_flush_usec_ >= kGroupCommitUsec) {
      FlushState();
    } else if (!flush_armed_) {
      flush_armed_ = true;
      loop_->ArmTimer(flush_timer_,
                      std::chrono::microseconds(kGroupCommitUsec - (now - last_flush_usec_)));
    }
  } else if (now - last_save_usec_ >= kCursorSaveIntervalUsec) {
    FlushState();
  }
  batch_faults_ = false;
}

void StandaloneAgent::ValidateCursor() {
  // A saved cursor of this boot that is ahead of every record the kernel holds (a corrupt or
  // hand-edited state file) would skip every record: read the buffer again from its start.
  if (!cursor_.AheadOfKernel()) return;
  Log("warn", "saved cursor is ahead of the kernel log: reading this boot's records from the start",
      {{"cursor", *cursor_.resume_after()},
       {"kernel_newest_seq", cursor_.ToJson()["newest_seen_seq"]},
       {"state", state_->path()}});
  cursor_.Forget();
  reader_->SeekStart();
  loop_->Post([this] { OnKmsgReadable(); });
}

bool StandaloneAgent::Enabled(const Fault& f) const {
  const MonitorSwitches& m = config_.monitors;
  switch (f.kind) {
    case FaultKind::kXid:
    case FaultKind::kGpuFallenOffBus:
    case FaultKind::kSxid:
    case FaultKind::kGpuHealth:
      return m.nvidia;
    case FaultKind::kStorage:
      return m.storage;
    case FaultKind::kNetwork:
      return m.network;
    case FaultKind::kRuntime:
      return m.runtime;
    case FaultKind::kKernel:
    case FaultKind::kRule:
      return m.kernel;
  }
  return true;
}

void StandaloneAgent::ProcessRecord(std::string_view raw) {
  records_->Inc();
  const std::string_view line = raw.substr(0, raw.find('\n'));  // drop " KEY=VALUE" lines
  const ParsedLine p = ParseLine(line);
  if (p.format == LineFormat::kKmsgContinuation) return;
  if (p.seq) {
    const KmsgCursor::Read read = cursor_.See(*p.seq);
    if (read.lost) lost_->Inc(static_cast<double>(read.lost));
    if (!read.fresh) return;  // reported before a restart
  }
  Record r;
  r.message = p.message;
  // Only a record whose header parsed says who wrote it: anything else from the kernel log
  // device is untrusted (the kernel writes every record with a header it can parse).
  r.trusted = p.format == LineFormat::kKmsg && p.kernel_origin;
  r.kmsg_seq = p.seq;
  r.kmsg_usec = p.usec;
  faults_.clear();
  classifier_->Classify(r, faults_);
  if (faults_.empty()) return;
  // Write-ahead: the cursor passes this record only after its faults are saved and its lines
  // written (FlushState), so a crash at any point reports them again rather than never.
  batch_faults_ = true;
  cursor_.BeginRecord(p.seq);
  const uint64_t detected = static_cast<uint64_t>(MonotonicUsec());
  for (size_t i = 0, n = faults_.size(); i < n; ++i) {
    if (faults_[i].reason == reason::kKernelOOMKill &&
        (faults_[i].trusted || config_.accept_injected)) {
      if (auto storm = CountOomKill(faults_[i])) faults_.push_back(std::move(*storm));
    }
  }
  for (Fault& f : faults_) HandleFault(std::move(f), detected);
  cursor_.EndRecord();
}

void StandaloneAgent::HandleFault(Fault f, uint64_t detected) {
  if (!Enabled(f)) return;
  if (!f.trusted && !config_.accept_injected) {
    ignored_->Inc();
    Emit(f, detected);
    return;
  }
  f.injected = !f.trusted;
  const std::string source = f.source;
  NodeState::Merge merge;
  auto reported = node_state_.Observe(std::move(f), clock_->Steady(), &merge);
  if (!reported) {
    duplicates_->Inc();
    if (!merge.key.empty()) {
      // The same fault through a second channel (kernel log and NVML): one fault, both noted.
      metrics_
          .GetCounter("gpuheal_faults_merged_across_sources_total",
                      "Faults reported by a second source (kmsg, nvml) and merged into the first",
                      {{"source", source}})
          .Inc();
      Log("info", "fault also reported by another source",
          {{"key", merge.key}, {"first", merge.first_source}, {"also", source}});
      if (active_.AddSource(merge.key, source)) ActiveFaultsChanged(static_cast<int64_t>(detected));
    }
    return;
  }
  if (reported->Follower()) {
    // A repeat of an incident or a consequence of another fault: reported, and it adds no
    // action (no Event, no GPU reset); a repeat keeps its incident's active fault fresh.
    metrics_
        .GetCounter("gpuheal_fault_lines_followed_total",
                    "Fault lines that repeat an incident or follow from another fault (no action "
                    "of their own)",
                    {{"kind", reported->repeat_of.empty() ? "consequence" : "repeat"}})
        .Inc();
    Emit(*reported, detected);
    if (!reported->repeat_of.empty() && active_.all().contains(NodeState::KeyOf(*reported)) &&
        active_.Observe(*reported, UnixNow(), boot_id_)) {
      ActiveFaultsChanged(static_cast<int64_t>(detected));
    }
    return;
  }
  // The line goes first (the detection path); the active set is saved with the batch, before the
  // cursor passes the record.
  Emit(*reported, detected);
  if (active_.Observe(*reported, UnixNow(), boot_id_))
    ActiveFaultsChanged(static_cast<int64_t>(detected));
  if (precursors_.Observe(*reported, clock_->Now())) AtRiskChanged();
  if (reported->severity < Severity::kFatal && reported->severity >= Severity::kWarn && reporter_) {
    std::string where = reported->pci.empty() ? reported->device : "GPU " + reported->pci;
    if (!reported->uuid.empty()) where += " (" + reported->uuid + ")";
    // An application fault names the workload it stopped.
    if (!reported->process.empty() || reported->pid) {
      where += fmt::format(", process {} (pid {})",
                           reported->process.empty() ? "<unknown>" : reported->process,
                           reported->pid ? std::to_string(*reported->pid) : "<unknown>");
    }
    reporter_->RecordEvent("Warning", reported->reason,
                           fmt::format("{}{}{} [{}]", where, where.empty() ? "" : ": ",
                                       reported->message, ToString(reported->severity)));
  }
  // Policy: a critical GPU fault whose action is a GPU reset gets the agent's own recovery.
  if (reported->action == Action::kResetGpu && !reported->pci.empty() &&
      config_.nvidia.reset_on_critical && nvml_) {
    nvml_->RequestReset(reported->pci, reported->reason);
  }
}

std::optional<Fault> StandaloneAgent::CountOomKill(const Fault& kill) {
  const int64_t now = UnixNow();
  const int64_t window =
      std::chrono::duration_cast<std::chrono::seconds>(config_.kernel.oom_storm_window).count();
  oom_kills_.push_back(now);
  while (!oom_kills_.empty() && now - oom_kills_.front() >= window) oom_kills_.pop_front();
  if (static_cast<int>(oom_kills_.size()) < config_.kernel.oom_storm_count) return std::nullopt;
  if (last_oom_storm_ && now - last_oom_storm_ < window) return std::nullopt;  // one per window
  last_oom_storm_ = now;
  Fault storm = kill;
  storm.reason = std::string(reason::kKernelOOMKillStorm);
  storm.severity = Severity::kWarn;
  storm.action = DefaultAction(storm.severity);
  storm.device.clear();
  storm.message =
      fmt::format("{} OOM kills within {}s; the last: {}", oom_kills_.size(), window, kill.message);
  oom_kills_.clear();
  return storm;
}

void StandaloneAgent::ReportObserved(const std::string& source, std::vector<Fault> faults) {
  const int64_t detected = MonotonicUsec();
  const int64_t now = UnixNow();
  std::vector<std::string> keys;
  bool changed = false;
  for (Fault& f : faults) {
    if (!Enabled(f)) continue;
    std::string key = NodeState::KeyOf(f);
    keys.push_back(key);
    if (active_.all().contains(key)) continue;  // already holding its condition
    Emit(f, static_cast<uint64_t>(detected));
    if (active_.Observe(f, now, boot_id_)) changed = true;
  }
  auto cleared = active_.ClearObserved(source, keys);
  for (const ActiveFault& a : cleared) {
    Log("info", "fault cleared: its monitor sees the healthy state again",
        {{"reason", a.fault.reason},
         {"key", a.key},
         {"source", source},
         {"rule", ToString(RecoveryRule::kWhileObserved)}});
  }
  if (changed || !cleared.empty()) {
    ActiveFaultsChanged(detected);
    FlushState();
  }
}

Status StandaloneAgent::StartDomainMonitors() {
  if (!config_.domain_monitors) return Status::Ok();
  DomainSink sink;
  sink.observed = [this](const std::string& source, std::vector<Fault> faults) {
    ReportObserved(source, std::move(faults));
  };
  sink.fault = [this](Fault f) {
    HandleFault(std::move(f), static_cast<uint64_t>(MonotonicUsec()));
    FlushState();
  };
  sink.log = [](std::string_view level, std::string msg, nlohmann::ordered_json fields) {
    Log(level, msg, std::move(fields));
  };
  sink.active_devices = [this](const std::string& source) {
    std::vector<std::string> devices;
    for (const auto& [key, a] : active_.all()) {
      if (a.fault.source == source) devices.push_back(a.fault.device);
    }
    return devices;
  };
  // A monitor that cannot start (netlink refused in a restricted container, no /proc) is said
  // once; the agent goes on with the others.
  if (config_.monitors.network) {
    auto m = LinkMonitor::Start(config_.network, *loop_, *monitors_, metrics_, sink);
    if (m)
      link_monitor_ = std::move(*m);
    else
      Log("warn", "network monitor not started", {{"error", m.error().message}});
  }
  if (config_.monitors.storage && !config_.storage.paths.empty()) {
    auto m = MountMonitor::Start(config_.storage, *loop_, *monitors_, sink);
    if (m)
      mount_monitor_ = std::move(*m);
    else
      Log("warn", "storage monitor not started", {{"error", m.error().message}});
  }
  if (config_.monitors.runtime) {
    auto m = RuntimeMonitor::Start(config_.runtime, *loop_, metrics_, sink);
    if (m)
      runtime_monitor_ = std::move(*m);
    else
      Log("warn", "container runtime monitor not started", {{"error", m.error().message}});
  }
  if (config_.monitors.kernel && config_.previous_boot.enabled) {
    // Reading a large journal takes its time: on a thread of its own, never ahead of the first
    // kernel record; what it finds reaches the loop like any other fault.
    DomainSink posted = sink;
    posted.fault = [this](Fault f) {
      loop_->Post([this, f = std::move(f)]() mutable {
        HandleFault(std::move(f), static_cast<uint64_t>(MonotonicUsec()));
        FlushState();
      });
    };
    previous_boot_ = std::thread([this, posted] {
      ReportPreviousBoot(config_.previous_boot, config_.state_dir, boot_id_, posted);
    });
  }
  return Status::Ok();
}

void StandaloneAgent::SaveHandledRequest() {
  const nlohmann::json j = {{"id", handled_request_id_}, {"raw", handled_request_raw_}};
  if (auto st = WriteFileAtomic(requests_path_, j.dump() + "\n"); !st) {
    Log("error", "cannot save the handled GPU recovery request", {{"error", st.error().message}});
  }
}

void StandaloneAgent::PublishRecoveryStatus() {
  if (reporter_) {
    reporter_->SetAnnotation(std::string(kRecoveryStatusAnnotation),
                             request_status_.ToJson(kube::RfcTime(clock_->Now())));
  }
}

void StandaloneAgent::OnNodeAnnotations(const std::map<std::string, std::string>& annotations) {
  auto it = annotations.find(std::string(kRecoveryRequestAnnotation));
  if (it == annotations.end()) return;
  const std::string& raw = it->second;
  auto req = ParseRecoveryRequest(raw);
  // At most once: a request id (or, unreadable, its text) is acted on once, across restarts too.
  if (req ? req->id == handled_request_id_ : raw == handled_request_raw_) return;
  handled_request_raw_ = raw;
  if (req) handled_request_id_ = req->id;
  SaveHandledRequest();
  request_status_ = {};
  if (!req) {
    request_status_.state = "rejected";
    request_status_.error = req.error().message;
    Log("warn", "GPU recovery request rejected", {{"error", req.error().message}});
    reporter_->RecordEvent("Warning", std::string(reason::kGPURecoveryFailed),
                           "request rejected: " + req.error().message);
    PublishRecoveryStatus();
    return;
  }
  request_status_.id = req->id;
  Log("info", "GPU recovery requested", {{"id", req->id}, {"gpus", req->gpus}});
  reporter_->RecordEvent(
      "Normal", std::string(reason::kGPURecovery),
      fmt::format("request {} accepted for GPU {}", req->id, fmt::join(req->gpus, ", ")));
  for (const std::string& pci : req->gpus) {
    RecoveryStatus::Gpu& g = request_status_.gpus[pci];
    g.step = "queued";
    if (!nvml_) {
      g = {"rejected", false, true,
           "NVML is not available on this node: the agent cannot drain or reset GPUs"};
    } else if (!nvml_->RequestReset(pci, "request " + req->id)) {
      g = {"rejected", false, true,
           "NVML lists no such GPU, or a recovery of it is already running"};
    }
  }
  request_status_.Settle();
  PublishRecoveryStatus();
}

void StandaloneAgent::OnGpuActionStep(const GpuActionStep& s) {
  nlohmann::ordered_json j;
  j["gpu_action"] = "recovery";
  j["pci"] = s.pci;
  j["bus_id"] = s.bus_id;
  j["step"] = s.step;
  j["ok"] = s.ok;
  j["final"] = s.final;
  j["message"] = s.message;
  j["elapsed_ms"] = s.elapsed_ms;
  std::string line = ToJsonLine(j);
  line.push_back('\n');
  output_->Write(std::move(line));
  Log(s.ok ? "info" : "warn", "GPU recovery: " + s.step,
      {{"pci", s.pci}, {"ok", s.ok}, {"message", s.message}});
  metrics_
      .GetCounter("gpuheal_gpu_recovery_steps_total",
                  "Steps of the agent's GPU recovery, by step and result",
                  {{"step", s.step}, {"result", s.ok ? "ok" : "failed"}})
      .Inc();
  if (reporter_ && (s.final || !s.ok || s.step == "drain" || s.step == "reset")) {
    const bool failed = !s.ok;
    reporter_->RecordEvent(failed ? "Warning" : "Normal",
                           std::string(failed ? reason::kGPURecoveryFailed : reason::kGPURecovery),
                           fmt::format("GPU {}: {}: {}", s.pci, s.step, s.message));
  }
  if (auto g = request_status_.gpus.find(s.pci);
      g != request_status_.gpus.end() && !g->second.final) {
    g->second = {s.step, s.ok, s.final, s.message};
    request_status_.Settle();
    PublishRecoveryStatus();
  }
  if (s.final && s.ok) {
    // A successful, verified reset clears the GPU's faults (docs/recovery.md).
    for (const ActiveFault& a : active_.ClearGpu(s.pci)) {
      Log("info", "fault cleared by GPU reset",
          {{"reason", a.fault.reason}, {"key", a.key}, {"rule", "gpu-reset"}});
    }
    // Its pending remaps applied: its precursor counts start again.
    if (precursors_.ClearGpu(s.pci)) AtRiskChanged();
    ActiveFaultsChanged(0);
    FlushState();
  }
}

void StandaloneAgent::ActiveFaultsChanged(int64_t detected_usec) {
  // Saved with the batch (FlushState); until then the cursor stays before this record.
  active_dirty_ = true;
  cursor_.FaultsChanged(save_in_flight_);
  metrics_.GetGauge("gpuheal_active_faults", "Faults holding a node condition False")
      .Set(static_cast<double>(active_.ConditionFaults()));
  metrics_
      .GetGauge("gpuheal_active_gpu_faults",
                "GPUs with an active fault (critical or worse), as in gpuheal.io/gpu-faults")
      .Set(static_cast<double>(active_.GpuLevel().size()));
  if (reporter_) {
    // The conditions first: a fatal fault's PATCH does not wait for the annotation (usually both
    // go in one PATCH; at worst the annotation follows in the next).
    reporter_->SetConditions(active_.Conditions(config_.monitors), detected_usec);
    reporter_->SetAnnotation(std::string(keys::kGpuFaults), GpuFaultsToJson(GpuFaultsToPublish()));
  }
  if (slurm_) slurm_->SetDesired(DesiredSlurmState(active_, config_.monitors));
}

GpuFaults StandaloneAgent::GpuFaultsToPublish() {
  GpuFaults faults = active_.GpuLevel();
  if (!pod_resources_) return faults;
  std::set<std::string> gpus;
  for (const auto& [pci, f] : faults) gpus.insert(pci);
  if (gpus.empty()) {
    holders_for_.clear();
    return faults;
  }
  // A GPU new to the set is asked about at once (the controller reads its pods when it acts);
  // the timer keeps the answer fresh while the fault lasts.
  if (!std::includes(holders_for_.begin(), holders_for_.end(), gpus.begin(), gpus.end())) {
    RefreshGpuHolders();
    loop_->ArmTimer(holders_timer_, config_.pod_resources.refresh);
  }
  holders_for_ = gpus;
  if (!gpu_holders_known_) return faults;
  for (auto& [pci, f] : faults) {
    auto it = gpu_holders_.find(pci);
    f.pods = it == gpu_holders_.end() ? std::vector<GpuHolder>{} : it->second;
  }
  return faults;
}

void StandaloneAgent::RefreshGpuHolders() {
  std::string error;
  auto uses = pod_resources_->List(config_.pod_resources.timeout);
  if (uses) {
    std::vector<GpuIdentity> gpus;
    for (unsigned i = 0; i < nvml_->gpu_count(); ++i) {
      auto [pci, uuid] = nvml_->GpuAt(i);
      gpus.push_back(GpuIdentity{pci, uuid});
    }
    auto holders = GpuHoldersOf(*uses, config_.pod_resources.resources, gpus);
    if (holders) {
      gpu_holders_ = std::move(*holders);
      gpu_holders_known_ = true;
    } else {
      error = holders.error().message;
    }
  } else {
    error = uses.error().message;
  }
  if (!error.empty()) {
    gpu_holders_known_ = false;
    gpu_holders_.clear();
    if (error != holders_error_) {
      Log("warn",
          "cannot tell which pods hold the faulty GPUs: the controller evicts none of them by "
          "GPU, and the GPU's drain waits for its processes",
          {{"error", error}});
    }
  } else if (!holders_error_.empty()) {
    Log("info", "the kubelet's PodResources answers again", {});
  }
  holders_error_ = error;
}

void StandaloneAgent::FlushState() {
  last_flush_usec_ = MonotonicUsec();
  if (active_dirty_ && loop_running_) {
    // One save at a time; what changes meanwhile is saved when it is done.
    if (!save_in_flight_) SaveActiveInBackground();
  } else if (active_dirty_) {
    // Written (and renamed into place) before the cursor moves; the fsync follows, for power loss.
    Status saved = active_.Save(active_path_);
    if (saved) saved = ActiveFaults::Sync(active_path_);
    if (!StateWrite(saved, "active faults")) return;  // the cursor stays before the unsaved faults
    active_dirty_ = false;
    cursor_.AllSaved();
  }
  SaveCursor();
}

void StandaloneAgent::SaveActiveInBackground() {
  save_in_flight_ = true;
  active_dirty_ = false;
  cursor_.SnapshotTaken();
  saver_->Save(active_.Serialize());
}

void StandaloneAgent::OnActiveSaved(const Status& s) {
  save_in_flight_ = false;
  const bool saved = StateWrite(s, "active faults");
  // Failed: the cursor stays before the unsaved faults; they are saved again with the next batch.
  if (!saved) active_dirty_ = true;
  cursor_.SnapshotSaved(saved);
  if (active_dirty_ && !flush_armed_) {  // the next save at the group commit's pace
    flush_armed_ = true;
    const int64_t since = MonotonicUsec() - last_flush_usec_;
    loop_->ArmTimer(flush_timer_,
                    std::chrono::microseconds(std::max<int64_t>(1, kGroupCommitUsec - since)));
  }
  SaveCursor();
}

bool StandaloneAgent::StateWrite(const Status& s, std::string_view what) {
  if (s) {
    if (!state_error_.empty()) {
      Log("info", "state directory writable again", {{"state_dir", config_.state_dir}});
      state_error_.clear();
      state_writable_->Set(1);
      std::lock_guard<std::mutex> l(health_mu_);
      health_state_error_.clear();
    }
    return true;
  }
  state_write_errors_->Inc();
  if (state_error_.empty()) {
    // Said once: detection and reporting go on; what is not saved is reported again after a
    // restart.
    Log("error",
        "cannot write the state directory: detecting and reporting continue, the cursor waits",
        {{"state_dir", config_.state_dir},
         {"what", std::string(what)},
         {"error", s.error().message}});
    state_writable_->Set(0);
  }
  state_error_ = fmt::format("{}: {}", what, s.error().message);
  std::lock_guard<std::mutex> l(health_mu_);
  health_state_error_ = state_error_;
  return false;
}

void StandaloneAgent::AtRiskChanged() {
  const AtRiskGpus& gpus = precursors_.at_risk();
  if (gpus_at_risk_) gpus_at_risk_->Set(static_cast<double>(gpus.size()));
  Log(gpus.empty() ? "info" : "warn", "GPUs at risk", {{"gpus", AtRiskToJson(gpus)}});
  if (reporter_) reporter_->SetAnnotation(std::string(keys::kGpuAtRisk), AtRiskToJson(gpus));
}

void StandaloneAgent::CheckQuietFaults() {
  if (precursors_.Expire(clock_->Now())) AtRiskChanged();
  const auto quiet = std::chrono::duration_cast<std::chrono::seconds>(config_.quiet_period);
  auto cleared = active_.ClearQuiet(UnixNow(), quiet);
  if (cleared.empty()) return;
  for (const ActiveFault& a : cleared) {
    Log("info", "fault cleared after its quiet period",
        {{"reason", a.fault.reason}, {"key", a.key}, {"rule", ToString(RecoveryRuleOf(a.fault))}});
  }
  ActiveFaultsChanged(0);
  FlushState();
}

void StandaloneAgent::Emit(const Fault& f, uint64_t detected_usec) {
  nlohmann::ordered_json j = ToJson(f);
  j["kmsg_seq"] = f.kmsg_seq ? nlohmann::ordered_json(*f.kmsg_seq) : nullptr;
  j["kmsg_usec"] = f.kmsg_usec ? nlohmann::ordered_json(*f.kmsg_usec) : nullptr;
  j["detected_usec"] = detected_usec;
  const bool acted = f.trusted || config_.accept_injected;
  if (!acted) j["ignored"] = true;
  std::string line = ToJsonLine(j);
  if (diagnostics_) {
    recent_faults_.push_back(line);
    if (recent_faults_.size() > 100) recent_faults_.pop_front();
  }
  line.push_back('\n');
  // Counted before the line is out: a reader of both never sees the line ahead of its count.
  if (acted && !f.Follower()) {
    metrics_
        .GetCounter("gpuheal_faults_total", "Faults detected, by reason and severity",
                    {{"reason", f.reason}, {"severity", std::string(ToString(f.severity))}})
        .Inc();
  }
  if (acted && f.kmsg_usec && detected_usec >= *f.kmsg_usec) {
    latency_->Observe(static_cast<double>(detected_usec - *f.kmsg_usec) / 1e6);
  }
  output_->Write(std::move(line), f.source == "kmsg" ? f.kmsg_seq : std::nullopt);
}

nlohmann::json StandaloneAgent::DiagnosticState() const {
  nlohmann::json recent = nlohmann::json::array();
  for (const auto& l : recent_faults_) recent.push_back(nlohmann::json::parse(l, nullptr, false));
  nlohmann::json config_text;
  if (!config_.config_file.empty()) {
    if (auto text = ReadWholeFile(config_.config_file)) config_text = *text;
  }
  nlohmann::json cursor = cursor_.ToJson();
  cursor["kmsg"] = config_.kmsg_path;
  return {{"version", GPUHEAL_VERSION},
          {"node", reporter_options_.node_name},
          {"boot_id", boot_id_},
          {"cursor", std::move(cursor)},
          {"kmsg_wakeup", kmsg_wakeup_},
          {"active_faults", active_.ToJson()},
          {"recent_faults", std::move(recent)},
          {"health", Health()},
          {"config_file", config_.config_file},
          {"config", config_text},
          {"state_dir", config_.state_dir}};
}

void StandaloneAgent::SaveCursor() {
  // The cursor may pass a record only once its lines are written and its faults saved.
  const auto safe = cursor_.SafeToSave(output_->OldestPending());
  if (!safe) return;
  Cursor c;
  c.boot_id = boot_id_;
  c.last_seq = *safe;
  if (!StateWrite(state_->Save(c), "cursor")) return;
  cursor_.Saved(*safe);
  last_save_usec_ = MonotonicUsec();
}

}  // namespace gpuheal
