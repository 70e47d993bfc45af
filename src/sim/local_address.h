#pragma once
// Pod addresses for the sim's process runtime: an IPv4 address added to this host's loopback
// interface (a /32, scope host) through rtnetlink, so that a process bound to it is reachable at
// the pod IP that the API server, the EndpointSlice controller and a Service's clients see.
// Kubernetes refuses loopback (127.0.0.0/8) endpoint addresses, so the runtime takes its
// addresses from 198.18.0.0/15, the range set aside for benchmark testing (RFC 2544). Needs
// CAP_NET_ADMIN (root).

#include <string>

#include "core/result.h"

namespace gpuheal::sim {

// Adding an address that is already there succeeds.
Status AddLoopbackAddress(const std::string& ipv4);
// Removing one that is not there succeeds.
Status RemoveLoopbackAddress(const std::string& ipv4);

}  // namespace gpuheal::sim
