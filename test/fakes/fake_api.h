#pragma once
// An in-memory Kubernetes API server behind the kube::Api port, for unit tests of the code that
// talks to Kubernetes (the controller's Repairer, the agent's KubeReporter). It keeps objects by
// path and answers the verbs the product uses as the API server does where the product depends
// on it: GET of an object or a collection (label and field selectors), POST (201, 409 when the
// name exists), PUT and PATCH with resourceVersion preconditions (409), the status subresource
// (only status and metadata change), DELETE with uid/resourceVersion preconditions, the Eviction
// subresource (the pod goes; a refused one answers 429 as a PodDisruptionBudget does), JSON,
// merge and strategic-merge patches (conditions merged by type).
//
// Faults: Fail() answers the next matching requests with any status (409, 429, 410, 500, 503);
// Cut() makes every request after the next N writes a transport error, which is how a test
// stops a component at any step ("crash") and then starts a fresh one on the saved state.
// A watch replays the changes after its resourceVersion and ends (410 when that version is older
// than the history kept); with SetBlockingWatches(true) it stays open as the API server's does,
// delivering each change as it is made until its timeout, its cancel flag or its handler ends
// it, so that informers run on the fake. WaitFor() waits for the fake's objects to reach a state
// without sleeping a fixed time: it wakes at each change.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kube/api.h"

namespace gpuheal::testing {

class FakeApi final : public kube::Api {
 public:
  struct Call {
    std::string method, path, body;
    long status = 0;  // 0: a transport error
  };

  // Stores `obj` at `path` as the server would after a create (uid, resourceVersion,
  // creationTimestamp added where missing), or replaces what is there. A path that names no
  // resource (a discovery document, /apis/GROUP) is answered as stored to a GET.
  void Put(const std::string& path, nlohmann::json obj);
  std::optional<nlohmann::json> Object(const std::string& path) const;
  // The objects directly under `collection` (a cluster-wide path lists every namespace).
  std::vector<nlohmann::json> List(const std::string& collection) const;

  // The next `times` requests whose method is `method` ("" any) and whose path contains
  // `path_part` answer `status` (with a Status body) instead of being served.
  void Fail(std::string method, std::string path_part, long status, int times = 1);
  // After `writes` more successful writes (POST, PUT, PATCH, DELETE), every request fails as a
  // lost connection until Heal().
  void Cut(int writes);
  void Heal();
  // Evictions of pods whose path contains `path_part` answer 429 (a PodDisruptionBudget); with
  // `budget`, the Status names it in a DisruptionBudget cause as the API server does.
  void RefuseEvictions(std::string path_part, std::string budget = "");
  void AllowEvictions();

  void Reset();  // forgets every object, rule and call

  // Watches stay open and deliver each change as it is made (default: replay and end).
  void SetBlockingWatches(bool on);
  // Calls `done` (without the fake's lock) at once and after each change until it returns true
  // or `timeout` passes; returns its last answer.
  bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout);

  std::vector<Call> Calls() const;
  // How many requests with `method` ("" any) had a path containing `path_part`.
  size_t Count(const std::string& method, const std::string& path_part) const;
  // The same, counting only the requests the fake served with a 2xx.
  size_t CountOk(const std::string& method, const std::string& path_part) const;
  size_t writes() const;

  Result<kube::Response> Request(const std::string& method, const std::string& path,
                                 const std::string& body = "",
                                 const std::string& content_type = "application/json") override;
  Result<kube::Response> Watch(const std::string& collection_path,
                               const std::string& resource_version,
                               const std::function<bool(const kube::WatchEventRaw&)>& on_event,
                               std::chrono::seconds timeout = std::chrono::seconds(300),
                               const std::atomic<bool>* cancel = nullptr) override;

 private:
  struct Rule {
    std::string method, path_part;
    long status;
    int times;
  };
  struct Change {
    std::string type, path;
    nlohmann::json object;
    uint64_t rv;
  };
  kube::Response Serve(const std::string& method, const std::string& path, const std::string& body,
                       const std::string& content_type);
  void Stamp(const std::string& path, nlohmann::json& obj, const char* change);
  std::vector<std::pair<std::string, nlohmann::json>> ListLocked(const std::string& coll,
                                                                 const std::string& query) const;

  mutable std::mutex mu_;
  std::condition_variable changed_;  // notified after each request, watch and change
  uint64_t generation_ = 0;          // counts those
  bool blocking_watches_ = false;
  std::map<std::string, nlohmann::json> objects_;
  std::vector<Rule> rules_;
  std::vector<std::pair<std::string, std::string>> refuse_evictions_;  // path part, budget
  std::vector<Call> calls_;
  std::vector<Change> history_;
  uint64_t rv_ = 1000;
  uint64_t uid_ = 0;
  size_t writes_ = 0;
  std::optional<int> cut_after_;
};

}  // namespace gpuheal::testing
