#pragma once
// Failure domains: several nodes of one rack, PDU, leaf switch or zone faulting at once are an
// infrastructure incident, not bad hardware, and rebooting or replacing those nodes one by one
// does harm. A pure function of the Nodes and the policy (no API calls, no state), so a restarted
// controller sees the same incidents: the faults' times are the conditions' lastTransitionTime,
// which does not move while a fault persists.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "controller/policy.h"
#include "kube/objects.h"

namespace gpuheal::controller {

struct Incident {
  std::string label, value;        // the failure domain: a node label and its value
  std::vector<std::string> nodes;  // its nodes with a node-level fault, by name
  std::chrono::system_clock::time_point first, last;  // the burst's first and last fault
  // "label=value", the domain's name in the NodeRepair status and the Events.
  std::string Domain() const { return label + "=" + value; }
  // One line for a record and an Event: the domain, the burst and what is held.
  std::string Describe(const FailureDomains& policy) const;
};

// The open incidents: for each label of policy.failure_domains and each of its values, the nodes
// of that domain with a node-level fault (critical GPU-level faults leave the node in service and
// do not count). A domain has an incident while at least `nodes` of those faults began within
// one `window` of each other. A node's fault that began at or before the node's own
// gpuheal.io/incident-release time does not count (an operator's release; on the node itself, so
// it outlives the other nodes of the domain being deleted or replaced). Sorted by domain.
std::vector<Incident> FindIncidents(const std::vector<kube::Node>& nodes,
                                    const FailureDomains& policy);

// The incident that holds `node`'s remediation, if any: the first (by domain) whose domain the
// node belongs to while the node has a node-level fault.
std::optional<Incident> IncidentOf(const kube::Node& node, const std::vector<Incident>& incidents);

}  // namespace gpuheal::controller
