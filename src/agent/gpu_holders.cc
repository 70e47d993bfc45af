#include "agent/gpu_holders.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <charconv>

namespace gpuheal {

Result<std::map<std::string, std::vector<GpuHolder>>> GpuHoldersOf(
    const std::vector<PodDeviceUse>& uses, const std::vector<std::string>& resources,
    const std::vector<GpuIdentity>& gpus) {
  std::map<std::string, std::vector<GpuHolder>> out;
  for (const auto& u : uses) {
    const bool gpu_resource = std::any_of(resources.begin(), resources.end(), [&](const auto& p) {
      return fnmatch(p.c_str(), u.resource.c_str(), 0) == 0;
    });
    if (!gpu_resource) continue;
    for (const auto& raw : u.device_ids) {
      const std::string id = raw.substr(0, raw.find("::"));  // a shared GPU's replica
      const GpuIdentity* gpu = nullptr;
      for (const auto& g : gpus) {
        if (!g.uuid.empty() && g.uuid == id) gpu = &g;
      }
      unsigned index = 0;
      const char* end = id.data() + id.size();
      if (!gpu && !id.empty() && std::from_chars(id.data(), end, index).ptr == end &&
          index < gpus.size()) {
        gpu = &gpus[index];
      }
      if (!gpu) {
        return Error{fmt::format(
            "device \"{}\" of {} (pod {}/{}) names no GPU this node's NVML knows (neither a GPU "
            "UUID nor an index)",
            raw, u.resource, u.namespace_, u.pod)};
      }
      out[gpu->pci].push_back(GpuHolder{u.namespace_, u.pod, u.container});
    }
  }
  for (auto& [pci, holders] : out) {
    std::sort(holders.begin(), holders.end());
    holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
  }
  return out;
}

}  // namespace gpuheal
