#pragma once
// Recognises non-GPU kernel faults (hung tasks, soft and hard lockups, machine checks, OOM kills,
// BUG/Oops/panic, block I/O and filesystem errors, NIC link loss) and maps them to the other
// NodeCondition domains. Memory, PID and disk pressure belong to kubelet and are never reported
// here.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/fault.h"
#include "core/severity.h"

namespace gpuheal {

// Keyword bits shared with the classifier's single scan.
enum KernelKeyword : int {
  kKwNvrm = 0,
  kKwSxid,
  kKwHungTask,
  kKwSoftLockup,
  kKwRcuStall,
  kKwKernelBugAt,
  kKwBugUnableToHandle,
  kKwBugNullDeref,
  kKwGeneralProtection,
  kKwOops,
  kKwPanic,
  kKwBlockIoError,
  kKwBufferIoError,
  kKwExt4Error,
  kKwRemountRo,
  kKwXfs,
  kKwBtrfsError,
  kKwForcedReadonly,
  kKwNetdevWatchdog,
  kKwLinkIsDownUpper,
  kKwLinkIsDownLower,
  kKwLinkDown,
  kKwAdapterRemoved,
  kKwPcieLinkLost,
  kKwExpeditedStall,
  kKwHardLockup,
  kKwMachineCheck,
  kKwMachineCheckLogged,
  kKwOomKilled,
  kKwNvmeTimeout,
  kKwNvmeDown,
  kKwNvmeProbeFailure,
  kKwNvmeResetFailure,
  kKwNvmeNotReady,
  kKwCount,
};

// The keyword texts, indexed by KernelKeyword.
const std::vector<std::string_view>& KernelKeywords();

struct KernelSignal {
  FaultKind kind = FaultKind::kKernel;
  std::string_view reason;
  Condition condition = Condition::kKernelReady;
  Severity severity = Severity::kWarn;
  std::string device;  // task, CPU, block device, filesystem or interface
};

// `keywords` is the KeywordScanner result for `message`.
std::optional<KernelSignal> ParseKernel(std::string_view message, uint64_t keywords);

}  // namespace gpuheal
