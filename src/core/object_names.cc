#include "core/object_names.h"

#include <fmt/format.h>

#include <cstdint>

namespace gpuheal {
namespace {

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// The first `keep` characters of `s`, without a trailing '-' or '.' (a segment of a DNS name and
// a label value end in an alphanumeric), then '-' and the hash of all of `s`.
std::string CutAndHash(std::string_view s, size_t keep) {
  std::string_view head = s.substr(0, keep);
  while (!head.empty() && (head.back() == '-' || head.back() == '.')) head.remove_suffix(1);
  return fmt::format("{}-{:016x}", head, Fnv1a(s));
}

}  // namespace

std::string NodeLabelValue(std::string_view node) {
  constexpr size_t kMax = 63;
  if (node.size() <= kMax) return std::string(node);
  return CutAndHash(node, kMax - 17);
}

std::string NameWithSuffix(std::string_view base, std::string_view suffix, size_t max) {
  if (base.size() + 1 + suffix.size() <= max) return fmt::format("{}-{}", base, suffix);
  const size_t keep = max > suffix.size() + 18 ? max - suffix.size() - 18 : 0;
  return fmt::format("{}-{}", CutAndHash(base, keep), suffix);
}

}  // namespace gpuheal
