#include "core/xid_catalog.h"

#include <gtest/gtest.h>

#include <set>

#include "core/reasons.h"

namespace gpuheal {
namespace {

TEST(XidCatalog, CoversEveryXidNvidiaDefinesFrom1To170AndBeyond) {
  for (int x = 1; x <= 172; ++x) {
    const XidInfo* info = FindXid(x);
    ASSERT_NE(info, nullptr) << x;
    EXPECT_EQ(info->xid, x);
    EXPECT_FALSE(info->mnemonic.empty()) << x;
    EXPECT_FALSE(info->description.empty()) << x;
  }
  EXPECT_EQ(FindXid(0), nullptr);
  EXPECT_EQ(FindXid(-5), nullptr);
  // Newer drivers' Xids the table carries without an NVIDIA bucket; the gap between is unknown.
  ASSERT_NE(FindXid(173), nullptr);
  EXPECT_EQ(FindXid(173)->severity, Severity::kFatal);
  ASSERT_NE(FindXid(185), nullptr);
  EXPECT_EQ(FindXid(185)->bucket, Bucket::kNone);
  EXPECT_EQ(FindXid(174), nullptr);
  EXPECT_EQ(FindXid(186), nullptr);
  EXPECT_NE(CatalogCoverage().find("R580"), std::string_view::npos);
}

TEST(XidCatalog, ProductSeverityMatrixIsBinding) {
  EXPECT_EQ(FindXid(13)->severity, Severity::kWarn);
  EXPECT_EQ(FindXid(31)->severity, Severity::kWarn);
  // 43 follows NVIDIA's IGNORE; a line naming the stopped process is a workload-level warning
  // (the classifier's rule, tested there).
  EXPECT_EQ(FindXid(43)->severity, Severity::kInfo);
  EXPECT_EQ(FindXid(45)->severity, Severity::kCritical);
  EXPECT_EQ(FindXid(48)->severity, Severity::kFatal);
  EXPECT_EQ(FindXid(61)->severity, Severity::kFatal);
  EXPECT_EQ(FindXid(62)->severity, Severity::kFatal);
  EXPECT_EQ(FindXid(79)->severity, Severity::kCatastrophic);
}

TEST(XidCatalog, NvidiaBucketsAsPublished) {
  EXPECT_EQ(FindXid(48)->bucket, Bucket::kWorkflowXid48);
  EXPECT_EQ(FindXid(79)->bucket, Bucket::kRestartBm);
  EXPECT_EQ(FindXid(79)->mnemonic, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS");
  EXPECT_EQ(FindXid(119)->bucket, Bucket::kResetGpu);
  EXPECT_EQ(FindXid(63)->bucket, Bucket::kIgnore);
  EXPECT_EQ(FindXid(74)->bucket, Bucket::kWorkflowNvlinkErr);
  for (int x = 144; x <= 150; ++x) EXPECT_EQ(FindXid(x)->bucket, Bucket::kWorkflowNvlink5Err);
  EXPECT_EQ(FindXid(154)->bucket, Bucket::kXid154);
}

TEST(XidCatalog, EveryDeviationIsExplainedAndEveryOtherXidFollowsItsBucket) {
  for (const XidInfo& x : AllXids()) {
    if (x.deviation.empty()) {
      EXPECT_EQ(x.severity, BucketSeverity(x.bucket)) << "Xid " << x.xid;
    } else {
      EXPECT_NE(x.severity, BucketSeverity(x.bucket)) << "Xid " << x.xid << " needs no deviation";
    }
  }
}

TEST(XidCatalog, RecoveryActionSeverity) {
  EXPECT_EQ(RecoveryActionSeverity(0), Severity::kInfo);
  EXPECT_EQ(RecoveryActionSeverity(1), Severity::kCritical);
  EXPECT_EQ(RecoveryActionSeverity(2), Severity::kFatal);
  EXPECT_EQ(RecoveryActionSeverity(4), Severity::kCritical);
  EXPECT_EQ(RecoveryActionSeverity(99), Severity::kInfo);
  EXPECT_EQ(RecoveryActionName(2), "Node Reboot Required");
}

TEST(Reasons, XidReasonsSwitchOnFatal) {
  EXPECT_EQ(reason::XidReason(79, Severity::kCatastrophic), "NvidiaXID79Error");
  EXPECT_EQ(reason::XidReason(13, Severity::kWarn), "NvidiaXID13Warning");
  EXPECT_EQ(reason::XidReason(119, Severity::kCritical), "NvidiaXID119Warning");
  EXPECT_EQ(reason::WithSeverity("NvidiaXID13Warning", Severity::kFatal), "NvidiaXID13Error");
  EXPECT_EQ(reason::WithSeverity("NvidiaSXID5Warning", Severity::kFatal), "NvidiaSXID5Error");
  EXPECT_EQ(reason::WithSeverity("KernelHungTask", Severity::kFatal), "KernelHungTask");
}

// ParseReason inverts XidReason and SxidReason for every catalog Xid and severity, and refuses
// what they never print.
TEST(Reasons, ParseReasonInvertsTheBuilders) {
  using reason::NumberedReason;
  for (const auto& x : AllXids()) {
    for (int s = 0; s <= static_cast<int>(Severity::kCatastrophic); ++s) {
      const auto sev = static_cast<Severity>(s);
      EXPECT_EQ(reason::ParseReason(reason::XidReason(x.xid, sev)),
                (NumberedReason{false, x.xid, FlipsCondition(sev)}))
          << x.xid;
      EXPECT_EQ(reason::ParseReason(reason::SxidReason(x.xid, sev)),
                (NumberedReason{true, x.xid, FlipsCondition(sev)}))
          << x.xid;
    }
  }
  for (const char* bad : {"NvidiaXIDError", "NvidiaXID79", "NvidiaXID-1Error", "NvidiaXID079Error",
                          "NvidiaXID7x9Error", "NvidiaXID1234567890Error", "KernelHungTask",
                          "NvidiaGPUFallenOffBus", "nvidiaXID79Error", ""})
    EXPECT_FALSE(reason::ParseReason(bad)) << bad;
}

TEST(Reasons, FixedReasonsArePascalCaseAndUnique) {
  std::set<std::string_view> seen;
  for (const auto& r : reason::FixedReasons()) {
    EXPECT_TRUE(seen.insert(r.name).second) << r.name;
    EXPECT_TRUE(isupper(static_cast<unsigned char>(r.name[0]))) << r.name;
    EXPECT_EQ(r.name.find_first_of(" _-"), std::string_view::npos) << r.name;
  }
  for (Condition c : kAllConditions) {
    EXPECT_FALSE(reason::HealthyReason(c).empty());
  }
}

}  // namespace
}  // namespace gpuheal
