#pragma once
// Which containers hold which GPU, from the kubelet's PodResources answer (device plugins) and
// NVML's GPUs. NVIDIA's device plugin names a GPU by its UUID ("GPU-…", the default) or its
// index ("0"), per its DEVICE_ID_STRATEGY; a shared GPU (time-slicing, MPS) as "<id>::<replica>".
// A device ID of a GPU resource that names no GPU NVML knows (a MIG device, another plugin's
// scheme) makes the answer unknown, not "none": a pod on that device might hold a faulty GPU,
// and the controller evicts by GPU only what it knows to be complete.

#include <map>
#include <string>
#include <vector>

#include "core/gpu_faults.h"
#include "core/result.h"
#include "sources/pod_resources.h"

namespace gpuheal {

struct GpuIdentity {
  std::string pci;  // normalised "dddd:bb:dd"
  std::string uuid;
};

// `gpus` in NVML's index order; `resources`: fnmatch patterns of the GPU resource names
// ("nvidia.com/*"). The holders of each GPU (sorted, each once), by bus id; GPUs without
// holders are absent.
Result<std::map<std::string, std::vector<GpuHolder>>> GpuHoldersOf(
    const std::vector<PodDeviceUse>& uses, const std::vector<std::string>& resources,
    const std::vector<GpuIdentity>& gpus);

}  // namespace gpuheal
