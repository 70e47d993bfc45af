#pragma once
// NVIDIA's WORKFLOW_NVLINK5_ERR for Xids 144-150 (the "Xid 144-150 Decode" sheet of the Xid
// catalog). A line reads "UNIT Fatal|Nonfatal XCn in Link NN (0xINTRINFO 0xERRORSTATUS ...)".
// The first register (IntrInfo) names the unit in its low bits and, for NETIR link-down events,
// the reason in bits 20-25; the second is the unit's error status. The row those select gives
// NVIDIA's resolution (RESET_GPU, IGNORE or XID_154_EVAL), which decides severity and action,
// not the Fatal/Nonfatal word: some "Fatal" link-down subcodes are rows NVIDIA marks IGNORE.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/severity.h"

namespace gpuheal {

struct Nvlink5Registers {
  uint32_t intrinfo = 0;
  uint32_t status = 0;
  bool has_status = false;  // a line with one register decodes with status 0
};

// Parses the register list "(0xA 0xB ...)" of an NVLink5 Xid line; nullopt without one.
std::optional<Nvlink5Registers> ParseNvlink5Registers(std::string_view text);

enum class Nvlink5Resolution { kIgnore, kResetGpu, kXid154Eval };
std::string_view ToString(Nvlink5Resolution r);

// One row of the decode sheet. Patterns are the sheet's: 32 characters, bit 31 first, '-' for
// "any"; V1 is the IntrInfo layout before driver R575, V2 the one from R575 on.
struct Nvlink5Row {
  int xid;
  std::string_view unit;
  std::string_view pattern_v1;
  std::string_view pattern_v2;
  uint32_t status;  // the error status this row is for (a bit, or a value for BER/MFDE/NETIR)
  Nvlink5Resolution resolution;
  std::string_view nvidia_severity;  // the sheet's word: Fatal, Non-fatal, Link Fatal, ...
  std::string_view investigatory;    // NVIDIA's investigatory action
  bool second_action_reset = false;  // the sheet's second action is RESET_GPU
};

std::span<const Nvlink5Row> Nvlink5Rows();

struct Nvlink5Decision {
  Severity severity = Severity::kWarn;
  Nvlink5Resolution resolution = Nvlink5Resolution::kIgnore;
  std::string unit;    // the sheet's unit of the deciding row
  std::string decode;  // the rows that decided, in NVIDIA's terms
};

// The decision of the rows the registers select: any RESET_GPU row → critical (reset the GPU);
// else XID_154_EVAL → warn (the Xid 154 the driver prints with it carries the action); else
// IGNORE → info, or warn where the sheet still calls the row fatal or asks for a GPU reset as
// its second action (repeats escalate). nullopt when no row matches (the caller falls back to
// the line's Fatal/Nonfatal word and says the row is not in the sheet).
std::optional<Nvlink5Decision> DecideNvlink5(int xid, const Nvlink5Registers& r);

}  // namespace gpuheal
