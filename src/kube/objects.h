#pragma once
// Typed projections of the Kubernetes objects gpuheal reads: only the fields it uses, so a
// 5,000-node + 150,000-pod cache stays small. Decoded with simdjson; written with nlohmann/json.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpuheal::kube {

// Cluster API marks the Nodes of its Machines with these annotations.
inline constexpr std::string_view kCapiMachineAnnotation = "cluster.x-k8s.io/machine";
inline constexpr std::string_view kCapiNamespaceAnnotation = "cluster.x-k8s.io/cluster-namespace";
// Karpenter's opt-out of disruption ("true"), on a Node or its NodeClaim.
inline constexpr std::string_view kKarpenterDoNotDisrupt = "karpenter.sh/do-not-disrupt";

struct ObjectMeta {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string resource_version;
  std::map<std::string, std::string> labels;
  // Only the annotations gpuheal reads are kept: those under gpuheal.io/ and sim.gpuheal.io/ and
  // the Cluster API Machine's (kCapiMachineAnnotation, kCapiNamespaceAnnotation).
  std::map<std::string, std::string> annotations;
  bool deleting = false;                // deletionTimestamp set
  std::string creation_timestamp;       // metadata.creationTimestamp (RFC 3339, seconds)
  int64_t deletion_grace_seconds = -1;  // metadata.deletionGracePeriodSeconds; -1 when absent
  std::string controller_kind;          // kind of the ownerReference with controller: true
  bool operator==(const ObjectMeta&) const = default;
};

struct Taint {
  std::string key, value, effect;
  std::string
      time_added;  // timeAdded (NoExecute taints), "" when absent: with it a taint list is whole
  bool operator==(const Taint&) const = default;
};

struct NodeCondition {
  std::string type, status, reason, message, last_transition_time;
  bool operator==(const NodeCondition&) const = default;
};

struct Node {
  ObjectMeta meta;
  std::vector<Taint> taints;
  bool unschedulable = false;
  std::string provider_id;  // spec.providerID: matched against an owner's (Karpenter NodeClaim)
  std::vector<NodeCondition> conditions;
  int64_t gpu_capacity = 0;  // status.capacity["nvidia.com/gpu"]
  bool operator==(const Node&) const = default;
};

struct Pod {
  ObjectMeta meta;
  std::string node_name;
  std::string
      owner_kind;  // kind of the controller owner (ReplicaSet, DaemonSet, Node for mirror pods...)
  std::string phase;
  int64_t gpu_requests = 0;  // sum over containers of nvidia.com/gpu requests (or limits)
  bool operator==(const Pod&) const = default;
};

// Whether an update changed anything this projection holds, beyond the resourceVersion: a
// kubelet's heartbeat (lastHeartbeatTime) or a pod's status detail gpuheal does not read is no
// reason to look at a node again.
template <typename T>
bool ChangedBeyondVersion(const T& old_obj, const T& new_obj) {
  T same = old_obj;
  same.meta.resource_version = new_obj.meta.resource_version;
  return !(same == new_obj);
}

struct PodDisruptionBudget {
  ObjectMeta meta;
  std::string selector;  // spec.selector as JSON; "" when null (such a budget selects no pod)
  int64_t disruptions_allowed = 0;
  int64_t current_healthy = 0;
  int64_t desired_healthy = 0;
};

struct Lease {
  ObjectMeta meta;
  std::string holder;
  int64_t lease_duration_seconds = 0;
  std::string renew_time;  // RFC3339 with microseconds
  int64_t transitions = 0;
};

// The NodeRepair collection (cluster-scoped).
inline constexpr std::string_view kNodeRepairsPath = "/apis/gpuheal.io/v1alpha1/noderepairs";

// One of a NodeRepair's status.steps: what the controller did, typed (controller/steps.h).
struct RepairStep {
  std::string kind;    // the Step's name (the CRD's enum)
  std::string at;      // RFC3339 with microseconds
  int64_t rung = 0;    // the ladder's rung, from 1; 0: not a rung's step
  std::string detail;  // by kind (controller/steps.h)
  std::string uid;     // AwaitingReplacement: the replaced Node's uid
  friend bool operator==(const RepairStep&, const RepairStep&) = default;
};

// gpuheal.io/v1alpha1 NodeRepair (deploy/crds/noderepairs.yaml): one repair episode of a node.
struct NodeRepair {
  ObjectMeta meta;
  std::string node;
  std::string condition, reason, severity;  // spec.trigger
  std::string phase;
  std::map<std::string, std::string> phase_times;  // status.phases: phase -> RFC3339 time
  std::vector<std::string> evicted_pods;           // status.evictedPods: "namespace/name"
  std::vector<std::string> actions;                // status.actions: words for people
  std::vector<RepairStep> steps;                   // status.steps: what the controller reads
  int64_t attempts = 0;                            // status.attempts
  std::string message;
  std::string rung;          // status.rung: the provider of the ladder's current rung
  int64_t rung_index = 0;    // status.rungIndex: 0 for the first rung
  std::string replacement;   // status.replacement: the node that joined in place of this one
  int64_t rung_attempt = 0;  // status.rungAttempt: 1 for the first try of the current provider
  std::string gate;          // status.gate: the gate that holds the repair now, if any
  std::string incident;      // status.incident: the failure domain whose incident holds it
};

// The NodeDiagnostic collection (cluster-scoped).
inline constexpr std::string_view kNodeDiagnosticsPath =
    "/apis/gpuheal.io/v1alpha1/nodediagnostics";

// gpuheal.io/v1alpha1 NodeDiagnostic (deploy/crds/nodediagnostics.yaml): a request for one node's
// diagnostic bundle, answered by that node's agent.
struct NodeDiagnostic {
  ObjectMeta meta;
  std::string node_name;                    // spec.nodeName
  std::string upload_url;                   // spec.upload.url ("" : kept on the node only)
  std::vector<std::string> include;         // spec.include
  std::vector<std::string> exclude;         // spec.exclude
  std::string repair;                       // spec.repair
  std::string phase;                        // status.phase
  std::string message;                      // status.message
  std::string start_time, completion_time;  // status.startTime, status.completionTime
  int64_t bundle_size = 0;                  // status.bundle.size
  std::string bundle_sha256;                // status.bundle.sha256
  std::string bundle_location;              // status.bundle.location
  std::string bundle_node_path;             // status.bundle.nodePath
  int64_t duration_ms = 0;                  // status.durationMs
  std::vector<std::string> collectors;      // status.collectors[].name
  bool operator==(const NodeDiagnostic&) const = default;
};

// Decoders from one object's JSON. Errors name what is missing or malformed.
Result<Node> DecodeNode(std::string_view json);
Result<Pod> DecodePod(std::string_view json);
Result<PodDisruptionBudget> DecodePdb(std::string_view json);
Result<Lease> DecodeLease(std::string_view json);
Result<ObjectMeta> DecodeMeta(std::string_view json);

// A list response: the items' raw JSON is decoded by the caller's decoder.
template <typename T>
struct List {
  std::vector<T> items;
  std::string resource_version;
  std::string continue_token;
};
template <typename T>
using Decoder = Result<T> (*)(std::string_view);

Result<List<Node>> DecodeNodeList(std::string_view json);
Result<List<Pod>> DecodePodList(std::string_view json);
Result<List<PodDisruptionBudget>> DecodePdbList(std::string_view json);
Result<List<Lease>> DecodeLeaseList(std::string_view json);
Result<NodeRepair> DecodeNodeRepair(std::string_view json);
Result<List<NodeRepair>> DecodeNodeRepairList(std::string_view json);
Result<NodeDiagnostic> DecodeNodeDiagnostic(std::string_view json);
Result<List<NodeDiagnostic>> DecodeNodeDiagnosticList(std::string_view json);

// One watch event line: {"type": "...", "object": {...}}.
struct WatchEventRaw {
  std::string type;              // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
  std::string object;            // the object's JSON
  std::string resource_version;  // metadata.resourceVersion of the object
  long error_code = 0;  // for ERROR events: the Status code (410 = resourceVersion too old)
};
Result<WatchEventRaw> DecodeWatchEvent(std::string_view line);

// A Status response body's message and reason ("" when not a Status), and its details: the
// server's suggested retry delay and the causes (an eviction refused by a PodDisruptionBudget
// has one of type "DisruptionBudget" whose message names the budget).
struct StatusCause {
  std::string type;
  std::string message;
};
struct ApiStatus {
  long code = 0;
  std::string reason;
  std::string message;
  int64_t retry_after_seconds = 0;  // details.retryAfterSeconds
  std::vector<StatusCause> causes;  // details.causes
};
ApiStatus DecodeStatus(std::string_view json);

// "1Gi"-style quantities for whole-number extended resources ("8" -> 8).
int64_t ParseCount(std::string_view q);

}  // namespace gpuheal::kube
