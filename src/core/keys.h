#pragma once
// Label, annotation and taint keys under gpuheal.io/: public contracts (golden-tested through
// reason::ContractListing). Adding one is a feature; renaming one breaks users.

#include <string_view>

namespace gpuheal::keys {

// The controller's GPU-level request to a node's agent, and the agent's answer (docs/nvml.md).
inline constexpr std::string_view kGpuRecoveryRequest = "gpuheal.io/gpu-recovery-request";
inline constexpr std::string_view kGpuRecoveryStatus = "gpuheal.io/gpu-recovery-status";

}  // namespace gpuheal::keys
