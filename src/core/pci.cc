#include "core/pci.h"

#include <cctype>

namespace gpuheal {
namespace {

size_t HexRun(std::string_view s, size_t pos, size_t max) {
  size_t n = 0;
  while (pos + n < s.size() && n < max && std::isxdigit(static_cast<unsigned char>(s[pos + n]))) {
    ++n;
  }
  return n;
}

char Lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

}  // namespace

std::optional<PciMatch> ParsePciPrefix(std::string_view s) {
  size_t pos = 0;
  if (s.starts_with("PCI:")) pos = 4;
  const size_t first = HexRun(s, pos, 8);
  std::string domain, bus, dev;
  size_t p = pos + first;
  if (first >= 4 && p < s.size() && s[p] == ':') {
    domain = std::string(s.substr(pos, first));
    ++p;
    if (HexRun(s, p, 3) != 2 || p + 2 >= s.size() || s[p + 2] != ':') return std::nullopt;
    bus = std::string(s.substr(p, 2));
    p += 3;
  } else if (first == 2 && p < s.size() && s[p] == ':') {
    domain = "0000";
    bus = std::string(s.substr(pos, 2));
    p += 1;
  } else {
    return std::nullopt;
  }
  if (HexRun(s, p, 3) != 2) return std::nullopt;
  dev = std::string(s.substr(p, 2));
  p += 2;
  if (p + 1 < s.size() && s[p] == '.' && std::isxdigit(static_cast<unsigned char>(s[p + 1]))) {
    p += 2;
  }
  // Trim leading zeros of long domains to the usual 4 digits ("00000000" -> "0000").
  while (domain.size() > 4 && domain.front() == '0') domain.erase(domain.begin());
  PciMatch m;
  m.id.reserve(10);
  for (char c : domain) m.id.push_back(Lower(c));
  m.id.push_back(':');
  for (char c : bus) m.id.push_back(Lower(c));
  m.id.push_back(':');
  for (char c : dev) m.id.push_back(Lower(c));
  m.consumed = p;
  return m;
}

std::optional<std::string> NormalisePci(std::string_view s) {
  auto m = ParsePciPrefix(s);
  if (!m || m->consumed != s.size()) return std::nullopt;
  return m->id;
}

}  // namespace gpuheal
