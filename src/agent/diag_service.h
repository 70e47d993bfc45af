#pragma once
// The agent's answer to NodeDiagnostic requests (Kubernetes mode; docs/diagnostics.md): it watches
// the requests for its own node only (fieldSelector spec.nodeName), and for each new one, on a
// thread of its own, runs the collectors, builds the bundle under the diagnostics directory,
// uploads it to spec.upload.url and writes each phase to the request's status
// (Pending -> Collecting -> Uploading -> Succeeded | Failed). A request left Collecting or
// Uploading by an agent that stopped is taken up again by the next one. Bundles are deleted
// after diagnostics.retention.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/config.h"
#include "agent/diag_collectors.h"
#include "kube/api.h"
#include "kube/informer.h"
#include "serve/metrics.h"

namespace gpuheal {

struct DiagnosticServiceOptions {
  std::string node_name;
  DiagnosticsConfig config;  // config.dir already resolved
  CollectContext context;    // the collectors' context for this host
  // The agent collector's state, taken when a request starts (from any thread).
  std::function<nlohmann::json()> agent_state;
  std::vector<std::string> secrets;  // literal values the Redactor removes (the API token, ...)
  std::chrono::milliseconds sweep_period{std::chrono::seconds(30)};
};

class DiagnosticService {
 public:
  DiagnosticService(std::unique_ptr<kube::Api> api, DiagnosticServiceOptions o, Metrics& metrics);
  ~DiagnosticService();
  Status Start();  // creates the bundle directory, starts the watch and the worker
  void Stop();
  // Asks its watch to end without waiting (Stop() then joins it).
  void RequestStop() {
    if (informer_) informer_->RequestStop();
  }

  // Deletes bundles older than the retention (the worker does it every sweep_period).
  void Sweep();

 private:
  void OnRequest(const kube::NodeDiagnostic& d);
  void Work();
  // False: the request could not be started (its first status write failed); try again later.
  bool Handle(const kube::NodeDiagnostic& d);
  // The status write's HTTP status (0: no answer).
  long Patch(const std::string& name, const nlohmann::json& status);

  std::unique_ptr<kube::Api> api_;
  DiagnosticServiceOptions o_;
  Metrics& metrics_;
  // Created with the service, so that a bundle's first observation counts in rate().
  Histogram* collect_seconds_ = nullptr;
  Gauge* last_bundle_bytes_ = nullptr;
  std::unique_ptr<kube::Informer<kube::NodeDiagnostic>> informer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::set<std::string> queued_, handled_;  // names; handled_: answered by this process
  bool stop_ = false;
  std::atomic<bool> cancel_{false};  // Stop(): an upload in flight ends
  std::thread worker_;
};

}  // namespace gpuheal
