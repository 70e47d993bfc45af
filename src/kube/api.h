#pragma once
// The port to the Kubernetes API: the verbs the agent, the controller and the simulator use.
// Two primitives are virtual (one request, one watch); every verb is built on them, so an
// implementation is a transport: kube::Client speaks HTTP to an API server, a test fake keeps
// objects in memory and can answer any request with 409, 429, 410 or 5xx.

#include <atomic>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/result.h"
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

class Api {
 public:
  virtual ~Api() = default;

  // One request (retried by the implementation where it retries). `path` includes the query.
  virtual Result<Response> Request(const std::string& method, const std::string& path,
                                   const std::string& body = "",
                                   const std::string& content_type = "application/json") = 0;

  // Watches `collection_path` from `resource_version`; calls `on_event` for each event until it
  // returns false, the server closes the stream, `timeout` passes or `*cancel` becomes true.
  // Bookmarks are requested. A watch the server refuses (e.g. 410 for a too-old resourceVersion
  // on a non-cached resource) comes back as its status; a 410 inside the stream arrives as an
  // ERROR event.
  virtual Result<Response> Watch(const std::string& collection_path,
                                 const std::string& resource_version,
                                 const std::function<bool(const WatchEventRaw&)>& on_event,
                                 std::chrono::seconds timeout = std::chrono::seconds(300),
                                 const std::atomic<bool>* cancel = nullptr) = 0;

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
};

// "/api/v1/nodes" style paths.
std::string NodePath(const std::string& name = "");
std::string PodPath(const std::string& ns, const std::string& name = "");
std::string LeasePath(const std::string& ns, const std::string& name = "");
std::string PdbPath(const std::string& ns, const std::string& name = "");
std::string UrlEncode(const std::string& s);

template <typename T>
Result<List<T>> Api::ListAll(const std::string& collection_path,
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
