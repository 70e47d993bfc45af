#pragma once
// The Kubernetes API client shared by the agent, the controller and the simulator.
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
#include "kube/http.h"
#include "kube/kube_config.h"
#include "kube/objects.h"

namespace gpuheal::kube {

enum class PatchType { kJson, kMerge, kStrategicMerge };

// An API response: any HTTP status (errors are in `status`), or a transport Error.
struct Response {
  long status = 0;
  std::string body;
  bool ok() const { return status >= 200 && status < 300; }
  ApiStatus api_status() const { return DecodeStatus(body); }
  std::string Describe() const;  // "409 Conflict: <message>"
};

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
  double qps_, tokens_, burst_;
  std::chrono::steady_clock::time_point last_;
};

class Client {
 public:
  static Result<std::unique_ptr<Client>> Create(Config cfg, RetryPolicy retry = {});
  const Config& config() const { return cfg_; }

  // One request with retries for 429/5xx/transport errors. `path` includes the query string.
  Result<Response> Request(const std::string& method, const std::string& path,
                           const std::string& body = "",
                           const std::string& content_type = "application/json");

  Result<Response> Get(const std::string& path) { return Request("GET", path); }
  Result<Response> Create(const std::string& collection_path, const nlohmann::json& obj);
  Result<Response> Patch(const std::string& path, PatchType type, const nlohmann::json& patch);
  // Delete with optional preconditions (uid and/or resourceVersion) and grace period.
  Result<Response> Delete(const std::string& path, const std::string& uid = "",
                          const std::string& resource_version = "",
                          std::optional<int64_t> grace_period_seconds = std::nullopt);
  // POST pods/NAME/eviction (policy/v1). 429 means a PodDisruptionBudget refused it: not retried.
  Result<Response> Evict(const std::string& ns, const std::string& pod);

  // Read-modify-write with optimistic concurrency: GET `path`, apply `mutate` to the object
  // (return false to leave it unchanged), PUT it with its resourceVersion; on 409 re-read and
  // re-apply `mutate`, up to `attempts` times.
  Result<Response> Update(const std::string& path,
                          const std::function<bool(nlohmann::json&)>& mutate, int attempts = 10);

  // Lists every page (limit/continue) of a collection, decoding each page with `decode`.
  template <typename T>
  Result<List<T>> ListAll(const std::string& collection_path,
                          Result<List<T>> (*decode)(std::string_view), int page_size = 500,
                          int* pages = nullptr);

  // Watches `collection_path` from `resource_version`; calls `on_event` for each event line until
  // it returns false, the server closes the stream, `timeout` passes or `*cancel` becomes true.
  // Bookmarks are requested. A watch the server refuses (e.g. 410 for a too-old resourceVersion
  // on a non-cached resource) comes back as its status; a 410 inside the stream arrives as an
  // ERROR event.
  Result<Response> Watch(const std::string& collection_path, const std::string& resource_version,
                         const std::function<bool(const WatchEventRaw&)>& on_event,
                         std::chrono::seconds timeout = std::chrono::seconds(300),
                         const std::atomic<bool>* cancel = nullptr);

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

// "/api/v1/nodes" style paths.
std::string NodePath(const std::string& name = "");
std::string PodPath(const std::string& ns, const std::string& name = "");
std::string LeasePath(const std::string& ns, const std::string& name = "");
std::string PdbPath(const std::string& ns, const std::string& name = "");
std::string UrlEncode(const std::string& s);

template <typename T>
Result<List<T>> Client::ListAll(const std::string& collection_path,
                                Result<List<T>> (*decode)(std::string_view), int page_size,
                                int* pages) {
  List<T> all;
  std::string cont;
  int n = 0;
  const char sep = collection_path.find('?') == std::string::npos ? '?' : '&';
  do {
    std::string path = collection_path + sep + "limit=" + std::to_string(page_size);
    if (!cont.empty()) path += "&continue=" + UrlEncode(cont);
    auto r = Get(path);
    if (!r) return r.error();
    if (!r->ok()) return Error{"list " + collection_path + ": " + r->Describe()};
    auto page = decode(r->body);
    if (!page) return page.error();
    ++n;
    for (auto& item : page->items) all.items.push_back(std::move(item));
    if (all.resource_version.empty()) all.resource_version = page->resource_version;
    cont = page->continue_token;
  } while (!cont.empty());
  if (pages) *pages = n;
  return all;
}

}  // namespace gpuheal::kube
