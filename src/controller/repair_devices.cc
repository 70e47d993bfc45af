// GPUs out of service without their node: a DeviceTaintRule per GPU (controller/device_taints.h),
// made by the GPU-level and predictive rungs and removed when their episode ends. The rules'
// names are the record's actions, so a restarted controller removes what its predecessor made.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "controller/repair.h"
#include "core/log.h"

namespace gpuheal::controller {
namespace {

constexpr std::string_view kRuleAction = "DeviceTaintRule ";

}  // namespace

std::optional<std::vector<DeviceRef>> Repairer::TaintDevices(const kube::Node& node,
                                                             const NodeFault& f, RepairRecord& r,
                                                             const std::string& value,
                                                             const std::string& effect) {
  const bool tainted = r.HasAction(kRuleAction);
  if (dry_run_ || (!tainted && !device_taints_.Served())) return std::vector<DeviceRef>{};
  auto devices = device_taints_.DevicesOf(node.meta.name, f.gpus);
  if (!devices) {
    // Rules made earlier in this episode stay the way: the lookup failed for now.
    if (tainted) return std::nullopt;
    return std::vector<DeviceRef>{};
  }
  if (tainted) return devices;
  for (const auto& d : *devices) {
    auto name = device_taints_.Taint(r.cr.meta.name, node.meta.name, d, value, effect);
    if (!name) {
      Log("warn", "cannot create a DeviceTaintRule; retrying",
          {{"node", node.meta.name}, {"gpu", d.pci}, {"error", name.error().message}});
      return std::nullopt;
    }
    r.Action(fmt::format("{}{}: GPU {} ({}/{}/{}) {}", kRuleAction, *name, d.pci, d.driver,
                         d.pool, d.device, effect));
  }
  return devices;
}

bool Repairer::UntaintDevices(RepairRecord& r) {
  std::vector<std::string> names;
  for (const auto& a : r.cr.actions) {
    if (!a.starts_with(kRuleAction)) continue;
    const std::string rest = a.substr(kRuleAction.size());
    names.push_back(rest.substr(0, rest.find(':')));
  }
  if (names.empty() || r.HasAction("removed DeviceTaintRule")) return true;
  if (dry_run_) return true;
  if (auto s = device_taints_.Untaint(names); !s) {
    Log("warn", "cannot delete the DeviceTaintRules; retrying",
        {{"record", r.cr.meta.name}, {"error", s.error().message}});
    return false;
  }
  r.Action(fmt::format("removed DeviceTaintRule(s) {}", fmt::join(names, ", ")));
  return true;
}

}  // namespace gpuheal::controller
