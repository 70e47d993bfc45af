// The Kubernetes client against a real local control plane (etcd + kube-apiserver).

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "kube_test_util.h"
#include "kube/client.h"

namespace gpuheal::kube {
namespace {

using gpuheal::testing::ControlPlaneEnv;

std::unique_ptr<Client> NewClient() { return gpuheal::testing::AdminClient(); }
nlohmann::json NodeObject(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"gpuheal.io/pool", "test"}}}}}};
}

TEST(KubeClient, NodeCrudThroughEveryPatchType) {
  auto c = NewClient();
  auto created = c->Create(NodePath(), NodeObject("crud-1"));
  ASSERT_TRUE(created.ok()) << created.error().message;
  ASSERT_EQ(created->status, 201) << created->Describe();
  auto node = DecodeNode(created->body);
  ASSERT_TRUE(node.ok());

  // Strategic merge on the status subresource, keyed by condition type.
  nlohmann::json cond = {{"status", {{"conditions", {{{"type", "AcceleratedHardwareReady"}, {"status", "False"},
                                                      {"reason", "NvidiaXID79Error"}, {"message", "GPU 0000:3b:00"}}}}}}};
  auto p1 = c->Patch(NodePath("crud-1") + "/status", PatchType::kStrategicMerge, cond);
  ASSERT_TRUE(p1.ok() && p1->ok()) << (p1 ? p1->Describe() : p1.error().message);
  auto p2 = c->Patch(NodePath("crud-1"), PatchType::kMerge, {{"metadata", {{"labels", {{"a", "b"}}}}}});
  ASSERT_TRUE(p2.ok() && p2->ok());
  auto p3 = c->Patch(NodePath("crud-1"), PatchType::kJson,
                     nlohmann::json::array({{{"op", "add"}, {"path", "/spec/unschedulable"}, {"value", true}}}));
  ASSERT_TRUE(p3.ok() && p3->ok()) << p3->Describe();

  auto got = c->Get(NodePath("crud-1"));
  ASSERT_TRUE(got.ok() && got->ok());
  auto n = DecodeNode(got->body);
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(n->unschedulable);
  EXPECT_EQ(n->meta.labels.at("a"), "b");
  EXPECT_EQ(n->meta.labels.at("gpuheal.io/pool"), "test");
  ASSERT_EQ(n->conditions.size(), 1u);
  EXPECT_EQ(n->conditions[0].reason, "NvidiaXID79Error");

  // A delete with a stale uid precondition is refused; the right one succeeds.
  auto wrong = c->Delete(NodePath("crud-1"), "not-the-uid");
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong->status, 409);
  auto del = c->Delete(NodePath("crud-1"), node->meta.uid);
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(del->status, 200) << del->Describe();
  EXPECT_EQ(c->Get(NodePath("crud-1"))->status, 404);
}

TEST(KubeClient, ConcurrentWriterForcesA409AndBothIntentsSurvive) {
  auto c = NewClient();
  ASSERT_EQ(c->Create(NodePath(), NodeObject("conflict-1"))->status, 201);
  int attempts = 0;
  auto r = c->Update(NodePath("conflict-1"), [&](nlohmann::json& obj) {
    if (++attempts == 1) {
      // Another writer gets in between our read and our write.
      auto other = c->Patch(NodePath("conflict-1"), PatchType::kMerge,
                            {{"spec", {{"taints", {{{"key", "other.io/t"}, {"effect", "NoSchedule"}}}}}}});
      EXPECT_TRUE(other.ok() && other->ok());
    }
    auto& taints = obj["spec"]["taints"];
    if (!taints.is_array()) taints = nlohmann::json::array();
    taints.push_back({{"key", "gpuheal.io/gpu-fault"}, {"value", "fatal"}, {"effect", "NoSchedule"}});
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200) << r->Describe();
  EXPECT_EQ(attempts, 2) << "the first write must have hit 409 and been re-applied";
  auto n = DecodeNode(c->Get(NodePath("conflict-1"))->body);
  ASSERT_EQ(n->taints.size(), 2u);
  EXPECT_EQ(n->taints[0].key, "other.io/t");
  EXPECT_EQ(n->taints[1].key, "gpuheal.io/gpu-fault");
}

TEST(KubeClient, ListsManyNodesAcrossPages) {
  auto c = NewClient();
  constexpr int kNodes = 1200;
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      for (int i = w; i < kNodes; i += 4) {
        auto r = c->Create(NodePath(), NodeObject("page-" + std::to_string(i)));
        if (!r || r->status != 201) ++failures;
      }
    });
  }
  for (auto& t : workers) t.join();
  ASSERT_EQ(failures, 0);
  int pages = 0;
  auto all = c->ListAll<Node>(NodePath() + "?labelSelector=gpuheal.io%2Fpool%3Dtest", DecodeNodeList, 500, &pages);
  ASSERT_TRUE(all.ok()) << all.error().message;
  int ours = 0;
  for (const Node& n : all->items) ours += n.meta.name.starts_with("page-");
  EXPECT_EQ(ours, kNodes);
  EXPECT_EQ(pages, 3);
}

TEST(KubeClient, WatchResumesFromAResourceVersion) {
  auto c = NewClient();
  auto list = c->ListAll<Node>(NodePath(), DecodeNodeList);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(c->Create(NodePath(), NodeObject("watch-1"))->status, 201);
  std::vector<std::string> seen;
  auto w = c->Watch(NodePath(), list->resource_version, [&](const WatchEventRaw& ev) {
    if (ev.type == "BOOKMARK") return true;
    auto n = DecodeNode(ev.object);
    if (n.ok()) seen.push_back(ev.type + " " + n->meta.name);
    return !(n.ok() && n->meta.name == "watch-1");
  }, std::chrono::seconds(10));
  ASSERT_TRUE(w.ok()) << w.error().message;
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), "ADDED watch-1");

}

}  // namespace
}  // namespace gpuheal::kube

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new gpuheal::testing::ControlPlaneEnv(false));
  return RUN_ALL_TESTS();
}
