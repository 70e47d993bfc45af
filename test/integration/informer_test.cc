// The informer against a real control plane. Nodes are served without the API server's watch
// cache (--watch-cache-sizes=nodes#0), so that compacting etcd makes an old resourceVersion
// answer 410 Gone, as it does in a cluster after a long disconnect; pods keep the cache (and
// its bookmarks).

#include "kube/informer.h"

#include <curl/curl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "kube_test_util.h"

namespace gpuheal::kube {
namespace {

using gpuheal::testing::AdminClient;
using gpuheal::testing::ControlPlaneEnv;
using gpuheal::testing::Eventually;
using gpuheal::testing::NodeJson;
using gpuheal::testing::PodJson;

// What the handlers saw: per object, the list of deliveries ("add", "update", "delete").
struct Recorder {
  std::mutex mu;
  std::map<std::string, std::vector<std::string>> seen;
  template <typename T>
  typename Informer<T>::Handlers Handlers() {
    return {[this](const T& o) { Note(ObjectKey(o), "add"); },
            [this](const T&, const T& o) { Note(ObjectKey(o), "update"); },
            [this](const T& o) { Note(ObjectKey(o), "delete"); }};
  }
  void Note(const std::string& k, const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    seen[k].push_back(what);
  }
  std::vector<std::string> Of(const std::string& k) {
    std::lock_guard<std::mutex> lock(mu);
    return seen[k];
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu);
    seen.clear();
  }
};

// Compacts etcd's history up to its current revision (etcd's v3 JSON gateway).
std::string EtcdPost(const std::string& path, const std::string& body) {
  CURL* h = curl_easy_init();
  std::string out;
  const std::string url = ControlPlaneEnv::etcd_url() + path;
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(
      h, CURLOPT_WRITEFUNCTION, +[](char* p, size_t s, size_t n, void* u) {
        static_cast<std::string*>(u)->append(p, s * n);
        return s * n;
      });
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
  EXPECT_EQ(curl_easy_perform(h), CURLE_OK);
  curl_easy_cleanup(h);
  return out;
}
void CompactEtcd() {
  auto range = nlohmann::json::parse(EtcdPost("/v3/kv/range", R"({"key":"AA=="})"));
  const std::string rev = range["header"]["revision"];
  auto r = nlohmann::json::parse(
      EtcdPost("/v3/kv/compaction", R"({"physical":true,"revision":")" + rev + "\"}"));
  ASSERT_TRUE(r.contains("header")) << r.dump();
}

TEST(Informer, ListsWatchesAndIndexesPodsByNode) {
  auto c = AdminClient();
  for (const char* n : {"idx-a", "idx-b"})
    ASSERT_EQ(c->Create(NodePath(), NodeJson(n))->status, 201);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(c->Create(PodPath("default"), PodJson("default", "a-" + std::to_string(i), "idx-a"))
                  ->status,
              201);
  }
  ASSERT_EQ(c->Create(PodPath("default"), PodJson("default", "b-0", "idx-b"))->status, 201);
  ASSERT_EQ(c->Create(PodPath("default"), PodJson("default", "unscheduled", ""))->status, 201);

  Recorder rec;
  Informer<Pod> pods(*c, PodPath(""), DecodePodList, DecodePod);
  pods.AddIndex("node", PodNodeIndex);
  pods.SetHandlers(rec.Handlers<Pod>());
  pods.Start();
  ASSERT_TRUE(pods.WaitForSynced(std::chrono::seconds(10)));
  EXPECT_EQ(pods.Size(), 5u);
  EXPECT_EQ(pods.ByIndex("node", "idx-a").size(), 3u);
  EXPECT_EQ(pods.ByIndex("node", "idx-b").size(), 1u);
  EXPECT_EQ(rec.Of("default/a-0"), std::vector<std::string>{"add"});

  // Changes after the list arrive through the watch, once each, and move the index.
  ASSERT_EQ(c->Create(PodPath("default"), PodJson("default", "b-1", "idx-b"))->status, 201);
  ASSERT_EQ(c->Delete(PodPath("default", "a-2"), "", "", 0)->status, 200);
  ASSERT_TRUE(c->Patch(PodPath("default", "a-0"), PatchType::kMerge,
                       {{"metadata", {{"labels", {{"x", "y"}}}}}})
                  ->ok());
  ASSERT_TRUE(Eventually(
      [&] {
        return pods.ByIndex("node", "idx-b").size() == 2 &&
               pods.ByIndex("node", "idx-a").size() == 2 && rec.Of("default/a-0").size() == 2;
      },
      std::chrono::seconds(5)));
  EXPECT_EQ(rec.Of("default/b-1"), std::vector<std::string>{"add"});
  // A deleted pod may first be updated (deletionTimestamp set), then deleted: once, last.
  const auto a2 = rec.Of("default/a-2");
  ASSERT_GE(a2.size(), 2u);
  EXPECT_EQ(a2.front(), "add");
  EXPECT_EQ(a2.back(), "delete");
  EXPECT_EQ(std::count(a2.begin(), a2.end(), "delete"), 1);
  EXPECT_EQ(rec.Of("default/a-0"), (std::vector<std::string>{"add", "update"}));
  EXPECT_EQ(pods.Get("default/a-0")->meta.labels.at("x"), "y");
  EXPECT_FALSE(pods.Get("default/a-2").has_value());
  EXPECT_EQ(pods.Stats().lists, 1u);
}

TEST(Informer, ResumesFromItsResourceVersionWithoutRelisting) {
  auto c = AdminClient();
  Recorder rec;
  Informer<Pod> pods(*c, PodPath("default"), DecodePodList, DecodePod);
  pods.SetHandlers(rec.Handlers<Pod>());
  pods.Start();
  ASSERT_TRUE(pods.WaitForSynced(std::chrono::seconds(10)));
  pods.Stop();  // the connection is gone for a while
  ASSERT_EQ(c->Create(PodPath("default"), PodJson("default", "while-away", "idx-a"))->status, 201);
  rec.Clear();
  pods.Start();
  ASSERT_TRUE(Eventually([&] { return pods.Get("default/while-away").has_value(); },
                         std::chrono::seconds(5)));
  EXPECT_EQ(rec.Of("default/while-away"), std::vector<std::string>{"add"});
  EXPECT_EQ(pods.Stats().lists, 1u) << "resumed from its resourceVersion, no relist";
  EXPECT_EQ(pods.Stats().relists_gone, 0u);
}

TEST(Informer, A410AfterCompactionRelistsWithNoMissedOrDuplicatedEvent) {
  auto c = AdminClient();
  for (const char* n : {"gone-keep", "gone-change", "gone-delete"}) {
    ASSERT_EQ(c->Create(NodePath(), NodeJson(n))->status, 201);
  }
  Recorder rec;
  Informer<Node> nodes(*c, NodePath() + "?labelSelector=gpuheal.io%2Fpool%3Dtest", DecodeNodeList,
                       DecodeNode);
  nodes.SetHandlers(rec.Handlers<Node>());
  nodes.Start();
  ASSERT_TRUE(nodes.WaitForSynced(std::chrono::seconds(10)));
  ASSERT_TRUE(Eventually([&] { return nodes.Stats().watches >= 1; }, std::chrono::seconds(5)));
  nodes.Stop();
  rec.Clear();

  // While it is away: one node added, one changed, one deleted; then the history is compacted.
  ASSERT_EQ(c->Create(NodePath(), NodeJson("gone-new"))->status, 201);
  ASSERT_TRUE(c->Patch(NodePath("gone-change"), PatchType::kMerge,
                       {{"metadata", {{"labels", {{"v", "2"}}}}}})
                  ->ok());
  ASSERT_EQ(c->Delete(NodePath("gone-delete"))->status, 200);
  CompactEtcd();

  nodes.Start();
  ASSERT_TRUE(
      Eventually([&] { return nodes.Stats().relists_gone == 1 && nodes.Stats().lists == 2; },
                 std::chrono::seconds(10)))
      << nodes.Stats().last_error;
  ASSERT_TRUE(Eventually([&] { return !nodes.Get("gone-delete"); }, std::chrono::seconds(5)));
  EXPECT_EQ(rec.Of("gone-new"), std::vector<std::string>{"add"});
  EXPECT_EQ(rec.Of("gone-change"), std::vector<std::string>{"update"});
  EXPECT_EQ(rec.Of("gone-delete"), std::vector<std::string>{"delete"});
  EXPECT_TRUE(rec.Of("gone-keep").empty()) << "unchanged objects are not re-delivered";
  EXPECT_EQ(nodes.Get("gone-change")->meta.labels.at("v"), "2");

  // The store equals the server's list, object for object.
  auto truth =
      c->ListAll<Node>(NodePath() + "?labelSelector=gpuheal.io%2Fpool%3Dtest", DecodeNodeList);
  ASSERT_TRUE(truth.ok());
  std::map<std::string, std::string> want, got;
  for (const auto& n : truth->items) want[n.meta.name] = n.meta.resource_version;
  for (const auto& n : nodes.Items()) got[n.meta.name] = n.meta.resource_version;
  EXPECT_EQ(got, want);

  // And the watch goes on after the relist.
  ASSERT_EQ(c->Create(NodePath(), NodeJson("gone-after"))->status, 201);
  EXPECT_TRUE(
      Eventually([&] { return nodes.Get("gone-after").has_value(); }, std::chrono::seconds(5)));
  EXPECT_EQ(rec.Of("gone-after"), std::vector<std::string>{"add"});
}

TEST(Informer, BookmarksAdvanceTheResourceVersion) {
  auto c = AdminClient();
  InformerOptions opts;
  opts.watch_timeout = std::chrono::seconds(90);
  Informer<Pod> pods(*c, PodPath("kube-system"), DecodePodList, DecodePod, opts);
  pods.Start();
  ASSERT_TRUE(pods.WaitForSynced(std::chrono::seconds(10)));
  const std::string listed = pods.ResourceVersion();
  // Pod changes this watch filters out (another namespace) move the resourceVersion on; the API
  // server's watch cache tells the idle watcher with a bookmark, about once a minute.
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(c->Create(PodPath("default"), PodJson("default", "bookmark-" + std::to_string(i), ""))
                  ->status,
              201);
  }
  ASSERT_TRUE(Eventually([&] { return pods.Stats().bookmarks >= 1; }, std::chrono::seconds(75)));
  EXPECT_GT(std::stoll(pods.ResourceVersion()), std::stoll(listed));
  EXPECT_EQ(pods.Stats().events, 0u);
}

}  // namespace
}  // namespace gpuheal::kube

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(
      new gpuheal::testing::ControlPlaneEnv(false, {"--watch-cache-sizes=nodes#0"}));
  return RUN_ALL_TESTS();
}
