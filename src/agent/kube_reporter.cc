#include "agent/kube_reporter.h"

#include <fmt/format.h>

#include "core/clock.h"
#include "kube/backoff.h"

namespace gpuheal {
namespace {

const std::vector<double> kWriteBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                           0.1,   0.25,   0.5,   1,    5,     30};

}  // namespace

KubeReporter::KubeReporter(std::unique_ptr<kube::Api> client, const Clock& clock,
                           KubeReporterOptions opts, Metrics& metrics)
    : client_(std::move(client)),
      clock_(clock),
      opts_(std::move(opts)),
      writes_(
          metrics.GetCounter("gpuheal_api_writes_total", "Node status writes to the API server")),
      write_failures_(metrics.GetCounter("gpuheal_api_write_failures_total",
                                         "Node status writes that failed (retried with backoff)")),
      events_written_(metrics.GetCounter("gpuheal_events_total", "Events recorded on the Node")),
      events_dropped_(
          metrics.GetCounter("gpuheal_events_rate_limited_total",
                             "Events not written because their reason exceeded its rate")),
      write_latency_(metrics.GetHistogram("gpuheal_detection_to_write_seconds",
                                          "Fault detected to its node condition written",
                                          kWriteBuckets)),
      api_up_(metrics.GetGauge("gpuheal_api_up", "1 when the last API write succeeded")) {
  kube::EventRecorderOptions eo;
  eo.component = "gpuheal-agent";
  eo.host = opts_.node_name;
  eo.instance = opts_.node_name;
  eo.patch_interval = opts_.event_patch_interval;
  eo.create_only = true;  // the agent's RBAC: events create only (deploy/kubernetes/agent.yaml)
  events_ = std::make_unique<kube::EventRecorder>(*client_, eo);
  node_ref_ = {"Node", "v1", "", opts_.node_name, opts_.node_name};
  rng_.seed(std::random_device{}());
  next_heartbeat_ = clock_.Steady();
}

KubeReporter::~KubeReporter() { Stop(); }

void KubeReporter::Start() {
  thread_ = std::thread([this] { Run(); });
}

void KubeReporter::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void KubeReporter::SetConditions(std::vector<DesiredCondition> desired,
                                 int64_t detected_mono_usec) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (desired == desired_ && desired_gen_ > 0) return;
    desired_ = std::move(desired);
    ++desired_gen_;
    if (detected_mono_usec && !detected_usec_) detected_usec_ = detected_mono_usec;
  }
  cv_.notify_all();
}

void KubeReporter::SetAnnotation(const std::string& key, std::string value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = desired_annotations_.find(key);
    if (it != desired_annotations_.end() && it->second == value) return;
    desired_annotations_[key] = std::move(value);
    ++desired_gen_;
  }
  cv_.notify_all();
}

void KubeReporter::RecordEvent(std::string type, std::string reason, std::string message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_events_.size() >= 1024) {
      events_dropped_.Inc();
      return;
    }
    pending_events_.push_back({std::move(type), std::move(reason), std::move(message)});
  }
  cv_.notify_all();
}

bool KubeReporter::api_ok() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (write_started_ && clock_.Steady() - *write_started_ > opts_.write_deadline) return false;
  return api_ok_;
}

std::string KubeReporter::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (write_started_) {
    const auto pending = clock_.Steady() - *write_started_;
    if (pending > opts_.write_deadline) {
      return fmt::format(
          "a node status write has had no answer for {} s (deadline {} s)",
          std::chrono::duration_cast<std::chrono::seconds>(pending).count(),
          std::chrono::duration_cast<std::chrono::seconds>(opts_.write_deadline).count());
    }
  }
  return last_error_;
}

void KubeReporter::Fail(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  api_ok_ = false;
  last_error_ = what;
  api_up_.Set(0);
}

bool KubeReporter::Init() {
  auto r = client_->Get(kube::NodePath(opts_.node_name));
  if (!r) {
    Fail(r.error().message);
    return false;
  }
  if (!r->ok()) {
    Fail("get node " + opts_.node_name + ": " + r->Describe());
    return false;
  }
  auto node = kube::DecodeNode(r->body);
  if (!node) {
    Fail(node.error().message);
    return false;
  }
  node_ref_.uid = node->meta.uid;
  for (const auto& c : node->conditions) server_status_[c.type] = c.status;
  return true;
}

bool KubeReporter::WriteConditions(const std::vector<DesiredCondition>& desired,
                                   const std::map<std::string, std::string>& annotations) {
  const std::string now = kube::RfcTime(clock_.Now());
  nlohmann::json conds = nlohmann::json::array();
  for (const auto& d : desired) {
    nlohmann::json c = {{"type", d.type},
                        {"status", d.status},
                        {"reason", d.reason},
                        {"message", d.message},
                        {"lastHeartbeatTime", now}};
    auto it = server_status_.find(d.type);
    if (it == server_status_.end() || it->second != d.status) c["lastTransitionTime"] = now;
    conds.push_back(std::move(c));
  }
  nlohmann::json body = {{"status", {{"conditions", conds}}}};
  if (!annotations.empty()) body["metadata"]["annotations"] = annotations;
  auto r = client_->Patch(kube::NodePath(opts_.node_name) + "/status",
                          kube::PatchType::kStrategicMerge, body);
  if (!r || !r->ok()) {
    write_failures_.Inc();
    Fail(r ? "patch node " + opts_.node_name + "/status: " + r->Describe() : r.error().message);
    return false;
  }
  writes_.Inc();
  for (const auto& d : desired) server_status_[d.type] = d.status;
  return true;
}

bool KubeReporter::AllowEvent(const std::string& reason) {
  const auto now = clock_.Steady();
  const double rate = 1.0 / std::chrono::duration<double>(opts_.event_refill).count();
  auto it = event_buckets_.try_emplace(reason, rate, opts_.event_burst, now).first;
  return it->second.TryTake(now);
}

void KubeReporter::Run() {
  auto wake = clock_.Steady();  // the first pass at once: it reads the Node
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_until(lock, wake, [&] {
        if (stop_) return true;
        if (clock_.Steady() < retry_at_) return false;
        return desired_gen_ != written_gen_ || !pending_events_.empty();
      });
      stopping = stop_;
    }
    wake = Step(stopping);
    if (stopping) return;
  }
}

std::chrono::steady_clock::time_point KubeReporter::Step(bool stopping) {
  std::vector<DesiredCondition> desired;
  std::map<std::string, std::string> annotations;
  std::deque<PendingEvent> events;
  uint64_t gen = 0;
  int64_t detected = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    desired = desired_;
    annotations = desired_annotations_;
    gen = desired_gen_;
    detected = detected_usec_;
    events.swap(pending_events_);
  }
  const auto now = clock_.Steady();
  bool ok = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    write_started_ = now;
  }
  if (!initialized_) initialized_ = ok = Init();
  if (ok && gen > 0 && (gen != written_gen_ || now >= next_heartbeat_)) {
    ok = WriteConditions(desired, annotations);
    if (ok) {
      if (detected) write_latency_.Observe(static_cast<double>(MonotonicUsec() - detected) / 1e6);
      next_heartbeat_ = clock_.Steady() + opts_.heartbeat;
      std::lock_guard<std::mutex> lock(mu_);
      written_gen_ = gen;
      if (detected_usec_ == detected) detected_usec_ = 0;
    }
  }
  if (ok) {
    for (const auto& ev : events) {
      if (!AllowEvent(ev.reason)) {
        events_dropped_.Inc();
        continue;
      }
      auto r = events_->Record(node_ref_, ev.type, ev.reason, ev.message);
      if (r.ok()) events_written_.Inc();
    }
    events_->Flush(stopping);
    failures_ = 0;
    retry_at_ = {};
    std::lock_guard<std::mutex> lock(mu_);
    write_started_.reset();
    api_ok_ = true;
    last_error_.clear();
    api_up_.Set(1);
  } else {
    // Keep the events for the next attempt, in their order.
    std::lock_guard<std::mutex> lock(mu_);
    write_started_.reset();
    for (auto it = events.rbegin(); it != events.rend(); ++it) pending_events_.push_front(*it);
    retry_at_ = clock_.Steady() +
                kube::JitteredBackoff(opts_.initial_backoff, opts_.max_backoff, failures_++, rng_);
  }
  cv_.notify_all();
  return std::max(retry_at_,
                  std::min(next_heartbeat_, clock_.Steady() + opts_.event_patch_interval));
}

}  // namespace gpuheal
