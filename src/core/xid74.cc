#include "core/xid74.h"

#include <fmt/format.h>

#include <charconv>
#include <vector>

namespace gpuheal {
namespace {

struct Row {
  int reg;
  std::vector<int> bits;
  Severity severity;
  std::string_view meaning;
};

// NVIDIA's rows, register by register (first = 0). Severity is gpuheal's reading of the action:
// "can be safely ignored" / "continue operation" -> info; "sympathetic or secondary", "report a
// bug", ECC/parity "if seen more than 2 times" -> warn; "check link mechanical connections",
// "marginal channel SI issue", "a reset of the fabric is required" -> fatal.
const std::vector<Row>& Rows() {
  static const std::vector<Row> rows = {
      {0, {0, 23, 30}, Severity::kInfo, "can be safely ignored"},
      {0,
       {1, 20},
       Severity::kWarn,
       "sympathetic or secondary error: follow the other Xid; solo, report a bug"},
      {0,
       {4, 5},
       Severity::kWarn,
       "likely ECC/parity hardware issue: report it when seen more than 2 times on the link"},
      {0,
       {8, 9, 12, 16, 17, 24, 28},
       Severity::kFatal,
       "possibly hardware: check and re-seat the link's mechanical connections, run diagnostics"},
      {0,
       {21, 22},
       Severity::kFatal,
       "marginal channel signal integrity: check the link's connections, run field diagnostics"},
      {0, {27, 29}, Severity::kWarn, "report a bug when seen repeatedly"},
      {2,
       {0, 1, 2, 6},
       Severity::kWarn,
       "likely ECC/parity hardware issue: report it when seen more than 2 times on the link"},
      {2, {13}, Severity::kWarn, "not expected in production: report a bug"},
      {2, {16, 19}, Severity::kWarn, "run field diagnostics when seen repeatedly"},
      {2, {17, 18}, Severity::kWarn, "report a bug when seen repeatedly"},
      {3,
       {16, 17},
       Severity::kWarn,
       "sympathetic or secondary error: follow the other Xid; solo, report a bug"},
      {3, {18}, Severity::kFatal, "secondary error, but the fabric must be reset"},
      {4,
       {18, 19, 21, 22, 24, 25, 27, 28},
       Severity::kWarn,
       "likely ECC/parity hardware issue: report it when seen more than 2 times on the link"},
      {4,
       {20, 23, 26, 29},
       Severity::kInfo,
       "ECC error threshold exceeded, no uncorrectable error: continue operation"},
  };
  return rows;
}

}  // namespace

std::optional<Xid74Registers> ParseXid74(std::string_view text) {
  const size_t at = text.find("link ");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view s = text.substr(at + 5);
  Xid74Registers r;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), r.link);
  if (ec != std::errc() || p == s.data()) return std::nullopt;
  s.remove_prefix(static_cast<size_t>(p - s.data()));
  if (!s.starts_with("(")) return std::nullopt;
  s.remove_prefix(1);
  for (size_t i = 0; i < r.reg.size(); ++i) {
    while (s.starts_with(" ")) s.remove_prefix(1);
    if (!s.starts_with("0x")) return std::nullopt;
    s.remove_prefix(2);
    auto [q, ec2] = std::from_chars(s.data(), s.data() + s.size(), r.reg[i], 16);
    if (ec2 != std::errc() || q == s.data()) return std::nullopt;
    s.remove_prefix(static_cast<size_t>(q - s.data()));
    if (!s.starts_with(i + 1 < r.reg.size() ? "," : ")")) return std::nullopt;
    s.remove_prefix(1);
  }
  return r;
}

Xid74Decision DecideXid74(const Xid74Registers& r) {
  Xid74Decision d;
  d.severity = Severity::kInfo;
  std::vector<std::string> parts;
  for (int reg : {0, 2, 3, 4}) {
    for (int bit = 0; bit < 32; ++bit) {
      if (!((r.reg[static_cast<size_t>(reg)] >> bit) & 1u)) continue;
      const Row* row = nullptr;
      for (const Row& candidate : Rows()) {
        if (candidate.reg != reg) continue;
        for (int b : candidate.bits) {
          if (b == bit) row = &candidate;
        }
      }
      const Severity sev = row ? row->severity : Severity::kWarn;
      if (sev > d.severity) d.severity = sev;
      parts.push_back(fmt::format("register {} bit {}: {}", reg, bit,
                                  row ? row->meaning : "not in NVIDIA's sheet: report a bug"));
    }
  }
  if (parts.empty()) {
    d.severity = Severity::kWarn;  // no valid register bit set: nothing to decode, report it
    parts.push_back("no bit set in the registers NVIDIA decodes (first, third, fourth, fifth)");
  }
  for (size_t i = 0; i < parts.size(); ++i) d.decode += (i ? "; " : "") + parts[i];
  return d;
}

}  // namespace gpuheal
