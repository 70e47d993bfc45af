#pragma once
// The repair controller's policy (YAML file or ConfigMap; docs/controller.md). Every key is
// validated; errors name file:line:column and the field, and say what is accepted.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bmc/endpoint_policy.h"
#include "core/result.h"
#include "core/severity.h"

namespace gpuheal::controller {

enum class Provider { kNone, kDeleteNode, kExec, kStandby, kRedfish };
std::string_view ToString(Provider p);

// failure_domains: K nodes of one domain (a value of one of these node labels: a rack, a PDU, a
// leaf switch, a zone) with node-level faults that began within one window are an infrastructure
// incident (controller/incidents.h): quarantine and drain go on, node-level remediation waits.
struct FailureDomains {
  std::vector<std::string> labels;  // empty: no failure domains
  int nodes = 3;
  // At most the AcceleratedHardwareReady toleration, so the incident is known before the first
  // of its nodes would be remediated.
  std::chrono::milliseconds window = std::chrono::minutes(10);
};

struct Policy {
  // How long a domain may stay False before remediation (quarantine and drain do not wait).
  std::map<std::string, std::chrono::milliseconds> toleration = {
      {"AcceleratedHardwareReady", std::chrono::minutes(10)}};
  std::chrono::milliseconds default_toleration = std::chrono::minutes(30);
  std::chrono::milliseconds checkpoint_window = std::chrono::seconds(30);
  std::chrono::milliseconds catastrophic_checkpoint_window = std::chrono::seconds(5);
  int eviction_grace_seconds = -1;  // -1: each pod's own terminationGracePeriodSeconds
  std::chrono::milliseconds drain_timeout = std::chrono::minutes(10);
  bool force_delete_after_drain_timeout = false;  // false: wait (and say so)
  bool gpu_pods_only = false;
  int eviction_parallel = 8;  // a node's pods evicted at once (eviction.parallel)
  // evictions in flight at once, all nodes together (eviction.concurrency)
  int eviction_concurrency = 32;
  std::vector<std::string> skip_namespaces = {"kube-system"};
  std::map<std::string, std::string> skip_pod_labels;  // pods with all these labels are left alone
  // Not read from the policy file: the namespace the controller itself runs in (POD_NAMESPACE,
  // else its service account's namespace; "" outside a pod). Its pods, the controller's own
  // among them, are never evicted: a controller draining the node it runs on must not take
  // itself away in the middle of the repair.
  std::string controller_namespace;
  std::string pool_label = "gpuheal.io/pool";  // falls back to karpenter.sh/nodepool
  int max_unavailable_percent = 20;            // per pool, rounded up, at least 1 node
  // How many of a pool of `size` nodes may be out of service at once.
  size_t PoolAllowance(size_t size) const;
  // pools.standby: how many standby nodes each pool keeps. A repaired node, or the replacement of
  // a deleted one, becomes the pool's standby while the pool has fewer. Unset: no size; a node
  // that a standby stood in for becomes the standby after its repair.
  std::optional<int> standby_default;
  std::map<std::string, int> standby_sizes;  // per pool, over standby_default
  std::optional<int> StandbySizeFor(const std::string& pool) const;
  double breaker_share = 0.30;  // of GPU nodes turning unhealthy within the window
  std::chrono::milliseconds breaker_window = std::chrono::minutes(5);
  std::chrono::milliseconds breaker_quiet = std::chrono::minutes(15);
  int max_repairs = 3;  // per node within repairs_window
  std::chrono::milliseconds repairs_window = std::chrono::hours(24 * 7);
  // NodeRepair records of finished episodes are deleted this long after they ended (at least
  // repairs_window: the attempt cap counts them).
  std::chrono::milliseconds records_keep = std::chrono::hours(24 * 30);
  std::chrono::milliseconds probation =
      std::chrono::minutes(5);  // healthy this long before release
  Provider provider = Provider::kNone;
  std::vector<std::string> exec_command;  // argv; NODE_NAME and REASON in the environment
  std::chrono::milliseconds exec_timeout = std::chrono::minutes(5);
  // Provider delete-node: how long a replacement node has to join the pool (Ready, the fault's
  // condition True) after the deletion before the repair ends Failed; 0: Replaced at deletion.
  std::chrono::milliseconds replacement_timeout = std::chrono::minutes(30);
  // Provider redfish: a power cycle through the node's BMC (docs/controller.md, "The BMC rung").
  struct Redfish {
    std::string credentials_secret =
        "gpuheal-system/gpuheal-bmc";  // NAMESPACE/NAME: username, password
    // NAMESPACE/NAME: node name -> endpoint, or {endpoint, credentials_secret} (controller/
    // bmc_target.h). The administrator's map: the default and only trusted source.
    std::string endpoints_configmap;
    // Where a node's endpoint is read, first found wins. A Node's own annotation is something
    // its kubelet can write (NodeRestriction allows a kubelet its own Node's annotations): named
    // only on purpose, and then only with an allow-list.
    enum class EndpointSource { kConfigMap, kNodeAnnotation };
    std::vector<EndpointSource> endpoint_sources = {EndpointSource::kConfigMap};
    // CIDRs and host-name suffixes a BMC endpoint must lie in (bmc/endpoint_policy.h); empty:
    // any endpoint of the ConfigMap.
    std::vector<std::string> allowed_endpoints;
    std::vector<bmc::EndpointRule> allowed_endpoint_rules;  // parsed from allowed_endpoints
    bool allow_insecure_http = false;  // plain http to a BMC (logged at every use)
    std::string ca_file;               // PEM bundle for the BMCs' certificates; empty: the system's
    bool insecure_skip_verify = false;
    bool session_auth = false;  // auth: basic (false) | session (a Redfish session per request run)
    std::vector<std::string> reset_types = {"PowerCycle", "ForceRestart", "GracefulRestart"};
    std::chrono::milliseconds request_timeout = std::chrono::seconds(10);
    int attempts = 3;
    // The node back, its fault cleared, within this after the reset; otherwise Failed.
    std::chrono::milliseconds recovery_timeout = std::chrono::minutes(15);
  } redfish;
  bool paused = false;
  FailureDomains failure_domains;
  // predictive: a GPU at risk (the agent's gpuheal.io/gpu-at-risk) on a node without a fault.
  // none: nothing (the agent still publishes it); cordon-at-boundary: no new work on the node (a
  // GPU alone cannot be isolated without DRA), its GPU pods left to finish, then the agent resets
  // the GPUs at risk (applying pending remaps) and the node is uncordoned; drain-at-boundary: the
  // same, and the GPU pods are asked to checkpoint and each evicted once it says it did.
  enum class Predictive { kNone, kCordonAtBoundary, kDrainAtBoundary };
  Predictive predictive = Predictive::kNone;
  // Critical (GPU-level) faults, from the agent's gpuheal.io/gpu-faults: ask the node's agent to
  // drain and reset those GPUs (the node stays in service), or treat the node like a fatal one.
  bool critical_node_level = false;  // critical.action: gpu-reset (false) | node (true)
  std::chrono::milliseconds critical_request_timeout = std::chrono::minutes(15);

  // diagnostics: before the first remediation that destroys the evidence (delete-node, redfish,
  // exec), the node's agent is asked for a bundle (a NodeDiagnostic) uploaded to this URL
  // ({node}, {repair}, {time} replaced); the repair waits for it at most `diagnostics_timeout`.
  std::string diagnostics_url_template;  // "": no diagnostic
  std::chrono::milliseconds diagnostics_timeout = std::chrono::seconds(20);
  std::string DiagnosticsUrl(const std::string& node, const std::string& repair,
                             const std::string& time) const;

  std::chrono::milliseconds TolerationFor(const std::string& condition) const;
  // The repair ladder: per node-level severity the providers tried in order, each after the one
  // before it failed; a severity without one has `provider` alone.
  std::map<std::string, std::vector<Provider>> ladder;
  std::vector<Provider> LadderFor(const std::string& severity) const;
};

// An endpoint source by its name in the policy and in `gpuheal bmc --endpoint-source`
// ("configmap", "node-annotation"); nullopt for any other name.
std::optional<Policy::Redfish::EndpointSource> ParseEndpointSource(std::string_view name);

Result<Policy> ParsePolicy(std::string_view yaml, const std::string& source);
Result<Policy> LoadPolicy(const std::string& path);

}  // namespace gpuheal::controller
