#pragma once
// NVML readings and events -> faults. Pure functions (no I/O, no clock), so every rule is unit
// tested: a state reported by a poll becomes a fault when it appears (a transition), never again
// on each poll while it lasts; a counter becomes a fault when it rises.

#include <optional>
#include <vector>

#include "core/fault.h"
#include "parse/classifier.h"
#include "sources/dcgm_source.h"
#include "sources/nvml_source.h"

namespace gpuheal {

struct GpuHealthLimits {
  unsigned temperature_limit = 0;                   // 0: the GPU's own slowdown threshold
  unsigned long long nvlink_errors_per_poll = 100;  // replay + recovery + CRC growth per poll
  unsigned long long corrected_ecc_per_poll = 100;  // single-bit (corrected) ECC growth per poll
};

// Faults implied by the change from `prev` (nullptr on the first poll of this GPU) to `cur`.
std::vector<Fault> EvaluateGpu(const GpuSnapshot* prev, const GpuSnapshot& cur,
                               const GpuHealthLimits& limits, const Classifier& classifier);

// The fault an NVML event reports, or nullopt for events that are not faults on their own
// (a single corrected ECC error: the agent counts those for storms).
std::optional<Fault> FaultFromEvent(const NvmlEvent& e, const Classifier& classifier);

// NVML sees fewer GPUs than the PCI bus holds, or than the config expects: nullopt when all agree.
std::optional<Fault> DeviceCountFault(size_t nvml_count, size_t pci_count,
                                      std::optional<int> expected);

// A DCGM policy violation. `pci`/`uuid`: the GPU as NVML names it ("" when NVML is absent: the
// fault then names the DCGM GPU id as its device).
Fault FaultFromDcgm(const DcgmViolation& v, const std::string& pci, const std::string& uuid,
                    const Classifier& classifier);

// A DCGM health-watch incident (warn or fail) as a fault.
Fault FaultFromIncident(const DcgmIncident& i, const std::string& pci, const std::string& uuid);

}  // namespace gpuheal
