#pragma once
// Informer: lists a collection, then watches it from the list's resourceVersion into a typed
// store with indexes (e.g. pods by node) and event handlers. Bookmarks advance the
// resourceVersion; a watch that ends is resumed from the last one seen; 410 Gone (the
// resourceVersion was compacted away) leads to a relist whose differences to the store are
// delivered as add/update/delete, so the store never misses or repeats an object's change;
// transport errors reconnect with exponential backoff and jitter. One thread per informer;
// handlers run on it, after the store is updated and without its lock held.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kube/api.h"
#include "kube/backoff.h"
#include "kube/objects.h"

namespace gpuheal::kube {

struct InformerOptions {
  // Each watch asks the server to end it after a random time in [watch_timeout, 2*watch_timeout),
  // so that a fleet of informers does not reconnect at once.
  std::chrono::seconds watch_timeout{300};
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{30000};
  int page_size = 500;
};

struct InformerStats {
  uint64_t lists = 0;         // full lists: the first and every relist
  uint64_t relists_gone = 0;  // relists because the server answered 410 Gone
  uint64_t watches = 0;       // watch requests started
  uint64_t failures = 0;      // failed lists/watches (transport, HTTP error, undecodable event)
  uint64_t events = 0;        // ADDED/MODIFIED/DELETED events applied from watches
  uint64_t bookmarks = 0;
  std::string last_error;
};

// "namespace/name", or "name" for cluster-scoped objects.
template <typename T>
std::string ObjectKey(const T& o) {
  return o.meta.namespace_.empty() ? o.meta.name : o.meta.namespace_ + "/" + o.meta.name;
}

template <typename T>
class Informer {
 public:
  using IndexFunc = std::function<std::vector<std::string>(const T&)>;
  struct Handlers {
    std::function<void(const T&)> on_add;
    std::function<void(const T& old_obj, const T& new_obj)> on_update;
    std::function<void(const T&)> on_delete;
  };

  // `collection_path` may carry a labelSelector/fieldSelector query.
  Informer(Api& client, std::string collection_path, Decoder<kube::List<T>> decode_list,
           Decoder<T> decode, InformerOptions opts = {})
      : client_(client),
        path_(std::move(collection_path)),
        decode_list_(decode_list),
        decode_(decode),
        opts_(opts),
        rng_(std::random_device{}()) {}
  ~Informer() { Stop(); }
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Both before Start().
  void AddIndex(const std::string& name, IndexFunc fn) { index_funcs_[name] = std::move(fn); }
  void SetHandlers(Handlers h) { handlers_ = std::move(h); }

  // Starts (or, after Stop(), resumes) the informer. A resumed informer keeps its store and
  // watches from the last resourceVersion it saw, as after a dropped connection: what changed
  // meanwhile arrives as watch events, or, when that history was compacted away, as the
  // difference a relist finds.
  void Start() {
    if (thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = false;
    }
    thread_ = std::thread([this] { Run(); });
  }
  void Stop() {
    RequestStop();
    if (thread_.joinable()) thread_.join();
  }
  // Asks the informer to stop without waiting: a watch in flight notices within about a second
  // (libcurl's progress callback), so a program with several informers asks each first and then
  // Stop()s them, waiting that second once rather than once per informer.
  void RequestStop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
  }

  // True once the first list has been stored and delivered to the handlers (and stays true
  // across relists).
  bool synced() const {
    std::lock_guard<std::mutex> lock(mu_);
    return synced_;
  }
  bool WaitForSynced(std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return synced_ || stop_.load(); }) && synced_;
  }

  std::optional<T> Get(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = store_.find(key);
    if (it == store_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<T> Items() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<T> out;
    out.reserve(store_.size());
    for (const auto& [k, v] : store_) out.push_back(v);
    return out;
  }
  // Calls `fn` on each cached object under the cache's lock, copying none: for a pass over a
  // large cache (1,500 nodes) on every reconcile. `fn` must be quick and not call back into this
  // informer.
  void ForEach(const std::function<void(const T&)>& fn) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, v] : store_) fn(v);
  }
  std::vector<T> ByIndex(const std::string& index, const std::string& value) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<T> out;
    auto idx = indexes_.find(index);
    if (idx == indexes_.end()) return out;
    auto keys = idx->second.find(value);
    if (keys == idx->second.end()) return out;
    for (const auto& k : keys->second) out.push_back(store_.at(k));
    return out;
  }
  // Calls `fn` on each cached object that `index` files under `value`, under the cache's lock,
  // copying none (the same rules as ForEach): a pass over one pool's nodes, not the cluster's.
  void ForEachIn(const std::string& index, const std::string& value,
                 const std::function<void(const T&)>& fn) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto idx = indexes_.find(index);
    if (idx == indexes_.end()) return;
    auto keys = idx->second.find(value);
    if (keys == idx->second.end()) return;
    for (const auto& k : keys->second) fn(store_.at(k));
  }
  // How many cached objects `index` files under `value`.
  size_t CountIn(const std::string& index, const std::string& value) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto idx = indexes_.find(index);
    if (idx == indexes_.end()) return 0;
    auto keys = idx->second.find(value);
    return keys == idx->second.end() ? 0 : keys->second.size();
  }
  size_t Size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return store_.size();
  }
  std::string ResourceVersion() const {
    std::lock_guard<std::mutex> lock(mu_);
    return rv_;
  }
  InformerStats Stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  enum class WatchEnd { kClosed, kGone, kError, kStopped };
  struct Delivery {
    enum Kind { kAdd, kUpdate, kDelete } kind;
    std::optional<T> old_obj;
    T obj;
  };

  void Run() {
    bool need_list = ResourceVersion().empty();
    int failures = 0;
    while (!stopping()) {
      if (need_list) {
        if (!Relist()) {
          if (!Backoff(failures)) return;
          continue;
        }
        need_list = false;
        failures = 0;
      }
      switch (WatchOnce()) {
        case WatchEnd::kStopped:
          return;
        case WatchEnd::kGone:
          need_list = true;  // at once: the server told us exactly what happened
          break;
        case WatchEnd::kClosed:
          failures = 0;  // the server ended the watch at its timeout: resume from rv_
          break;
        case WatchEnd::kError:
          if (!Backoff(failures)) return;
          break;
      }
    }
  }

  bool stopping() const { return stop_.load(); }

  void Fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.failures;
    stats_.last_error = what;
  }

  // Sleeps the next backoff; false when stopped meanwhile.
  bool Backoff(int& failures) {
    const auto wait = JitteredBackoff(opts_.initial_backoff, opts_.max_backoff, failures++, rng_);
    std::unique_lock<std::mutex> lock(mu_);
    return !cv_.wait_for(lock, wait, [this] { return stop_.load(); });
  }

  bool Relist() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.lists;
    }
    auto list = client_.ListAll<T>(path_, decode_list_, opts_.page_size);
    if (!list) {
      Fail(list.error().message);
      return false;
    }
    std::vector<Delivery> out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::set<std::string> seen;
      for (auto& obj : list->items) {
        std::string key = ObjectKey(obj);
        seen.insert(key);
        auto it = store_.find(key);
        if (it == store_.end()) {
          out.push_back({Delivery::kAdd, std::nullopt, obj});
          Put(key, std::move(obj));
        } else if (it->second.meta.resource_version != obj.meta.resource_version) {
          out.push_back({Delivery::kUpdate, it->second, obj});
          Put(key, std::move(obj));
        }
      }
      for (auto it = store_.begin(); it != store_.end();) {
        if (seen.count(it->first)) {
          ++it;
          continue;
        }
        out.push_back({Delivery::kDelete, std::nullopt, it->second});
        Unindex(it->first, it->second);
        it = store_.erase(it);
      }
      rv_ = list->resource_version;
    }
    // Synced once the list's objects have reached the handlers too: a caller of WaitForSynced
    // then sees the store and everything its handlers were told (the handlers' adds came after
    // the flag before, so a waiter could find the store full and its own records empty).
    Deliver(out);
    {
      std::lock_guard<std::mutex> lock(mu_);
      synced_ = true;
    }
    cv_.notify_all();
    return true;
  }

  WatchEnd WatchOnce() {
    std::string from;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.watches;
      from = rv_;
    }
    std::uniform_int_distribution<int64_t> spread(0, opts_.watch_timeout.count());
    const auto timeout = opts_.watch_timeout + std::chrono::seconds(spread(rng_));
    bool gone = false;
    std::string error;
    auto r = client_.Watch(
        path_, from,
        [&](const WatchEventRaw& ev) {
          if (ev.type == "ERROR") {
            if (ev.error_code == 410) {
              gone = true;
            } else {
              error = "watch " + path_ + ": ERROR event " + std::to_string(ev.error_code) + ": " +
                      DecodeStatus(ev.object).message;
            }
            return false;
          }
          if (ev.type == "BOOKMARK") {
            std::lock_guard<std::mutex> lock(mu_);
            ++stats_.bookmarks;
            if (!ev.resource_version.empty()) rv_ = ev.resource_version;
            return true;
          }
          auto obj = decode_(ev.object);
          if (!obj) {
            error = "watch " + path_ + ": " + obj.error().message;
            return false;
          }
          Apply(ev.type, std::move(*obj), ev.resource_version);
          return true;
        },
        timeout, &stop_);
    if (stopping()) return WatchEnd::kStopped;
    if (!r) {
      Fail(r.error().message);
      return WatchEnd::kError;
    }
    if (gone || r->status == 410) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.relists_gone;
      return WatchEnd::kGone;
    }
    if (!r->ok()) {
      Fail("watch " + path_ + ": " + r->Describe());
      return WatchEnd::kError;
    }
    if (!error.empty()) {
      Fail(error);
      return WatchEnd::kError;
    }
    return WatchEnd::kClosed;
  }

  void Apply(const std::string& type, T obj, const std::string& rv) {
    std::vector<Delivery> out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.events;
      if (!rv.empty()) rv_ = rv;
      std::string key = ObjectKey(obj);
      auto it = store_.find(key);
      if (type == "DELETED") {
        if (it != store_.end()) {
          Unindex(key, it->second);
          store_.erase(it);
          out.push_back({Delivery::kDelete, std::nullopt, std::move(obj)});
        }
      } else if (it == store_.end()) {
        out.push_back({Delivery::kAdd, std::nullopt, obj});
        Put(key, std::move(obj));
      } else if (it->second.meta.resource_version != obj.meta.resource_version) {
        out.push_back({Delivery::kUpdate, it->second, obj});
        Put(key, std::move(obj));
      }
    }
    Deliver(out);
  }

  // Under mu_: stores `obj` at `key` and keeps the indexes in step.
  void Put(const std::string& key, T obj) {
    auto it = store_.find(key);
    if (it != store_.end()) Unindex(key, it->second);
    for (const auto& [name, fn] : index_funcs_) {
      for (const auto& v : fn(obj)) indexes_[name][v].insert(key);
    }
    store_[key] = std::move(obj);
  }
  void Unindex(const std::string& key, const T& obj) {
    for (const auto& [name, fn] : index_funcs_) {
      auto& idx = indexes_[name];
      for (const auto& v : fn(obj)) {
        auto it = idx.find(v);
        if (it == idx.end()) continue;
        it->second.erase(key);
        if (it->second.empty()) idx.erase(it);
      }
    }
  }

  void Deliver(const std::vector<Delivery>& out) {
    for (const auto& d : out) {
      switch (d.kind) {
        case Delivery::kAdd:
          if (handlers_.on_add) handlers_.on_add(d.obj);
          break;
        case Delivery::kUpdate:
          if (handlers_.on_update) handlers_.on_update(*d.old_obj, d.obj);
          break;
        case Delivery::kDelete:
          if (handlers_.on_delete) handlers_.on_delete(d.obj);
          break;
      }
    }
  }

  Api& client_;
  const std::string path_;
  const Decoder<kube::List<T>> decode_list_;
  const Decoder<T> decode_;
  const InformerOptions opts_;
  std::mt19937_64 rng_;  // used by the informer's thread only
  Handlers handlers_;
  std::map<std::string, IndexFunc> index_funcs_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::atomic<bool> stop_{false};
  bool synced_ = false;
  std::string rv_;
  std::unordered_map<std::string, T> store_;
  std::map<std::string, std::unordered_map<std::string, std::set<std::string>>> indexes_;
  InformerStats stats_;
  std::thread thread_;
};

// The index every controller needs: pods by spec.nodeName.
inline std::vector<std::string> PodNodeIndex(const Pod& p) {
  if (p.node_name.empty()) return {};
  return {p.node_name};
}

}  // namespace gpuheal::kube
