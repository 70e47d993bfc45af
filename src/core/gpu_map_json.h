#pragma once
// The shape the agent's per-GPU annotations share (gpuheal.io/gpu-faults, gpuheal.io/gpu-at-risk):
// a JSON object from PCI bus id to an entry object, at most 64 GPUs, each entry with an RFC 3339
// "since". Errors name the annotation, the GPU and what the whole should look like.

#include <simdjson.h>

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpuheal {

// Calls `entry` with each GPU's normalised bus id ("dddd:bb:dd") and its object, in order.
Status ParseGpuMap(
    std::string_view json, std::string_view key, std::string_view shape,
    const std::function<Status(const std::string& pci, simdjson::dom::object entry)>& entry);
// The entry's "since", cut to whole seconds as the agent writes it.
Result<std::chrono::system_clock::time_point> ParseSince(simdjson::dom::object entry,
                                                         std::string_view key,
                                                         const std::string& pci);

}  // namespace gpuheal
