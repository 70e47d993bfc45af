// Fuzzes the agent's YAML config loader: any bytes give a config or an error, never a crash.

#include <cstdint>
#include <string_view>

#include "agent/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;  // yaml-cpp recursion on deep nesting is bounded by input size
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cfg = gpuheal::ParseAgentConfig(text, "fuzz.yaml");
  if (!cfg.ok() && cfg.error().message.rfind("fuzz.yaml", 0) != 0) __builtin_trap();
  return 0;
}
