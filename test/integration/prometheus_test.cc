// The chart's alerts against the real Prometheus tools (built from github.com/prometheus/prometheus
// by scripts/build-peer.sh; GPUHEAL_PROMETHEUS names its directory): the PrometheusRule rendered
// with every optional part on (test/golden/helm/all-features.yaml, which the real-node tier holds
// equal to the chart) passes `promtool check rules`, and test/prometheus/alerts_test.yaml passes
// `promtool test rules` with a case where each alert fires and one where it does not.
// The scrape side (a real Prometheus reading the agent and the controller through the chart's
// scrape config, every documented metric and every dashboard panel queried back) is in the
// real-node tier (test/e2e/real_node_test.cc).

#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "run_binary.h"

namespace gpuheal::testing {
namespace {

namespace fs = std::filesystem;

const std::string kSource = GPUHEAL_SOURCE_DIR;

class PrometheusRules : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("GPUHEAL_PROMETHEUS");
    if (dir == nullptr || !*dir) {
      GTEST_SKIP() << "GPUHEAL_PROMETHEUS is not set (scripts/build-peer.sh prometheus builds it; "
                      "scripts/run-tests.sh sets it)";
    }
    promtool_ = std::string(dir) + "/bin/promtool";
    ASSERT_TRUE(fs::exists(promtool_)) << promtool_;
    char tmpl[] = "/tmp/gpuheal-promtool-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // The rendered PrometheusRule's groups, as a Prometheus rule file.
    YAML::Node rule;
    for (const auto& doc : YAML::LoadAllFromFile(kSource + "/test/golden/helm/all-features.yaml")) {
      if (doc.IsMap() && doc["kind"] && doc["kind"].as<std::string>() == "PrometheusRule") {
        rule = doc;
      }
    }
    ASSERT_TRUE(rule) << "no PrometheusRule in test/golden/helm/all-features.yaml";
    YAML::Node file;
    file["groups"] = rule["spec"]["groups"];
    std::ofstream(dir_ + "/gpuheal-rules.yaml") << YAML::Dump(file) << "\n";
    for (const auto& g : rule["spec"]["groups"]) {
      for (const auto& r : g["rules"]) {
        if (r["alert"]) alerts_.insert(r["alert"].as<std::string>());
      }
    }
    fs::copy_file(kSource + "/test/prometheus/alerts_test.yaml", dir_ + "/alerts_test.yaml");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::string promtool_, dir_;
  std::set<std::string> alerts_;
};

TEST_F(PrometheusRules, TheChartsRulesPassPromtoolCheck) {
  ASSERT_FALSE(alerts_.empty());
  auto r = RunShell("cd " + dir_ + " && " + promtool_ + " check rules gpuheal-rules.yaml 2>&1");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("SUCCESS: " + std::to_string(alerts_.size()) + " rules found"),
            std::string::npos)
      << r.out;
}

TEST_F(PrometheusRules, EveryAlertPassesItsUnitTests) {
  auto r = RunShell("cd " + dir_ + " && " + promtool_ + " test rules alerts_test.yaml 2>&1");
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST_F(PrometheusRules, EveryAlertHasACaseWhereItFiresAndOneWhereItDoesNot) {
  std::map<std::string, std::pair<int, int>> cases;  // alert -> (firing, quiet)
  const YAML::Node tests = YAML::LoadFile(dir_ + "/alerts_test.yaml")["tests"];
  for (const auto& t : tests) {
    for (const auto& a : t["alert_rule_test"]) {
      const std::string name = a["alertname"].as<std::string>();
      EXPECT_TRUE(alerts_.count(name))
          << "alerts_test.yaml tests " << name << ", which the chart does not define";
      auto& c = cases[name];
      (a["exp_alerts"] && a["exp_alerts"].size() > 0 ? c.first : c.second)++;
    }
  }
  for (const auto& alert : alerts_) {
    EXPECT_GT(cases[alert].first, 0) << alert << " has no case where it fires";
    EXPECT_GT(cases[alert].second, 0) << alert << " has no case where it stays quiet";
  }
}

// A rule test that expects the wrong thing fails: the tests above can fail.
TEST_F(PrometheusRules, AWrongExpectationFails) {
  std::ofstream(dir_ + "/wrong_test.yaml") << R"(rule_files: [gpuheal-rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'gpuheal_controller_breaker_open{job="gpuheal-controller", instance="c:9465"}'
        values: '0x10'
    alert_rule_test:
      - eval_time: 5m
        alertname: GpuhealBreakerOpen
        exp_alerts: [{exp_labels: {severity: critical}}]
)";
  auto r = RunShell("cd " + dir_ + " && " + promtool_ + " test rules wrong_test.yaml 2>&1");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("FAILED"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gpuheal::testing
