#pragma once
// The Kubernetes API client shared by the agent, the controller and the simulator: the real
// implementation of the kube::Api port (kube/api.h).
// Retries 429 and 5xx (and transport failures) with exponential backoff and jitter, honouring
// Retry-After; rate-limits itself (QPS/burst); keeps a pool of keep-alive connections.
// Optimistic concurrency: Update() re-reads and re-applies the caller's intent on 409, never
// overwriting another writer.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/token_bucket.h"
#include "kube/api.h"
#include "kube/http.h"
#include "kube/kube_config.h"
#include "kube/objects.h"

namespace gpuheal::kube {

struct RetryPolicy {
  int max_attempts = 6;
  std::chrono::milliseconds initial_backoff = std::chrono::milliseconds(50);
  std::chrono::milliseconds max_backoff = std::chrono::seconds(5);
};

// Token bucket: `qps` sustained, `burst` at once. Thread-safe; Wait() blocks.
class RateLimiter {
 public:
  RateLimiter(double qps, int burst);
  void Wait();

 private:
  std::mutex mu_;
  double qps_;
  TokenBucket bucket_;
};

class Client final : public Api {
 public:
  static Result<std::unique_ptr<Client>> Create(Config cfg, RetryPolicy retry = {});
  using Api::Create;
  const Config& config() const { return cfg_; }

  // One request with retries for 429/5xx/transport errors (not an eviction's 429).
  Result<Response> Request(const std::string& method, const std::string& path,
                           const std::string& body = "",
                           const std::string& content_type = "application/json") override;
  Result<Response> Watch(const std::string& collection_path, const std::string& resource_version,
                         const std::function<bool(const WatchEventRaw&)>& on_event,
                         std::chrono::seconds timeout = std::chrono::seconds(300),
                         const std::atomic<bool>* cancel = nullptr) override;

 private:
  Client(Config cfg, RetryPolicy retry);
  std::unique_ptr<HttpConnection> Take();
  void Give(std::unique_ptr<HttpConnection> c);
  std::chrono::milliseconds Backoff(int attempt, const std::string& retry_after);

  Config cfg_;
  RetryPolicy retry_;
  RateLimiter limiter_;
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<HttpConnection>> pool_;
  std::mutex rng_mu_;
  std::mt19937_64 rng_;
};

}  // namespace gpuheal::kube
