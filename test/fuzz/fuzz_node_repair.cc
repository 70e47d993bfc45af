// Fuzzes a NodeRepair as the API server sends it (anyone allowed to write the status could have
// written it): decoded with simdjson or refused, never a crash; and a record without
// status.steps read through the migration from its actions (MigrateActions): every step it makes
// is a known kind, at most one per action plus the legacy rung, and the second read changes
// nothing.

#include <cstdint>
#include <string_view>

#include "controller/record.h"
#include "controller/steps.h"
#include "kube/objects.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto decoded = gpuheal::kube::DecodeNodeRepair(text);
  if (!decoded) return 0;
  const bool had_steps = !decoded->steps.empty();
  auto r = gpuheal::controller::RepairRecord::Read(*decoded);
  if (had_steps && r.dirty) __builtin_trap();  // a record with steps is read as it is
  if (!had_steps) {
    if (r.cr.steps.size() > r.cr.actions.size() + 1) __builtin_trap();
    for (const auto& s : r.cr.steps) {
      if (!gpuheal::controller::ParseStep(s.kind)) __builtin_trap();
    }
  }
  if (gpuheal::controller::MigrateActions(r.cr)) __builtin_trap();  // read once
  (void)r.RungStarted();
  (void)r.RungSince();
  (void)gpuheal::controller::StepsJson(r.cr.steps).dump();
  return 0;
}
