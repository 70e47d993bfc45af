#include "serve/metrics.h"

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <tuple>

namespace gpuheal {
namespace {

TEST(Metrics, RendersPrometheusText) {
  Metrics m;
  m.GetCounter("gpuheal_faults_total", "Faults",
               {{"reason", "NvidiaXID79Error"}, {"severity", "catastrophic"}})
      .Inc();
  m.GetCounter("gpuheal_faults_total", "Faults",
               {{"reason", "NvidiaXID79Error"}, {"severity", "catastrophic"}})
      .Inc(2);
  m.GetGauge("gpuheal_up", "Up").Set(1);
  auto& h = m.GetHistogram("gpuheal_latency_seconds", "Latency", {0.001, 0.01});
  h.Observe(0.0005);
  h.Observe(0.005);
  h.Observe(5);
  const std::string out = m.Render();
  EXPECT_NE(out.find("# TYPE gpuheal_faults_total counter"), std::string::npos);
  EXPECT_NE(
      out.find("gpuheal_faults_total{reason=\"NvidiaXID79Error\",severity=\"catastrophic\"} 3"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("gpuheal_up 1"), std::string::npos);
  EXPECT_NE(out.find("gpuheal_latency_seconds_bucket{le=\"0.001\"} 1"), std::string::npos) << out;
  EXPECT_NE(out.find("gpuheal_latency_seconds_bucket{le=\"0.01\"} 2"), std::string::npos);
  EXPECT_NE(out.find("gpuheal_latency_seconds_bucket{le=\"+Inf\"} 3"), std::string::npos);
  EXPECT_NE(out.find("gpuheal_latency_seconds_count 3"), std::string::npos);
}

TEST(Metrics, EscapesLabelValues) {
  Metrics m;
  m.GetCounter("c", "h", {{"reason", "a\"b\\c\nd"}}).Inc();
  EXPECT_NE(m.Render().find(R"(c{reason="a\"b\\c\nd"} 1)"), std::string::npos) << m.Render();
}

}  // namespace
}  // namespace gpuheal

namespace gpuheal {
namespace {

// The public contract: every metric the source registers (name, type, label names) is the one
// docs/metrics.md or docs/controller.md lists, and every listed metric exists. A renamed metric
// or label, or a metric added without its row, fails here.
using MetricShape =
    std::tuple<std::string, std::string, std::set<std::string>>;  // name, type, labels

std::set<MetricShape> FromSource() {
  std::set<MetricShape> out;
  const std::regex call(R"(Get(Counter|Gauge|Histogram)\()");
  const std::regex name(R"re("([a-z_:]+)")re");
  const std::regex label(R"re(\{"([a-z_]+)",)re");
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(std::string(GPUHEAL_SOURCE_DIR) + "/src")) {
    const std::string path = e.path().string();
    if (!e.is_regular_file() || path.ends_with("serve/metrics.cc") ||
        path.ends_with("serve/metrics.h"))
      continue;
    std::ifstream in(path);
    const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (auto it = std::sregex_iterator(s.begin(), s.end(), call); it != std::sregex_iterator();
         ++it) {
      size_t i = static_cast<size_t>(it->position() + it->length()), depth = 1;
      const size_t start = i;
      for (; i < s.size() && depth; ++i) depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
      const std::string args = s.substr(start, i - start);
      std::smatch m;
      if (!std::regex_search(args, m, name)) {
        ADD_FAILURE() << path << ": a metric whose name is not a literal: " << args;
        continue;
      }
      std::set<std::string> labels;
      for (auto l = std::sregex_iterator(args.begin(), args.end(), label);
           l != std::sregex_iterator(); ++l) {
        labels.insert((*l)[1]);
      }
      std::string type = (*it)[1];
      type[0] = static_cast<char>(std::tolower(type[0]));
      out.insert({m[1], type, labels});
    }
  }
  return out;
}

std::set<MetricShape> FromDocs() {
  std::set<MetricShape> out;
  const std::regex row(
      R"(^\|\s*`(gpuheal_[a-z_]+)`\s*\|\s*(counter|gauge|histogram)\s*\|([^|]*)\|)");
  const std::regex paren(R"(\([^)]*\))");
  const std::regex quoted("`([a-z_]+)`");
  for (const char* doc : {"/docs/metrics.md", "/docs/controller.md"}) {
    std::ifstream in(std::string(GPUHEAL_SOURCE_DIR) + doc);
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, row)) continue;
      const std::string cell =
          std::regex_replace(std::string(m[3]), paren, "");  // drop "(`a` or `b`)" values
      std::set<std::string> labels;
      for (auto l = std::sregex_iterator(cell.begin(), cell.end(), quoted);
           l != std::sregex_iterator(); ++l) {
        labels.insert((*l)[1]);
      }
      out.insert({m[1], m[2], labels});
    }
  }
  return out;
}

TEST(Metrics, NamesTypesAndLabelsAreTheDocumentedContract) {
  const auto src = FromSource();
  const auto docs = FromDocs();
  ASSERT_GT(src.size(), 35u);
  for (const auto& s : src) {
    EXPECT_TRUE(docs.count(s)) << std::get<0>(s) << " (" << std::get<1>(s)
                               << ") is registered but not documented with these labels";
  }
  for (const auto& d : docs) {
    EXPECT_TRUE(src.count(d)) << std::get<0>(d)
                              << " is documented but the source registers no such metric";
  }
}

// The exposition keeps Prometheus' format through prometheus-cpp: HELP and TYPE per family,
// label names sorted within a series, histogram buckets cumulative with +Inf.
TEST(Metrics, ExpositionShape) {
  Metrics m;
  m.GetGauge("gpuheal_agent_info", "Agent build and mode",
             {{"version", "1.2.3"}, {"mode", "standalone"}})
      .Set(1);
  const std::string out = m.Render();
  EXPECT_NE(out.find("# HELP gpuheal_agent_info Agent build and mode\n"), std::string::npos) << out;
  EXPECT_NE(out.find("# TYPE gpuheal_agent_info gauge\n"), std::string::npos) << out;
  EXPECT_NE(out.find("gpuheal_agent_info{mode=\"standalone\",version=\"1.2.3\"} 1\n"),
            std::string::npos)
      << out;
  Counter& a = m.GetCounter("c_total", "h", {{"k", "v"}});
  Counter& b = m.GetCounter("c_total", "h", {{"k", "v"}});
  EXPECT_EQ(&a, &b) << "one handle per series";
  a.Inc(2.5);
  EXPECT_EQ(b.value(), 2.5);
}

}  // namespace
}  // namespace gpuheal
