#include "agent/gpu_health.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/reasons.h"

namespace gpuheal {
namespace {

const std::string kGpuCondition(ToString(Condition::kAcceleratedHardwareReady));

Fault GpuFault(const GpuSnapshot& s, std::string_view reason, Severity sev, std::string message) {
  Fault f;
  f.kind = FaultKind::kGpuHealth;
  f.pci = s.pci;
  f.uuid = s.uuid;
  f.severity = sev;
  f.action = DefaultAction(sev);
  f.condition = kGpuCondition;
  f.reason = std::string(reason);
  f.message = std::move(message);
  f.source = "nvml";
  return f;
}

Fault XidFault(const Classifier& c, int xid, const std::string& pci, const std::string& uuid,
               std::optional<int> recovery_action, std::string message) {
  Fault f = c.DriverXid(xid, recovery_action);
  f.pci = pci;
  f.uuid = uuid;
  f.message = std::move(message);
  f.source = "nvml";
  return f;
}

// The double-bit ECC fault: keyed as Xid 48 (what the driver logs for it), so the kernel line and
// the NVML report of one error are one fault.
Fault DoubleBitFault(const Classifier& c, const std::string& pci, const std::string& uuid,
                     std::string message) {
  Fault f = XidFault(c, 48, pci, uuid, std::nullopt, std::move(message));
  f.reason = std::string(reason::kNvidiaDoubleBitError);
  return f;
}

Fault LostFault(const Classifier& c, const std::string& pci, const std::string& uuid,
                std::string message) {
  Fault f = XidFault(c, 79, pci, uuid, std::nullopt, std::move(message));
  f.reason = std::string(reason::kNvidiaGPULost);
  return f;
}

template <typename T>
bool Rose(const std::optional<T>& prev, const std::optional<T>& cur) {
  return cur && prev && *cur > *prev;
}

std::string SlowdownWords(unsigned long long bits) {
  std::vector<std::string> w;
  if (bits & nvml::kClocksEventHwSlowdown) w.push_back("HW slowdown");
  if (bits & nvml::kClocksEventHwThermalSlowdown) w.push_back("HW thermal slowdown");
  if (bits & nvml::kClocksEventSwThermalSlowdown) w.push_back("SW thermal slowdown");
  if (bits & nvml::kClocksEventHwPowerBrakeSlowdown) w.push_back("HW power brake");
  return fmt::format("{}", fmt::join(w, ", "));
}

}  // namespace

std::vector<Fault> EvaluateGpu(const GpuSnapshot* prev, const GpuSnapshot& cur,
                               const GpuHealthLimits& limits, const Classifier& c) {
  std::vector<Fault> out;
  const GpuSnapshot none;
  const GpuSnapshot& p = prev ? *prev : none;
  if (cur.lost) {
    if (!p.lost)
      out.push_back(
          LostFault(c, cur.pci, cur.uuid, "NVML answers NVML_ERROR_GPU_IS_LOST for this GPU"));
    return out;  // nothing else read from a lost GPU means anything
  }
  // Volatile counters restart at zero on reboot and reset: any uncorrected error counted since
  // then is a fault, including one already counted before the agent started.
  if (cur.ecc_volatile_uncorrected && *cur.ecc_volatile_uncorrected > 0 &&
      (!p.ecc_volatile_uncorrected ||
       *cur.ecc_volatile_uncorrected > *p.ecc_volatile_uncorrected)) {
    out.push_back(DoubleBitFault(c, cur.pci, cur.uuid,
                                 fmt::format("uncorrected ECC errors since the last reset: {}",
                                             *cur.ecc_volatile_uncorrected)));
  }
  if (Rose(p.ecc_volatile_corrected, cur.ecc_volatile_corrected) &&
      *cur.ecc_volatile_corrected - *p.ecc_volatile_corrected >= limits.corrected_ecc_per_poll) {
    out.push_back(GpuFault(cur, reason::kNvidiaSingleBitErrorStorm, Severity::kWarn,
                           fmt::format("{} corrected ECC errors since the last poll (threshold {})",
                                       *cur.ecc_volatile_corrected - *p.ecc_volatile_corrected,
                                       limits.corrected_ecc_per_poll)));
  }
  if (cur.remap_failure && *cur.remap_failure > 0 && !(p.remap_failure && *p.remap_failure > 0)) {
    out.push_back(GpuFault(
        cur, reason::kNvidiaRowRemapFailure, Severity::kFatal,
        "row remapping failed: the GPU has no spare rows left for an uncorrectable error"));
  }
  if (cur.remap_pending && *cur.remap_pending > 0 && !(p.remap_pending && *p.remap_pending > 0)) {
    out.push_back(GpuFault(
        cur, reason::kNvidiaRowRemapPending, Severity::kCritical,
        fmt::format("row remap pending ({} uncorrectable rows remapped): reset the GPU to apply it",
                    cur.remap_uncorrectable.value_or(0))));
  }
  if (cur.retired_pages_pending.value_or(false) && !p.retired_pages_pending.value_or(false)) {
    out.push_back(GpuFault(cur, reason::kNvidiaRetiredPagesPending, Severity::kCritical,
                           "pages pending retirement: reset the GPU to retire them"));
  }
  // An NVLink goes down: a link seen up before, or (first poll) a link down while others are up.
  std::vector<unsigned> newly_down;
  for (unsigned link : cur.nvlinks_down) {
    const bool was_up =
        std::find(p.nvlinks_up.begin(), p.nvlinks_up.end(), link) != p.nvlinks_up.end();
    const bool first_poll_partial = !prev && !cur.nvlinks_up.empty();
    if (was_up || first_poll_partial) newly_down.push_back(link);
  }
  for (unsigned link : newly_down) {
    Fault f =
        GpuFault(cur, reason::kNvidiaNVLinkError, Severity::kFatal,
                 fmt::format("NVLink {} is down ({} of {} links up)", link, cur.nvlinks_up.size(),
                             cur.nvlinks_up.size() + cur.nvlinks_down.size()));
    f.device = fmt::format("nvlink{}", link);
    out.push_back(std::move(f));
  }
  if (Rose(p.nvlink_errors, cur.nvlink_errors) &&
      *cur.nvlink_errors - *p.nvlink_errors >= limits.nvlink_errors_per_poll) {
    out.push_back(GpuFault(
        cur, reason::kNvidiaNVLinkErrorRate, Severity::kWarn,
        fmt::format("{} NVLink replay/recovery/CRC errors since the last poll (threshold {})",
                    *cur.nvlink_errors - *p.nvlink_errors, limits.nvlink_errors_per_poll)));
  }
  constexpr unsigned long long kSlowdown =
      nvml::kClocksEventHwSlowdown | nvml::kClocksEventHwThermalSlowdown |
      nvml::kClocksEventSwThermalSlowdown | nvml::kClocksEventHwPowerBrakeSlowdown;
  const unsigned long long now_slow = cur.clock_event_reasons.value_or(0) & kSlowdown;
  const unsigned long long was_slow = p.clock_event_reasons.value_or(0) & kSlowdown;
  if (now_slow & ~was_slow) {
    out.push_back(GpuFault(cur, reason::kNvidiaClockSlowdown, Severity::kWarn,
                           fmt::format("clocks slowed: {}", SlowdownWords(now_slow))));
  }
  // Width below maximum is a degraded link. A lower generation alone is usually power saving at
  // idle (the link retrains up under load), so it is only logged (info).
  auto narrow = [](const GpuSnapshot& s) {
    return s.pcie_width && s.pcie_width_max && *s.pcie_width < *s.pcie_width_max;
  };
  auto slow = [](const GpuSnapshot& s) {
    return s.pcie_gen && s.pcie_gen_max && *s.pcie_gen < *s.pcie_gen_max;
  };
  if (narrow(cur) && !narrow(p)) {
    out.push_back(GpuFault(cur, reason::kNvidiaPCIeLinkDegraded, Severity::kWarn,
                           fmt::format("PCIe link width x{} below its maximum x{}", *cur.pcie_width,
                                       *cur.pcie_width_max)));
  } else if (slow(cur) && !slow(p) && !narrow(cur)) {
    out.push_back(
        GpuFault(cur, reason::kNvidiaPCIeLinkDegraded, Severity::kInfo,
                 fmt::format("PCIe link generation {} below its maximum {} (normal when idle)",
                             *cur.pcie_gen, *cur.pcie_gen_max)));
  }
  auto hot = [&](const GpuSnapshot& s) {
    const unsigned limit =
        limits.temperature_limit ? limits.temperature_limit : s.temperature_slowdown.value_or(0);
    return s.temperature && limit > 0 && *s.temperature >= limit;
  };
  if (hot(cur) && !hot(p)) {
    const unsigned limit =
        limits.temperature_limit ? limits.temperature_limit : *cur.temperature_slowdown;
    out.push_back(GpuFault(cur, reason::kNvidiaTemperatureHigh, Severity::kWarn,
                           fmt::format("GPU at {} C, limit {} C", *cur.temperature, limit)));
  }
  if (cur.recovery_action && *cur.recovery_action != 0 &&
      p.recovery_action.value_or(0) != *cur.recovery_action) {
    out.push_back(
        XidFault(c, 154, cur.pci, cur.uuid, static_cast<int>(*cur.recovery_action),
                 fmt::format("the driver's recovery action field is {}", *cur.recovery_action)));
  }
  if (cur.persistence_mode && !*cur.persistence_mode && p.persistence_mode.value_or(true)) {
    out.push_back(GpuFault(
        cur, reason::kNvidiaPersistenceModeDisabled, Severity::kInfo,
        "persistence mode is off: the driver unloads between jobs and NVML calls are slower"));
  }
  return out;
}

std::optional<Fault> FaultFromEvent(const NvmlEvent& e, const Classifier& c) {
  std::optional<Fault> f;
  if (e.type & nvml::kEventXidCriticalError) {
    const int xid = static_cast<int>(e.data);
    f = XidFault(c, xid, e.pci, e.uuid, std::nullopt,
                 xid == 999 ? std::string("NVML event: Xid of unknown type (999)")
                            : fmt::format("NVML event: Xid {}", xid));
  } else if (e.type & nvml::kEventDoubleBitEccError) {
    f = DoubleBitFault(c, e.pci, e.uuid, "NVML event: double-bit ECC error");
  } else if (e.type & nvml::kEventGpuUnavailableError) {
    f = LostFault(c, e.pci, e.uuid, "NVML event: GPU unavailable");
  } else if (e.type & nvml::kEventGpuRecoveryAction) {
    f = XidFault(c, 154, e.pci, e.uuid, static_cast<int>(e.data),
                 fmt::format("NVML event: recovery action {}", e.data));
  } else if (e.type & nvml::kEventSingleBitEccErrorStorm) {
    GpuSnapshot s;
    s.pci = e.pci;
    s.uuid = e.uuid;
    f = GpuFault(s, reason::kNvidiaSingleBitErrorStorm, Severity::kWarn,
                 "NVML event: single-bit ECC error storm");
  }
  if (f) {
    f->gpu_instance = e.gpu_instance;
    f->compute_instance = e.compute_instance;
  }
  return f;
}

namespace {

Fault DcgmGpuFault(unsigned gpu_id, const std::string& pci, const std::string& uuid,
                   std::string_view reason, Severity sev, std::string message) {
  GpuSnapshot s;
  s.pci = pci;
  s.uuid = uuid;
  Fault f = GpuFault(s, reason, sev, std::move(message));
  f.source = "dcgm";
  if (pci.empty()) f.device = fmt::format("dcgm-gpu{}", gpu_id);
  return f;
}

std::string_view HealthSystemName(int system) {
  switch (system) {
    case 0x1:
      return "PCIe";
    case 0x2:
      return "NVLink";
    case 0x4:
      return "PMU";
    case 0x8:
      return "MCU";
    case 0x10:
      return "memory";
    case 0x20:
      return "SM";
    case 0x40:
      return "InfoROM";
    case 0x80:
      return "thermal";
    case 0x100:
      return "power";
    case 0x200:
      return "driver";
    default:
      return "other";
  }
}

}  // namespace

Fault FaultFromDcgm(const DcgmViolation& v, const std::string& pci, const std::string& uuid,
                    const Classifier& c) {
  Fault f;
  switch (v.condition) {
    case dcgm::kCondXid:
      f = XidFault(c, static_cast<int>(v.value), pci, uuid, std::nullopt,
                   fmt::format("DCGM policy: Xid {}", v.value));
      break;
    case dcgm::kCondDbe:
      f = DoubleBitFault(c, pci, uuid,
                         fmt::format("DCGM policy: {} double-bit ECC error(s)", v.value));
      break;
    case dcgm::kCondMaxPagesRetired:
      return DcgmGpuFault(v.gpu_id, pci, uuid, reason::kNvidiaRetiredPagesLimit, Severity::kFatal,
                          fmt::format("DCGM policy: {} pages retired", v.value));
    case dcgm::kCondPci:
      return DcgmGpuFault(v.gpu_id, pci, uuid, reason::kNvidiaPCIeLinkDegraded, Severity::kWarn,
                          fmt::format("DCGM policy: PCIe replay counter {}", v.value));
    case dcgm::kCondThermal:
      return DcgmGpuFault(v.gpu_id, pci, uuid, reason::kNvidiaTemperatureHigh, Severity::kWarn,
                          fmt::format("DCGM policy: temperature {} C", v.value));
    case dcgm::kCondPower:
      return DcgmGpuFault(v.gpu_id, pci, uuid, reason::kNvidiaPowerHigh, Severity::kWarn,
                          fmt::format("DCGM policy: power {} W", v.value));
    default:  // NVLink
      return DcgmGpuFault(v.gpu_id, pci, uuid, reason::kNvidiaNVLinkErrorRate, Severity::kWarn,
                          fmt::format("DCGM policy: NVLink error counter {}", v.value));
  }
  f.source = "dcgm";
  if (pci.empty()) f.device = fmt::format("dcgm-gpu{}", v.gpu_id);
  return f;
}

Fault FaultFromIncident(const DcgmIncident& i, const std::string& pci, const std::string& uuid) {
  const bool fail = i.health >= dcgm::kHealthFail;
  Fault f =
      DcgmGpuFault(i.gpu_id, pci, uuid,
                   fail ? reason::kNvidiaDCGMHealthFailure : reason::kNvidiaDCGMHealthWarning,
                   fail ? Severity::kFatal : Severity::kWarn,
                   fmt::format("DCGM health ({}): {}", HealthSystemName(i.system), i.message));
  // One fault per GPU and health system.
  f.device = fmt::format("{}{}", pci.empty() ? fmt::format("dcgm-gpu{}/", i.gpu_id) : "",
                         HealthSystemName(i.system));
  return f;
}

std::optional<Fault> DeviceCountFault(size_t nvml_count, size_t pci_count,
                                      std::optional<int> expected) {
  const bool short_of_pci = nvml_count < pci_count;
  const bool short_of_expected = expected && nvml_count < static_cast<size_t>(*expected);
  const bool pci_short = expected && pci_count < static_cast<size_t>(*expected);
  if (!short_of_pci && !short_of_expected && !pci_short) return std::nullopt;
  Fault f;
  f.kind = FaultKind::kGpuHealth;
  f.severity = Severity::kFatal;
  f.action = DefaultAction(f.severity);
  f.condition = kGpuCondition;
  f.reason = std::string(reason::kNvidiaDeviceCountMismatch);
  f.source = "sysfs";
  f.device = "gpu-count";
  f.message = expected
                  ? fmt::format("NVML sees {} GPUs, the PCI bus holds {}, {} expected", nvml_count,
                                pci_count, *expected)
                  : fmt::format("NVML sees {} GPUs, the PCI bus holds {}", nvml_count, pci_count);
  return f;
}

}  // namespace gpuheal
