#pragma once
// Reason codes: the PascalCase strings that appear in NodeConditions, Events and JSON output.
// One source of truth; docs/reasons.md documents each and a golden test guards the whole set.
// Adding a reason is a feature; renaming or removing one breaks users.

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/severity.h"

namespace gpuheal::reason {

// Fixed reason codes.
inline constexpr std::string_view kNvidiaGPUIsReady = "NvidiaGPUIsReady";
inline constexpr std::string_view kKernelIsReady = "KernelIsReady";
inline constexpr std::string_view kNetworkingIsReady = "NetworkingIsReady";
inline constexpr std::string_view kStorageIsReady = "StorageIsReady";
inline constexpr std::string_view kContainerRuntimeIsReady = "ContainerRuntimeIsReady";

inline constexpr std::string_view kNvidiaDoubleBitError = "NvidiaDoubleBitError";
inline constexpr std::string_view kNvidiaNVLinkError = "NvidiaNVLinkError";
inline constexpr std::string_view kNvidiaDeviceCountMismatch = "NvidiaDeviceCountMismatch";
inline constexpr std::string_view kNvidiaGPUFallenOffBus = "NvidiaGPUFallenOffBus";
inline constexpr std::string_view kNvidiaGPULost = "NvidiaGPULost";
inline constexpr std::string_view kNvidiaRowRemapFailure = "NvidiaRowRemapFailure";
inline constexpr std::string_view kNvidiaRowRemapPending = "NvidiaRowRemapPending";
inline constexpr std::string_view kNvidiaRetiredPagesPending = "NvidiaRetiredPagesPending";
inline constexpr std::string_view kNvidiaNVLinkErrorRate = "NvidiaNVLinkErrorRate";
inline constexpr std::string_view kNvidiaClockSlowdown = "NvidiaClockSlowdown";
inline constexpr std::string_view kNvidiaPCIeLinkDegraded = "NvidiaPCIeLinkDegraded";
inline constexpr std::string_view kNvidiaTemperatureHigh = "NvidiaTemperatureHigh";
inline constexpr std::string_view kNvidiaPersistenceModeDisabled = "NvidiaPersistenceModeDisabled";
inline constexpr std::string_view kNvidiaSingleBitErrorStorm = "NvidiaSingleBitErrorStorm";
inline constexpr std::string_view kNvidiaRetiredPagesLimit = "NvidiaRetiredPagesLimit";
inline constexpr std::string_view kNvidiaPowerHigh = "NvidiaPowerHigh";
inline constexpr std::string_view kNvidiaDCGMHealthFailure = "NvidiaDCGMHealthFailure";
inline constexpr std::string_view kNvidiaDCGMHealthWarning = "NvidiaDCGMHealthWarning";
inline constexpr std::string_view kKernelHungTask = "KernelHungTask";
inline constexpr std::string_view kKernelSoftLockup = "KernelSoftLockup";
inline constexpr std::string_view kKernelRcuStall = "KernelRcuStall";
inline constexpr std::string_view kKernelBug = "KernelBug";
inline constexpr std::string_view kKernelOops = "KernelOops";
inline constexpr std::string_view kKernelPanic = "KernelPanic";
inline constexpr std::string_view kStorageIOError = "StorageIOError";
inline constexpr std::string_view kStorageFilesystemError = "StorageFilesystemError";
inline constexpr std::string_view kStorageReadOnlyRemount = "StorageReadOnlyRemount";
inline constexpr std::string_view kNetworkLinkDown = "NetworkLinkDown";
inline constexpr std::string_view kNetworkTxTimeout = "NetworkTxTimeout";
inline constexpr std::string_view kNetworkDeviceRemoved = "NetworkDeviceRemoved";
// Kernel faults beyond the lockup family, and the previous boot's crash (docs/domains.md).
inline constexpr std::string_view kKernelHardLockup = "KernelHardLockup";
inline constexpr std::string_view kStorageNVMeTimeout = "StorageNVMeTimeout";
inline constexpr std::string_view kStorageNVMeControllerFailed = "StorageNVMeControllerFailed";
inline constexpr std::string_view kKernelMachineCheck = "KernelMachineCheck";
inline constexpr std::string_view kKernelCorrectedMachineCheck = "KernelCorrectedMachineCheck";
inline constexpr std::string_view kKernelOOMKill = "KernelOOMKill";
inline constexpr std::string_view kKernelOOMKillStorm = "KernelOOMKillStorm";
inline constexpr std::string_view kKernelCrashPreviousBoot = "KernelCrashPreviousBoot";
// States the agent's domain monitors observe (recovery rule while-observed: they clear when the
// monitor sees the healthy state again).
// InterfaceNotUp and InterfaceNotRunning are the EKS node monitoring agent's names for the same
// two states (IFF_UP clear; IFF_RUNNING clear), so dashboards keyed on them keep working.
inline constexpr std::string_view kInterfaceNotUp = "InterfaceNotUp";
inline constexpr std::string_view kInterfaceNotRunning = "InterfaceNotRunning";
inline constexpr std::string_view kNetworkInterfaceMissing = "NetworkInterfaceMissing";
inline constexpr std::string_view kNetworkInterfaceFlapping = "NetworkInterfaceFlapping";
inline constexpr std::string_view kInfiniBandPortDown = "InfiniBandPortDown";
inline constexpr std::string_view kStorageMountReadOnly = "StorageMountReadOnly";
inline constexpr std::string_view kStorageMountUnresponsive = "StorageMountUnresponsive";
inline constexpr std::string_view kContainerRuntimeUnreachable = "ContainerRuntimeUnreachable";
inline constexpr std::string_view kContainerRuntimeUnresponsive = "ContainerRuntimeUnresponsive";
inline constexpr std::string_view kContainerRuntimeNotReady = "ContainerRuntimeNotReady";
inline constexpr std::string_view kContainerRuntimeNetworkNotReady =
    "ContainerRuntimeNetworkNotReady";

// Event reasons of the agent's GPU-level recovery (drain, wait, reset, verify, undrain).
inline constexpr std::string_view kGPURecovery = "GPURecovery";
inline constexpr std::string_view kGPURecoveryFailed = "GPURecoveryFailed";

// Event reasons the repair controller records on Nodes: one per NodeRepair phase (the phase's
// name), and these (docs/controller.md).
inline constexpr std::string_view kRepairPhases[] = {
    "Detected", "Quarantined", "CheckpointRequested", "Draining",
    "Drained",  "Remediating", "Recovered",           "Replaced",
    "Failed",   "Blocked"};
inline constexpr std::string_view kRepairBlocked = "RepairBlocked";
inline constexpr std::string_view kRemediated = "Remediated";
inline constexpr std::string_view kRemediationFailed = "RemediationFailed";
inline constexpr std::string_view kStandbyPromoted = "StandbyPromoted";
inline constexpr std::string_view kReleased = "Released";
inline constexpr std::string_view kGPURecoveryRequested = "GPURecoveryRequested";
inline constexpr std::string_view kBreakerOpened = "CircuitBreakerOpened";
inline constexpr std::string_view kBreakerClosed = "CircuitBreakerClosed";
// A predictive repair: a GPU at risk on a node without a fault (the NodeRepair's trigger reason).
inline constexpr std::string_view kNvidiaGPUAtRisk = "NvidiaGPUAtRisk";
// A failure domain's incident began (on each of its nodes and the controller's Lease), and ended.
inline constexpr std::string_view kIncidentOpened = "InfrastructureIncident";
inline constexpr std::string_view kIncidentClosed = "InfrastructureIncidentResolved";

struct ReasonInfo {
  std::string_view name;
  Condition condition;
  std::string_view meaning;
};

// Every fixed reason, with its domain and meaning.
std::span<const ReasonInfo> FixedReasons();

// Reasons of states a domain monitor observes (network interfaces, mounts, the container
// runtime): their faults hold while observed and clear when the monitor sees the healthy state.
bool IsObserved(std::string_view reason);

// The healthy reason of a domain (condition status True).
std::string_view HealthyReason(Condition c);

// NvidiaXID<N>Error for fatal and worse, NvidiaXID<N>Warning otherwise (EKS NMA compatible).
std::string XidReason(int xid, Severity s);
// NvidiaSXID<N>Error / NvidiaSXID<N>Warning for NVSwitch SXids.
std::string SxidReason(int sxid, Severity s);

// The inverse of XidReason and SxidReason: the Xid or SXid a reason names and whether it is the
// Error form (fatal and worse) or the Warning form; nullopt for any other reason, and for a
// malformed one ("NvidiaXIDError", "NvidiaXID79", "NvidiaXID-1Error", "NvidiaXID079Error").
struct NumberedReason {
  bool sxid = false;  // NvidiaSXID<N>..., else NvidiaXID<N>...
  int number = 0;
  bool error = false;  // ...Error, else ...Warning
  friend bool operator==(const NumberedReason&, const NumberedReason&) = default;
};
std::optional<NumberedReason> ParseReason(std::string_view reason);

// A reason with the severity's suffix swapped (used when escalation raises a fault's severity).
std::string WithSeverity(std::string_view reason, Severity s);

// The full public contract as text (conditions, severities, actions, reasons, patterns):
// compared against test/golden/contracts.txt.
std::string ContractListing();

}  // namespace gpuheal::reason
