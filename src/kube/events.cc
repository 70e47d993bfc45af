#include "kube/events.h"

#include <fmt/format.h>

namespace gpuheal::kube {

EventRecorder::EventRecorder(Api& client, EventRecorderOptions opts)
    : client_(client), opts_(std::move(opts)) {}

EventRecorderStats EventRecorder::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Result<bool> EventRecorder::Record(const ObjectReference& obj, std::string_view type,
                                   std::string_view reason, std::string_view message) {
  const auto now = std::chrono::steady_clock::now();
  const std::string stamp = RfcTime(std::chrono::system_clock::now());
  std::string key = fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", obj.kind, obj.namespace_,
                                obj.name, obj.uid, type, reason, message);
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.recorded;
  auto it = by_key_.find(key);
  if (it != by_key_.end() && now - it->second->last_seen > opts_.forget_after) {
    lru_.erase(it->second);
    by_key_.erase(it);
    it = by_key_.end();
  }
  if (it == by_key_.end()) {
    lru_.push_front(Entry{key,
                          obj,
                          std::string(type),
                          std::string(reason),
                          std::string(message),
                          "",
                          "",
                          0,
                          0,
                          stamp,
                          stamp,
                          now,
                          {}});
    by_key_[key] = lru_.begin();
    while (lru_.size() > opts_.max_entries) {
      by_key_.erase(lru_.back().key);
      lru_.pop_back();
    }
  } else {
    lru_.splice(lru_.begin(), lru_, it->second);  // most recently seen first
  }
  Entry& e = lru_.front();
  ++e.count;
  e.last_timestamp = stamp;
  e.last_seen = now;
  if (!e.event_name.empty() && now - e.last_written < opts_.patch_interval) {
    ++stats_.suppressed;
    return false;
  }
  return Write(e);
}

void EventRecorder::Flush(bool force) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : lru_) {
    if (e.count == e.written_count) continue;
    if (!force && now - e.last_written < opts_.patch_interval) continue;
    (void)Write(e);
  }
}

Result<bool> EventRecorder::Write(Entry& e) {
  auto r = e.event_name.empty() || opts_.create_only ? CreateEvent(e) : PatchEvent(e);
  if (!r) {
    ++stats_.failed;
    return r;
  }
  e.written_count = e.count;
  e.last_written = std::chrono::steady_clock::now();
  return true;
}

Result<bool> EventRecorder::CreateEvent(Entry& e) {
  // Events of cluster-scoped objects (Nodes) live in "default", as the kubelet's do.
  const std::string ns = e.obj.namespace_.empty() ? "default" : e.obj.namespace_;
  const auto now = std::chrono::system_clock::now();
  const std::string name = fmt::format(
      "{}.{:x}", e.obj.name,
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());
  nlohmann::json involved = {{"kind", e.obj.kind}, {"name", e.obj.name}};
  if (!e.obj.api_version.empty()) involved["apiVersion"] = e.obj.api_version;
  if (!e.obj.namespace_.empty()) involved["namespace"] = e.obj.namespace_;
  if (!e.obj.uid.empty()) involved["uid"] = e.obj.uid;
  nlohmann::json ev = {{"apiVersion", "v1"},
                       {"kind", "Event"},
                       {"metadata", {{"name", name}, {"namespace", ns}}},
                       {"involvedObject", involved},
                       {"type", e.type},
                       {"reason", e.reason},
                       {"message", e.message},
                       // Create-only: each Event holds the occurrences since the last one written.
                       {"count", opts_.create_only ? e.count - e.written_count : e.count},
                       {"firstTimestamp", e.first_timestamp},
                       {"lastTimestamp", e.last_timestamp},
                       {"source", {{"component", opts_.component}}},
                       {"reportingComponent", opts_.component},
                       {"reportingInstance", opts_.instance.empty() ? opts_.host : opts_.instance}};
  if (!opts_.host.empty()) ev["source"]["host"] = opts_.host;
  auto r = client_.Create("/api/v1/namespaces/" + ns + "/events", ev);
  if (!r) return r.error();
  if (r->status != 201) return Error{"create event " + e.reason + ": " + r->Describe()};
  ++stats_.created;
  e.event_namespace = ns;
  e.event_name = name;
  return true;
}

Result<bool> EventRecorder::PatchEvent(Entry& e) {
  auto r =
      client_.Patch("/api/v1/namespaces/" + e.event_namespace + "/events/" + e.event_name,
                    PatchType::kMerge, {{"count", e.count}, {"lastTimestamp", e.last_timestamp}});
  if (!r) return r.error();
  if (r->status == 404) {  // expired (events have a TTL) or deleted: start a new one
    e.event_name.clear();
    return CreateEvent(e);
  }
  if (!r->ok()) return Error{"update event " + e.reason + ": " + r->Describe()};
  ++stats_.patched;
  return true;
}

}  // namespace gpuheal::kube
