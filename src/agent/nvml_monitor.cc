#include "agent/nvml_monitor.h"

#include <fmt/format.h>

#include "core/clock.h"
#include "core/subprocess.h"

namespace gpuheal {
namespace {

// A burst of single corrected ECC events within this window is a storm (the per-event path; the
// poll path compares counters).
constexpr auto kSbeWindow = std::chrono::minutes(1);

std::string EventName(unsigned long long type) {
  if (type & nvml::kEventXidCriticalError) return "xid";
  if (type & nvml::kEventDoubleBitEccError) return "double_bit_ecc";
  if (type & nvml::kEventSingleBitEccError) return "single_bit_ecc";
  if (type & nvml::kEventSingleBitEccErrorStorm) return "single_bit_ecc_storm";
  if (type & nvml::kEventGpuUnavailableError) return "gpu_unavailable";
  if (type & nvml::kEventGpuRecoveryAction) return "recovery_action";
  return "other";
}

}  // namespace

std::unique_ptr<NvmlMonitor> NvmlMonitor::Start(const NvidiaConfig& config, EventLoop& loop,
                                                MonitorQueue& monitors,
                                                const Classifier& classifier, Metrics& metrics,
                                                Sink sink) {
  Gauge& up = metrics.GetGauge("gpuheal_nvml_up", "1 when the NVML backend is loaded and polling");
  if (config.nvml == NvidiaConfig::Use::kOff) {
    up.Set(0);
    return nullptr;
  }
  auto source = NvmlSource::Open(config.nvml_library);
  if (!source) {
    up.Set(0);
    // Said once. Without NVML the kernel log still reports every Xid; only the driver-API checks
    // are off.
    sink.log(config.nvml == NvidiaConfig::Use::kOn ? "warn" : "info",
             "NVML not available; driver-API checks off, "
             "kernel log monitoring continues",
             {{"error", source.error().message}});
    return nullptr;
  }
  std::unique_ptr<NvmlMonitor> m(
      new NvmlMonitor(config, loop, classifier, metrics, std::move(sink), std::move(*source)));
  up.Set(1);
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (const NvmlGpu& g : m->source_->gpus()) {
    gpus.push_back({{"pci", g.pci},
                    {"uuid", g.uuid},
                    {"name", g.name},
                    {"events", fmt::format("{:#x}", g.supported_events & nvml::kWantedEvents)}});
  }
  m->sink_.log("info", "NVML backend started",
               {{"library", m->source_->library().path()},
                {"driver", m->source_->library().driver_version()},
                {"gpus", gpus}});
  NvmlMonitor* self = m.get();
  for (const std::string& n : m->source_->StartEvents([self](NvmlEvent e) {
         self->loop_.Post([self, e = std::move(e)] { self->OnEvent(e); });
       })) {
    m->sink_.log("info", n, {});
  }
  m->poll_thread_ = std::thread([self] { self->PollThread(); });
  m->action_thread_ = std::thread([self] { self->ActionThread(); });
  monitors.Add(
      std::make_unique<FunctionMonitor>("nvml-health", config.poll_period, [self](ProcCache&) {
        std::lock_guard<std::mutex> lock(self->mu_);
        self->poll_requested_ = true;
        self->cv_.notify_all();
      }));
  return m;
}

NvmlMonitor::NvmlMonitor(const NvidiaConfig& config, EventLoop& loop, const Classifier& classifier,
                         Metrics& metrics, Sink sink, std::unique_ptr<NvmlSource> source)
    : config_(config),
      loop_(loop),
      classifier_(classifier),
      metrics_(metrics),
      sink_(std::move(sink)),
      source_(std::move(source)) {
  limits_.temperature_limit = config.temperature_limit;
  limits_.nvlink_errors_per_poll = config.nvlink_errors_per_poll;
  limits_.corrected_ecc_per_poll = config.corrected_ecc_per_poll;
  poll_cpu_ = &metrics.GetHistogram("gpuheal_nvml_poll_cpu_seconds_per_gpu",
                                    "CPU time of one NVML health poll per GPU",
                                    {0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05});
  event_latency_ =
      &metrics.GetHistogram("gpuheal_nvml_event_to_fault_seconds",
                            "NVML event returned by the wait to fault handed to the agent",
                            {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05});
}

NvmlMonitor::~NvmlMonitor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (poll_thread_.joinable()) poll_thread_.join();
  if (action_thread_.joinable()) action_thread_.join();
  source_->StopEvents();
}

bool NvmlMonitor::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stop_; });
}

void NvmlMonitor::PollThread() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || poll_requested_; });
      if (stop_) return;
      poll_requested_ = false;
    }
    NvmlPoll p = source_->Poll();
    const size_t pci = CountPciGpus(config_.sysfs_pci_devices);
    loop_.Post([this, p = std::move(p), pci]() mutable { OnPoll(std::move(p), pci); });
  }
}

void NvmlMonitor::OnEvent(const NvmlEvent& e) {
  metrics_
      .GetCounter("gpuheal_nvml_events_total", "NVML events received, by type",
                  {{"type", EventName(e.type)}})
      .Inc();
  std::optional<Fault> f;
  if ((e.type & nvml::kEventSingleBitEccError) && !(e.type & ~nvml::kEventSingleBitEccError)) {
    // One corrected error is normal; a burst within a minute is a storm.
    auto& q = sbe_[e.pci];
    const auto now = std::chrono::steady_clock::now();
    q.push_back(now);
    while (!q.empty() && now - q.front() > kSbeWindow) q.pop_front();
    if (q.size() < config_.corrected_ecc_per_poll) return;
    q.clear();
    NvmlEvent storm = e;
    storm.type = nvml::kEventSingleBitEccErrorStorm;
    f = FaultFromEvent(storm, classifier_);
  } else {
    f = FaultFromEvent(e, classifier_);
  }
  if (!f) return;
  event_latency_->Observe(static_cast<double>(MonotonicUsec() - e.received_usec) / 1e6);
  sink_.fault(std::move(*f), e.received_usec);
}

void NvmlMonitor::OnPoll(NvmlPoll p, size_t pci_count) {
  for (const std::string& n : p.notices) {
    if (notices_said_.insert(n).second) sink_.log("info", n, {});
  }
  if (!p.gpus.empty())
    poll_cpu_->Observe(static_cast<double>(p.cpu_usec) / 1e6 / static_cast<double>(p.gpus.size()));
  const int64_t now = MonotonicUsec();
  for (const GpuSnapshot& s : p.gpus) {
    auto it = last_.find(s.pci);
    for (Fault& f :
         EvaluateGpu(it == last_.end() ? nullptr : &it->second, s, limits_, classifier_)) {
      sink_.fault(std::move(f), now);
    }
    if (s.drained) {
      const std::string state = *s.drained ? "drained" : "";
      auto [d, inserted] = drain_state_.try_emplace(s.pci, state);
      if (inserted || d->second != state) {
        d->second = state;
        sink_.gpu_state(s.pci, state);
      }
    }
    last_[s.pci] = s;
  }
  // The count check: NVML's device count now, the PCI bus, and the config's expectation.
  const size_t nvml_count = p.device_count.value_or(source_->gpus().size());
  auto mismatch = DeviceCountFault(nvml_count, pci_count, config_.expected_gpus);
  if (mismatch && !count_fault_reported_) sink_.fault(std::move(*mismatch), now);
  count_fault_reported_ = mismatch.has_value();
}

bool NvmlMonitor::RequestReset(const std::string& pci, const std::string& why) {
  if (!source_->Find(pci)) {
    sink_.log("warn", "GPU recovery not started: NVML does not list this GPU",
              {{"pci", pci}, {"why", why}});
    return false;
  }
  if (!recovering_.insert(pci).second) return false;
  sink_.log("info", "GPU recovery requested", {{"pci", pci}, {"why", why}});
  std::lock_guard<std::mutex> lock(mu_);
  reset_queue_.push_back(pci);
  cv_.notify_all();
  return true;
}

void NvmlMonitor::ActionThread() {
  while (true) {
    std::string pci;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !reset_queue_.empty(); });
      if (stop_) return;
      pci = reset_queue_.front();
      reset_queue_.pop_front();
    }
    RunRecovery(pci);
    loop_.Post([this, pci] { recovering_.erase(pci); });
  }
}

void NvmlMonitor::RunRecovery(const std::string& pci) {
  const NvmlGpu* g = source_->Find(pci);
  const auto start = std::chrono::steady_clock::now();
  auto report = [&](std::string step, bool ok, std::string message, bool final = false) {
    GpuActionStep s;
    s.pci = pci;
    s.bus_id = g->bus_id;
    s.step = std::move(step);
    s.ok = ok;
    s.final = final;
    s.message = std::move(message);
    s.elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count();
    loop_.Post([this, s] { sink_.step(s); });
  };
  // 1. Drain: no new CUDA contexts on this GPU. Where the driver refuses (persistence mode on,
  //    no permission, not supported), say so and go on: the wait below still protects running work.
  bool drained = false;
  if (Status s = source_->SetDrain(pci, true); s) {
    drained = true;
    report("drain", true, "GPU drained: no new work is admitted");
  } else {
    report("drain", false, "cannot drain (continuing without it): " + s.error().message);
  }
  auto undrain = [&] {
    if (!drained) return;
    if (Status s = source_->SetDrain(pci, false); s) {
      report("undrain", true, "GPU admits work again");
    } else {
      report("undrain", false, s.error().message);
    }
  };
  // 2. Let running compute processes finish, within the bound.
  const auto wait_deadline = std::chrono::steady_clock::now() + config_.drain_timeout;
  while (true) {
    auto pids = source_->ComputeProcesses(pci);
    if (!pids) {
      report("wait", false, pids.error().message);
      undrain();
      report("done", false, "GPU not reset: its processes cannot be listed", true);
      return;
    }
    if (pids->empty()) {
      report("wait", true, "no compute processes left on the GPU");
      break;
    }
    if (std::chrono::steady_clock::now() >= wait_deadline) {
      report("wait", false,
             fmt::format("{} compute process(es) still running after the drain timeout (pids {})",
                         pids->size(), fmt::join(*pids, ",")));
      undrain();
      report("done", false, "GPU not reset: work still running", true);
      return;
    }
    if (!SleepFor(std::chrono::milliseconds(500))) return;
  }
  // 3. Reset. NVML has no public reset call: nvidia-smi's --gpu-reset is the supported way.
  std::vector<std::string> argv;
  for (std::string a : config_.reset_command) {
    for (size_t at; (at = a.find("{bus_id}")) != std::string::npos;) a.replace(at, 8, g->bus_id);
    argv.push_back(std::move(a));
  }
  auto run = RunArgv(argv, config_.reset_timeout, {{"GPUHEAL_GPU_BUS_ID", g->bus_id}});
  if (!run || run->timed_out || run->exit_code != 0) {
    const std::string why =
        !run ? run.error().message
        : run->timed_out
            ? fmt::format(
                  "{} did not finish within {} s", argv[0],
                  std::chrono::duration_cast<std::chrono::seconds>(config_.reset_timeout).count())
            : fmt::format("{} exited {}: {}", argv[0], run->exit_code, run->output);
    report("reset", false, why);
    undrain();
    report("done", false, "GPU reset failed", true);
    return;
  }
  report("reset", true, fmt::format("{} succeeded", fmt::join(argv, " ")));
  // 4. Verify: the GPU answers and shows nothing that needs another reset.
  GpuSnapshot s = source_->PollOne(pci);
  std::string bad;
  if (s.lost)
    bad = "the GPU is lost";
  else if (s.remap_pending.value_or(0) > 0)
    bad = "a row remap is still pending";
  else if (s.retired_pages_pending.value_or(false))
    bad = "pages are still pending retirement";
  else if (s.ecc_volatile_uncorrected.value_or(0) > 0)
    bad = "uncorrected ECC errors since the reset";
  else if (s.recovery_action.value_or(0) != 0)
    bad = fmt::format("the driver still asks for recovery action {}", *s.recovery_action);
  if (!bad.empty()) {
    report("verify", false, bad);
    undrain();
    report("done", false, "GPU unhealthy after reset: " + bad, true);
    return;
  }
  report("verify", true, "GPU healthy after reset");
  undrain();
  report("done", true, "GPU reset and verified healthy", true);
}

}  // namespace gpuheal
