// Fuzzes the NPD rule loader and, for configs that load, RE2 matching of the rules.

#include <cstdint>
#include <string_view>

#include "parse/npd_rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cfg = gpuheal::ParseNpdConfig(text, "fuzz.json");
  if (!cfg.ok()) return 0;
  std::vector<gpuheal::NpdConfig> configs;
  configs.push_back(std::move(*cfg));
  auto m = gpuheal::NpdMatcher::Create(std::move(configs));
  if (!m.ok()) return 0;
  for (std::string_view line : {"INFO: task docker:abc blocked for more than 120 seconds.",
                                "Remounting filesystem read-only", "", "x"}) {
    for (int i : (*m)->Push(line)) (void)(*m)->rule(i);
  }
  return 0;
}
