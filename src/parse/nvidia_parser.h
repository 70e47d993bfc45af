#pragma once
// Parses the NVIDIA driver's kernel messages (NVRM Xid lines, GPU announcements, the
// fallen-off-the-bus variants, NVSwitch SXid lines). Stateless; the classifier stitches the
// three-record fallen-off message together.

#include <optional>
#include <string>
#include <string_view>

#include "core/nvlink5.h"

namespace gpuheal {

enum class NvidiaMessage {
  kNone,
  kXid,           // NVRM: Xid (PCI:dddd:bb:dd[ GPU-I:nn[ GPU-CI:nn]]): N, [pid=.., name=.., ]text
  kGpuAnnounce,   // NVRM: GPU at PCI:dddd:bb:dd: GPU-<uuid>
  kFallenOffBus,  // NVRM: GPU dddd:bb:dd.f: GPU has fallen off the bus. / GPU at ... has fallen ...
  kFallenStart,   // NVRM: The NVIDIA GPU dddd:bb:dd.f
  kFallenMiddle,  // NVRM: (PCI ID: vvvv:dddd) installed in this system has
  kFallenEnd,     // NVRM: fallen off the bus and is not responding to commands.
  kSxid,          // nvidia-nvswitchN: SXid (PCI:dddd:bb:dd.f): N, Non-fatal|Fatal, ...
};

struct NvidiaSignal {
  NvidiaMessage kind = NvidiaMessage::kNone;
  std::string pci;  // normalised
  int number = 0;   // Xid or SXid
  std::optional<int> gpu_instance;
  std::optional<int> compute_instance;
  std::optional<int> pid;  // nullopt when absent or '<unknown>'
  std::string process;     // empty when absent or <unknown>
  std::string_view text;   // the driver's free text after the number (and pid/name)
  std::string uuid;        // kGpuAnnounce
  // NVLink5 (Xid 144-150): "UNIT Fatal|Nonfatal ... (0xREG0 ...)".
  std::string unit;
  std::optional<bool> nvlink_fatal;
  std::optional<int> subcode;                   // bits 20-25 of the first register
  std::optional<Nvlink5Registers> nvlink_regs;  // "(0xINTRINFO 0xSTATUS ...)"
  std::optional<int> link;                      // "Link NN"
  // Xid 154: "... changed from 0x0 (None) to 0x2 (Node Reboot Required)".
  std::optional<int> recovery_action;
  // "channel 0x%08x" in the text: the GPU channel the fault stopped (Xid 13, 31, 43, 45, ...).
  std::optional<unsigned> channel;
  // "caused by previous Xid N": the driver says this line follows from another Xid.
  std::optional<int> previous_xid;
  // SXid: "Fatal" vs "Non-fatal".
  bool sxid_fatal = false;
};

// Returns false (and kind kNone) for messages that are not NVIDIA driver messages we know.
bool ParseNvidia(std::string_view message, NvidiaSignal& out);

// True when the message may be an NVIDIA driver message (cheap pre-filter for the hot path).
inline bool MaybeNvidia(std::string_view message) {
  return message.find("NVRM") != std::string_view::npos ||
         message.find("SXid") != std::string_view::npos;
}

}  // namespace gpuheal
