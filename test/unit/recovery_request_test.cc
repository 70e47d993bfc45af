#include "core/recovery_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpuheal {
namespace {

TEST(RecoveryRequest, ParsesNormalisesAndRejectsWithReasons) {
  auto r = ParseRecoveryRequest(
      R"({"id": "nr-7", "gpus": ["00000000:3B:00.0", "0000:3b:00", "0000:86:00"]})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->id, "nr-7");
  EXPECT_EQ(r->gpus, (std::vector<std::string>{"0000:3b:00", "0000:86:00"}))
      << "normalised, duplicates dropped";
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           {"{", "is not JSON"},
           {"[]", "is not a JSON object"},
           {R"({"gpus": ["0000:3b:00"]})", "\"id\" must be a non-empty string"},
           {R"({"id": "a", "gpus": "0000:3b:00"})", "\"gpus\" must be a list"},
           {R"({"id": "a", "gpus": []})", "\"gpus\" is empty"},
           {R"({"id": "a", "gpus": ["gpu0"]})", "\"gpu0\" is not a PCI bus id"}}) {
    auto bad = ParseRecoveryRequest(text);
    ASSERT_FALSE(bad) << text;
    EXPECT_NE(bad.error().message.find(want), std::string::npos) << bad.error().message;
    EXPECT_EQ(bad.error().message.rfind("gpuheal.io/gpu-recovery-request", 0), 0u)
        << "names the annotation";
  }
}

TEST(RecoveryRequest, StatusSettlesWhenEveryGpuIsDone) {
  RecoveryStatus s;
  s.id = "nr-1";
  s.gpus["0000:3b:00"] = {"reset", true, false, ""};
  s.gpus["0000:86:00"] = {"done", true, true, "ok"};
  s.Settle();
  EXPECT_EQ(s.state, "running");
  s.gpus["0000:3b:00"] = {"done", false, true, "reset failed"};
  s.Settle();
  EXPECT_EQ(s.state, "failed");
  s.gpus["0000:3b:00"].ok = true;
  s.Settle();
  EXPECT_EQ(s.state, "succeeded");
  const auto j = nlohmann::json::parse(s.ToJson("2026-11-30T08:00:00Z"));
  EXPECT_EQ(j["id"], "nr-1");
  EXPECT_EQ(j["gpus"]["0000:86:00"]["step"], "done");
  EXPECT_EQ(j["updated"], "2026-11-30T08:00:00Z");
}

TEST(RecoveryRequest, TheControllerReadsTheAnswer) {
  RecoveryStatus s;
  s.id = "nr-1";
  s.gpus["0000:3b:00"] = {"reset", false, true, "exit 3"};
  s.Settle();
  auto a = ParseRecoveryStatus(s.ToJson("2026-11-30T08:00:00Z"));
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->id, "nr-1");
  EXPECT_EQ(a->state, "failed");
  EXPECT_EQ(a->detail, "GPU 0000:3b:00: reset: exit 3");
  auto rejected = ParseRecoveryStatus(
      R"({"id": "nr-2", "state": "rejected", "error": "not a PCI bus id", "gpus": {}})");
  ASSERT_TRUE(rejected);
  EXPECT_EQ(rejected->detail, "not a PCI bus id");
  for (const char* bad : {"", "{", "[]", R"({"id": "x"})", R"({"id": "x", "state": "done"})"}) {
    auto r = ParseRecoveryStatus(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("gpuheal.io/gpu-recovery-status"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpuheal
