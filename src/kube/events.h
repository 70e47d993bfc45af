#pragma once
// core/v1 Events with client-side de-duplication. The first occurrence of an event (same
// object, type, reason and message) creates an Event; repeats only raise its count and
// lastTimestamp, written at most once per `patch_interval` per event (Flush() writes the ones
// still pending), so a flapping fault costs a bounded number of API writes however often it
// fires. An event not seen for `forget_after` starts a new Event object when it comes back.
// With `create_only`, repeats are written as new Events instead of updates.

#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/result.h"
#include "core/time.h"
#include "kube/api.h"

namespace gpuheal::kube {

struct ObjectReference {
  std::string kind;         // "Node"
  std::string api_version;  // "v1"
  std::string namespace_;   // empty for cluster-scoped objects
  std::string name;
  std::string uid;
};

struct EventRecorderOptions {
  std::string component = "gpuheal";  // source.component and reportingComponent
  std::string host;                   // source.host (the node an agent runs on)
  std::string instance;               // reportingInstance
  std::chrono::milliseconds patch_interval{10000};
  std::chrono::milliseconds forget_after{std::chrono::minutes(10)};
  size_t max_entries = 4096;  // least recently seen events are forgotten beyond this
  // Never update an Event: repeats written after `patch_interval` become a new Event carrying
  // the occurrences since the last one (for an identity allowed only to create Events).
  bool create_only = false;
};

struct EventRecorderStats {
  uint64_t recorded = 0;    // Record() calls
  uint64_t created = 0;     // POSTs
  uint64_t patched = 0;     // count/lastTimestamp updates written
  uint64_t suppressed = 0;  // repeats folded into a later update
  uint64_t failed = 0;      // API writes that failed
};

class EventRecorder {
 public:
  EventRecorder(Api& client, EventRecorderOptions opts);

  // Records one occurrence. `type` is "Normal" or "Warning". Returns true when it was written
  // now, false when folded into a pending update; an Error when the API write failed (the
  // occurrence is kept and retried by the next Record or Flush).
  Result<bool> Record(const ObjectReference& obj, std::string_view type, std::string_view reason,
                      std::string_view message);
  // Writes pending count updates whose interval has passed; all of them when `force`.
  void Flush(bool force = false);
  EventRecorderStats stats() const;

 private:
  struct Entry {
    std::string key;
    ObjectReference obj;
    std::string type, reason, message;
    std::string event_namespace, event_name;  // empty until created
    int64_t count = 0;
    int64_t written_count = 0;
    std::string first_timestamp, last_timestamp;
    std::chrono::steady_clock::time_point last_seen, last_written;
  };
  using Lru = std::list<Entry>;

  Result<bool> Write(Entry& e);  // under mu_
  Result<bool> CreateEvent(Entry& e);
  Result<bool> PatchEvent(Entry& e);

  Api& client_;
  EventRecorderOptions opts_;
  mutable std::mutex mu_;
  Lru lru_;  // most recently seen first
  std::unordered_map<std::string, Lru::iterator> by_key_;
  EventRecorderStats stats_;
};

}  // namespace gpuheal::kube
