// Evictions through the Eviction API against a control plane with kube-controller-manager, whose
// disruption controller computes PodDisruptionBudget status. No kubelet runs: the test reports
// pods Running and Ready through pods/status, as a kubelet would.

#include <gtest/gtest.h>

#include "kube_test_util.h"

namespace gpuheal::kube {
namespace {

using gpuheal::testing::AdminClient;
using gpuheal::testing::Eventually;
using gpuheal::testing::NodeJson;
using gpuheal::testing::PodJson;

constexpr const char* kNs = "evict";

void CreateReadyPod(Client& c, const std::string& name, const nlohmann::json& labels) {
  // The namespace's default ServiceAccount (which admission requires) appears shortly after the
  // namespace: retry until it does.
  ASSERT_TRUE(Eventually(
      [&] { return c.Create(PodPath(kNs), PodJson(kNs, name, "ev-node", labels))->status == 201; },
      std::chrono::seconds(20)));
  const nlohmann::json status = {{"status",
                                  {{"phase", "Running"},
                                   {"conditions",
                                    {{{"type", "Ready"}, {"status", "True"}},
                                     {{"type", "ContainersReady"}, {"status", "True"}}}}}}};
  auto r = c.Patch(PodPath(kNs, name) + "/status", PatchType::kStrategicMerge, status);
  ASSERT_TRUE(r.ok() && r->ok()) << (r ? r->Describe() : r.error().message);
}

PodDisruptionBudget Pdb(Client& c, const std::string& name) {
  auto r = c.Get(PdbPath(kNs, name));
  auto p = DecodePdb(r->body);
  return p.ok() ? *p : PodDisruptionBudget{};
}

TEST(Eviction, AllowedRefusedByABudgetThenAllowedWhenItHasRoom) {
  auto c = AdminClient();
  ASSERT_EQ(c->Create("/api/v1/namespaces",
                      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNs}}}})
                ->status,
            201);
  ASSERT_EQ(c->Create(NodePath(), NodeJson("ev-node"))->status, 201);

  // No budget covers this pod: the eviction is granted.
  CreateReadyPod(*c, "free", {{"app", "web"}});
  auto free = c->Evict(kNs, "free");
  ASSERT_TRUE(free.ok()) << free.error().message;
  EXPECT_EQ(free->status, 201) << free->Describe();

  CreateReadyPod(*c, "train-0", {{"app", "train"}});
  CreateReadyPod(*c, "train-1", {{"app", "train"}});
  nlohmann::json pdb = {
      {"apiVersion", "policy/v1"},
      {"kind", "PodDisruptionBudget"},
      {"metadata", {{"name", "train"}, {"namespace", kNs}}},
      {"spec", {{"minAvailable", 2}, {"selector", {{"matchLabels", {{"app", "train"}}}}}}}};
  ASSERT_EQ(c->Create(PdbPath(kNs), pdb)->status, 201);
  ASSERT_TRUE(
      Eventually([&] { return Pdb(*c, "train").current_healthy == 2; }, std::chrono::seconds(30)));
  EXPECT_EQ(Pdb(*c, "train").disruptions_allowed, 0);

  // The budget refuses: 429, returned at once (never retried by the client), the pod untouched.
  const auto t0 = std::chrono::steady_clock::now();
  auto refused = c->Evict(kNs, "train-0");
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 429) << refused->Describe();
  EXPECT_NE(refused->Describe().find("disruption budget"), std::string::npos)
      << refused->Describe();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  auto pod = DecodePod(c->Get(PodPath(kNs, "train-0"))->body);
  ASSERT_TRUE(pod.ok());
  EXPECT_FALSE(pod->meta.deleting);

  // A third replica gives the budget room; the same eviction, retried, is granted.
  CreateReadyPod(*c, "train-2", {{"app", "train"}});
  ASSERT_TRUE(Eventually([&] { return Pdb(*c, "train").disruptions_allowed == 1; },
                         std::chrono::seconds(30)));
  auto granted = c->Evict(kNs, "train-0");
  ASSERT_TRUE(granted.ok());
  EXPECT_EQ(granted->status, 201) << granted->Describe();
  auto after = c->Get(PodPath(kNs, "train-0"));
  EXPECT_TRUE(after->status == 404 || DecodePod(after->body)->meta.deleting);
  // The grant used the room up: the next one is refused again.
  EXPECT_EQ(c->Evict(kNs, "train-1")->status, 429);
}

}  // namespace
}  // namespace gpuheal::kube

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new gpuheal::testing::ControlPlaneEnv(true));
  return RUN_ALL_TESTS();
}
