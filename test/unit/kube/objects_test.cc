#include "kube/objects.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpuheal::kube {
namespace {

constexpr const char* kNode = R"({"kind":"Node","apiVersion":"v1",
 "metadata":{"name":"gpu-1","uid":"u1","resourceVersion":"42","labels":{"gpuheal.io/pool":"a"},
   "annotations":{"gpuheal.io/x":"1","other.io/y":"big"}},
 "spec":{"unschedulable":true,"taints":[{"key":"gpuheal.io/gpu-fault","value":"fatal","effect":"NoSchedule"}]},
 "status":{"capacity":{"cpu":"96","nvidia.com/gpu":"8"},
   "conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"ok",
     "lastTransitionTime":"2026-11-30T04:00:00Z"}]}})";

TEST(Objects, DecodesTheNodeProjection) {
  auto n = DecodeNode(kNode);
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_EQ(n->meta.name, "gpu-1");
  EXPECT_EQ(n->meta.resource_version, "42");
  EXPECT_EQ(n->meta.labels.at("gpuheal.io/pool"), "a");
  EXPECT_EQ(n->meta.annotations.size(), 1u) << "only gpuheal.io/ annotations are kept";
  EXPECT_TRUE(n->unschedulable);
  ASSERT_EQ(n->taints.size(), 1u);
  EXPECT_EQ(n->taints[0].effect, "NoSchedule");
  EXPECT_EQ(n->gpu_capacity, 8);
  ASSERT_EQ(n->conditions.size(), 1u);
  EXPECT_EQ(n->conditions[0].reason, "KubeletReady");
}

// What the controller's informer handlers use to skip updates it has no reason to look at.
TEST(Objects, AHeartbeatIsNoChangeButAConditionOrTaintIs) {
  auto base = DecodeNode(kNode);
  ASSERT_TRUE(base.ok());
  auto with = [](std::string json, const std::string& from, const std::string& to) {
    json.replace(json.find(from), from.size(), to);
    auto n = DecodeNode(json);
    EXPECT_TRUE(n.ok()) << n.error().message;
    return *n;
  };
  // A kubelet heartbeat: a new resourceVersion and lastHeartbeatTime, nothing else.
  std::string beat = kNode;
  beat.replace(beat.find(R"("resourceVersion":"42")"), 22, R"("resourceVersion":"43")");
  const Node heartbeat = with(beat, R"("message":"ok",)",
                              R"("message":"ok","lastHeartbeatTime":"2026-11-30T05:00:00Z",)");
  EXPECT_EQ(heartbeat.meta.resource_version, "43");
  EXPECT_FALSE(ChangedBeyondVersion(*base, heartbeat));
  EXPECT_FALSE(
      ChangedBeyondVersion(*base, with(kNode, R"("other.io/y":"big")", R"("other.io/y":"bigger")")))
      << "an annotation the projection drops";
  EXPECT_TRUE(
      ChangedBeyondVersion(*base, with(kNode, R"("status":"True")", R"("status":"False")")));
  EXPECT_TRUE(
      ChangedBeyondVersion(*base, with(kNode, R"("value":"fatal")", R"("value":"catastrophic")")));
  EXPECT_TRUE(
      ChangedBeyondVersion(*base, with(kNode, R"("gpuheal.io/x":"1")", R"("gpuheal.io/x":"2")")));
  EXPECT_TRUE(ChangedBeyondVersion(
      *base, with(kNode, R"("unschedulable":true)", R"("unschedulable":false)")));
  EXPECT_TRUE(ChangedBeyondVersion(
      *base, with(kNode, R"("nvidia.com/gpu":"8")", R"("nvidia.com/gpu":"7")")));

  auto pod = DecodePod(
      R"({"metadata":{"namespace":"ml","name":"p","resourceVersion":"1"},"spec":{"nodeName":"gpu-1"},
                           "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}})");
  auto pod2 = DecodePod(
      R"({"metadata":{"namespace":"ml","name":"p","resourceVersion":"2"},"spec":{"nodeName":"gpu-1"},
                            "status":{"phase":"Running","conditions":[{"type":"Ready","status":"False"}]}})");
  auto pod3 = DecodePod(
      R"({"metadata":{"namespace":"ml","name":"p","resourceVersion":"3"},"spec":{"nodeName":"gpu-1"},
                            "status":{"phase":"Failed"}})");
  ASSERT_TRUE(pod.ok() && pod2.ok() && pod3.ok());
  EXPECT_FALSE(ChangedBeyondVersion(*pod, *pod2))
      << "the pod's Ready condition is not in the projection";
  EXPECT_TRUE(ChangedBeyondVersion(*pod2, *pod3));
}

TEST(Objects, DecodesPodsAndLists) {
  auto list =
      DecodePodList(R"({"kind":"PodList","metadata":{"resourceVersion":"77","continue":"abc"},
   "items":[{"metadata":{"namespace":"ml","name":"p","uid":"u","deletionTimestamp":"2026-11-30T04:00:00Z",
     "ownerReferences":[{"kind":"ReplicaSet","name":"rs","controller":true}]},
     "spec":{"nodeName":"gpu-1","containers":[{"name":"a","resources":{"limits":{"nvidia.com/gpu":"2"}}},
       {"name":"b","resources":{"requests":{"nvidia.com/gpu":"1"},"limits":{"nvidia.com/gpu":"1"}}}]},
     "status":{"phase":"Running"}}]})");
  ASSERT_TRUE(list.ok()) << list.error().message;
  EXPECT_EQ(list->resource_version, "77");
  EXPECT_EQ(list->continue_token, "abc");
  ASSERT_EQ(list->items.size(), 1u);
  const Pod& p = list->items[0];
  EXPECT_EQ(p.meta.namespace_, "ml");
  EXPECT_TRUE(p.meta.deleting);
  EXPECT_EQ(p.meta.controller_kind, "ReplicaSet");
  EXPECT_EQ(p.node_name, "gpu-1");
  EXPECT_EQ(p.gpu_requests, 3);
  EXPECT_EQ(p.phase, "Running");
}

TEST(Objects, WatchEventsAndStatus) {
  auto ev = DecodeWatchEvent(R"({"type":"MODIFIED","object":)" + std::string(kNode) + "}");
  ASSERT_TRUE(ev.ok()) << ev.error().message;
  EXPECT_EQ(ev->type, "MODIFIED");
  EXPECT_EQ(ev->resource_version, "42");
  EXPECT_TRUE(DecodeNode(ev->object).ok());
  auto gone = DecodeWatchEvent(
      R"({"type":"ERROR","object":{"kind":"Status","status":"Failure","message":"too old resource version","reason":"Expired","code":410}})");
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->error_code, 410);
  const ApiStatus s = DecodeStatus(
      R"({"kind":"Status","code":409,"reason":"Conflict","message":"the object has been modified"})");
  EXPECT_EQ(s.code, 409);
  EXPECT_EQ(s.reason, "Conflict");
}

TEST(Objects, MalformedJsonIsAnErrorNotACrash) {
  for (const char* bad : {"", "{", "[]", R"({"metadata":5})", R"({"spec":{"taints":{}}})",
                          R"({"type":"ADDED","object":)", "not json at all"}) {
    EXPECT_FALSE(DecodeNode(bad).ok() && std::string(bad).empty()) << bad;
    (void)DecodeWatchEvent(bad);
    (void)DecodePodList(bad);
    (void)DecodeStatus(bad);
  }
  EXPECT_FALSE(DecodeNode("{").ok());
  EXPECT_FALSE(DecodeWatchEvent(R"({"object":{}})").ok());
  EXPECT_EQ(ParseCount("8"), 8);
  EXPECT_EQ(ParseCount("x"), 0);
}

// A budget's selector is kept as JSON for the drain's grouping; a null selector selects no pod.
TEST(Objects, ABudgetKeepsItsSelectorAndStatus) {
  auto b = DecodePdb(R"({"metadata":{"name":"tr","namespace":"ev"},
      "spec":{"minAvailable":0,"selector":{"matchLabels":{"app":"n1"}}},
      "status":{"disruptionsAllowed":8,"currentHealthy":8,"desiredHealthy":0}})");
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->meta.name, "tr");
  EXPECT_EQ(nlohmann::json::parse(b->selector),
            nlohmann::json::parse(R"({"matchLabels":{"app":"n1"}})"));
  EXPECT_EQ(b->disruptions_allowed, 8);
  auto none = DecodePdb(R"({"metadata":{"name":"x","namespace":"ev"},"spec":{"selector":null}})");
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(none->selector, "");
  auto list = DecodePdbList(R"({"metadata":{"resourceVersion":"7"},"items":[
      {"metadata":{"name":"a","namespace":"ev"},"spec":{"selector":{"matchLabels":{"app":"a"}}}}]})");
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_EQ(list->items.size(), 1u);
  EXPECT_NE(list->items[0].selector.find("matchLabels"), std::string::npos);
}

}  // namespace
}  // namespace gpuheal::kube
