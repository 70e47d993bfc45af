// The agent's KubeReporter on the fake Kubernetes API and a stepped clock: what a write holds,
// coalescing, backoff, heartbeat, recovery and the per-reason Event budget. Each test runs the
// reporter's loop by hand (Step) instead of its thread. The same reporter runs against a real
// API server in test/integration/agent_kube_test.cc.

#include "agent/kube_reporter.h"

#include <gtest/gtest.h>

#include "core/time.h"
#include "fakes/fake_api.h"
#include "fakes/fake_clock.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::FakeApi;
using testing::FakeClock;

class KubeReporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto owned = std::make_unique<FakeApi>();
    api = owned.get();
    api->Put(kube::NodePath("n1"),
             {{"status",
               {{"conditions", json::array({{{"type", "Ready"},
                                             {"status", "True"},
                                             {"reason", "KubeletReady"},
                                             {"lastTransitionTime", "2026-01-01T00:00:00Z"}}})}}}});
    opts.node_name = "n1";
    opts.heartbeat = 5min;
    opts.initial_backoff = 200ms;
    opts.max_backoff = 30s;
    opts.event_burst = 2;
    opts.event_refill = 1min;
    reporter = std::make_unique<KubeReporter>(std::move(owned), clock, opts, metrics);
  }
  void TearDown() override { reporter.reset(); }

  json Condition(const std::string& type) {
    const json node = *api->Object(kube::NodePath("n1"));  // kept: the loop walks inside it
    for (const auto& c : node.at("status").at("conditions"))
      if (c.value("type", "") == type) return c;
    ADD_FAILURE() << "no condition " << type << " in " << api->Object(kube::NodePath("n1"))->dump();
    return json::object();
  }
  static std::vector<DesiredCondition> Hw(const std::string& status, const std::string& msg) {
    return {{"AcceleratedHardwareReady", status,
             status == "True" ? "GPUsHealthy" : "NvidiaXID79Error", msg}};
  }

  FakeClock clock;
  Metrics metrics;
  KubeReporterOptions opts;
  FakeApi* api = nullptr;
  std::unique_ptr<KubeReporter> reporter;
};

TEST_F(KubeReporterTest, WritesOnlyItsConditionsAndMovesTransitionTimeOnlyOnAChange) {
  reporter->SetConditions(Hw("False", "a"));
  reporter->Step();
  EXPECT_TRUE(reporter->api_ok());
  const std::string t0 = kube::RfcTime(clock.Now());
  EXPECT_EQ(Condition("AcceleratedHardwareReady").value("status", ""), "False");
  EXPECT_EQ(Condition("AcceleratedHardwareReady").value("lastTransitionTime", ""), t0);
  EXPECT_EQ(Condition("Ready").value("reason", ""), "KubeletReady") << "kubelet's is untouched";

  clock.Advance(10s);
  reporter->SetConditions(Hw("False", "b"));
  reporter->Step();
  EXPECT_EQ(Condition("AcceleratedHardwareReady").value("message", ""), "b");
  EXPECT_EQ(Condition("AcceleratedHardwareReady").value("lastTransitionTime", ""), t0)
      << "still False: the transition stays at the first";
  EXPECT_EQ(Condition("AcceleratedHardwareReady").value("lastHeartbeatTime", ""),
            kube::RfcTime(clock.Now()));

  clock.Advance(10s);
  reporter->SetConditions(Hw("True", ""));
  reporter->Step();
  EXPECT_EQ(Condition("AcceleratedHardwareReady").value("lastTransitionTime", ""),
            kube::RfcTime(clock.Now()));
}

TEST_F(KubeReporterTest, ChangesBetweenTwoWritesCoalesceIntoTheLatest) {
  reporter->Step();  // reads the Node
  reporter->SetConditions(Hw("False", "first"));
  reporter->SetConditions(Hw("False", "second"));
  reporter->SetConditions(Hw("False", "third"));
  reporter->Step();
  EXPECT_EQ(api->CountOk("PATCH", "/nodes/n1/status"), 1u);
  EXPECT_EQ(Condition("AcceleratedHardwareReady").value("message", ""), "third");
  reporter->Step();
  EXPECT_EQ(api->CountOk("PATCH", "/nodes/n1/status"), 1u) << "nothing new, no heartbeat due";
}

TEST_F(KubeReporterTest, BacksOffWhileTheServerFailsThenWritesTheCurrentTruthOnce) {
  reporter->Step();
  api->Fail("PATCH", "/nodes/n1/status", 503, 4);
  reporter->SetConditions(Hw("False", "old"));
  std::chrono::steady_clock::duration last{};
  for (int i = 0; i < 4; ++i) {
    const auto wake = reporter->Step();
    EXPECT_FALSE(reporter->api_ok());
    EXPECT_NE(reporter->last_error().find("503"), std::string::npos) << reporter->last_error();
    const auto wait = wake - clock.Steady();
    EXPECT_GE(wait, 100ms) << "jittered from 200 ms up";
    if (i >= 1) {
      EXPECT_GE(wait, last) << "backoff grows (equal jitter: [d/2, d], d doubling)";
    }
    last = wait;
    if (i == 2) reporter->SetConditions(Hw("False", "current"));
    clock.Advance(std::chrono::duration_cast<std::chrono::microseconds>(wait));
  }
  reporter->Step();
  EXPECT_TRUE(reporter->api_ok());
  EXPECT_EQ(reporter->last_error(), "");
  EXPECT_EQ(api->CountOk("PATCH", "/nodes/n1/status"), 1u);
  EXPECT_EQ(Condition("AcceleratedHardwareReady").value("message", ""), "current");
}

TEST_F(KubeReporterTest, TheHeartbeatIsRefreshedEachPeriod) {
  reporter->SetConditions(Hw("True", ""));
  const auto wake = reporter->Step();
  EXPECT_LE(wake - clock.Steady(), opts.heartbeat);
  clock.Advance(4min);
  reporter->Step();
  EXPECT_EQ(api->CountOk("PATCH", "/nodes/n1/status"), 1u);
  clock.Advance(1min);
  reporter->Step();
  EXPECT_EQ(api->CountOk("PATCH", "/nodes/n1/status"), 2u);
  EXPECT_EQ(Condition("AcceleratedHardwareReady").value("lastHeartbeatTime", ""),
            kube::RfcTime(clock.Now()));
}

TEST_F(KubeReporterTest, AnAnnotationTravelsWithTheConditions) {
  reporter->SetConditions(Hw("True", ""));
  reporter->SetAnnotation("gpuheal.io/gpu-faults", "{}");
  reporter->Step();
  EXPECT_EQ(api->Object(kube::NodePath("n1"))
                ->at("metadata")
                .at("annotations")
                .value("gpuheal.io/gpu-faults", ""),
            "{}");
}

TEST_F(KubeReporterTest, EventsKeepAPerReasonBudget) {
  reporter->SetConditions(Hw("True", ""));
  for (int i = 0; i < 5; ++i)
    reporter->RecordEvent("Warning", "NvidiaXID31Error", "x" + std::to_string(i));
  reporter->RecordEvent("Warning", "NvidiaXID79Error", "lost");
  reporter->Step(true);
  EXPECT_EQ(api->CountOk("POST", "/events"), 3u) << "2 of the first reason (burst), 1 other";
  clock.Advance(1min);
  reporter->RecordEvent("Warning", "NvidiaXID31Error", "later");
  reporter->Step(true);
  EXPECT_EQ(api->CountOk("POST", "/events"), 4u) << "one token refilled";
}

TEST_F(KubeReporterTest, EventsWaitForTheServerAndAreNotLost) {
  reporter->SetConditions(Hw("False", "a"));
  reporter->RecordEvent("Warning", "NvidiaXID79Error", "lost");
  api->Fail("GET", "/nodes/n1", 500, 1);
  reporter->Step(true);
  EXPECT_EQ(api->CountOk("POST", "/events"), 0u);
  reporter->Step(true);
  EXPECT_EQ(api->CountOk("POST", "/events"), 1u);
}

}  // namespace
}  // namespace gpuheal
