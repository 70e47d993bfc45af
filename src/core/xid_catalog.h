#pragma once
// The NVIDIA Xid catalog: one source of truth for every Xid NVIDIA's catalog defines (1-172) and
// the newer ones drivers print (173, 185), with NVIDIA's immediate resolution bucket and gpuheal's
// severity and default action. docs/xid.md is generated from this table (`gpuheal explain xid --all
// --markdown`) and lists every deviation with its reason.

#include <span>
#include <string_view>

#include "core/severity.h"

namespace gpuheal {

struct XidInfo {
  int xid;
  std::string_view mnemonic;
  std::string_view description;
  Bucket bucket;
  Severity severity;  // gpuheal's default
  // Why gpuheal's severity differs from the one its bucket implies; empty when it follows NVIDIA.
  std::string_view deviation;
};

// The severity a resolution bucket implies when the product matrix says nothing else.
Severity BucketSeverity(Bucket b);

// True when NVIDIA attributes the Xid to the application rather than the GPU: its bucket is
// RESTART_APP, or IGNORE on a line that names the process it stopped. Such faults act at the
// workload level and escalate to the node only on evidence that points at the hardware.
bool ApplicationXid(int xid, bool names_process);

// True when the Xid is evidence of a memory fault of the GPU itself (double-bit error, row
// remapping, contained or uncontained ECC error, a high single-bit error rate).
bool HardwareSignalXid(int xid);

// How repetition can raise this Xid (docs/xid.md, "Escalation") and which lines of it follow
// another fault, in words for `gpuheal explain xid`.
std::string_view EscalationRuleOf(const XidInfo& x);
std::string_view ConsequenceRuleOf(int xid);

// nullptr for an Xid the catalog does not define.
const XidInfo* FindXid(int xid);
std::span<const XidInfo> AllXids();

// Which catalog revision and driver branches the table covers, in words (`explain xid --all`).
std::string_view CatalogCoverage();

// Xid 154 ("GPU recovery action changed") carries the action the driver now requires.
// Returns the severity that action implies (0 none .. 7 system reboot), or Info when unknown.
Severity RecoveryActionSeverity(int action);
std::string_view RecoveryActionName(int action);

}  // namespace gpuheal
