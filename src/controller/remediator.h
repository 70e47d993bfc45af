#pragma once
// The Remediator port: one implementation per provider (none, standby, delete-node, exec,
// redfish), each in its own file. The Repairer quarantines, gates and drains; the provider decides
// what "repaired" means once the node is drained and its toleration window is over.
//
// A provider acts through RepairContext (the API, the cluster as the controller sees it, the
// policy, Events, the record's writer) and keeps its state in the NodeRepair record, so that a
// restarted controller continues where the last one stopped and never repeats a disruptive act.

#include <chrono>
#include <memory>
#include <string>

#include "controller/node_fault.h"
#include "controller/policy.h"
#include "controller/record.h"
#include "kube/api.h"

namespace gpuheal::controller {

class RepairContext {
 public:
  virtual ~RepairContext() = default;
  virtual kube::Api& api() = 0;
  virtual const World& world() const = 0;
  virtual const Policy& policy() const = 0;
  virtual bool dry_run() const = 0;
  // An Event on the Node, written off the reconcile path.
  virtual void Event(const kube::Node& node, const std::string& type, const std::string& reason,
                     const std::string& message) = 0;
  // Writes the record's status now (false: not written; retry later).
  virtual bool WriteStatus(RepairRecord& r) = 0;
  // A place among `pool`'s `size` standbys for `node`, counted from the node cache plus the
  // standbys this replica has made that the cache does not show yet (read-your-writes: two
  // releases at once do not both take the last place). True reserves it until the cache shows the
  // node as a standby or UnreserveStandby (the write failed).
  virtual bool ReserveStandby(const std::string& pool, const std::string& node, int size) = 0;
  virtual void UnreserveStandby(const std::string& pool, const std::string& node) = 0;
};

class Remediator {
 public:
  virtual ~Remediator() = default;
  // At quarantine, before any gate: a provider that only adds capacity acts here (standby).
  // Returns when to retry; nullopt to go on.
  virtual Next AtQuarantine(const kube::Node& /*node*/, const NodeFault& /*f*/, RepairRecord& /*r*/,
                            std::chrono::system_clock::time_point /*now*/) {
    return std::nullopt;
  }
  // Once the node is drained and its toleration window is over.
  virtual Next Remediate(const kube::Node& node, const NodeFault& f, RepairRecord& r,
                         std::chrono::system_clock::time_point now) = 0;
  // The record was written with a final phase (whatever ended it: the provider, the fault
  // clearing, an operator's release): what the provider holds for it goes (a BMC's session).
  virtual void Ended(const RepairRecord& /*r*/) {}
};

// The delete-node provider's wait for the deleted node's replacement: whether the record is in
// it, and one look (also once the deleted node's Node object is gone).
bool AwaitingReplacement(const RepairRecord& r);
Next AwaitReplacement(RepairContext& ctx, RepairRecord& r,
                      std::chrono::system_clock::time_point now);

// The provider `policy.provider` names.
std::unique_ptr<Remediator> MakeRemediator(const Policy& policy, RepairContext& ctx);

// The providers, for tests that drive one directly.
std::unique_ptr<Remediator> MakeNoneRemediator();
std::unique_ptr<Remediator> MakeStandbyRemediator(RepairContext& ctx);
std::unique_ptr<Remediator> MakeDeleteNodeRemediator(RepairContext& ctx);
std::unique_ptr<Remediator> MakeExecRemediator(RepairContext& ctx);
std::unique_ptr<Remediator> MakeRedfishRemediator(RepairContext& ctx);

}  // namespace gpuheal::controller
