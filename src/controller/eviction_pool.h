#pragma once
// Evictions beside the reconcile workers. A drain hands the pool its pods as chains (the pods of
// one PodDisruptionBudget, evicted one after another and stopped at the first 429; a pod under no
// budget is a chain of one) and returns; the pool runs `concurrency` chains at once across all
// nodes, at most `per_node` of one node, taking nodes in turn. Each chain's results wait for the
// node's next reconcile (Take), and the node is woken when its last chain ends. A worker thus
// never waits on the Eviction API: a burst of faults is quarantined while earlier nodes drain, and
// the evictions in flight are bounded by the pool, not by the number of workers.
//
// Without a wake callback nothing would reconcile the node when its evictions end, so Submit then
// runs the chains itself (`per_node` at a time) and returns when they are done.

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/result.h"
#include "kube/api.h"

namespace gpuheal::controller {

struct EvictionTarget {
  std::string ns, name, uid;
  std::string Key() const { return ns + "/" + name; }
};

// One pod of a chain: its eviction's result, or not sent (an earlier pod of its chain was refused
// with 429).
struct EvictionOutcome {
  EvictionTarget pod;
  bool sent = false;
  Result<kube::Response> result = Error{"not sent"};
};
using ChainOutcome = std::vector<EvictionOutcome>;

class EvictionPool {
 public:
  using EvictFn =
      std::function<Result<kube::Response>(const std::string& ns, const std::string& name)>;
  using WakeFn = std::function<void(const std::string& node)>;

  EvictionPool(EvictFn evict, WakeFn wake, int concurrency);
  ~EvictionPool();  // the evictions in flight end; queued chains are dropped
  EvictionPool(const EvictionPool&) = delete;
  EvictionPool& operator=(const EvictionPool&) = delete;

  // Queues `chains` of `node`, at most `per_node` of them in flight at once.
  void Submit(const std::string& node, std::vector<std::vector<EvictionTarget>> chains,
              int per_node);
  // The chains of `node` that ended since the last call, in the order they ended.
  std::vector<ChainOutcome> Take(const std::string& node);
  // Whether the pod ("namespace/name") is queued or being evicted.
  bool Pending(const std::string& key) const;
  // Drops the chains of `node` not started yet (its fault went away); "": every node's
  // (leadership lost). The evictions in flight end and their results wait for Take as usual.
  void Cancel(const std::string& node);
  // Chains queued or in flight, all nodes (tests).
  size_t Busy() const;
  // Pods queued or being evicted, all nodes (gpuheal_controller_evictions_pending).
  size_t PendingPods() const;

 private:
  struct NodeWork {
    std::deque<std::vector<EvictionTarget>> queued;
    int running = 0;
    int per_node = 1;
    bool ready = false;  // in ready_
    std::vector<ChainOutcome> done;
  };
  void Worker();
  ChainOutcome Run(const std::vector<EvictionTarget>& chain);
  void MakeReadyLocked(const std::string& node, NodeWork& w);

  EvictFn evict_;
  WakeFn wake_;
  const int concurrency_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, NodeWork> nodes_;
  std::deque<std::string> ready_;  // nodes with a queued chain and a free slot, in turn
  std::set<std::string> pending_;  // pods queued or in flight
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stop_ = false;
};

}  // namespace gpuheal::controller
