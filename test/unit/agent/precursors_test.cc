// Precursor signals per GPU: which faults count, thresholds, the window, a reset, the contract.

#include "agent/precursors.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "agent/config.h"
#include "core/time.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using SysTime = std::chrono::system_clock::time_point;

const SysTime kT0 = *kube::ParseTime("2026-06-01T12:00:00Z");

Fault Xid(int xid, const std::string& pci = "0000:3b:00", Severity s = Severity::kInfo) {
  Fault f;
  f.kind = FaultKind::kXid;
  f.xid = xid;
  f.pci = pci;
  f.severity = s;
  f.reason = fmt::format("NvidiaXID{}Warning", xid);
  return f;
}

TEST(Precursors, WhichFaultsAreSignals) {
  EXPECT_EQ(PrecursorSignalOf(Xid(63)), kSignalRowRemap);
  EXPECT_EQ(PrecursorSignalOf(Xid(94, "0000:3b:00", Severity::kWarn)), kSignalContainedEcc);
  EXPECT_EQ(PrecursorSignalOf(Xid(92)), kSignalSbeRate);
  EXPECT_EQ(PrecursorSignalOf(Xid(13, "0000:3b:00", Severity::kWarn)), "") << "an app fault";
  EXPECT_EQ(PrecursorSignalOf(Xid(63, "")), "") << "names no GPU";
  EXPECT_EQ(PrecursorSignalOf(Xid(94, "0000:3b:00", Severity::kFatal)), "")
      << "raised to fatal: it acts on its own";
  Fault storm;
  storm.kind = FaultKind::kGpuHealth;
  storm.pci = "0000:3b:00";
  storm.severity = Severity::kWarn;
  storm.reason = "NvidiaSingleBitErrorStorm";
  EXPECT_EQ(PrecursorSignalOf(storm), kSignalSbeRate);
  storm.reason = "NvidiaNVLinkErrorRate";
  EXPECT_EQ(PrecursorSignalOf(storm), kSignalNvlinkErrors);
}

TEST(Precursors, AGpuIsAtRiskAtItsThresholdUntilItsSignalsAgeOut) {
  PrecursorTracker t(PrecursorConfig{});
  EXPECT_FALSE(t.Observe(Xid(92), kT0)) << "sbe_rate needs 2 within the window";
  EXPECT_TRUE(t.at_risk().empty());
  EXPECT_TRUE(t.Observe(Xid(92), kT0 + 1h));
  ASSERT_EQ(t.at_risk().size(), 1u);
  const AtRiskGpu& g = t.at_risk().at("0000:3b:00");
  EXPECT_EQ(g.since, kT0 + 1h);
  EXPECT_EQ(g.signals.at("sbe_rate"), 2);
  EXPECT_TRUE(t.Observe(Xid(63), kT0 + 2h)) << "another signal: the entry changes";
  EXPECT_EQ(t.at_risk().at("0000:3b:00").since, kT0 + 1h) << "at risk since the first";
  // A repeat of an incident or a consequence adds nothing.
  Fault repeat = Xid(63);
  repeat.repeat_of = "x";
  EXPECT_FALSE(t.Observe(repeat, kT0 + 2h));
  EXPECT_FALSE(t.Expire(kT0 + 20h));
  // 24 h after the first Xid 92: one left, below its threshold; the row remap holds it.
  EXPECT_TRUE(t.Expire(kT0 + 24h + 1s));
  EXPECT_EQ(t.at_risk().at("0000:3b:00").signals,
            (std::map<std::string, int64_t>{{"row_remap", 1}}));
  EXPECT_TRUE(t.Expire(kT0 + 26h + 1s));
  EXPECT_TRUE(t.at_risk().empty());
}

TEST(Precursors, AResetClearsTheGpuAndOtherGpusStay) {
  PrecursorTracker t(PrecursorConfig{});
  EXPECT_TRUE(t.Observe(Xid(63, "0000:3b:00"), kT0));
  EXPECT_TRUE(t.Observe(Xid(94, "0000:5d:00", Severity::kWarn), kT0));
  EXPECT_EQ(t.at_risk().size(), 2u);
  EXPECT_TRUE(t.ClearGpu("0000:3b:00"));
  EXPECT_FALSE(t.ClearGpu("0000:3b:00"));
  EXPECT_EQ(t.at_risk().size(), 1u);
  EXPECT_TRUE(t.at_risk().count("0000:5d:00"));
}

TEST(Precursors, ConfigTurnsSignalsOffAndTheTrackerOff) {
  auto cfg = ParseAgentConfig(
      "predictive:\n  window: 1h\n  thresholds: {row_remap: 0, sbe_rate: 5}\n", "agent.yaml");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->predictive.window, 1h);
  EXPECT_FALSE(cfg->predictive.thresholds.count("row_remap"));
  EXPECT_EQ(cfg->predictive.thresholds.at("sbe_rate"), 5);
  PrecursorTracker t(cfg->predictive);
  EXPECT_FALSE(t.Observe(Xid(63), kT0)) << "row_remap is off";
  auto off = ParseAgentConfig("predictive: {enabled: false}\n", "agent.yaml");
  ASSERT_TRUE(off);
  PrecursorTracker none(off->predictive);
  EXPECT_FALSE(none.Observe(Xid(94, "0000:3b:00", Severity::kWarn), kT0));
  auto bad = ParseAgentConfig("predictive:\n  thresholds: {row_remaps: 1}\n", "agent.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("agent.yaml:2:"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("unknown signal \"row_remaps\""), std::string::npos)
      << bad.error().message;
}

TEST(Precursors, TheAnnotationRoundTripsAndBadOnesSayWhy) {
  AtRiskGpus g;
  g["0000:3b:00"] = {kT0, {{"row_remap", 1}, {"sbe_rate", 3}}};
  const std::string j = AtRiskToJson(g);
  EXPECT_EQ(
      j,
      R"({"0000:3b:00":{"since":"2026-06-01T12:00:00Z","signals":{"row_remap":1,"sbe_rate":3}}})");
  auto back = ParseAtRisk(j);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, g);
  EXPECT_TRUE(ParseAtRisk("{}")->empty());
  for (const char* bad : {"[", "[]", R"({"x":{}})", R"({"0000:3b:00":{"since":"now"}})",
                          R"({"0000:3b:00":{"since":"2026-06-01T12:00:00Z","signals":{"a":0}}})"}) {
    auto r = ParseAtRisk(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("gpuheal.io/gpu-at-risk"), std::string::npos)
        << r.error().message;
  }
}

}  // namespace
}  // namespace gpuheal
