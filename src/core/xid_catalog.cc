#include "core/xid_catalog.h"

#include <algorithm>
#include <array>

namespace gpuheal {
namespace {

using B = Bucket;

// Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog" (docs.nvidia.com/deploy/xid-errors/,
// Ampere and newer), columns Code, Mnemonic, Description and Resolution Bucket (Immediate Action).
// Severity is filled from the bucket below, then the product matrix and deviations are applied.
struct Row {
  int xid;
  std::string_view mnemonic;
  std::string_view description;
  Bucket bucket;
};

constexpr Row kRows[] = {
    {1, "ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD", "Unused", B::kContactSupport},
    {2, "ROBUST_CHANNEL_FIFO_ERROR_SW_METHOD", "Unused", B::kContactSupport},
    {3, "ROBUST_CHANNEL_FIFO_ERROR_UNK_METHOD", "Unused", B::kContactSupport},
    {4, "ROBUST_CHANNEL_FIFO_ERROR_CHANNEL_BUSY", "Unused", B::kContactSupport},
    {5, "ROBUST_CHANNEL_FIFO_ERROR_RUNOUT_OVERFLOW", "Unused", B::kContactSupport},
    {6, "ROBUST_CHANNEL_FIFO_ERROR_PARSE_ERR", "Unused", B::kContactSupport},
    {7, "ROBUST_CHANNEL_FIFO_ERROR_PTE_ERR", "Unused", B::kContactSupport},
    {8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", B::kRestartApp},
    {9, "ROBUST_CHANNEL_GR_ERROR_INSTANCE", "Unused", B::kContactSupport},
    {10, "ROBUST_CHANNEL_GR_ERROR_SINGLE_STEP", "Unused", B::kContactSupport},
    {11, "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "Invalid or corrupted push buffer stream",
     B::kRestartApp},
    {12, "ROBUST_CHANNEL_GR_ERROR_SW_METHOD", "Unused", B::kContactSupport},
    {13, "ROBUST_CHANNEL_GR_EXCEPTION", "Graphics Engine Exception", B::kRestartApp},
    {14, "ROBUST_CHANNEL_FAKE_ERROR", "Fake or injected error", B::kIgnore},
    {15, "ROBUST_CHANNEL_SCANLINE_TIMEOUT", "Unused", B::kContactSupport},
    {16, "ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT", "Unused", B::kContactSupport},
    {17, "ROBUST_CHANNEL_PARAMETER_ERROR", "Unused", B::kContactSupport},
    {18, "ROBUST_CHANNEL_BUS_MASTER_TIMEOUT_ERROR", "Unused", B::kContactSupport},
    {19, "ROBUST_CHANNEL_DISP_MISSED_NOTIFIER", "Unused", B::kContactSupport},
    {20, "ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD", "Unused", B::kContactSupport},
    {21, "ROBUST_CHANNEL_ME_ERROR_SW_METHOD", "Unused", B::kContactSupport},
    {22, "ROBUST_CHANNEL_VP_ERROR_SW_METHOD", "Unused", B::kContactSupport},
    {23, "ROBUST_CHANNEL_RC_LOGGING_ENABLED", "Unused", B::kContactSupport},
    {24, "ROBUST_CHANNEL_GR_SEMAPHORE_TIMEOUT", "Unused", B::kContactSupport},
    {25, "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "Invalid or illegal push buffer stream",
     B::kRestartApp},
    {26, "ROBUST_CHANNEL_FIFO_ERROR_FBISTATE_TIMEOUT", "Unused", B::kContactSupport},
    {27, "ROBUST_CHANNEL_VP_ERROR", "Unused", B::kContactSupport},
    {28, "ROBUST_CHANNEL_VP2_ERROR", "Unused", B::kContactSupport},
    {29, "ROBUST_CHANNEL_BSP_ERROR", "Unused", B::kContactSupport},
    {30, "ROBUST_CHANNEL_BAD_ADDR_ACCESS", "Unused", B::kContactSupport},
    {31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", B::kRestartApp},
    {32, "ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream", B::kRestartApp},
    {33, "ROBUST_CHANNEL_SEC_ERROR", "Unused", B::kContactSupport},
    {34, "ROBUST_CHANNEL_MSVLD_ERROR", "Unused", B::kContactSupport},
    {35, "ROBUST_CHANNEL_MSPDEC_ERROR", "Unused", B::kContactSupport},
    {36, "ROBUST_CHANNEL_MSPPP_ERROR", "Unused", B::kContactSupport},
    {37, "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "Driver firmware error", B::kIgnore},
    {38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "Driver firmware error", B::kIgnore},
    {39, "ROBUST_CHANNEL_CE0_ERROR", "Copy Engine Exception", B::kRestartApp},
    {40, "ROBUST_CHANNEL_CE1_ERROR", "Copy Engine Exception", B::kRestartApp},
    {41, "ROBUST_CHANNEL_CE2_ERROR", "Copy Engine Exception", B::kRestartApp},
    {42, "ROBUST_CHANNEL_VIC_ERROR", "Unused", B::kContactSupport},
    {43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing", B::kIgnore},
    {44, "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "Graphics Engine fault during context switch",
     B::kIgnore},
    {45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "Preemptive cleanup, due to previous errors",
     B::kWorkflowXid45},
    {46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", B::kResetGpu},
    {47, "ROBUST_CHANNEL_NVENC0_ERROR", "Unused", B::kContactSupport},
    {48, "ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", B::kWorkflowXid48},
    {49, "SILENT_RUNNING_CONSTANT_LEVEL_SET_BY_REGISTRY", "Unused", B::kContactSupport},
    {50, "SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR", "Unused", B::kContactSupport},
    {51, "SILENT_RUNNING_STRESS_TEST_FAILURE", "Unused", B::kContactSupport},
    {52, "SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE", "Unused", B::kContactSupport},
    {53, "SILENT_RUNNING_TEMP_REDUCED_CLOCKING", "Unused", B::kContactSupport},
    {54, "SILENT_RUNNING_PWR_REDUCED_CLOCKING", "Auxiliary power is not connected to the GPU board",
     B::kCheckMechanicals},
    {55, "SILENT_RUNNING_TEMPERATURE_READ_ERROR", "Unused", B::kContactSupport},
    {56, "DISPLAY_CHANNEL_EXCEPTION", "Unused", B::kContactSupport},
    {57, "FB_LINK_TRAINING_FAILURE_ERROR", "Unused", B::kContactSupport},
    {58, "FB_MEMORY_ERROR", "Unused", B::kContactSupport},
    {59, "PMU_ERROR", "Unused", B::kContactSupport},
    {60, "ROBUST_CHANNEL_SEC2_ERROR", "Video processor exception", B::kRestartApp},
    {61, "PMU_BREAKPOINT", "Internal micro-controller breakpoint/warning (older GPUs)",
     B::kContactSupport},
    {62, "PMU_HALT_ERROR", "Internal micro-controller halt", B::kResetGpu},
    {63, "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event", B::kIgnore},
    {64, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", B::kResetGpu},
    {65, "ROBUST_CHANNEL_NVENC1_ERROR", "Unused", B::kContactSupport},
    {66, "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "Illegal access by driver", B::kIgnore},
    {67, "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "Illegal access by driver", B::kIgnore},
    {68, "ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 Exception", B::kRestartApp},
    {69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error", B::kRestartApp},
    {70, "ROBUST_CHANNEL_CE3_ERROR", "CE3: Unknown Error", B::kRestartApp},
    {71, "ROBUST_CHANNEL_CE4_ERROR", "CE4: Unknown Error", B::kRestartApp},
    {72, "ROBUST_CHANNEL_CE5_ERROR", "CE5: Unknown Error", B::kRestartApp},
    {73, "ROBUST_CHANNEL_NVENC2_ERROR", "Unused", B::kContactSupport},
    {74, "NVLINK_ERROR", "NVLINK Error", B::kWorkflowNvlinkErr},
    {75, "ROBUST_CHANNEL_CE6_ERROR", "CE6: Unknown Error", B::kRestartApp},
    {76, "ROBUST_CHANNEL_CE7_ERROR", "CE7: Unknown Error", B::kRestartApp},
    {77, "ROBUST_CHANNEL_CE8_ERROR", "CE8: Unknown Error", B::kRestartApp},
    {78, "VGPU_START_ERROR", "vGPU Start Error", B::kUpdateSwFw},
    {79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", B::kRestartBm},
    {80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", "Corrupted data sent to GPU", B::kRestartApp},
    {81, "ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR", "Unused", B::kContactSupport},
    {82, "ROBUST_CHANNEL_NVJPG0_ERROR", "NVJPG0 Error", B::kRestartApp},
    {83, "ROBUST_CHANNEL_NVDEC1_ERROR", "NVDEC1 Error", B::kRestartApp},
    {84, "ROBUST_CHANNEL_NVDEC2_ERROR", "NVDEC2 Error", B::kRestartApp},
    {85, "ROBUST_CHANNEL_CE9_ERROR", "CE9: Unknown Error", B::kRestartApp},
    {86, "ROBUST_CHANNEL_OFA0_ERROR", "OFA Exception", B::kRestartApp},
    {87, "NVTELEMETRY_DRIVER_REPORT", "Unused", B::kContactSupport},
    {88, "ROBUST_CHANNEL_NVDEC3_ERROR", "NVDEC3 Error", B::kRestartApp},
    {89, "ROBUST_CHANNEL_NVDEC4_ERROR", "NVDEC4 Error", B::kRestartApp},
    {90, "LTC_ERROR", "Unused", B::kContactSupport},
    {91, "RESERVED_XID", "Unused", B::kContactSupport},
    {92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", B::kIgnore},
    {93, "INFOROM_ERASE_LIMIT_EXCEEDED", "Non-fatal violation of provisioned InfoROM wear limit",
     B::kIgnore},
    {94, "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error", B::kRestartApp},
    {95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error", B::kResetGpu},
    {96, "ROBUST_CHANNEL_NVDEC5_ERROR", "NVDEC5 Error", B::kRestartApp},
    {97, "ROBUST_CHANNEL_NVDEC6_ERROR", "NVDEC6 Error", B::kRestartApp},
    {98, "ROBUST_CHANNEL_NVDEC7_ERROR", "NVDEC7 Error", B::kRestartApp},
    {99, "ROBUST_CHANNEL_NVJPG1_ERROR", "NVJPG1 Error", B::kRestartApp},
    {100, "ROBUST_CHANNEL_NVJPG2_ERROR", "NVJPG2 Error", B::kRestartApp},
    {101, "ROBUST_CHANNEL_NVJPG3_ERROR", "NVJPG3 Error", B::kRestartApp},
    {102, "ROBUST_CHANNEL_NVJPG4_ERROR", "NVJPG4 Error", B::kRestartApp},
    {103, "ROBUST_CHANNEL_NVJPG5_ERROR", "NVJPG5 Error", B::kRestartApp},
    {104, "ROBUST_CHANNEL_NVJPG6_ERROR", "NVJPG6 Error", B::kRestartApp},
    {105, "ROBUST_CHANNEL_NVJPG7_ERROR", "NVJPG7 Error", B::kRestartApp},
    {106, "SMBPBI_TEST_MESSAGE", "SMBPBI Test Message", B::kIgnore},
    {107, "SMBPBI_TEST_MESSAGE_SILENT", "SMBPBI Test Message Silent", B::kIgnore},
    {108, "NVLINK_REMOTE_TRANSLATION_ERROR", "Unused", B::kIgnore},
    {109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context Switch Timeout Error", B::kResetGpu},
    {110, "SEC_FAULT_ERROR", "Security Fault Error", B::kResetGpu},
    {111, "BUNDLE_ERROR_EVENT", "Unused", B::kContactSupport},
    {112, "DISP_SUPERVISOR_ERROR", "Unused", B::kContactSupport},
    {113, "DP_LT_FAILURE", "Unused", B::kContactSupport},
    {114, "HEAD_RG_UNDERFLOW", "Unused", B::kContactSupport},
    {115, "CORE_CHANNEL_REGS", "Unused", B::kContactSupport},
    {116, "WINDOW_CHANNEL_REGS", "Unused", B::kContactSupport},
    {117, "CURSOR_CHANNEL_REGS", "Unused", B::kContactSupport},
    {118, "HEAD_REGS", "Unused", B::kContactSupport},
    {119, "GSP_RPC_TIMEOUT", "GSP RPC Timeout", B::kResetGpu},
    {120, "GSP_ERROR", "GSP Error", B::kResetGpu},
    {121, "C2C_ERROR", "C2C Error", B::kIgnore},
    {122, "SPI_PMU_RPC_READ_FAIL", "Unused", B::kContactSupport},
    {123, "SPI_PMU_RPC_WRITE_FAIL", "Unused", B::kContactSupport},
    {124, "SPI_PMU_RPC_ERASE_FAIL", "Unused", B::kContactSupport},
    {125, "INFOROM_FS_ERROR", "Unused", B::kContactSupport},
    {126, "ROBUST_CHANNEL_CE10_ERROR", "CE10: Unknown Error", B::kRestartApp},
    {127, "ROBUST_CHANNEL_CE11_ERROR", "CE11: Unknown Error", B::kRestartApp},
    {128, "ROBUST_CHANNEL_CE12_ERROR", "CE12: Unknown Error", B::kRestartApp},
    {129, "ROBUST_CHANNEL_CE13_ERROR", "CE13: Unknown Error", B::kRestartApp},
    {130, "ROBUST_CHANNEL_CE14_ERROR", "CE14: Unknown Error", B::kRestartApp},
    {131, "ROBUST_CHANNEL_CE15_ERROR", "CE15: Unknown Error", B::kRestartApp},
    {132, "ROBUST_CHANNEL_CE16_ERROR", "CE16: Unknown Error", B::kRestartApp},
    {133, "ROBUST_CHANNEL_CE17_ERROR", "CE17: Unknown Error", B::kRestartApp},
    {134, "ROBUST_CHANNEL_CE18_ERROR", "CE18: Unknown Error", B::kRestartApp},
    {135, "ROBUST_CHANNEL_CE19_ERROR", "CE19: Unknown Error", B::kRestartApp},
    {136, "ALI_TRAINING_FAIL", "Link Training Failed", B::kResetGpu},
    {137, "NVLINK_PRIV_ERR", "NVLink Privilege Error", B::kIgnore},
    {138, "ROBUST_CHANNEL_DLA_ERROR", "Unused", B::kContactSupport},
    {139, "ROBUST_CHANNEL_OFA1_ERROR", "OFA1 Error", B::kRestartApp},
    {140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", B::kResetGpu},
    {141, "ROBUST_CHANNEL_FAST_PATH_ERROR", "CUDA Fast Path Error", B::kIgnore},
    {142, "ROBUST_CHANNEL_NVENC3_ERROR", "NVENC3 Error", B::kContactSupport},
    {143, "GPU_INIT_ERROR", "GPU Initialization Error", B::kResetGpu},
    {144, "NVLINK_SAW_ERROR", "NVLINK: SAW Error", B::kWorkflowNvlink5Err},
    {145, "NVLINK_RLW_ERROR", "NVLINK: RLW Error", B::kWorkflowNvlink5Err},
    {146, "NVLINK_TLW_ERROR", "NVLINK: TLW Error", B::kWorkflowNvlink5Err},
    {147, "NVLINK_TREX_ERROR", "NVLINK: TREX Error", B::kWorkflowNvlink5Err},
    {148, "NVLINK_NVLPW_CTRL_ERROR", "NVLINK: NVLPW_CTRL Error", B::kWorkflowNvlink5Err},
    {149, "NVLINK_NETIR_ERROR", "NVLINK: NETIR Error", B::kWorkflowNvlink5Err},
    {150, "NVLINK_MSE_ERROR", "NVLINK: MSE Error", B::kWorkflowNvlink5Err},
    {151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "Key rotation Error", B::kRestartVm},
    {152, "ROBUST_CHANNEL_DLA_SMMU_ERROR", "DLA SMMU Error", B::kIgnore},
    {153, "ROBUST_CHANNEL_DLA_TIMEOUT", "DLA timeout Error", B::kIgnore},
    {154, "GPU_RECOVERY_ACTION_CHANGED", "GPU Recovery Action Changed", B::kXid154},
    {155, "NVLINK_SW_DEFINED_ERROR", "NVLINK: SW Defined Error", B::kResetGpu},
    {156, "RESOURCE_RETIREMENT_EVENT", "Resource Retirement Event", B::kResetGpu},
    {157, "RESOURCE_RETIREMENT_FAILURE", "Resource Retirement Failure", B::kIgnore},
    {158, "GPU_FATAL_TIMEOUT", "GPU Fatal Timeout", B::kResetGpu},
    {159, "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHI Non-Data Error", B::kCheckUvm},
    {160, "CHANNEL_RETIREMENT_EVENT", "Channel Retirement Event", B::kIgnore},
    {161, "CHANNEL_RETIREMENT_FAILURE", "Channel Retirement Failure", B::kIgnore},
    {162, "PSHC_REENGAGED", "Power Smoothing HW Circuitry capability reengaged", B::kNone},
    {163, "PSHC_DISENGAGED", "Power Smoothing HW Circuitry capability disengaged", B::kNone},
    {164, "PSHC_LOW_LIFETIME", "Power Smoothing HW Circuitry low lifetime reached", B::kNone},
    {165, "PSHC_ZERO_LIFETIME", "Power Smoothing HW Circuitry lifetime exhausted", B::kNone},
    {166, "NVLINK_SECURE_CRYPTO_ERR",
     "Confidential-computing traffic seen before the link was configured for encryption", B::kNone},
    {167, "PCIE_FATAL_TIMEOUT", "PCIe fatal timeout", B::kNone},
    {168, "REDUCED_GPU_MEMORY_CAPACITY", "Errors found in WPR (write protected region)", B::kNone},
    {169, "SEC2_HALT_ERROR", "Internal micro-controller halt", B::kNone},
    {170, "NVLINK_SECURE_OTHER", "Interrupt seen in confidential-computing mode", B::kNone},
    {171, "UNCORRECTABLE_DRAM_ERROR", "Details of an Xid 48 (DRAM)", B::kNone},
    {172, "UNCORRECTABLE_SRAM_ERROR", "Details of an Xid 48 (SRAM)", B::kNone},
    // Defined by newer drivers; the catalog revision above has no row (and no bucket) for them.
    {173, "(not in the catalog)", "C2C fatal link failure", B::kNone},
    {185, "(not in the catalog)", "Sparing event", B::kNone},
};

// Where gpuheal's severity differs from BucketSeverity(bucket), and why. 61 and 62 come from the
// product's severity matrix (13/31 warn, 45 critical, 48 fatal and 79 catastrophic already follow
// their buckets; 43 follows NVIDIA's IGNORE, see the classifier); the rest follow ARCHITECTURE.md
// or fill buckets NVIDIA has not assigned yet.
struct Deviation {
  int xid;
  Severity severity;
  std::string_view why;
};
constexpr Deviation kDeviations[] = {
    {61, Severity::kFatal,
     "product matrix: micro-controller breakpoint on pre-Ampere GPUs precedes a halt; node is "
     "quarantined (NVIDIA: CONTACT_SUPPORT, unused on Ampere+)"},
    {62, Severity::kFatal,
     "product matrix: micro-controller halt; node is quarantined rather than reset in place "
     "(NVIDIA: RESET_GPU)"},
    {64, Severity::kFatal,
     "row-remap failure: the memory cannot be repaired in place, so the node is quarantined for "
     "inspection (NVIDIA: RESET_GPU)"},
    {95, Severity::kFatal,
     "uncontained memory error affects every application on the GPU; quarantine the node "
     "(NVIDIA: RESET_GPU)"},
    {140, Severity::kFatal,
     "unrecovered ECC error escaped row remapping; quarantine the node (NVIDIA: RESET_GPU)"},
    {162, Severity::kInfo, "no NVIDIA bucket yet: power-smoothing capability came back"},
    {167, Severity::kFatal,
     "no NVIDIA bucket yet: a fatal PCIe timeout is a bus fault; quarantine like Xid 79's "
     "precursors"},
    {169, Severity::kFatal, "no NVIDIA bucket yet: the same micro-controller halt as Xid 62"},
    {171, Severity::kFatal,
     "no NVIDIA bucket yet: details of a double-bit error, treated as Xid 48"},
    {172, Severity::kFatal,
     "no NVIDIA bucket yet: details of a double-bit error, treated as Xid 48"},
    {173, Severity::kFatal,
     "no NVIDIA bucket yet: the fatal loss of the CPU-GPU (C2C) link takes the GPU out of service; "
     "quarantine"},
};

constexpr Severity SeverityOf(Bucket b) {
  switch (b) {
    case B::kIgnore:
    case B::kXid154:  // the real severity comes from the recovery action in the line
      return Severity::kInfo;
    case B::kNone:
    case B::kContactSupport:
    case B::kRestartApp:
    case B::kUpdateSwFw:
    case B::kCheckUvm:
      return Severity::kWarn;
    case B::kResetGpu:
    case B::kWorkflowXid45:
    case B::kWorkflowNvlink5Err:
      return Severity::kCritical;
    case B::kWorkflowXid48:
    case B::kWorkflowNvlinkErr:
    case B::kRestartVm:
    case B::kCheckMechanicals:
      return Severity::kFatal;
    case B::kRestartBm:
      return Severity::kCatastrophic;
  }
  return Severity::kWarn;
}

constexpr std::array<XidInfo, std::size(kRows)> BuildCatalog() {
  std::array<XidInfo, std::size(kRows)> out{};
  for (size_t i = 0; i < std::size(kRows); ++i) {
    const Row& r = kRows[i];
    const Severity sev = SeverityOf(r.bucket);
    out[i] = XidInfo{r.xid, r.mnemonic, r.description, r.bucket, sev, {}};
    for (const Deviation& d : kDeviations) {
      if (d.xid == r.xid) {
        out[i].severity = d.severity;
        out[i].deviation = d.why;
      }
    }
  }
  return out;
}

constexpr auto kCatalog = BuildCatalog();

// Sorted, and dense for the catalog's own range: Xid N (N <= 172) lives at index N-1.
static_assert([] {
  for (size_t i = 0; i < kCatalog.size(); ++i) {
    if (kCatalog[i].xid <= 172 && kCatalog[i].xid != static_cast<int>(i) + 1) return false;
    if (i > 0 && kCatalog[i - 1].xid >= kCatalog[i].xid) return false;
  }
  return true;
}());

}  // namespace

Severity BucketSeverity(Bucket b) { return SeverityOf(b); }

bool ApplicationXid(int xid, bool names_process) {
  const XidInfo* info = FindXid(xid);
  if (!info) return false;
  return info->bucket == B::kRestartApp || (info->bucket == B::kIgnore && names_process);
}

std::string_view EscalationRuleOf(const XidInfo& x) {
  if (x.severity >= Severity::kFatal) return "none: already fatal or worse";
  if (x.bucket == B::kRestartApp) {
    return "application fault: raised only by distinct_workloads (different programs on one GPU "
           "while the "
           "others stay clean) or hardware_signal (a memory fault of the same GPU), never by "
           "repeats of one program";
  }
  if (x.bucket == B::kIgnore) {
    return "info, never raised; with the stopped process named it is an application fault, raised "
           "only by "
           "distinct_workloads or hardware_signal";
  }
  if (x.bucket == B::kXid154) return "by the recovery action in the line, not by repetition";
  return "repeated_incidents: count incidents of it on one GPU within the window";
}

std::string_view ConsequenceRuleOf(int xid) {
  switch (xid) {
    case 45:
      return "follows any other Xid on the same GPU within 10 s (NVIDIA: Not Solo: IGNORE, follow "
             "the other Xid)";
    case 43:
      return "follows Xid 13, 31 or 45 of the same process (or channel) within 10 s";
    case 79:
      return "its \"GPU has fallen off the bus\" text within 10 s follows it";
    default:
      return "a line saying \"caused by previous Xid N\" follows Xid N";
  }
}

bool HardwareSignalXid(int xid) {
  switch (xid) {
    case 48:   // double-bit ECC error
    case 63:   // row remapping event
    case 64:   // row remapping failure
    case 92:   // high single-bit ECC error rate
    case 94:   // contained memory error
    case 95:   // uncontained memory error
    case 140:  // ECC error escaped row remapping
    case 171:
    case 172:  // details of an Xid 48
      return true;
    default:
      return false;
  }
}

const XidInfo* FindXid(int xid) {
  const auto it = std::lower_bound(kCatalog.begin(), kCatalog.end(), xid,
                                   [](const XidInfo& x, int v) { return x.xid < v; });
  return it != kCatalog.end() && it->xid == xid ? &*it : nullptr;
}

std::string_view CatalogCoverage() {
  return "NVIDIA's Xid catalog for Ampere and newer (its rows name driver branches R565 to R575; "
         "checked "
         "against R580 lines): Xids 1-172 with NVIDIA's buckets and its Xid 144-150 decode sheet; "
         "Xids 173 and "
         "185 of newer drivers, without a bucket; any other Xid is reported as a warning";
}

std::span<const XidInfo> AllXids() { return kCatalog; }

Severity RecoveryActionSeverity(int action) {
  switch (action) {
    case 0:
      return Severity::kInfo;  // none
    case 1:                    // GPU reset
    case 3:                    // drain P2P
    case 4:                    // drain and reset
      return Severity::kCritical;
    case 2:  // node reboot
    case 6:  // bus reset
    case 7:  // system reboot
      return Severity::kFatal;
    case 5:
      return Severity::kWarn;  // recover IMEX domain: a fabric action, not this node's GPUs
    default:
      return Severity::kInfo;
  }
}

std::string_view RecoveryActionName(int action) {
  switch (action) {
    case 0:
      return "None";
    case 1:
      return "GPU Reset Required";
    case 2:
      return "Node Reboot Required";
    case 3:
      return "Drain P2P";
    case 4:
      return "Drain and Reset";
    case 5:
      return "Recover IMEX Domain";
    case 6:
      return "Bus Reset";
    case 7:
      return "System Reboot";
    default:
      return "Unknown";
  }
}

}  // namespace gpuheal
