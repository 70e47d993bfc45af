// Fuzzes what the agent reads from the kubelet's PodResources socket (a gRPC frame around a
// ListPodResourcesResponse) and how it maps device IDs to GPUs: any bytes give device uses or an
// error, never a read past the input; decoded strings stay within their bounds; every holder the
// mapping gives is a container that holds a matching resource.

#include <cstdint>
#include <string>
#include <string_view>

#include "agent/gpu_holders.h"
#include "sources/pod_resources.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto framed = gpuheal::UnframeGrpc(body);
  for (std::string_view m : {body, framed.ok() ? *framed : std::string_view()}) {
    auto uses = gpuheal::ParsePodResources(m);
    if (!uses) {
      if (uses.error().message.find("PodResources") == std::string::npos) __builtin_trap();
      continue;
    }
    for (const auto& u : *uses) {
      if (u.namespace_.size() > 512 || u.pod.size() > 512 || u.container.size() > 512 ||
          u.resource.size() > 512 || u.device_ids.size() > 1024)
        __builtin_trap();
    }
    const std::vector<gpuheal::GpuIdentity> gpus = {{"0000:1b:00", "GPU-a"},
                                                    {"0000:2b:00", "GPU-b"}};
    auto holders = gpuheal::GpuHoldersOf(*uses, {"nvidia.com/*"}, gpus);
    if (!holders) continue;
    for (const auto& [pci, list] : *holders) {
      if (pci != "0000:1b:00" && pci != "0000:2b:00") __builtin_trap();
      for (const auto& h : list) {
        bool found = false;
        for (const auto& u : *uses)
          found |= u.namespace_ == h.namespace_ && u.pod == h.name && u.container == h.container &&
                   u.resource.rfind("nvidia.com/", 0) == 0;
        if (!found) __builtin_trap();
      }
    }
  }
  return 0;
}
