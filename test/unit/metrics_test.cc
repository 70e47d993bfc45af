#include "agent/metrics.h"

#include <gtest/gtest.h>

namespace gpuheal {
namespace {

TEST(Metrics, RendersPrometheusText) {
  Metrics m;
  m.GetCounter("gpuheal_faults_total", "Faults", {{"reason", "NvidiaXID79Error"}, {"severity", "catastrophic"}}).Inc();
  m.GetCounter("gpuheal_faults_total", "Faults", {{"reason", "NvidiaXID79Error"}, {"severity", "catastrophic"}}).Inc(2);
  m.GetGauge("gpuheal_up", "Up").Set(1);
  auto& h = m.GetHistogram("gpuheal_latency_seconds", "Latency", {0.001, 0.01});
  h.Observe(0.0005);
  h.Observe(0.005);
  h.Observe(5);
  const std::string out = m.Render();
  EXPECT_NE(out.find("# TYPE gpuheal_faults_total counter"), std::string::npos);
  EXPECT_NE(out.find("gpuheal_faults_total{reason=\"NvidiaXID79Error\",severity=\"catastrophic\"} 3"),
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
