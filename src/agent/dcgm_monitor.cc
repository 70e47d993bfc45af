#include "agent/dcgm_monitor.h"

#include <fmt/format.h>

#include "core/clock.h"

namespace gpuheal {

std::unique_ptr<DcgmMonitor> DcgmMonitor::Start(const NvidiaConfig& config, EventLoop& loop,
                                                MonitorQueue& monitors,
                                                const Classifier& classifier, Metrics& metrics,
                                                Sink sink) {
  if (!config.dcgm) return nullptr;
  std::unique_ptr<DcgmMonitor> m(
      new DcgmMonitor(config, loop, classifier, metrics, std::move(sink)));
  DcgmMonitor* self = m.get();
  {
    std::lock_guard<std::mutex> lock(m->mu_);
    m->check_requested_ = true;  // connect (and check) at once
  }
  m->thread_ = std::thread([self] { self->Thread(); });
  monitors.Add(std::make_unique<FunctionMonitor>("dcgm-health", config.dcgm_health_period,
                                                 [self](ProcCache&) {
                                                   std::lock_guard<std::mutex> lock(self->mu_);
                                                   self->check_requested_ = true;
                                                   self->cv_.notify_all();
                                                 }));
  return m;
}

DcgmMonitor::DcgmMonitor(const NvidiaConfig& config, EventLoop& loop, const Classifier& classifier,
                         Metrics& metrics, Sink sink)
    : config_(config),
      loop_(loop),
      classifier_(classifier),
      metrics_(metrics),
      sink_(std::move(sink)) {
  up_ = &metrics.GetGauge("gpuheal_dcgm_up", "1 while the DCGM host engine answers");
  up_->Set(0);
}

DcgmMonitor::~DcgmMonitor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void DcgmMonitor::Thread() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || check_requested_; });
      if (stop_) break;
      check_requested_ = false;
    }
    if (!source_) {
      DcgmOptions o;
      o.library = config_.dcgm_library;
      o.address = config_.dcgm_address;
      auto s = DcgmSource::Open(
          o, [this](DcgmViolation v) { loop_.Post([this, v] { OnViolation(v); }); });
      if (!s) {
        loop_.Post([this, e = s.error().message] { OnLost(e); });
        continue;
      }
      source_ = std::move(*s);
      loop_.Post([this, n = source_->gpu_ids().size(), lib = source_->library()] {
        said_lost_ = false;
        up_->Set(1);
        sink_.log("info", "DCGM connected",
                  {{"library", lib},
                   {"address", config_.dcgm_address.empty() ? "embedded" : config_.dcgm_address},
                   {"gpus", n}});
      });
    }
    auto incidents = source_->HealthCheck();
    if (!incidents) {
      const std::string err = incidents.error().message;
      const Status again = source_->Reconnect();
      loop_.Post([this, err, again_error = again ? std::string() : again.error().message] {
        metrics_
            .GetCounter("gpuheal_dcgm_connection_errors_total",
                        "Health checks that found the DCGM host engine gone")
            .Inc();
        if (!again_error.empty()) {
          OnLost(err + "; reconnecting: " + again_error);
          return;
        }
        said_lost_ = false;
        up_->Set(1);
        sink_.log("info", "DCGM connected", {{"reconnected", true}, {"after", err}});
      });
      continue;
    }
    loop_.Post([this, i = std::move(*incidents)]() mutable {
      up_->Set(1);
      said_lost_ = false;
      OnHealth(std::move(i));
    });
  }
  source_.reset();
}

void DcgmMonitor::OnLost(const std::string& error) {
  up_->Set(0);
  if (said_lost_) return;
  said_lost_ = true;
  // Not a GPU fault: the host engine restarting or missing says nothing about the GPUs.
  sink_.log("warn",
            "DCGM host engine not reachable; DCGM checks paused, retried each health period (not a "
            "GPU fault)",
            {{"error", error}});
}

void DcgmMonitor::OnViolation(const DcgmViolation& v) {
  metrics_
      .GetCounter("gpuheal_dcgm_violations_total", "DCGM policy violations received",
                  {{"condition", fmt::format("{:#x}", v.condition)}})
      .Inc();
  auto [pci, uuid] = sink_.gpu(v.gpu_id);
  sink_.fault(FaultFromDcgm(v, pci, uuid, classifier_), v.received_usec);
}

void DcgmMonitor::OnHealth(std::vector<DcgmIncident> incidents) {
  std::set<std::string> now;
  const int64_t t = MonotonicUsec();
  for (const DcgmIncident& i : incidents) {
    const std::string key = fmt::format("{}/{}/{}", i.gpu_id, i.system, i.health);
    now.insert(key);
    if (incidents_.count(key)) continue;  // reported when it appeared
    auto [pci, uuid] = sink_.gpu(i.gpu_id);
    sink_.fault(FaultFromIncident(i, pci, uuid), t);
  }
  incidents_ = std::move(now);
}

}  // namespace gpuheal
