#include "core/nvlink5.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <vector>

namespace gpuheal {
namespace {

using R = Nvlink5Resolution;

// Source: NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html,
// the spreadsheet's "Xid 144-150 Decode" sheet): unit, IntrInfo patterns (pre-R575 and R575+),
// error status, immediate resolution, severity and investigatory action, one row per sheet row.
constexpr Nvlink5Row kRows[] = {
    {144, "SAW_MVB", "------000000----------0000100001", "------000000-------------0000001",
     0x00000001, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {144, "SAW_MVB", "------000000----------0000100001", "------000000-------------0000001",
     0x00000002, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
    {144, "SAW_MVB", "------000000----------0000100001", "------000000-------------0000001",
     0x00000004, R::kIgnore, "Non-fatal", "IGNORE"},
    {144, "SAW_MVB", "------000000----------0000100001", "------000000-------------0000001",
     0x00000008, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {144, "SAW_MVB", "------000000----------0000100001", "------000000-------------0000001",
     0x00000010, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
    {144, "SAW_MVB", "------000000----------0000100001", "------000000-------------0000001",
     0x00000020, R::kIgnore, "Non-fatal", "IGNORE"},
    {145, "RLW_CTRL", "------000000----------0001100010", "------000000-------------0000011",
     0x80000000, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {145, "RLW_REMAP", "------000000----------0010000010", "------000000-------------0000100",
     0x00000001, R::kXid154Eval, "Non-fatal", "CONTACT_SUPPORT"},
    {145, "RLW_REMAP", "------000000----------0010000010", "------000000-------------0000100",
     0x00000002, R::kXid154Eval, "Non-fatal", "CONTACT_SUPPORT"},
    {145, "RLW_REMAP", "------000000----------0010000010", "------000000-------------0000100",
     0x00000004, R::kXid154Eval, "Non-fatal", "CHECK_NVLINK_FAILURE_FLOW"},
    {145, "RLW_REMAP", "------000000----------0010000010", "------000000-------------0000100",
     0x00000008, R::kXid154Eval, "Non-fatal", "CHECK_NVLINK_FAILURE_FLOW"},
    {145, "RLW_REMAP", "------000000----------0010000010", "------000000-------------0000100",
     0x00000010, R::kXid154Eval, "Non-fatal", "CHECK_NVLINK_FAILURE_FLOW"},
    {145, "RLW_REMAP", "------000000----------0010000010", "------000000-------------0000100",
     0x00000020, R::kXid154Eval, "Non-fatal", "CHECK_NVLINK_FAILURE_FLOW"},
    {145, "RLW_REMAP", "------000000----------0010000010", "------000000-------------0000100",
     0x00000040, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
    {145, "RLW_REMAP", "------000000----------0010000010", "------000000-------------0000100",
     0x00000080, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
    {145, "RLW_REMAP", "------000000----------0010000010", "------000000-------------0000100",
     0x00000100, R::kIgnore, "Non-fatal", "IGNORE"},
    {145, "RLW_REMAP", "------000000----------0010000010", "------000000-------------0000100",
     0x00000200, R::kIgnore, "Non-fatal", "IGNORE"},
    {145, "RLW_REMAP", "------000000----------0010000010", "------000000-------------0000100",
     0x80000000, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {145, "RLW_RSPCOL", "------000000----------0010100010", "------000000-------------0000101",
     0x00000001, R::kIgnore, "Non-fatal", "IGNORE"},
    {145, "RLW_RSPCOL", "------000000----------0010100010", "------000000-------------0000101",
     0x00000002, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
    {145, "RLW_RSPCOL", "------000000----------0010100010", "------000000-------------0000101",
     0x80000000, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {145, "RLW_RXPIPE", "------000000---------00011000010", "------000000------------00000110",
     0x00000001, R::kIgnore, "Non-fatal*", "CONTACT_SUPPORT", true},
    {145, "RLW_RXPIPE", "------000000---------00011000010", "------000000------------00000110",
     0x00000002, R::kIgnore, "Non-fatal*", "CONTACT_SUPPORT", true},
    {145, "RLW_RXPIPE", "------000000---------00011000010", "------000000------------00000110",
     0x00000004, R::kIgnore, "Non-fatal*", "CONTACT_SUPPORT", true},
    {145, "RLW_RXPIPE", "------000000----------0011000010", "------000000-------------0000110",
     0x00000008, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {145, "RLW_RXPIPE", "------000000----------0011000010", "------000000-------------0000110",
     0x80000000, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {145, "RLW_SRC_TRACK", "------000000----------0011100010", "------000000-------------0000111",
     0x00000001, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
    {145, "RLW_SRC_TRACK", "------000000----------0011100010", "------000000-------------0000111",
     0x00000002, R::kIgnore, "Non-fatal", "IGNORE"},
    {145, "RLW_SRC_TRACK", "------000000----------0011100010", "------000000-------------0000111",
     0x00000004, R::kXid154Eval, "Non-fatal", "IGNORE"},
    {145, "RLW_SRC_TRACK", "------000000----------0011100010", "------000000-------------0000111",
     0x00000008, R::kXid154Eval, "Non-fatal", "IGNORE"},
    {145, "RLW_SRC_TRACK", "------000000----------0011100010", "------000000-------------0000111",
     0x00000010, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
    {145, "RLW_SRC_TRACK", "------000000----------0011100010", "------000000-------------0000111",
     0x00000020, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
    {145, "RLW_SRC_TRACK", "------000000----------0011100010", "------000000-------------0000111",
     0x80000000, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {145, "RLW_TAGSTATE", "------000000----------0100000010", "------000000-------------0001000",
     0x00000001, R::kIgnore, "Non-fatal", "IGNORE"},
    {145, "RLW_TAGSTATE", "------000000----------0100000010", "------000000-------------0001000",
     0x00000002, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
    {145, "RLW_TAGSTATE", "------000000----------0100000010", "------000000-------------0001000",
     0x00010000, R::kIgnore, "Non-fatal", "IGNORE"},
    {145, "RLW_TAGSTATE", "------000000----------0100000010", "------000000-------------0001000",
     0x00020000, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
    {145, "RLW_TAGSTATE", "------000000----------0100000010", "------000000-------------0001000",
     0x00100000, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
    {145, "RLW_TAGSTATE", "------000000----------0100000010", "------000000-------------0001000",
     0x80000000, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {146, "TLW_CTRL", "------000000----------0100100011", "------000000-------------0001001",
     0x00000001, R::kIgnore, "Non-fatal", "IGNORE"},
    {146, "TLW_CTRL", "------000000----------0100100011", "------000000-------------0001001",
     0x00000002, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {146, "TLW_CTRL", "------000000----------0100100011", "------000000-------------0001001",
     0x00000004, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
    {146, "TLW_CTRL", "------000000----------0100100011", "------000000-------------0001001",
     0x80000000, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {146, "TLW_RX/TLW_RX_PIPE0", "------000000----------0101000011",
     "------000000-------------0001010", 0x00000001, R::kIgnore, "Non-fatal", "IGNORE"},
    {146, "TLW_RX/TLW_RX_PIPE0", "------000000----------0101000011",
     "------000000-------------0001010", 0x00000002, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {146, "TLW_RX/TLW_RX_PIPE0", "------000000----------0101000011",
     "------000000-------------0001010", 0x00000004, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
    {146, "TLW_RX/TLW_RX_PIPE0", "------000000----------0101000011",
     "------000000-------------0001010", 0x80000000, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {146, "TLW_RX/TLW_RX_PIPE1", "------000000----------0101000011",
     "------000000-------------0001011", 0x00000001, R::kIgnore, "Non-fatal", "IGNORE"},
    {146, "TLW_RX/TLW_RX_PIPE1", "------000000----------0101000011",
     "------000000-------------0001011", 0x00000002, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {146, "TLW_RX/TLW_RX_PIPE1", "------000000----------0101000011",
     "------000000-------------0001011", 0x00000004, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
    {146, "TLW_RX/TLW_RX_PIPE1", "------000000----------0101000011",
     "------000000-------------0001011", 0x80000000, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {146, "TLW_TX/TLW_TX_PIPE0", "------000000----------0101100011",
     "------000000-------------0001100", 0x00000001, R::kIgnore, "Non-fatal", "IGNORE"},
    {146, "TLW_TX/TLW_TX_PIPE0", "------000000----------0101100011",
     "------000000-------------0001100", 0x00000002, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {146, "TLW_TX/TLW_TX_PIPE0", "------000000----------0101100011",
     "------000000-------------0001100", 0x00000004, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
    {146, "TLW_TX/TLW_TX_PIPE0", "------000000----------0101100011",
     "------000000-------------0001100", 0x80000000, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {146, "TLW_TX/TLW_TX_PIPE1", "------000000----------0101100011",
     "------000000-------------0001101", 0x00000001, R::kIgnore, "Non-fatal", "IGNORE"},
    {146, "TLW_TX/TLW_TX_PIPE1", "------000000----------0101100011",
     "------000000-------------0001101", 0x00000002, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {146, "TLW_TX/TLW_TX_PIPE1", "------000000----------0101100011",
     "------000000-------------0001101", 0x00000004, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
    {146, "TLW_TX/TLW_TX_PIPE1", "------000000----------0101100011",
     "------000000-------------0001101", 0x80000000, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {147, "TREX", "------000000----------0110000100", "------000000-------------0001110",
     0x00000001, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {147, "TREX", "------000000----------0110000100", "------000000-------------0001110",
     0x80000000, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {148, "NVLPW_CTRL/NVLPW", "------000000----------0000000101",
     "------000000-------------0001111", 0x80000000, R::kIgnore, "Non-fatal", "CONTACT_SUPPORT"},
    {149, "NETIR/NETIR_INT", "------000000----------0000000110", "------000000-------------0011000",
     0x00000000, R::kResetGpu, "Link Fatal", "SYMPATHETIC_REPORT_SOLO"},
    {149, "NETIR_BER_EVENT", "------000000----------1000100110", "------000000-------------0010011",
     0x00000000, R::kIgnore, "Non-fatal", "INVESTIGATE_LINK_SI_AND_CABLES"},
    {149, "NETIR_BER_EVENT", "------000000----------1000100110", "------000000-------------0010011",
     0x00000001, R::kIgnore, "Non-fatal", "INVESTIGATE_LINK_SI_AND_CABLES"},
    {149, "NETIR_BER_EVENT", "------000000----------1000100110", "------000000-------------0010011",
     0x00000002, R::kIgnore, "Non-fatal", "INVESTIGATE_LINK_SI_AND_CABLES"},
    {149, "NETIR_BER_EVENT", "------000000----------1000100110", "------000000-------------0010011",
     0x00000003, R::kIgnore, "Non-fatal", "INVESTIGATE_LINK_SI_AND_CABLES"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------000000----------0111000110",
     "------000000-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "SYMPATHETIC_REPORT_SOLO"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------000001----------0111000110",
     "------000001-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "REPORT_ISSUE (if seen >1 per day)"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------000010----------0111000110",
     "------000010-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "INVESTIGATE_LINK_SI"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------000100----------0111000110",
     "------000100-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "INVESTIGATE_LINK_SI"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------001010----------0111000110",
     "------001010-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "INVESTIGATE_LINK_SI"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------001111----------0111000110",
     "------001111-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "INVESTIGATE_SW_USER"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------010000----------0111000110",
     "------010000-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "INVESTIGATE_SW_USER_LINK_SI"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------010001----------0111000110",
     "------010001-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "INVESTIGATE_SW_USER"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------010010----------0111000110",
     "------010010-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "INVESTIGATE_SW_USER_LINK_SI"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------010101----------0111000110",
     "------010101-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "INVESTIGATE_PEER_DEVICE"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------010110----------0111000110",
     "------010110-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "INVESTIGATE_SW_USER"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------100000----------0111000110",
     "------100000-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "INVESTIGATE_PEER_DEVICE"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------100001----------0111000110",
     "------100001-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "INVESTIGATE_PEER_DEVICE"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------100010----------0111000110",
     "------100010-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "INVESTIGATE_PEER_DEVICE"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------100011----------0111000110",
     "------100011-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "INVESTIGATE_PEER_DEVICE"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------100100----------0111000110",
     "------100100-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "INVESTIGATE_PEER_DEVICE"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------100101----------0111000110",
     "------100101-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal",
     "INVESTIGATE_PEER_DEVICE"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------100110----------0111000110",
     "------100110-------------0010001", 0x00000000, R::kIgnore, "Link Fatal",
     "INVESTIGATE_SW/USER"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------101000----------0111000110",
     "------101000-------------0010001", 0x00000000, R::kIgnore, "Fatal", "INVESTIGATE_HOST"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------101010----------0111000110",
     "------101010-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal?",
     "INVESTIGATE_LINK_SI_AND_CABLES"},
    {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "------101011----------0111000110",
     "------101011-------------0010001", 0x00000000, R::kResetGpu, "Link Fatal?",
     "INVESTIGATE_LINK_SI_AND_CABLES"},
    {149, "NETIR_MFDE_EVENT", "------000000----------1001000110",
     "------000000-------------0010100", 0x00000001, R::kResetGpu, "Fatal**", "CONTACT_SUPPORT"},
    {149, "NETIR_MFDE_EVENT", "------000000----------1001000110",
     "------000000-------------0010100", 0x00000003, R::kIgnore, "Non-fatal", "IGNORE"},
    {149, "NETIR_MFDE_EVENT", "------000000----------1001000110",
     "------000000-------------0010100", 0x00000004, R::kResetGpu, "Fatal**", "CONTACT_SUPPORT"},
    {149, "NETIR_MFDE_EVENT", "------000000----------1001000110",
     "------000000-------------0010100", 0x00000005, R::kResetGpu, "Fatal**", "CONTACT_SUPPORT"},
    {149, "NETIR_MFDE_EVENT", "------000000----------1001000110",
     "------000000-------------0010100", 0x00000007, R::kResetGpu, "Fatal**", "CONTACT_SUPPORT"},
    {150, "MSE_WATCHDOG", "------000000----------0000000000", "------000000-------------0000000",
     0x00000000, R::kResetGpu, "Fatal", "CONTACT_SUPPORT"},
};

// A pattern's mask (bits it fixes) and value. Validated by a unit test: 32 of '0', '1', '-'.
struct MaskValue {
  uint32_t mask = 0, value = 0;
  bool Matches(uint32_t v) const { return (v & mask) == value; }
};
constexpr MaskValue Compile(std::string_view p) {
  MaskValue mv;
  for (size_t i = 0; i < p.size() && i < 32; ++i) {
    const uint32_t bit = uint32_t{1} << (31 - i);
    if (p[i] == '-') continue;
    mv.mask |= bit;
    if (p[i] == '1') mv.value |= bit;
  }
  return mv;
}

// Both layouts of every row, compiled when the program is.
struct CompiledRow {
  MaskValue v1, v2;
};
constexpr auto kCompiled = [] {
  std::array<CompiledRow, std::size(kRows)> out{};
  for (size_t i = 0; i < std::size(kRows); ++i) {
    out[i] = {Compile(kRows[i].pattern_v1), Compile(kRows[i].pattern_v2)};
  }
  return out;
}();

std::optional<uint32_t> Hex(std::string_view& s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == ',')) s.remove_prefix(1);
  if (!s.starts_with("0x") && !s.starts_with("0X")) return std::nullopt;
  s.remove_prefix(2);
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || p == s.data()) return std::nullopt;
  s.remove_prefix(static_cast<size_t>(p - s.data()));
  return v;
}

}  // namespace

std::string_view ToString(Nvlink5Resolution r) {
  switch (r) {
    case R::kIgnore:
      return "IGNORE";
    case R::kResetGpu:
      return "RESET_GPU";
    case R::kXid154Eval:
      return "XID_154_EVAL";
  }
  return "IGNORE";
}

std::span<const Nvlink5Row> Nvlink5Rows() { return kRows; }

std::optional<Nvlink5Registers> ParseNvlink5Registers(std::string_view text) {
  const size_t open = text.find("(0x");
  if (open == std::string_view::npos) return std::nullopt;
  std::string_view s = text.substr(open + 1);
  Nvlink5Registers r;
  auto first = Hex(s);
  if (!first) return std::nullopt;
  r.intrinfo = *first;
  if (auto second = Hex(s)) {
    r.status = *second;
    r.has_status = true;
  }
  return r;
}

std::optional<Nvlink5Decision> DecideNvlink5(int xid, const Nvlink5Registers& r) {
  std::vector<const Nvlink5Row*> unit_rows;
  for (size_t i = 0; i < std::size(kRows); ++i) {
    if (kRows[i].xid == xid &&
        (kCompiled[i].v1.Matches(r.intrinfo) || kCompiled[i].v2.Matches(r.intrinfo))) {
      unit_rows.push_back(&kRows[i]);
    }
  }
  if (unit_rows.empty()) return std::nullopt;

  // A row is for one status value (BER, MFDE and link-down events number them) or one bit.
  std::vector<const Nvlink5Row*> hits;
  std::vector<uint32_t> unknown_bits;
  for (const Nvlink5Row* row : unit_rows) {
    if (row->status == r.status) hits.push_back(row);
  }
  if (hits.empty()) {
    for (int b = 0; b < 32; ++b) {
      const uint32_t bit = uint32_t{1} << b;
      if (!(r.status & bit)) continue;
      const auto it = std::find_if(unit_rows.begin(), unit_rows.end(),
                                   [&](const Nvlink5Row* row) { return row->status == bit; });
      if (it == unit_rows.end())
        unknown_bits.push_back(bit);
      else
        hits.push_back(*it);
    }
  }
  if (hits.empty()) return std::nullopt;

  Nvlink5Decision d;
  d.unit = std::string(hits.front()->unit);
  const auto has = [&](R res) {
    return std::any_of(hits.begin(), hits.end(),
                       [&](const Nvlink5Row* row) { return row->resolution == res; });
  };
  if (has(R::kResetGpu)) {
    d.resolution = R::kResetGpu;
    d.severity = Severity::kCritical;
  } else if (has(R::kXid154Eval)) {
    d.resolution = R::kXid154Eval;
    d.severity = Severity::kWarn;
  } else {
    d.resolution = R::kIgnore;
    const bool still_fatal = std::any_of(hits.begin(), hits.end(), [](const Nvlink5Row* row) {
      return row->second_action_reset ||
             (row->nvidia_severity.find("atal") != std::string_view::npos &&
              !row->nvidia_severity.starts_with("Non"));
    });
    d.severity = still_fatal ? Severity::kWarn : Severity::kInfo;
  }
  if (!unknown_bits.empty() && d.severity < Severity::kWarn) d.severity = Severity::kWarn;

  const uint32_t subcode = (r.intrinfo >> 20) & 0x3f;
  for (const Nvlink5Row* row : hits) {
    if (!d.decode.empty()) d.decode += "; ";
    d.decode += fmt::format("{} subcode 0x{:02x} status 0x{:x}: {} ({}; investigate: {}{})",
                            row->unit, subcode, row->status, ToString(row->resolution),
                            row->nvidia_severity, row->investigatory,
                            row->second_action_reset ? "; second action RESET_GPU" : "");
  }
  for (uint32_t bit : unknown_bits)
    d.decode += fmt::format("; status bit 0x{:x}: not in NVIDIA's decode sheet", bit);
  return d;
}

}  // namespace gpuheal
