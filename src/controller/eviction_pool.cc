#include "controller/eviction_pool.h"

#include <signal.h>

#include <algorithm>

#include "core/parallel.h"

namespace gpuheal::controller {

EvictionPool::EvictionPool(EvictFn evict, WakeFn wake, int concurrency)
    : evict_(std::move(evict)), wake_(std::move(wake)), concurrency_(std::max(1, concurrency)) {}

EvictionPool::~EvictionPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

ChainOutcome EvictionPool::Run(const std::vector<EvictionTarget>& chain) {
  ChainOutcome out;
  out.reserve(chain.size());
  bool refused = false;
  for (const auto& pod : chain) {
    EvictionOutcome o{pod};
    if (!refused) {
      o.sent = true;
      o.result = evict_(pod.ns, pod.name);
      refused = o.result && o.result->status == 429;
    }
    out.push_back(std::move(o));
  }
  return out;
}

void EvictionPool::MakeReadyLocked(const std::string& node, NodeWork& w) {
  if (w.ready || w.queued.empty() || w.running >= w.per_node) return;
  w.ready = true;
  ready_.push_back(node);
}

void EvictionPool::Submit(const std::string& node, std::vector<std::vector<EvictionTarget>> chains,
                          int per_node) {
  per_node = std::max(1, per_node);
  if (chains.empty()) return;
  if (!wake_) {
    // Nothing would wake the node: run the chains here, per_node at a time.
    std::vector<ChainOutcome> outs(chains.size());
    ParallelFor(chains.size(), per_node, [&](size_t i) { outs[i] = Run(chains[i]); });
    std::lock_guard<std::mutex> lock(mu_);
    auto& w = nodes_[node];
    for (auto& o : outs) w.done.push_back(std::move(o));
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto& w = nodes_[node];
  w.per_node = per_node;
  for (auto& c : chains) {
    for (const auto& p : c) pending_.insert(p.Key());
    w.queued.push_back(std::move(c));
  }
  MakeReadyLocked(node, w);
  // A thread per chain up to the concurrency: threads start when first needed and then stay.
  size_t queued = 0;
  for (const auto& [n, nw] : nodes_) queued += nw.queued.size();
  while (static_cast<size_t>(idle_) < queued && static_cast<int>(threads_.size()) < concurrency_) {
    // The threads start with every signal blocked: SIGTERM belongs to Controller::Run.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    threads_.emplace_back([this] { Worker(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    ++idle_;
  }
  cv_.notify_all();
}

void EvictionPool::Worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !ready_.empty(); });
    if (stop_) return;
    const std::string node = ready_.front();
    ready_.pop_front();
    auto it = nodes_.find(node);
    if (it == nodes_.end()) continue;
    auto& w = it->second;
    w.ready = false;
    if (w.queued.empty() || w.running >= w.per_node) {
      if (w.queued.empty() && w.running == 0 && w.done.empty()) nodes_.erase(it);
      continue;
    }
    auto chain = std::move(w.queued.front());
    w.queued.pop_front();
    ++w.running;
    MakeReadyLocked(node, w);  // its next chain, after the other nodes' turn
    --idle_;
    const bool more = !ready_.empty();
    lock.unlock();
    if (more) cv_.notify_one();
    ChainOutcome out = Run(chain);
    lock.lock();
    ++idle_;
    for (const auto& p : chain) pending_.erase(p.Key());
    auto& after = nodes_[node];
    --after.running;
    after.done.push_back(std::move(out));
    const bool wake = after.queued.empty() && after.running == 0;
    MakeReadyLocked(node, after);
    if (after.ready) cv_.notify_one();
    if (wake) {
      lock.unlock();
      wake_(node);
      lock.lock();
    }
  }
}

std::vector<ChainOutcome> EvictionPool::Take(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return {};
  std::vector<ChainOutcome> out;
  out.swap(it->second.done);
  if (it->second.queued.empty() && it->second.running == 0 && !it->second.ready) nodes_.erase(it);
  return out;
}

bool EvictionPool::Pending(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.count(key) > 0;
}

void EvictionPool::Cancel(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  // A named node is looked up: every healthy node's reconcile calls this.
  auto it = node.empty() ? nodes_.begin() : nodes_.find(node);
  while (it != nodes_.end()) {
    auto& w = it->second;
    for (const auto& c : w.queued)
      for (const auto& p : c) pending_.erase(p.Key());
    w.queued.clear();
    if (w.running == 0 && !w.ready && w.done.empty()) {
      it = nodes_.erase(it);
    } else {
      ++it;
    }
    if (!node.empty()) break;
  }
}

size_t EvictionPool::PendingPods() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

size_t EvictionPool::Busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [node, w] : nodes_) n += w.queued.size() + static_cast<size_t>(w.running);
  return n;
}

}  // namespace gpuheal::controller
