#include "controller/budget_backoff.h"

#include <gtest/gtest.h>

#include "kube/objects.h"

namespace gpuheal::controller {
namespace {

using namespace std::chrono_literals;
using SysTime = BudgetBackoff::SysTime;

// The 429 bodies kube-apiserver's eviction subresource writes (pkg/registry/core/pod/storage).
kube::ApiStatus Refusal(const std::string& cause_message, int retry_after = 0) {
  std::string body =
      R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"Cannot evict pod as it would violate the pod's disruption budget.","reason":"TooManyRequests","details":{"causes":[{"reason":"DisruptionBudget","message":")" +
      cause_message + R"("}])";
  if (retry_after) body += R"(,"retryAfterSeconds":)" + std::to_string(retry_after);
  body += R"(},"code":429})";
  return kube::DecodeStatus(body);
}

TEST(BudgetBackoffTest, TheBudgetIsReadFromEachCauseTheApiServerWrites) {
  EXPECT_EQ(BudgetBackoff::BudgetName(Refusal(
                "The disruption budget train-pdb needs 2 healthy pods and has 2 currently")),
            "train-pdb");
  const auto stale =
      Refusal("The disruption budget web is still being processed by the server.", 10);
  EXPECT_EQ(BudgetBackoff::BudgetName(stale), "web");
  EXPECT_EQ(stale.retry_after_seconds, 10);
  EXPECT_EQ(stale.code, 429);
  EXPECT_EQ(BudgetBackoff::BudgetName(
                Refusal("The disruption budget db does not allow evicting pods currently")),
            "db");
  EXPECT_EQ(BudgetBackoff::BudgetName(kube::DecodeStatus(
                R"({"kind":"Status","code":429,"message":"Too many requests"})")),
            "")
      << "a 429 of the API server's own rate limits names no budget";
  EXPECT_EQ(BudgetBackoff::BudgetName(Refusal("something else")), "");
}

TEST(BudgetBackoffTest, OneProbePerBudgetWithADoublingDelayThatResetsOnAnEviction) {
  BudgetBackoff b;
  const SysTime t0{};
  const auto full = Refusal("The disruption budget tr needs 2 healthy pods and has 2 currently");
  EXPECT_FALSE(b.Wait("work/a", t0)) << "a pod never refused is not held";
  EXPECT_EQ(b.Refused("work/a", full, t0), "work/tr");
  EXPECT_EQ(b.Refused("work/b", full, t0), "work/tr");
  EXPECT_EQ(b.BudgetOf("work/b"), "work/tr");
  // Two refusals at once: 1 s, then 2 s.
  ASSERT_TRUE(b.Wait("work/a", t0 + 1s));
  EXPECT_EQ(*b.Wait("work/a", t0 + 1s), t0 + 2s);
  EXPECT_FALSE(b.Wait("work/b", t0 + 2s)) << "b takes the probe";
  EXPECT_TRUE(b.Wait("work/a", t0 + 2s)) << "a waits for b's answer";
  std::chrono::milliseconds want{4000};
  SysTime now = t0 + 2s;
  for (int i = 0; i < 5; ++i) {  // 4, 8, 16, then capped at 16
    b.Refused("work/b", full, now);
    EXPECT_EQ(*b.HeldUntil("work/a"), now + want) << i;
    now += want;
    want = std::min(want * 2, std::chrono::milliseconds(BudgetBackoff::kMax));
  }
  // Another budget in the namespace, and the same name in another namespace, are not held.
  EXPECT_FALSE(b.Wait("work/c", now));
  EXPECT_EQ(b.Refused("other/x", full, now), "other/tr");
  EXPECT_EQ(*b.HeldUntil("other/x"), now + 1s) << "its own, first delay";
  // Room in the budget: b is evicted, a goes at once.
  b.Evicted("work/b");
  EXPECT_FALSE(b.Wait("work/a", now));
  EXPECT_FALSE(b.HeldUntil("work/a"));
  EXPECT_TRUE(b.HeldUntil("other/x"));
}

TEST(BudgetBackoffTest, TheServersRetryAfterIsTheLeastDelay) {
  BudgetBackoff b;
  const SysTime t0{};
  b.Refused("work/a",
            Refusal("The disruption budget web is still being processed by the server.", 10), t0);
  EXPECT_EQ(*b.HeldUntil("work/a"), t0 + 10s);
}

TEST(BudgetBackoffTest, ARefusalNamingNoBudgetHoldsNothing) {
  BudgetBackoff b;
  EXPECT_EQ(b.Refused("work/a", kube::DecodeStatus(R"({"kind":"Status","code":429})"), SysTime{}),
            "");
  EXPECT_FALSE(b.HeldUntil("work/a"));
  EXPECT_FALSE(b.Wait("work/a", SysTime{}));
}

TEST(BudgetBackoffTest, PodsOfLongReleasedBudgetsAreForgotten) {
  BudgetBackoff b;
  const auto full = Refusal("The disruption budget tr needs 2 healthy pods and has 2 currently");
  SysTime now{};
  for (int i = 0; i < 5000; ++i) b.Refused("work/p" + std::to_string(i), full, now);
  now += 10min;
  const auto other = Refusal("The disruption budget web needs 1 healthy pods and has 1 currently");
  b.Refused("work/q", other, now);
  EXPECT_FALSE(b.HeldUntil("work/p1")) << "pruned once the map is large and the budget stale";
  EXPECT_TRUE(b.HeldUntil("work/q"));
}

}  // namespace
}  // namespace gpuheal::controller
