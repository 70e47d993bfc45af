#include "parse/kernel_parser.h"

#include <re2/re2.h>

#include <memory>
#include <vector>

#include "core/reasons.h"

namespace gpuheal {
namespace {

bool Has(uint64_t kw, KernelKeyword k) { return (kw >> k) & 1; }

// One kernel message format. Each pattern is anchored at the start of the message and spells
// out the subsystem's own prefix and the fixed text around every variable part, as the kernel's
// format string prints it. A keyword anywhere in the text is never enough: user space controls
// text the kernel prints for it (a process name in "<comm>[<pid>]: segfault at ...", a mount
// option in "tmpfs: Unknown parameter '...'"), and such a line must never become a fault.
struct Pattern {
  std::vector<KernelKeyword> keywords;  // the scanner finds at least one of these first
  const char* regex;                    // group 1, when present, is the device
  FaultKind kind;
  std::string_view reason;
  Condition condition;
  Severity severity;
  std::string_view device_prefix = {};  // prepended to group 1 ("CPU#")
};

// A netdev message's prefix as netdev_printk prints it: "<driver> <bus id> <ifname>: ".
#define NETDEV_PREFIX \
  R"(^[\w.-]+ [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7] ([^\s:]+)(?: \(unregister(?:ed|ing)\))?: )"

const std::vector<Pattern>& Patterns() {
  using namespace reason;
  const auto K = FaultKind::kKernel;
  const auto S = FaultKind::kStorage;
  const auto N = FaultKind::kNetwork;
  const auto KR = Condition::kKernelReady;
  const auto SR = Condition::kStorageReady;
  const auto NR = Condition::kNetworkingReady;
  static const std::vector<Pattern> p = {
      // kernel/hung_task.c: "INFO: task %s:%d blocked for more than %ld seconds." (comm: 15 bytes)
      {{kKwHungTask},
       R"(^INFO: task (.{1,15}:\d+) blocked for more than \d+ seconds\.\s*$)",
       K,
       kKernelHungTask,
       KR,
       Severity::kWarn},
      // kernel/watchdog.c: "BUG: soft lockup - CPU#%d stuck for %us! [%s:%d]" (pr_fmt "watchdog: ")
      {{kKwSoftLockup},
       R"(^(?:watchdog: )?BUG: soft lockup - CPU#(\d+) stuck for \d+s! \[.{1,15}:\d+\])",
       K,
       kKernelSoftLockup,
       KR,
       Severity::kWarn,
       "CPU#"},
      // kernel/rcu/tree_stall.h: "INFO: %s self-detected stall on CPU", "INFO: %s detected stalls
      // on CPUs/tasks:", "INFO: %s detected expedited stalls on CPUs/tasks:" (pr_fmt "rcu: ")
      {{kKwRcuStall, kKwExpeditedStall},
       R"(^(?:rcu: )?INFO: rcu_[a-z_]+ (?:self-detected stall on CPU|detected (?:expedited )?stalls on CPUs/tasks:))",
       K,
       kKernelRcuStall,
       KR,
       Severity::kWarn},
      // kernel/watchdog.c (pr_fmt "watchdog: "): "CPU%u: Watchdog detected hard LOCKUP on cpu %u"
      // (6.13+), "Watchdog detected hard LOCKUP on cpu %d" (6.5+); before 6.5 watchdog_hld.c's
      // "NMI watchdog: " prefix. Group 1: the stuck CPU.
      {{kKwHardLockup},
       R"(^(?:NMI )?watchdog: (?:CPU\d+: )?Watchdog detected hard LOCKUP on cpu (\d+)\s*$)",
       K,
       kKernelHardLockup,
       KR,
       Severity::kFatal,
       "CPU#"},
      // arch/x86/kernel/cpu/mce/core.c, __print_mce (pr_fmt "mce: ", HW_ERR "[Hardware Error]: "):
      // "CPU %d: Machine Check%s: %Lx Bank %d: %016Lx" - %s is " Exception" on the #MC path; the
      // bank status's bit 61 (UC, the first hex digit's value 2) marks an uncorrected error.
      {{kKwMachineCheck},
       R"(^mce: \[Hardware Error\]: CPU (\d+): Machine Check Exception: [0-9a-f]+ Bank \d+: )",
       K,
       kKernelMachineCheck,
       KR,
       Severity::kFatal,
       "CPU#"},
      {{kKwMachineCheck},
       R"(^mce: \[Hardware Error\]: CPU (\d+): Machine Check: [0-9a-f]+ Bank \d+: [2367abef][0-9a-f]{15}\b)",
       K,
       kKernelMachineCheck,
       KR,
       Severity::kFatal,
       "CPU#"},
      {{kKwMachineCheck},
       R"(^mce: \[Hardware Error\]: CPU (\d+): Machine Check: [0-9a-f]+ Bank \d+: [0-9a-f]{16}\b)",
       K,
       kKernelCorrectedMachineCheck,
       KR,
       Severity::kWarn,
       "CPU#"},
      // mce/core.c: pr_info(HW_ERR "Machine check events logged") - rate-limited (2 a minute),
      // for corrected and recoverable errors alike: a warning, never counted.
      {{kKwMachineCheckLogged},
       R"(^mce: \[Hardware Error\]: Machine check events logged\s*$)",
       K,
       kKernelCorrectedMachineCheck,
       KR,
       Severity::kWarn},
      // mm/oom_kill.c, __oom_kill_process: "%s: Killed process %d (%s) total-vm:%lukB, ..." with
      // %s "Out of memory", "Memory cgroup out of memory" or "Out of memory
      // (oom_kill_allocating_task)"; printed once per killed task, not rate-limited. The process
      // name (user-chosen) sits between the pid and ") total-vm:". Info: one kill is the kubelet's
      // business; the agent counts them for KernelOOMKillStorm.
      {{kKwOomKilled},
       R"(^(?:Out of memory|Memory cgroup out of memory)(?: \(oom_kill_allocating_task\))?: Killed process \d+ \(.{0,16}\) total-vm:\d+kB)",
       K,
       kKernelOOMKill,
       KR,
       Severity::kInfo},
      // lib/bug.c: "kernel BUG at %s:%u!" (the whole message)
      {{kKwKernelBugAt}, R"(^kernel BUG at (\S+:\d+)!\s*$)", K, kKernelBug, KR, Severity::kFatal},
      // arch/x86/mm/fault.c: "BUG: unable to handle page fault for address: %px",
      // "BUG: kernel NULL pointer dereference, address: %px"
      {{kKwBugUnableToHandle},
       R"(^BUG: unable to handle (?:page fault for address:|kernel paging request at|kernel NULL pointer dereference at) )",
       K,
       kKernelOops,
       KR,
       Severity::kFatal},
      {{kKwBugNullDeref},
       R"(^BUG: kernel NULL pointer dereference, address: [0-9a-fx]+)",
       K,
       kKernelOops,
       KR,
       Severity::kFatal},
      // arch/x86/kernel/traps.c: "general protection fault[, probably for non-canonical address
      // 0x%lx]: %04lx [#%d] ..." (user-space GPFs are printed as "traps: <comm>[<pid>] general
      // protection fault ip:..." and are not kernel faults); dumpstack.c: "Oops: [%s: ]%04lx [#%d]"
      {{kKwGeneralProtection},
       R"(^general protection fault(?:, [^:\[]*)?: [0-9a-f]{4} \[#\d+\](?: |$))",
       K,
       kKernelOops,
       KR,
       Severity::kFatal},
      {{kKwOops},
       R"(^Oops: (?:[^\[]*: )?[0-9a-f]{4} \[#\d+\](?: |$))",
       K,
       kKernelOops,
       KR,
       Severity::kFatal},
      // kernel/panic.c: "Kernel panic - not syncing: %s"
      {{kKwPanic}, R"(^Kernel panic - not syncing: )", K, kKernelPanic, KR, Severity::kFatal},
      // drivers/nvme/host/pci.c nvme_timeout (dev_warn on the controller: "nvme nvmeN: "): "I/O %d
      // QID %d timeout, aborting|reset controller|disable controller" (5.x), "I/O %d (%s) QID %d
      // timeout, aborting" (6.1), "I/O tag %d (%04x) [opcode %#x (%s) ]QID %d timeout, ..." (6.2+).
      // "completion polled" (a missed interrupt) is not a fault.
      {{kKwNvmeTimeout},
       R"(^nvme (nvme\d+): I/O (?:tag )?\d+ .*QID \d+ timeout, (?:aborting|reset controller|disable controller))",
       S,
       kStorageNVMeTimeout,
       SR,
       Severity::kWarn},
      // pci.c nvme_warn_reset: "controller is down; will reset: CSTS=0x%x, PCI_STATUS=..."
      {{kKwNvmeDown},
       R"(^nvme (nvme\d+): controller is down; will reset: CSTS=0x[0-9a-f]+)",
       S,
       kStorageNVMeTimeout,
       SR,
       Severity::kWarn},
      // The driver gives the controller up: "Removing after probe failure status: %d" (to 6.1),
      // "Disabling device after reset failure: %d" (6.12+), core.c "Device not ready; aborting
      // reset[, CSTS=0x%x]".
      {{kKwNvmeProbeFailure, kKwNvmeResetFailure, kKwNvmeNotReady},
       R"(^nvme (nvme\d+): (?:Removing after probe failure status: -?\d+|Disabling device after reset failure: -?\d+|Device not ready; aborting (?:reset|initialisation)))",
       S,
       kStorageNVMeControllerFailed,
       SR,
       Severity::kFatal},
      // fs/ext4/super.c: "EXT4-fs (%s): Remounting filesystem read-only"
      {{kKwRemountRo},
       R"(^EXT4-fs \(([^)\s]+)\): Remounting filesystem read-only)",
       S,
       kStorageReadOnlyRemount,
       SR,
       Severity::kFatal},
      // fs/btrfs/messages.c: "BTRFS <level> (device %s[ state %s]): forced readonly"
      {{kKwForcedReadonly},
       R"(^BTRFS [a-z]+ \(device ([^)\s]+)(?: state [^)]*)?\): forced readonly)",
       S,
       kStorageReadOnlyRemount,
       SR,
       Severity::kFatal},
      // fs/xfs/xfs_fsops.c: "XFS (%s): Corruption of in-memory data (0x%x) detected at %pS (%s:%d).
      // Shutting down filesystem."
      {{kKwXfs},
       R"(^XFS \(([^)\s]+)\): .*Shutting down filesystem)",
       S,
       kStorageReadOnlyRemount,
       SR,
       Severity::kFatal},
      // fs/ext4/super.c: "EXT4-fs error (device %s): %s:%d: ..."; fs/btrfs: "BTRFS error (device
      // %s"
      {{kKwExt4Error},
       R"(^EXT4-fs error \(device ([^)\s]+)\): )",
       S,
       kStorageFilesystemError,
       SR,
       Severity::kWarn},
      {{kKwBtrfsError},
       R"(^BTRFS error \(device ([^)\s]+))",
       S,
       kStorageFilesystemError,
       SR,
       Severity::kWarn},
      // fs/xfs: "XFS (%s): Corruption detected. Unmount and run xfs_repair", "metadata I/O error"
      {{kKwXfs},
       R"(^XFS \(([^)\s]+)\): (?:.*Corruption|metadata I/O error))",
       S,
       kStorageFilesystemError,
       SR,
       Severity::kWarn},
      // block/blk-mq.c (5.x+): "%s error, dev %s, sector %llu op 0x%x:(%s) flags 0x%x ...";
      // older: "blk_update_request: I/O error, dev %s, sector %llu"
      {{kKwBlockIoError},
       R"(^(?:blk_update_request: |print_req_error: )?[a-zA-Z/ ]{1,24} error, dev ([^,\s]+), sector \d+)",
       S,
       kStorageIOError,
       SR,
       Severity::kWarn},
      // fs/buffer.c: "Buffer I/O error on dev %pg, logical block %llu, ..."
      {{kKwBufferIoError},
       R"(^Buffer I/O error on dev ([^,\s]+), logical block \d+)",
       S,
       kStorageIOError,
       SR,
       Severity::kWarn},
      // net/sched/sch_generic.c: "NETDEV WATCHDOG: %s (%s): transmit queue %u timed out"; since 6.8
      // netdev_crit: "<driver> <bus> <ifname>: NETDEV WATCHDOG: CPU: %d: transmit queue %u timed
      // out"
      {{kKwNetdevWatchdog},
       R"(^NETDEV WATCHDOG: ([^\s:]+) \([^)]*\): transmit queue \d+ timed out)",
       N,
       kNetworkTxTimeout,
       NR,
       Severity::kWarn},
      {{kKwNetdevWatchdog},
       NETDEV_PREFIX R"(NETDEV WATCHDOG: CPU: \d+: transmit queue \d+ timed out)",
       N,
       kNetworkTxTimeout,
       NR,
       Severity::kWarn},
      // ixgbe_main.c: "Adapter removed"; igb_main.c: netdev_err(..., "PCIe link lost") - as netdev
      // messages, or as dev_err ("<driver> <bus id>: Adapter removed"; the bus id is the device)
      {{kKwAdapterRemoved, kKwPcieLinkLost},
       NETDEV_PREFIX R"((?:Adapter removed|PCIe link lost))",
       N,
       kNetworkDeviceRemoved,
       NR,
       Severity::kFatal},
      {{kKwAdapterRemoved, kKwPcieLinkLost},
       R"(^[\w.-]+ ([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]): (?:Adapter removed|PCIe link lost))",
       N,
       kNetworkDeviceRemoved,
       NR,
       Severity::kFatal},
      // e1000e/igb/ixgbe/bnxt: "NIC Link is Down"; ena: "Link is down"; mlx5e: "Link down" - as
      // netdev messages; old e1000e printk: "e1000e: %s NIC Link is Down". PCIe hotplug's
      // "<bus id>: pciehp: Slot(%s): Link Down" has no interface and is deliberately not matched.
      {{kKwLinkIsDownUpper, kKwLinkIsDownLower, kKwLinkDown},
       NETDEV_PREFIX R"((?:NIC Link is Down|Link is down|Link down))",
       N,
       kNetworkLinkDown,
       NR,
       Severity::kWarn},
      {{kKwLinkIsDownUpper},
       R"(^[\w.-]+: ([^\s:]+) NIC Link is Down)",
       N,
       kNetworkLinkDown,
       NR,
       Severity::kWarn},
  };
  return p;
}
#undef NETDEV_PREFIX

// Compiled once; RE2 matches in time linear in the message.
const std::vector<std::unique_ptr<RE2>>& Compiled() {
  static const std::vector<std::unique_ptr<RE2>> c = [] {
    std::vector<std::unique_ptr<RE2>> out;
    RE2::Options o;
    o.set_log_errors(false);
    o.set_encoding(RE2::Options::EncodingLatin1);  // kernel text is bytes, not always UTF-8
    for (const Pattern& p : Patterns()) {
      out.push_back(std::make_unique<RE2>(p.regex, o));
      if (!out.back()->ok()) std::abort();  // a built-in pattern that does not compile is a bug
    }
    return out;
  }();
  return c;
}

}  // namespace

const std::vector<std::string_view>& KernelKeywords() {
  static const std::vector<std::string_view> kw = {
      "NVRM",
      "SXid",
      "blocked for more than",
      "soft lockup",
      "detected stall",
      "kernel BUG at",
      "BUG: unable to handle",
      "BUG: kernel NULL pointer",
      "general protection fault",
      "Oops: ",
      "Kernel panic - not syncing",
      " error, dev ",
      "Buffer I/O error on dev",
      "EXT4-fs error",
      "Remounting filesystem read-only",
      "XFS (",
      "BTRFS error",
      "forced readonly",
      "NETDEV WATCHDOG",
      "Link is Down",
      "Link is down",
      "Link down",
      "Adapter removed",
      "PCIe link lost",
      "detected expedited stall",
      "Watchdog detected hard LOCKUP",
      ": Machine Check",
      "Machine check events logged",
      ": Killed process",
      " timeout, ",
      "controller is down",
      "after probe failure",
      "after reset failure",
      "Device not ready; aborting",
  };
  return kw;
}

std::optional<KernelSignal> ParseKernel(std::string_view m, uint64_t kw) {
  if (kw == 0) return std::nullopt;
  const auto& patterns = Patterns();
  const auto& compiled = Compiled();
  for (size_t i = 0; i < patterns.size(); ++i) {
    const Pattern& p = patterns[i];
    bool any = false;
    for (KernelKeyword k : p.keywords) any = any || Has(kw, k);
    if (!any) continue;
    const RE2& re = *compiled[i];
    std::string device;
    const bool matched = re.NumberOfCapturingGroups() >= 1 ? RE2::PartialMatch(m, re, &device)
                                                           : RE2::PartialMatch(m, re);
    if (!matched) continue;
    if (!device.empty()) device = std::string(p.device_prefix) + device;
    return KernelSignal{p.kind, p.reason, p.condition, p.severity, std::move(device)};
  }
  return std::nullopt;
}

}  // namespace gpuheal
