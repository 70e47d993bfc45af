// Fuzzes the Slurm drain-reason parser (a node's reason, written by gpuheal, an administrator or
// any tool) and its round trip: whatever ParseReason accepts formats back to a reason it parses
// the same way, within the length limit, on one line.

#include <cstdint>
#include <string_view>

#include "slurm/reason.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto r = gpuheal::slurm::ParseReason(text);
  if (r && !gpuheal::slurm::IsGpuhealReason(text)) __builtin_trap();
  if (!r) return 0;
  if (r->code.empty() || r->more < 0) __builtin_trap();
  const std::string again = gpuheal::slurm::FormatReason(*r);
  if (again.size() > gpuheal::slurm::kMaxReasonBytes) __builtin_trap();
  if (again.find('\n') != std::string::npos) __builtin_trap();
  const auto back = gpuheal::slurm::ParseReason(again);
  if (!back || back->code != r->code) __builtin_trap();
  return 0;
}
