#pragma once
// One GPU out of service without its node: Dynamic Resource Allocation's DeviceTaintRule
// (resource.k8s.io/v1, Kubernetes 1.37) taints one device of a ResourceSlice, so the scheduler
// allocates no new claim to it (NoSchedule) while the node's other GPUs keep serving. The devices
// are NVIDIA's DRA driver's: a ResourceSlice of the node lists each GPU with its `pciBusID`
// attribute, which names it as the agent does. The claims allocated to a device say which pods
// hold it, so a drain can take just those. Calls the API each time (no cache): used on the
// GPU-level and predictive rungs only, a few calls per repair.

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "kube/api.h"

namespace gpuheal::controller {

inline constexpr std::string_view kDeviceTaintRulesPath =
    "/apis/resource.k8s.io/v1/devicetaintrules";

struct DeviceRef {
  std::string driver, pool, device;
  std::string pci;  // the GPU as the agent names it, "dddd:bb:dd"
};

class DeviceTaints {
 public:
  DeviceTaints(kube::Api& api, const Clock& clock) : api_(api), clock_(clock) {}

  // Whether the API server serves DeviceTaintRules (asked again after 10 minutes).
  bool Served();
  // The DRA devices of `node` that are the GPUs `pcis`, from the node's ResourceSlices; nullopt
  // unless every one of them was found (the caller then isolates the node instead).
  std::optional<std::vector<DeviceRef>> DevicesOf(const std::string& node,
                                                  const std::vector<std::string>& pcis);
  // The rule of `record` for device `d` (its name); created if missing.
  Result<std::string> Taint(const std::string& record, const std::string& node, const DeviceRef& d,
                            const std::string& value, const std::string& effect);
  // Deletes the rules named (a missing one is fine).
  Status Untaint(const std::vector<std::string>& names);
  // The pods ("namespace/name") holding claims allocated to any of `devices`.
  Result<std::vector<std::string>> PodsUsing(const std::vector<DeviceRef>& devices);

 private:
  static std::string RuleName(const std::string& record, const std::string& pci);

  kube::Api& api_;
  const Clock& clock_;
  std::mutex mu_;  // workers reconcile different nodes at once
  std::optional<bool> served_;
  std::chrono::system_clock::time_point asked_{};
};

}  // namespace gpuheal::controller
