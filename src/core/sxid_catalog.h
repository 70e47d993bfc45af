#pragma once
// NVSwitch SXids: NVIDIA's classification and action for each SXid the Fabric Manager User Guide
// lists (its SXid error tables), instead of the Fatal/Non-fatal word of the line alone.

#include <optional>
#include <span>
#include <string_view>

#include "core/severity.h"

namespace gpuheal {

enum class SxidClass {
  kNonFatal,     // the guide's non-fatal SXids
  kFatal,        // fatal: resets depend on the port's scope
  kAlwaysFatal,  // always fatal: the host (or a secondary bus reset) must restart the fabric
};

struct SxidInfo {
  int sxid;
  SxidClass cls;
  std::string_view nvidia_action;  // NVIDIA's action, in the guide's terms
  Severity severity;               // gpuheal's
  std::string_view why;            // why that severity, in NVIDIA's words where they exist
};

std::string_view ToString(SxidClass c);

// nullptr for an SXid the tables do not list: the line's Fatal/Non-fatal word decides then.
const SxidInfo* FindSxid(int sxid);
std::span<const SxidInfo> AllSxids();

// The severity of an SXid line: the table's when it lists the SXid, else fatal for a line marked
// Fatal and warn otherwise.
Severity SxidSeverity(int sxid, bool line_says_fatal);

}  // namespace gpuheal
