#include "core/classifier.h"

#include <gtest/gtest.h>

namespace gpuheal {
namespace {

std::vector<Fault> Classify(Classifier& c, const std::vector<std::string>& lines) {
  std::vector<Fault> out;
  size_t n = 0;
  for (const auto& l : lines) c.ClassifyLine(l, ++n, out);
  return out;
}

TEST(Classifier, OverridesChangeSeverityAndAction) {
  ClassifierOptions o;
  o.xid_overrides[13] = {Severity::kFatal, std::nullopt};
  o.xid_overrides[79] = {std::nullopt, Action::kQuarantine};
  auto c = Classifier::Create(std::move(o));
  ASSERT_TRUE(c.ok());
  auto f = Classify(**c, {"NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=a, b",
                     "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus."});
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].severity, Severity::kFatal);
  EXPECT_EQ(f[0].action, Action::kQuarantine);
  EXPECT_EQ(f[0].reason, "NvidiaXID13Error");
  EXPECT_EQ(f[1].severity, Severity::kCatastrophic);  // only the action was overridden
  EXPECT_EQ(f[1].action, Action::kQuarantine);
}

TEST(Classifier, OverrideBeatsTheLinesOwnSeverityFor154) {
  ClassifierOptions o;
  o.xid_overrides[154] = {Severity::kWarn, std::nullopt};
  auto c = Classifier::Create(std::move(o));
  auto f = Classify(**c, {"NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 "
                     "(None) to 0x2 (Node Reboot Required)"});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kWarn);
}

TEST(Classifier, MultiRecordMessageIsAbandonedWhenTooMuchInterleaves) {
  auto c = Classifier::Create({});
  std::vector<std::string> lines = {"NVRM: The NVIDIA GPU 0000:b3:00.0"};
  for (int i = 0; i < 20; ++i) lines.push_back("unrelated " + std::to_string(i));
  lines.push_back("NVRM: fallen off the bus and is not responding to commands.");
  auto f = Classify(**c, lines);
  ASSERT_EQ(f.size(), 1u);  // still reported, but without the bus id it cannot know
  EXPECT_EQ(f[0].kind, FaultKind::kGpuFallenOffBus);
  EXPECT_TRUE(f[0].pci.empty());
  EXPECT_EQ(f[0].line, lines.size());
}

TEST(Classifier, UntrustedRecordsAreClassifiedButMarked) {
  auto c = Classifier::Create({});
  auto f = Classify(**c, {"12,5,100,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen "
                     "off the bus."});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_FALSE(f[0].trusted);
  EXPECT_EQ(f[0].kmsg_seq, 5u);
  EXPECT_EQ(f[0].kmsg_usec, 100u);
}

TEST(Classifier, NvrmLinesNeverFallThroughToKernelRules) {
  auto c = Classifier::Create({});
  auto f = Classify(**c, {"NVRM: nvlink: Link down on link 3 I/O error, dev x, sector 1"});
  EXPECT_TRUE(f.empty());
}

TEST(Classifier, UuidIsAttachedAfterTheAnnouncement) {
  auto c = Classifier::Create({});
  auto f = Classify(**c, {"NVRM: GPU at PCI:0000:3b:00: GPU-1111",
                     "NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=a, DBE",
                     "NVRM: Xid (PCI:0000:86:00): 48, pid=1, name=a, DBE"});
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].uuid, "GPU-1111");
  EXPECT_EQ(f[1].uuid, "");
  EXPECT_EQ((*c)->UuidFor("0000:3b:00"), "GPU-1111");
}

}  // namespace
}  // namespace gpuheal
