#include "core/reasons.h"

#include <fmt/format.h>

#include "core/condition_decision.h"
#include "core/keys.h"
#include "core/xid_catalog.h"

namespace gpuheal::reason {
namespace {

using C = Condition;

constexpr ReasonInfo kFixed[] = {
    {kNvidiaGPUIsReady, C::kAcceleratedHardwareReady, "All NVIDIA GPUs are healthy"},
    {kKernelIsReady, C::kKernelReady, "No kernel fault is active"},
    {kNetworkingIsReady, C::kNetworkingReady, "No network device fault is active"},
    {kStorageIsReady, C::kStorageReady, "No storage fault is active"},
    {kContainerRuntimeIsReady, C::kContainerRuntimeReady, "No container runtime fault is active"},
    {kNvidiaDoubleBitError, C::kAcceleratedHardwareReady,
     "Uncorrectable (double-bit) ECC error reported by the driver API"},
    {kNvidiaNVLinkError, C::kAcceleratedHardwareReady, "NVLink down or failing"},
    {kNvidiaDeviceCountMismatch, C::kAcceleratedHardwareReady,
     "Fewer NVIDIA GPUs visible than on the PCI bus or than expected"},
    {kNvidiaGPUFallenOffBus, C::kAcceleratedHardwareReady,
     "The driver reports the GPU has fallen off the bus (treated as Xid 79)"},
    {kNvidiaGPULost, C::kAcceleratedHardwareReady, "The driver API reports the GPU is lost"},
    {kNvidiaRowRemapFailure, C::kAcceleratedHardwareReady, "GPU memory row remapping failed"},
    {kNvidiaRowRemapPending, C::kAcceleratedHardwareReady,
     "A GPU memory row remap is pending: the GPU needs a reset to apply it"},
    {kNvidiaRetiredPagesPending, C::kAcceleratedHardwareReady,
     "GPU memory pages are pending retirement: the GPU needs a reset to apply it"},
    {kNvidiaNVLinkErrorRate, C::kAcceleratedHardwareReady,
     "NVLink error counters rising faster than the threshold"},
    {kNvidiaClockSlowdown, C::kAcceleratedHardwareReady,
     "The GPU's clocks are slowed by hardware (HW slowdown, thermal, power brake)"},
    {kNvidiaPCIeLinkDegraded, C::kAcceleratedHardwareReady,
     "The GPU's PCIe link runs below its maximum width or generation"},
    {kNvidiaTemperatureHigh, C::kAcceleratedHardwareReady,
     "GPU temperature at or above its slowdown threshold"},
    {kNvidiaPersistenceModeDisabled, C::kAcceleratedHardwareReady,
     "NVIDIA persistence mode is off"},
    {kNvidiaSingleBitErrorStorm, C::kAcceleratedHardwareReady,
     "Corrected (single-bit) ECC errors arriving as a storm"},
    {kNvidiaRetiredPagesLimit, C::kAcceleratedHardwareReady,
     "DCGM: the GPU retired as many memory pages as its policy allows"},
    {kNvidiaPowerHigh, C::kAcceleratedHardwareReady, "DCGM: GPU power draw above its policy limit"},
    {kNvidiaDCGMHealthFailure, C::kAcceleratedHardwareReady,
     "DCGM's health check reports a failure for the GPU"},
    {kNvidiaDCGMHealthWarning, C::kAcceleratedHardwareReady,
     "DCGM's health check reports a warning for the GPU"},
    {kKernelHungTask, C::kKernelReady, "A task was blocked for longer than the hung-task timeout"},
    {kKernelSoftLockup, C::kKernelReady, "A CPU was stuck in kernel mode (soft lockup)"},
    {kKernelRcuStall, C::kKernelReady, "RCU stall detected"},
    {kKernelBug, C::kKernelReady, "Kernel BUG: the kernel hit an internal consistency check"},
    {kKernelOops, C::kKernelReady, "Kernel oops: the kernel faulted"},
    {kKernelPanic, C::kKernelReady, "Kernel panic"},
    {kStorageIOError, C::kStorageReady, "Block device I/O error"},
    {kStorageFilesystemError, C::kStorageReady, "Filesystem error or corruption detected"},
    {kStorageReadOnlyRemount, C::kStorageReady, "A filesystem was remounted read-only"},
    {kNetworkLinkDown, C::kNetworkingReady, "A network interface lost its link"},
    {kNetworkTxTimeout, C::kNetworkingReady, "A network device's transmit queue timed out"},
    {kNetworkDeviceRemoved, C::kNetworkingReady, "A network device was removed or failed"},
    {kStorageNVMeTimeout, C::kStorageReady,
     "An NVMe command timed out, or the controller went down and is being reset"},
    {kStorageNVMeControllerFailed, C::kStorageReady,
     "The NVMe driver gave the controller up after a failed reset"},
    {kKernelHardLockup, C::kKernelReady,
     "The NMI watchdog saw a CPU stuck with interrupts off (hard lockup)"},
    {kKernelMachineCheck, C::kKernelReady, "Uncorrected machine check (CPU, memory or bus error)"},
    {kKernelCorrectedMachineCheck, C::kKernelReady,
     "Corrected machine check events were logged (hardware wear; an Event)"},
    {kKernelOOMKill, C::kKernelReady,
     "The kernel's OOM killer killed a process (info: the kubelet owns memory pressure)"},
    {kKernelOOMKillStorm, C::kKernelReady,
     "The OOM killer killed many processes within the storm window (an Event)"},
    {kKernelCrashPreviousBoot, C::kKernelReady,
     "The previous boot ended in a panic, oops, machine check or hard lockup (pstore or the "
     "journal; an Event, once per boot)"},
    {kInterfaceNotUp, C::kNetworkingReady,
     "A monitored fabric interface is administratively down (IFF_UP clear; rtnetlink)"},
    {kInterfaceNotRunning, C::kNetworkingReady,
     "A monitored fabric interface is up but not running: no carrier (rtnetlink)"},
    {kNetworkInterfaceMissing, C::kNetworkingReady,
     "A monitored fabric interface vanished (rtnetlink)"},
    {kNetworkInterfaceFlapping, C::kNetworkingReady,
     "A monitored interface lost its link repeatedly within the flap window (an Event)"},
    {kInfiniBandPortDown, C::kNetworkingReady,
     "An InfiniBand port is not ACTIVE or its physical link is not LinkUp"},
    {kStorageMountReadOnly, C::kStorageReady,
     "A monitored mount point is read-only (remounted or shut down by its filesystem)"},
    {kStorageMountUnresponsive, C::kStorageReady,
     "A monitored mount point did not answer a stat within the deadline"},
    {kContainerRuntimeUnreachable, C::kContainerRuntimeReady,
     "The container runtime's CRI socket is gone or refuses connections"},
    {kContainerRuntimeUnresponsive, C::kContainerRuntimeReady,
     "The container runtime did not answer CRI Status within the deadline"},
    {kContainerRuntimeNotReady, C::kContainerRuntimeReady,
     "CRI Status: the runtime reports RuntimeReady false"},
    {kContainerRuntimeNetworkNotReady, C::kContainerRuntimeReady,
     "CRI Status: the runtime reports NetworkReady false (the pod network is not configured)"},
};

}  // namespace

std::span<const ReasonInfo> FixedReasons() { return kFixed; }

bool IsObserved(std::string_view r) {
  for (std::string_view o : {kInterfaceNotUp, kInterfaceNotRunning, kNetworkInterfaceMissing,
                             kInfiniBandPortDown, kStorageMountReadOnly, kStorageMountUnresponsive,
                             kContainerRuntimeUnreachable, kContainerRuntimeUnresponsive,
                             kContainerRuntimeNotReady, kContainerRuntimeNetworkNotReady}) {
    if (r == o) return true;
  }
  return false;
}

std::string_view HealthyReason(Condition c) {
  switch (c) {
    case C::kAcceleratedHardwareReady:
      return kNvidiaGPUIsReady;
    case C::kKernelReady:
      return kKernelIsReady;
    case C::kNetworkingReady:
      return kNetworkingIsReady;
    case C::kStorageReady:
      return kStorageIsReady;
    case C::kContainerRuntimeReady:
      return kContainerRuntimeIsReady;
  }
  return kKernelIsReady;
}

std::string XidReason(int xid, Severity s) {
  return fmt::format("NvidiaXID{}{}", xid, FlipsCondition(s) ? "Error" : "Warning");
}

std::string SxidReason(int sxid, Severity s) {
  return fmt::format("NvidiaSXID{}{}", sxid, FlipsCondition(s) ? "Error" : "Warning");
}

std::optional<NumberedReason> ParseReason(std::string_view r) {
  NumberedReason out;
  if (r.starts_with("NvidiaSXID")) {
    out.sxid = true;
    r.remove_prefix(10);
  } else if (r.starts_with("NvidiaXID")) {
    r.remove_prefix(9);
  } else {
    return std::nullopt;
  }
  if (r.ends_with("Error")) {
    out.error = true;
    r.remove_suffix(5);
  } else if (r.ends_with("Warning")) {
    r.remove_suffix(7);
  } else {
    return std::nullopt;
  }
  // Digits only, as XidReason prints them: no sign, no leading zero.
  if (r.empty() || r.size() > 9 || (r.size() > 1 && r.front() == '0')) return std::nullopt;
  for (char c : r) {
    if (c < '0' || c > '9') return std::nullopt;
    out.number = out.number * 10 + (c - '0');
  }
  return out;
}

std::string WithSeverity(std::string_view r, Severity s) {
  const auto parsed = ParseReason(r);
  if (!parsed) return std::string(r);
  return parsed->sxid ? SxidReason(parsed->number, s) : XidReason(parsed->number, s);
}

std::string ContractListing() {
  std::string out;
  out += "# conditions\n";
  for (Condition c : kAllConditions) out += fmt::format("{}\n", ToString(c));
  out += "# severities\n";
  for (int s = 0; s <= static_cast<int>(Severity::kCatastrophic); ++s) {
    auto sev = static_cast<Severity>(s);
    out += fmt::format("{} default-action={} flips-condition={}\n", ToString(sev),
                       ToString(DefaultAction(sev)), FlipsCondition(sev));
  }
  out += "# fixed reasons\n";
  for (const ReasonInfo& r : kFixed) out += fmt::format("{} {}\n", r.name, ToString(r.condition));
  out += "# keys (annotations, labels, taints)\n";
  for (std::string_view k :
       {keys::kGpuRecoveryRequest, keys::kGpuRecoveryStatus, keys::kGpuFaults, keys::kFaultTaint,
        keys::kStandbyTaint, keys::kManagedLabel, keys::kPausedLabel, keys::kDefaultPoolLabel,
        keys::kCordonedAnnotation, keys::kCheckpointRequested, keys::kCheckpointDone,
        keys::kRepairNodeLabel, keys::kBreakerReset, keys::kBmcEndpoint, keys::kReplaces,
        keys::kIncidentRelease, keys::kGpuAtRisk}) {
    out += fmt::format("{}\n", k);
  }
  out += "# event reasons\n";
  out += fmt::format("{}\n{}\n", kGPURecovery, kGPURecoveryFailed);
  for (std::string_view p : kRepairPhases) out += fmt::format("{} (NodeRepair phase)\n", p);
  for (std::string_view r : {kRepairBlocked, kRemediated, kRemediationFailed, kStandbyPromoted,
                             kReleased, kGPURecoveryRequested, kBreakerOpened, kBreakerClosed,
                             kIncidentOpened, kIncidentClosed, kNvidiaGPUAtRisk}) {
    out += fmt::format("{}\n", r);
  }
  out += "# reason patterns\n";
  out += "NvidiaXID<N>Error AcceleratedHardwareReady (fatal, catastrophic)\n";
  out += "NvidiaXID<N>Warning AcceleratedHardwareReady (info, warn, critical)\n";
  out += "NvidiaSXID<N>Error AcceleratedHardwareReady (fatal)\n";
  out += "NvidiaSXID<N>Warning AcceleratedHardwareReady (info, warn, critical)\n";
  out += "# condition message prefix (the agent's decision on a False condition)\n";
  out += fmt::format("{}<description>\n", DecisionPrefix({Severity::kFatal, Action::kQuarantine}));
  out +=
      fmt::format("{}<description>\n", DecisionPrefix({Severity::kCatastrophic, Action::kIsolate}));
  out += "# xid catalog: xid bucket severity action reason\n";
  for (const XidInfo& x : AllXids()) {
    out += fmt::format("{} {} {} {} {}\n", x.xid, ToString(x.bucket), ToString(x.severity),
                       ToString(DefaultAction(x.severity)), XidReason(x.xid, x.severity));
  }
  return out;
}

}  // namespace gpuheal::reason
