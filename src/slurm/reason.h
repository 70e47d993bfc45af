#pragma once
// The reason gpuheal gives Slurm when it drains a node: a public contract (docs/slurm.md,
// golden-tested), read by operators in `sinfo -R` and by tools, and by gpuheal itself to tell
// its own drains from an administrator's (it resumes only its own).
//
//   gpuheal: <ReasonCode>[ GPU <pci bus id>] <message>[ (+N more)]
//
// At most kMaxReasonBytes bytes: the message is cut (ending in "...") to fit.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gpuheal::slurm {

inline constexpr std::string_view kReasonPrefix = "gpuheal: ";
inline constexpr size_t kMaxReasonBytes = 256;

struct DrainReason {
  std::string code;     // a reason code of the catalog: NvidiaXID79Error, KernelSoftLockup, ...
  std::string gpu;      // the GPU's PCI bus id ("0000:3b:00"); "" for a node-level fault
  std::string message;  // one line
  int more = 0;         // further active faults not named
  bool operator==(const DrainReason&) const = default;
};

std::string FormatReason(const DrainReason& r);
// True for a reason gpuheal wrote (its prefix).
inline bool IsGpuhealReason(std::string_view reason) { return reason.starts_with(kReasonPrefix); }
// The parts of a reason gpuheal wrote; nullopt for anyone else's.
std::optional<DrainReason> ParseReason(std::string_view reason);

// The format with worked examples, as `gpuheal explain contracts` lists it (golden-tested).
std::string ReasonContractListing();

}  // namespace gpuheal::slurm
