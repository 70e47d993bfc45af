#include "core/sxid_catalog.h"

#include <algorithm>

namespace gpuheal {
namespace {

using C = SxidClass;

// Source: NVIDIA Fabric Manager User Guide, the SXid error tables (non-fatal, fatal, always
// fatal): each SXid's classification and NVIDIA's action. Sorted by SXid.
constexpr SxidInfo kSxids[] = {
    {10001, C::kNonFatal, "IGNORE (correlate with the fatal SXids that follow)", Severity::kWarn,
     "non-fatal: a fatal SXid that follows decides"},
    {10002, C::kNonFatal, "IGNORE (correlate with the fatal SXids that follow)", Severity::kWarn,
     "non-fatal: a fatal SXid that follows decides"},
    {10003, C::kFatal, "RESET_ALL_GPUS_AND_NVSWITCHES", Severity::kFatal,
     "fatal: every GPU and NVSwitch of the node must be reset"},
    {10004, C::kNonFatal, "IGNORE (check the system's cooling)", Severity::kWarn,
     "non-fatal: a thermal event; check cooling"},
    {10005, C::kNonFatal, "IGNORE (verify the thermal event cleared)", Severity::kWarn,
     "non-fatal: a thermal event cleared"},
    {11001, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {11004, C::kNonFatal, "RESTART_VM (shared NVSwitch or vGPU mode)", Severity::kWarn,
     "non-fatal: restart the guest VM in virtualised modes; nothing to do on bare metal"},
    {11009, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {11012, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {11013, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {11018, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {11019, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {11020, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {11021, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {11022, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {11023, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {12001, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {12002, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {12020, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {12021, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {12022, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {12023, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {12024, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {12025, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {12026, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {12027, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {12028, C::kNonFatal, "RESTART_VM (shared NVSwitch or vGPU mode)", Severity::kWarn,
     "non-fatal: restart the guest VM in virtualised modes; nothing to do on bare metal"},
    {12030, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {12031, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {12032, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {14017, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {15001, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {15006, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {15008, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {15009, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {15010, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {15011, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {15012, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {15013, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {19047, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {19048, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {19049, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {19054, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {19055, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {19056, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {19057, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {19058, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {19059, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {19060, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {19061, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {19062, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {19063, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {19064, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {19065, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {19066, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {19067, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {19068, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {19069, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {19070, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {19071, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {19084, C::kNonFatal, "RESET_ALL_GPUS_AND_NVSWITCHES", Severity::kFatal,
     "non-fatal in the table, but NVIDIA asks for a reset of every GPU and NVSwitch: the node "
     "leaves service"},
    {20001, C::kNonFatal, "IGNORE (monitor NVLink throughput)", Severity::kWarn,
     "non-fatal: traffic continues; watch throughput"},
    {20012, C::kNonFatal, "CHECK_MECHANICALS (the link's mechanical connections)", Severity::kWarn,
     "non-fatal: inspect the link's connections at the next maintenance"},
    {20034, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {22003, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {22011, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {22012, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {22013, C::kNonFatal, "IGNORE", Severity::kWarn, "non-fatal"},
    {23001, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {23002, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {23003, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {23004, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {23005, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {23006, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {23007, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {23008, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {23009, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {23010, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {23011, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {23012, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {23013, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {23014, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {23015, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {23016, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {23017, C::kAlwaysFatal, "RESTART_HOST_OR_SBR (restart the host or a secondary bus reset)",
     Severity::kCatastrophic,
     "always fatal: the switch needs a host restart; every GPU of the node loses the fabric"},
    {24001, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {24002, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {24003, C::kNonFatal, "IGNORE (monitor corrected ECC errors)", Severity::kWarn,
     "non-fatal: a corrected error; the switch keeps working"},
    {24004, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {24005, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {24006, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
    {24007, C::kFatal,
     "reset by scope: an access port resets the GPUs of the partition, a trunk port every GPU and "
     "NVSwitch",
     Severity::kFatal,
     "fatal: the GPUs using the switch port must be reset; the node leaves service"},
};

static_assert([] {
  for (size_t i = 1; i < std::size(kSxids); ++i) {
    if (kSxids[i - 1].sxid >= kSxids[i].sxid) return false;
  }
  return true;
}());

}  // namespace

std::string_view ToString(SxidClass c) {
  switch (c) {
    case C::kNonFatal:
      return "non-fatal";
    case C::kFatal:
      return "fatal";
    case C::kAlwaysFatal:
      return "always fatal";
  }
  return "non-fatal";
}

const SxidInfo* FindSxid(int sxid) {
  const auto it = std::lower_bound(std::begin(kSxids), std::end(kSxids), sxid,
                                   [](const SxidInfo& s, int v) { return s.sxid < v; });
  return it != std::end(kSxids) && it->sxid == sxid ? &*it : nullptr;
}

std::span<const SxidInfo> AllSxids() { return kSxids; }

Severity SxidSeverity(int sxid, bool line_says_fatal) {
  if (const SxidInfo* s = FindSxid(sxid)) return s->severity;
  return line_says_fatal ? Severity::kFatal : Severity::kWarn;
}

}  // namespace gpuheal
