#pragma once
// A client of the kubelet's PodResources API (gRPC v1.PodResourcesLister, read-only, on
// /var/lib/kubelet/pod-resources/kubelet.sock): which containers hold which device-plugin
// devices. Over sources/grpc_unix.h; the List answer is decoded from protobuf's wire format by
// ParsePodResources (fuzzed).

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "sources/grpc_unix.h"

namespace gpuheal {

// One container's devices of one resource (ContainerDevices).
struct PodDeviceUse {
  std::string namespace_, pod, container, resource;
  std::vector<std::string> device_ids;
  bool operator==(const PodDeviceUse&) const = default;
};

// ListPodResourcesResponse (pod_resources=1: PodResources{name=1, namespace=2, containers=3:
// ContainerResources{name=1, devices=2: ContainerDevices{resource_name=1, device_ids=2}}}).
// Containers without devices give nothing; CPUs, memory and DRA claims are skipped. Malformed
// input, or more than 100,000 device assignments, is an error.
Result<std::vector<PodDeviceUse>> ParsePodResources(std::string_view message);

class PodResourcesClient {
 public:
  explicit PodResourcesClient(const std::string& socket_path);
  void SetCancel(const std::atomic<bool>* cancel) { cancel_ = cancel; }
  Result<std::vector<PodDeviceUse>> List(std::chrono::milliseconds deadline);

 private:
  GrpcTarget target_;
  const std::atomic<bool>* cancel_ = nullptr;
};

}  // namespace gpuheal
