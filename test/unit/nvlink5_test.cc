#include "core/nvlink5.h"

#include <gtest/gtest.h>

#include <map>

#include "core/sxid_catalog.h"

namespace gpuheal {
namespace {

TEST(Nvlink5, EveryPatternIsTheSheetsNotation) {
  for (const Nvlink5Row& r : Nvlink5Rows()) {
    for (std::string_view p : {r.pattern_v1, r.pattern_v2}) {
      ASSERT_EQ(p.size(), 32u) << r.unit;
      EXPECT_EQ(p.find_first_not_of("01-"), std::string_view::npos) << r.unit << " " << p;
    }
  }
}

TEST(Nvlink5, RowsPerXidAsTheSheetHasThem) {
  std::map<int, int> n;
  for (const Nvlink5Row& r : Nvlink5Rows()) ++n[r.xid];
  EXPECT_EQ(n, (std::map<int, int>{
                   {144, 6}, {145, 33}, {146, 20}, {147, 2}, {148, 1}, {149, 31}, {150, 1}}));
}

TEST(Nvlink5, EveryRowDecidesItselfConsistently) {
  // The registers a row describes (its fixed one-bits in either layout, its status) select it,
  // and the decision follows the row's resolution.
  for (const Nvlink5Row& r : Nvlink5Rows()) {
    for (std::string_view p : {r.pattern_v1, r.pattern_v2}) {
      Nvlink5Registers regs;
      for (size_t i = 0; i < 32; ++i) {
        if (p[i] == '1') regs.intrinfo |= uint32_t{1} << (31 - i);
      }
      regs.status = r.status;
      const auto d = DecideNvlink5(r.xid, regs);
      ASSERT_TRUE(d) << r.unit << " " << p;
      EXPECT_EQ(d->resolution, r.resolution) << r.unit << " " << p << " " << d->decode;
      const Severity want =
          r.resolution == Nvlink5Resolution::kResetGpu     ? Severity::kCritical
          : r.resolution == Nvlink5Resolution::kXid154Eval ? Severity::kWarn
          : (r.second_action_reset || (r.nvidia_severity.find("atal") != std::string_view::npos &&
                                       !r.nvidia_severity.starts_with("Non")))
              ? Severity::kWarn
              : Severity::kInfo;
      EXPECT_EQ(d->severity, want) << r.unit << " " << p << " " << d->decode;
    }
  }
}

TEST(Nvlink5, RegistersAreParsedFromTheLine) {
  auto r = ParseNvlink5Registers(
      "NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000010 0x0 0x0)");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->intrinfo, 0x021425c6u);
  EXPECT_EQ(r->status, 0x10u);
  EXPECT_TRUE(r->has_status);
  EXPECT_FALSE(ParseNvlink5Registers("NETIR_LINK_EVT Fatal XC 1 i 2 Link 01 [0x0000000a]"));
  EXPECT_FALSE(ParseNvlink5Registers("RLW Fatal (0xzz)"));
}

TEST(Nvlink5, FatalWordIsNotTheDecision) {
  // Subcode 0x26 of a link-down event: NVIDIA says IGNORE, though the line says Fatal.
  auto d = DecideNvlink5(149, {0x026001c6, 0, true});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->resolution, Nvlink5Resolution::kIgnore);
  EXPECT_EQ(d->severity, Severity::kWarn);
  EXPECT_NE(d->decode.find("INVESTIGATE_SW/USER"), std::string::npos) << d->decode;
  // An unknown subcode, an unknown unit and the wrong Xid match nothing.
  EXPECT_FALSE(DecideNvlink5(149, {0x03f001c6, 0, true}));
  EXPECT_FALSE(DecideNvlink5(149, {0x000003ff, 0, true}));
  EXPECT_FALSE(DecideNvlink5(144, {0x021425c6, 0, true}));
  // A status bit the sheet does not name is at least a warning and is named in the decode.
  auto part = DecideNvlink5(144, {0x00000021, 0x00000005, true});  // 0x1 IGNORE + 0x4 IGNORE
  ASSERT_TRUE(part);
  EXPECT_EQ(part->severity, Severity::kInfo);
  auto odd = DecideNvlink5(144, {0x00000021, 0x00000041, true});  // 0x40 has no row
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->severity, Severity::kWarn);
  EXPECT_NE(odd->decode.find("0x40: not in NVIDIA's decode sheet"), std::string::npos)
      << odd->decode;
}

TEST(Sxid, TablesAreConsistent) {
  for (const SxidInfo& s : AllSxids()) {
    EXPECT_EQ(FindSxid(s.sxid), &s);
    EXPECT_FALSE(s.nvidia_action.empty());
    EXPECT_FALSE(s.why.empty());
    switch (s.cls) {
      case SxidClass::kNonFatal:
        EXPECT_TRUE(s.severity == Severity::kWarn || s.sxid == 19084) << s.sxid;
        break;
      case SxidClass::kFatal:
        EXPECT_EQ(s.severity, Severity::kFatal) << s.sxid;
        break;
      case SxidClass::kAlwaysFatal:
        EXPECT_EQ(s.severity, Severity::kCatastrophic) << s.sxid;
        break;
    }
  }
  EXPECT_EQ(SxidSeverity(1, true), Severity::kFatal);
  EXPECT_EQ(SxidSeverity(1, false), Severity::kWarn);
  EXPECT_EQ(SxidSeverity(19084, false), Severity::kFatal);
  EXPECT_EQ(SxidSeverity(12028, true), Severity::kWarn);  // the table, not the word
}

}  // namespace
}  // namespace gpuheal
