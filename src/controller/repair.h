#pragma once
// One idempotent reconcile per node: it reads the world each time (the Node, its pods, its
// NodeRepair records) and takes the next step of the ladder, so a restarted or failed-over
// controller simply continues. State lives in the cluster: our taint and cordon annotation on the
// Node, checkpoint annotations on pods, phase times and evicted pods in the NodeRepair record.
//
//   fault (a domain False) -> Detected -> Quarantined (taint + cordon, at once) -> gates ->
//   CheckpointRequested -> Draining (Eviction API, PDBs honoured) -> Drained ->
//   [toleration window] -> Remediating (provider) -> Replaced | Failed
//   all domains True for the probation period -> release (our taint, our cordon) -> Recovered

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/metrics.h"
#include "controller/policy.h"
#include "core/severity.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/objects.h"

namespace gpuheal::controller {

// The worst False domain of a node.
struct NodeFault {
  std::string condition, reason, message;
  Severity severity = Severity::kFatal;
  std::chrono::system_clock::time_point since;  // the condition's lastTransitionTime
};
std::optional<NodeFault> FaultOf(const kube::Node& n);
// Severity of a reason code on a False condition: the catalog's for NvidiaXID<N>Error (at least
// fatal: repetition may have raised it), catastrophic for a lost GPU, fatal otherwise.
Severity SeverityOfReason(const std::string& reason);

// Pods the drain evicts: not DaemonSet-owned, not mirror pods, not finished, not in a skipped
// namespace or matching the skip labels, and (gpu_pods_only) requesting GPUs.
bool Evictable(const kube::Pod& p, const Policy& policy);

struct World {
  std::function<std::optional<kube::Node>(const std::string&)> node;
  std::function<std::vector<kube::Node>()> nodes;
  std::function<std::vector<kube::Pod>(const std::string& node)> pods;
  std::function<std::vector<kube::NodeRepair>(const std::string& node)> repairs;
  std::function<std::chrono::system_clock::time_point()> now = [] { return std::chrono::system_clock::now(); };
};

inline const std::string kNodeRepairs = "/apis/gpuheal.io/v1alpha1/noderepairs";

class Repairer {
 public:
  Repairer(kube::Client& client, World world, Policy policy, bool dry_run, Metrics& metrics);

  // The next step for `node`; when to look again (nullopt: only when something changes).
  std::optional<std::chrono::milliseconds> Reconcile(const std::string& node);

  bool breaker_open() const { return breaker_open_; }

 private:
  struct Record;  // the open NodeRepair as the reconcile sees and updates it
  std::optional<std::chrono::milliseconds> Repair(const kube::Node& node, const NodeFault& f, Record& r,
                                                  bool quarantined);
  std::optional<std::chrono::milliseconds> Release(const kube::Node& node, Record* r);
  bool Quarantine(const kube::Node& node, const NodeFault& f);
  std::string Gate(const kube::Node& node, const NodeFault& f, int attempts);  // "" = disruptive actions allowed
  bool WriteStatus(Record& r);
  void Event(const kube::Node& node, const std::string& type, const std::string& reason, const std::string& msg);
  std::string PoolOf(const kube::Node& n) const;

  kube::Client& client_;
  World world_;
  Policy policy_;
  bool dry_run_;
  Metrics& metrics_;
  std::unique_ptr<kube::EventRecorder> events_;
  std::mutex mu_;  // the breaker and the event recorder: workers reconcile different nodes at once
  std::map<std::string, std::string> created_;  // node -> the last NodeRepair this replica created
  bool breaker_open_ = false;
  std::chrono::system_clock::time_point breaker_last_over_{};
  Histogram* fault_to_quarantine_ = nullptr;
  Histogram* fault_to_drained_ = nullptr;
};

}  // namespace gpuheal::controller
