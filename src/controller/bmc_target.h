#pragma once
// Which BMC a node's power cycle goes to, and with which credentials: the one place the redfish
// rung and `gpuheal bmc NODE` decide it.
//
// The endpoint comes from the administrator's ConfigMap (provider.redfish.endpoints_configmap),
// whose entry per node is either the endpoint itself or a mapping that also names the Secret of
// that node's (or that group of nodes') credentials:
//
//   data:
//     gpu-node-1: https://10.20.0.11
//     gpu-node-2: |
//       endpoint: https://10.20.0.12
//       credentials_secret: bmc-rack-7      # NAME (the ConfigMap's namespace) or NAMESPACE/NAME
//
// The Node's own gpuheal.io/bmc-endpoint annotation is read only when endpoint_sources names
// node-annotation (its kubelet can write it), never chooses the credentials, and like every
// endpoint is checked against allowed_endpoints and the http setting before anything is sent.

#include <string>
#include <string_view>
#include <vector>

#include "bmc/endpoint_policy.h"
#include "bmc/redfish.h"
#include "controller/policy.h"
#include "core/result.h"
#include "kube/api.h"
#include "kube/objects.h"

namespace gpuheal::controller {

// One node's entry of the endpoints ConfigMap.
struct BmcEntry {
  std::string endpoint;
  std::string credentials_secret;  // NAMESPACE/NAME, or empty: the policy's
};
// Parses an entry (`where` names it in errors); a NAME-only Secret is put in `ns`.
Result<BmcEntry> ParseBmcEntry(std::string_view value, const std::string& ns,
                               const std::string& where);

struct BmcTarget {
  std::string url;
  bmc::Endpoint endpoint;
  bmc::Credentials credentials;
  std::string source;  // "ConfigMap NS/NAME" or "annotation gpuheal.io/bmc-endpoint"
  std::string secret;  // NAMESPACE/NAME the credentials came from
  bmc::EndpointCheck check;
  // For the record: where the endpoint and the credentials came from.
  std::string Describe() const;
};

// Resolves and checks `node`'s BMC endpoint and names the Secret of its credentials (nothing is
// sent to the BMC, the Secret is not read). Errors say what is missing or refused and which key
// would change that.
Result<BmcTarget> ResolveBmcEndpoint(kube::Api& api, const Policy::Redfish& policy,
                                     const kube::Node& node,
                                     const bmc::Resolver& resolve = bmc::SystemResolve);
// Reads the target's credentials from its Secret.
Status ReadBmcCredentials(kube::Api& api, BmcTarget& target);
// Both: what the redfish rung uses.
Result<BmcTarget> ResolveBmcTarget(kube::Api& api, const Policy::Redfish& policy,
                                   const kube::Node& node,
                                   const bmc::Resolver& resolve = bmc::SystemResolve);

}  // namespace gpuheal::controller
