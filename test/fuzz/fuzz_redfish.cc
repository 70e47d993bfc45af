// Fuzzes the decoders of a BMC's Redfish answers (bmc/redfish.h): a ComputerSystem, a Systems
// collection, an ActionInfo and an error body. A BMC is outside gpuheal's trust: any bytes give
// a value within its bounds or an error, never a crash.

#include <cstdint>
#include <string_view>

#include "bmc/redfish.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto s = gpuheal::bmc::DecodeSystem(text); s.ok()) {
    if (s->reset_target.empty() || s->reset_target[0] != '/') __builtin_trap();
    if (s->reset_types.size() > 32 || s->power_state.size() > 32) __builtin_trap();
    auto t = gpuheal::bmc::ChooseResetType(*s, {"PowerCycle", "ForceRestart"});
    if (t.ok() && *t != "PowerCycle" && *t != "ForceRestart") __builtin_trap();
  }
  if (auto m = gpuheal::bmc::DecodeMembers(text); m.ok()) {
    if (m->size() > 64) __builtin_trap();
    for (const auto& id : *m) {
      if (id.empty() || id[0] != '/') __builtin_trap();
    }
  }
  if (auto a = gpuheal::bmc::DecodeActionInfoResetTypes(text); a.ok() && a->size() > 32)
    __builtin_trap();
  if (gpuheal::bmc::DecodeErrorMessage(text).size() > 2048) __builtin_trap();
  (void)gpuheal::bmc::ParseEndpoint(text);
  return 0;
}
