#include "sources/kernel_parser.h"

#include <vector>

#include "core/reasons.h"

namespace gpuheal {
namespace {

bool Has(uint64_t kw, KernelKeyword k) { return (kw >> k) & 1; }

// Text between `open` and `close` after `from`, e.g. "(device sda1)" -> "sda1".
std::string Between(std::string_view s, std::string_view open, char close) {
  const size_t a = s.find(open);
  if (a == std::string_view::npos) return {};
  std::string_view t = s.substr(a + open.size());
  return std::string(t.substr(0, t.find(close)));
}

// The interface a NIC driver line names: the token before ": " preceding `at`, e.g.
// "ixgbe 0000:01:00.0 eth0: NIC Link is Down" -> "eth0"; "e1000e: eth0 NIC Link is Down" -> "eth0".
std::string InterfaceBefore(std::string_view s, size_t at) {
  std::string_view head = s.substr(0, at);
  while (!head.empty() && (head.back() == ' ' || head.back() == ':')) head.remove_suffix(1);
  if (head.ends_with("NIC")) {
    head.remove_suffix(3);
    while (!head.empty() && head.back() == ' ') head.remove_suffix(1);
  }
  const size_t sp = head.find_last_of(' ');
  std::string_view tok = sp == std::string_view::npos ? head : head.substr(sp + 1);
  while (!tok.empty() && tok.back() == ':') tok.remove_suffix(1);
  return std::string(tok);
}

KernelSignal Make(FaultKind kind, std::string_view reason, Condition c, Severity s,
                  std::string device) {
  return KernelSignal{kind, reason, c, s, std::move(device)};
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
  };
  return kw;
}

std::optional<KernelSignal> ParseKernel(std::string_view m, uint64_t kw) {
  using namespace reason;
  const auto K = FaultKind::kKernel;
  const auto S = FaultKind::kStorage;
  const auto N = FaultKind::kNetwork;
  const auto KR = Condition::kKernelReady;
  const auto SR = Condition::kStorageReady;
  const auto NR = Condition::kNetworkingReady;

  // kernel/hung_task.c: "INFO: task %s:%d blocked for more than %ld seconds."
  if (Has(kw, kKwHungTask) && m.find("task ") != std::string_view::npos) {
    return Make(K, kKernelHungTask, KR, Severity::kWarn, Between(m, "task ", ' '));
  }
  // kernel/watchdog.c: "BUG: soft lockup - CPU#%d stuck for %us! [%s:%d]"
  if (Has(kw, kKwSoftLockup)) {
    return Make(K, kKernelSoftLockup, KR, Severity::kWarn, "CPU#" + Between(m, "CPU#", ' '));
  }
  // kernel/rcu/tree_stall.h: "%s: self-detected stall on CPU", "%s detected stalls on CPUs/tasks:"
  if (Has(kw, kKwRcuStall)) {
    return Make(K, kKernelRcuStall, KR, Severity::kWarn, {});
  }
  // lib/bug.c / arch: "kernel BUG at %s:%u!"
  if (Has(kw, kKwKernelBugAt)) {
    return Make(K, kKernelBug, KR, Severity::kFatal, Between(m, "kernel BUG at ", '!'));
  }
  // arch/x86/mm/fault.c: "BUG: unable to handle page fault for address: %px",
  // "BUG: kernel NULL pointer dereference, address: %px"; traps.c "general protection fault";
  // arch/x86/kernel/dumpstack.c: "Oops: %s%s%s%s%s%s%s" / "Oops: %04lx [#%d]"
  if (Has(kw, kKwBugUnableToHandle) || Has(kw, kKwBugNullDeref) ||
      (Has(kw, kKwGeneralProtection) && m.starts_with("general protection fault")) ||
      (Has(kw, kKwOops) && m.starts_with("Oops: "))) {
    return Make(K, kKernelOops, KR, Severity::kFatal, {});
  }
  // kernel/panic.c: "Kernel panic - not syncing: %s"
  if (Has(kw, kKwPanic)) {
    return Make(K, kKernelPanic, KR, Severity::kFatal, {});
  }
  // fs/ext4/super.c: "EXT4-fs (%s): Remounting filesystem read-only";
  // fs/btrfs: "BTRFS info (device %s): forced readonly";
  // fs/xfs/xfs_fsops.c: "Corruption of in-memory data (0x%x) detected at %pS ... Shutting down filesystem."
  if (Has(kw, kKwRemountRo)) {
    return Make(S, kStorageReadOnlyRemount, SR, Severity::kFatal, Between(m, "(", ')'));
  }
  if (Has(kw, kKwForcedReadonly)) {
    return Make(S, kStorageReadOnlyRemount, SR, Severity::kFatal, Between(m, "(device ", ')'));
  }
  if (Has(kw, kKwXfs) && m.find("Shutting down filesystem") != std::string_view::npos) {
    return Make(S, kStorageReadOnlyRemount, SR, Severity::kFatal, Between(m, "XFS (", ')'));
  }
  // fs/ext4/super.c: "EXT4-fs error (device %s): %s:%d: ..."; fs/btrfs: "BTRFS error (device %s)";
  // fs/xfs: "XFS (%s): Corruption detected. Unmount and run xfs_repair", "metadata I/O error"
  if (Has(kw, kKwExt4Error) || Has(kw, kKwBtrfsError)) {
    return Make(S, kStorageFilesystemError, SR, Severity::kWarn, Between(m, "(device ", ')'));
  }
  if (Has(kw, kKwXfs) && (m.find("Corruption") != std::string_view::npos ||
                          m.find("metadata I/O error") != std::string_view::npos)) {
    return Make(S, kStorageFilesystemError, SR, Severity::kWarn, Between(m, "XFS (", ')'));
  }
  // block/blk-core.c (5.x+): "%s error, dev %s, sector %llu op 0x%x:(%s) flags 0x%x ...";
  // older: "blk_update_request: I/O error, dev %s, sector %llu"; fs/buffer.c:
  // "Buffer I/O error on dev %pg, logical block %llu, async page read"
  if (Has(kw, kKwBlockIoError) && m.find(", sector ") != std::string_view::npos) {
    return Make(S, kStorageIOError, SR, Severity::kWarn, Between(m, " error, dev ", ','));
  }
  if (Has(kw, kKwBufferIoError)) {
    return Make(S, kStorageIOError, SR, Severity::kWarn, Between(m, "error on dev ", ','));
  }
  // net/sched/sch_generic.c: "NETDEV WATCHDOG: %s (%s): transmit queue %u timed out"
  if (Has(kw, kKwNetdevWatchdog)) {
    return Make(N, kNetworkTxTimeout, NR, Severity::kWarn, Between(m, "NETDEV WATCHDOG: ", ' '));
  }
  // ixgbe_main.c: e_dev_err("Adapter removed"); igb_main.c: netdev_err(..., "PCIe link lost")
  if (Has(kw, kKwAdapterRemoved) || Has(kw, kKwPcieLinkLost)) {
    const size_t at = Has(kw, kKwAdapterRemoved) ? m.find("Adapter removed") : m.find("PCIe link lost");
    return Make(N, kNetworkDeviceRemoved, NR, Severity::kFatal, InterfaceBefore(m, at));
  }
  // e1000e/igb/ixgbe/bnxt: "NIC Link is Down"; ena: "Link is down"; mlx5e: "Link down".
  // PCIe hotplug prints "Link Down" (capital D) and is deliberately not matched.
  if (Has(kw, kKwLinkIsDownUpper) || Has(kw, kKwLinkIsDownLower) || Has(kw, kKwLinkDown)) {
    size_t at = m.find("Link is Down");
    if (at == std::string_view::npos) at = m.find("Link is down");
    if (at == std::string_view::npos) at = m.find("Link down");
    return Make(N, kNetworkLinkDown, NR, Severity::kWarn, InterfaceBefore(m, at));
  }
  return std::nullopt;
}

}  // namespace gpuheal
