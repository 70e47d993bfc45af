#include "parse/npd_rules.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "parse/classifier.h"

namespace gpuheal {
namespace {

const std::string kFixture =
    std::string(GPUHEAL_SOURCE_DIR) + "/test/fixtures/npd/kernel-monitor.json";

TEST(NpdRules, AnExistingKernelMonitorConfigLoadsUnchanged) {
  auto cfg = LoadNpdConfig(kFixture);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->npd_source, "kernel-monitor");
  EXPECT_EQ(cfg->buffer_size, 10);
  ASSERT_EQ(cfg->rules.size(), 6u);
  EXPECT_FALSE(cfg->rules[0].permanent);
  EXPECT_TRUE(cfg->rules[3].permanent);
  EXPECT_EQ(cfg->rules[3].npd_condition, "KernelDeadlock");
  EXPECT_EQ(cfg->rules[3].condition, "KernelReady");
}

// The agent writes only its five condition types, so an NPD condition of the file's own (upstream
// KernelDeadlock) would never reach the Node: it becomes KernelReady with the rule's reason, and
// the load says so.
TEST(NpdRules, APermanentRulesOwnConditionIsReportedAsKernelReadyWithItsReason) {
  auto cfg = LoadNpdConfig(kFixture);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  ASSERT_EQ(cfg->notes.size(), 3u);  // rules 3 and 5 name KernelDeadlock, rule 4 ReadonlyFilesystem
  EXPECT_NE(
      cfg->notes[0].find(
          "kernel-monitor.json: rules[3] (reason DockerHung): NPD condition \"KernelDeadlock\" "
          "is reported as KernelReady=False with reason DockerHung"),
      std::string::npos)
      << cfg->notes[0];
  EXPECT_NE(cfg->notes[1].find("\"ReadonlyFilesystem\""), std::string::npos) << cfg->notes[1];

  auto own = ParseNpdConfig(R"js({"conditions":[{"type":"StorageReady"}],
      "rules":[{"type":"permanent","condition":"StorageReady","reason":"DiskGone","pattern":"disk gone"}]})js",
                            "f");
  ASSERT_TRUE(own.ok()) << own.error().message;
  EXPECT_EQ(own->rules[0].condition, "StorageReady");
  EXPECT_TRUE(own->notes.empty());
}

TEST(NpdRules, ARuleNamingAKubeletConditionIsRefused) {
  for (const char* kubelet :
       {"Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"}) {
    auto r = ParseNpdConfig(fmt::format(R"js({{"conditions":[{{"type":"{0}"}}],
        "rules":[{{"type":"permanent","condition":"{0}","reason":"R","pattern":"x"}}]}})js",
                                        kubelet),
                            "npd.json");
    ASSERT_FALSE(r.ok()) << kubelet;
    EXPECT_NE(r.error().message.find(
                  fmt::format("npd.json: rules[0] (reason R): condition \"{}\" belongs to the "
                              "kubelet, and gpuheal never writes the kubelet's conditions",
                              kubelet)),
              std::string::npos)
        << r.error().message;
  }
}

// Each rule compiles alone; together they pass RE2's memory budget. The error used to name no file.
TEST(NpdRules, ARuleSetTooLargeForRe2NamesItsFiles) {
  std::vector<NpdConfig> v;
  for (const std::string name : {"a.json", "b.json"}) {
    std::string rules;
    for (int i = 0; i < 50; ++i) {
      rules += fmt::format(
          R"js({}{{"type":"temporary","reason":"R{}","pattern":"{} rule{} [a-z]{{1000}}"}})js",
          i ? "," : "", i, name, i);
    }
    auto cfg = ParseNpdConfig(fmt::format(R"js({{"rules":[{}]}})js", rules), name);
    ASSERT_TRUE(cfg.ok()) << cfg.error().message;
    v.push_back(std::move(*cfg));
  }
  auto m = NpdMatcher::Create(std::move(v));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(
      m.error().message.find("a.json, b.json: RE2 could not compile these 100 NPD rules together"),
      std::string::npos)
      << m.error().message;
}

TEST(NpdRules, RulesMatchAtTheEndOfTheBufferLikeNpd) {
  auto cfg = LoadNpdConfig(kFixture);
  ASSERT_TRUE(cfg.ok());
  ClassifierOptions opts;
  opts.npd_rules.push_back(std::move(*cfg));
  auto c = Classifier::Create(std::move(opts));
  ASSERT_TRUE(c.ok()) << c.error().message;
  std::vector<Fault> out;
  (*c)->ClassifyLine(
      "Out of memory: Killed process 123 (python) total-vm:100kB, anon-rss:50kB, file-rss:0kB", 1,
      out);
  // The built-in OOM kill (info: counted for KernelOOMKillStorm) and the NPD rule both fire.
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].reason, "KernelOOMKill");
  EXPECT_EQ(out[0].severity, Severity::kInfo);
  EXPECT_EQ(out[1].kind, FaultKind::kRule);
  EXPECT_EQ(out[1].reason, "OOMKilling");
  EXPECT_EQ(out[1].severity, Severity::kWarn);
  out.clear();
  (*c)->ClassifyLine("INFO: task docker:1234 blocked for more than 120 seconds.", 2, out);
  // The built-in hung-task fault and both NPD rules (TaskHung, DockerHung) fire.
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].reason, "KernelHungTask");
  EXPECT_EQ(out[1].reason, "TaskHung");
  EXPECT_EQ(out[2].reason, "DockerHung");
  EXPECT_EQ(out[2].condition, "KernelReady");
  EXPECT_EQ(out[2].severity, Severity::kFatal);
  out.clear();
  // The earlier line is still in the buffer but no longer at its end: no repeat.
  (*c)->ClassifyLine("unrelated line", 3, out);
  EXPECT_TRUE(out.empty());
}

TEST(NpdRules, ErrorsNameTheFileAndRule) {
  auto bad_re = ParseNpdConfig(
      R"js({"plugin":"kmsg","rules":[{"type":"temporary","reason":"Lookahead","pattern":"a(?=b)"}]})js",
      "rules.json");
  ASSERT_FALSE(bad_re.ok());
  EXPECT_NE(bad_re.error().message.find("rules.json"), std::string::npos);
  EXPECT_NE(bad_re.error().message.find("rules[0] (reason Lookahead)"), std::string::npos);
  EXPECT_NE(bad_re.error().message.find("RE2"), std::string::npos);

  auto backref = ParseNpdConfig(
      R"js({"rules":[{"type":"temporary","reason":"R","pattern":"(a)\\1"}]})js", "f");
  EXPECT_FALSE(backref.ok());

  auto bad_type =
      ParseNpdConfig(R"js({"rules":[{"type":"sometimes","reason":"R","pattern":"x"}]})js", "f");
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.error().message.find("temporary"), std::string::npos);

  auto undeclared = ParseNpdConfig(
      R"js({"conditions":[],"rules":[{"type":"permanent","condition":"X","reason":"R","pattern":"x"}]})js",
      "f");
  ASSERT_FALSE(undeclared.ok());
  EXPECT_NE(undeclared.error().message.find("not declared"), std::string::npos);

  EXPECT_FALSE(ParseNpdConfig("{not json", "f").ok());
  EXPECT_FALSE(ParseNpdConfig("[]", "f").ok());
  EXPECT_FALSE(ParseNpdConfig(R"js({"plugin":"journald"})js", "f").ok());
  EXPECT_FALSE(ParseNpdConfig(R"js({"rules":[{"type":"temporary","reason":"R"}]})js", "f").ok());
  EXPECT_FALSE(LoadNpdConfig("/nonexistent/npd.json").ok());
}

}  // namespace
}  // namespace gpuheal

namespace gpuheal {
namespace {

TEST(NpdRules, OnlyPatternsThatCannotSpanLinesRunOnTheNewestLineAlone) {
  EXPECT_FALSE(NpdPatternMaySpanLines("task [\\S ]+:\\w+ blocked for more than \\w+ seconds\\."));
  EXPECT_FALSE(NpdPatternMaySpanLines("Remounting filesystem read-only"));
  EXPECT_TRUE(NpdPatternMaySpanLines("a\\nb"));
  EXPECT_TRUE(NpdPatternMaySpanLines("a\\sb"));
  EXPECT_TRUE(NpdPatternMaySpanLines("a[^x]b"));
  EXPECT_TRUE(NpdPatternMaySpanLines("(?s)a.b"));
  EXPECT_TRUE(NpdPatternMaySpanLines("^anchored"));
}

TEST(NpdRules, MultiLinePatternsSeeTheJoinedBuffer) {
  auto cfg = ParseNpdConfig(
      R"js({"bufferSize":3,"rules":[{"type":"temporary","reason":"TwoLines","pattern":"first\\nsecond"},
                                    {"type":"temporary","reason":"OneLine","pattern":"second"}]})js",
      "f");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  std::vector<NpdConfig> v;
  v.push_back(std::move(*cfg));
  auto m = NpdMatcher::Create(std::move(v));
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE((*m)->Push("first").empty());
  auto hits = (*m)->Push("second");
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_EQ((*m)->rule(hits[0]).reason, "TwoLines");
  EXPECT_EQ((*m)->rule(hits[1]).reason, "OneLine");
  EXPECT_TRUE((*m)->Push("third").empty());
}

}  // namespace
}  // namespace gpuheal
