// The Kubernetes client against a real local control plane (etcd + kube-apiserver).

#include "kube/client.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <thread>

#include "agent_process.h"
#include "kube/events.h"
#include "kube_test_util.h"

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
  nlohmann::json cond = {{"status",
                          {{"conditions",
                            {{{"type", "AcceleratedHardwareReady"},
                              {"status", "False"},
                              {"reason", "NvidiaXID79Error"},
                              {"message", "GPU 0000:3b:00"}}}}}}};
  auto p1 = c->Patch(NodePath("crud-1") + "/status", PatchType::kStrategicMerge, cond);
  ASSERT_TRUE(p1.ok() && p1->ok()) << (p1 ? p1->Describe() : p1.error().message);
  auto p2 =
      c->Patch(NodePath("crud-1"), PatchType::kMerge, {{"metadata", {{"labels", {{"a", "b"}}}}}});
  ASSERT_TRUE(p2.ok() && p2->ok());
  auto p3 = c->Patch(
      NodePath("crud-1"), PatchType::kJson,
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
      auto other =
          c->Patch(NodePath("conflict-1"), PatchType::kMerge,
                   {{"spec", {{"taints", {{{"key", "other.io/t"}, {"effect", "NoSchedule"}}}}}}});
      EXPECT_TRUE(other.ok() && other->ok());
    }
    auto& taints = obj["spec"]["taints"];
    if (!taints.is_array()) taints = nlohmann::json::array();
    taints.push_back(
        {{"key", "gpuheal.io/gpu-fault"}, {"value", "fatal"}, {"effect", "NoSchedule"}});
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
  auto all = c->ListAll<Node>(NodePath() + "?labelSelector=gpuheal.io%2Fpool%3Dtest",
                              DecodeNodeList, 500, &pages);
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
  auto w = c->Watch(
      NodePath(), list->resource_version,
      [&](const WatchEventRaw& ev) {
        if (ev.type == "BOOKMARK") return true;
        auto n = DecodeNode(ev.object);
        if (n.ok()) seen.push_back(ev.type + " " + n->meta.name);
        return !(n.ok() && n->meta.name == "watch-1");
      },
      std::chrono::seconds(10));
  ASSERT_TRUE(w.ok()) << w.error().message;
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), "ADDED watch-1");
}

TEST(KubeClient, EventsAreDeduplicatedIntoOneObjectWithACount) {
  auto c = NewClient();
  EventRecorderOptions opts;
  opts.host = "ev-node";
  opts.patch_interval = std::chrono::seconds(30);
  EventRecorder rec(*c, opts);
  const ObjectReference node{"Node", "v1", "", "ev-node", "ev-node"};
  for (int i = 0; i < 1000; ++i) {
    auto r = rec.Record(node, "Warning", "NvidiaXID13Error",
                        "GPU 0000:3b:00.0: Xid 13 (graphics engine exception)");
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  ASSERT_TRUE(
      rec.Record(node, "Warning", "NvidiaXID31Error", "GPU 0000:3b:00.0: Xid 31 (MMU fault)").ok());
  EXPECT_EQ(rec.stats().created, 2u);
  EXPECT_EQ(rec.stats().patched, 0u);
  EXPECT_EQ(rec.stats().suppressed, 999u);
  rec.Flush(true);  // the pending count is written once
  EXPECT_EQ(rec.stats().patched, 1u);
  rec.Flush(true);  // nothing new: nothing written
  EXPECT_EQ(rec.stats().patched, 1u);

  auto list =
      c->Get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dev-node");
  ASSERT_TRUE(list.ok() && list->ok());
  auto j = nlohmann::json::parse(list->body);
  ASSERT_EQ(j["items"].size(), 2u);
  std::map<std::string, int> counts;
  for (const auto& ev : j["items"]) {
    counts[ev["reason"]] = ev["count"];
    EXPECT_EQ(ev["type"], "Warning");
    EXPECT_EQ(ev["involvedObject"]["kind"], "Node");
    EXPECT_EQ(ev["source"]["host"], "ev-node");
  }
  EXPECT_EQ(counts["NvidiaXID13Error"], 1000);
  EXPECT_EQ(counts["NvidiaXID31Error"], 1);
}

// An identity allowed only to create Events (the agent's): repeats become new Events, each with
// the occurrences since the last one, and no Event is ever updated.
TEST(KubeClient, CreateOnlyEventsNeverUpdateAnEvent) {
  auto c = NewClient();
  EventRecorderOptions opts;
  opts.create_only = true;
  opts.patch_interval = std::chrono::seconds(30);
  EventRecorder rec(*c, opts);
  const ObjectReference node{"Node", "v1", "", "ev-create-only", "ev-create-only"};
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(rec.Record(node, "Warning", "NvidiaXID13Warning", "m").ok());
  rec.Flush(true);
  rec.Flush(true);  // nothing new: nothing written
  EXPECT_EQ(rec.stats().created, 2u);
  EXPECT_EQ(rec.stats().patched, 0u);
  auto list = c->Get(
      "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dev-create-only");
  ASSERT_TRUE(list.ok() && list->ok());
  const nlohmann::json events = nlohmann::json::parse(list->body);
  int total = 0;
  for (const auto& ev : events["items"]) total += ev["count"].get<int>();
  EXPECT_EQ(events["items"].size(), 2u);
  EXPECT_EQ(total, 10) << "every occurrence is in exactly one Event";
}

TEST(KubeClient, EventRecreatedWhenItsObjectIsGone) {
  auto c = NewClient();
  EventRecorderOptions opts;
  opts.patch_interval = std::chrono::milliseconds(0);
  EventRecorder rec(*c, opts);
  const ObjectReference node{"Node", "v1", "", "ev-gone", ""};
  ASSERT_TRUE(rec.Record(node, "Warning", "R", "m").ok());
  auto list = [&] {
    auto r =
        c->Get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dev-gone");
    return nlohmann::json::parse(r->body)["items"];
  };
  ASSERT_EQ(list().size(), 1u);
  const std::string name = list()[0]["metadata"]["name"];
  ASSERT_EQ(c->Delete("/api/v1/namespaces/default/events/" + name)->status,
            200);  // as its TTL would
  ASSERT_TRUE(rec.Record(node, "Warning", "R", "m").ok());
  auto items = list();
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0]["count"], 2);
  EXPECT_EQ(rec.stats().created, 2u);
}

// In-cluster config pointed at files this test writes: the token file is replaced (as the kubelet
// rotates bound tokens) and the very next request authenticates with the new token.
TEST(KubeClient, InClusterTokenRotationTakesEffectOnTheNextRequest) {
  auto admin = NewClient();
  auto token_for = [&](const std::string& sa) {
    auto r = admin->Create(
        "/api/v1/namespaces/default/serviceaccounts",
        {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", sa}}}});
    EXPECT_TRUE(r.ok() && r->status == 201);
    auto t = admin->Create("/api/v1/namespaces/default/serviceaccounts/" + sa + "/token",
                           {{"apiVersion", "authentication.k8s.io/v1"},
                            {"kind", "TokenRequest"},
                            {"spec", {{"expirationSeconds", 3600}}}});
    EXPECT_TRUE(t.ok() && t->status == 201) << (t ? t->Describe() : t.error().message);
    return nlohmann::json::parse(t->body)["status"]["token"].get<std::string>();
  };
  const std::string dir = ControlPlaneEnv::dir() + "/incluster";
  mkdir(dir.c_str(), 0700);
  auto write_atomically = [&](const std::string& path, const std::string& content) {
    std::ofstream(path + ".tmp") << content;
    ASSERT_EQ(std::rename((path + ".tmp").c_str(), path.c_str()), 0);
  };
  write_atomically(dir + "/token", token_for("rot-a"));
  write_atomically(dir + "/ca.crt", admin->config().ca_pem);
  const std::string server = admin->config().server;  // https://127.0.0.1:PORT
  const size_t colon = server.rfind(':');
  setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", server.substr(colon + 1).c_str(), 1);
  auto cfg = InClusterConfig(dir + "/token", dir + "/ca.crt");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  auto c = Client::Create(std::move(*cfg));
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto whoami = [&] {
    auto r =
        (*c)->Create("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                     {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "SelfSubjectReview"}});
    EXPECT_TRUE(r.ok() && r->status == 201) << (r ? r->Describe() : r.error().message);
    return nlohmann::json::parse(r->body)["status"]["userInfo"]["username"].get<std::string>();
  };
  EXPECT_EQ(whoami(), "system:serviceaccount:default:rot-a");
  write_atomically(dir + "/token", token_for("rot-b"));
  EXPECT_EQ(whoami(), "system:serviceaccount:default:rot-b");
  // A token the server does not accept is a 401 the caller sees, not a crash or a retry storm.
  write_atomically(dir + "/token", "not-a-token");
  auto r = (*c)->Get(NodePath());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 401);
}

TEST(KubeClient, WrongCaIsAClearErrorNotACrash) {
  auto cfg = LoadKubeconfig(ControlPlaneEnv::kubeconfig());
  ASSERT_TRUE(cfg.ok());
  // A valid CA that did not sign the server's certificate.
  const std::string other = ControlPlaneEnv::dir() + "/other-ca";
  ASSERT_EQ(
      std::system(
          ("openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
           "-keyout " +
           other + ".key -out " + other + ".crt -subj /CN=other 2>/dev/null")
              .c_str()),
      0);
  std::ifstream in(other + ".crt");
  cfg->ca_pem.assign(std::istreambuf_iterator<char>(in), {});
  auto c = Client::Create(std::move(*cfg), RetryPolicy{2, std::chrono::milliseconds(10),
                                                       std::chrono::milliseconds(20)});
  ASSERT_TRUE(c.ok());
  auto r = (*c)->Get(NodePath());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("certificate"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("/api/v1/nodes"), std::string::npos) << r.error().message;
}

// Two candidate processes: one leader at a time; SIGKILL of the leader hands over once the
// Lease expires (not before); a leader that stops releases the Lease for an immediate successor.
TEST(KubeClient, LeaderElectionBetweenTwoProcesses) {
  auto c = NewClient();
  constexpr int kLeaseMs = 3000, kRenewMs = 2000, kRetryMs = 250;
  auto candidate = [&](const std::string& id) {
    return std::make_unique<gpuheal::testing::AgentProcess>(std::vector<std::string>{
        GPUHEAL_BINARY_DIR "/leader_candidate", ControlPlaneEnv::kubeconfig(), id, "it-leader",
        std::to_string(kLeaseMs), std::to_string(kRenewMs), std::to_string(kRetryMs)});
  };
  auto is = [](const char* ev) {
    return [ev](const nlohmann::json& j) { return j.value("event", "") == ev; };
  };
  auto holder = [&] {
    auto l = DecodeLease(c->Get(LeasePath("default", "it-leader"))->body);
    return l.ok() ? l->holder : std::string("?");
  };

  auto a = candidate("cand-a");
  ASSERT_TRUE(a->WaitEvent(is("leading"), std::chrono::seconds(10)));
  auto b = candidate("cand-b");
  ASSERT_TRUE(b->WaitEvent(is("started"), std::chrono::seconds(10)));
  // Over more than a whole lease duration, B stays a follower while A renews.
  EXPECT_FALSE(b->WaitEvent(is("leading"), std::chrono::milliseconds(kLeaseMs + 1000)));
  EXPECT_EQ(holder(), "cand-a");

  const auto killed = std::chrono::steady_clock::now();
  a->Kill(SIGKILL);
  auto led = b->WaitEvent(is("leading"), std::chrono::milliseconds(kLeaseMs * 3));
  ASSERT_TRUE(led);
  const auto handover = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - killed);
  EXPECT_LE(handover.count(), kLeaseMs + 1500) << "handover took " << handover.count() << " ms";
  EXPECT_GE(handover.count(), kLeaseMs - kRenewMs) << "took over a lease that had not expired";
  EXPECT_EQ(holder(), "cand-b");
  std::fprintf(stderr, "leader handover after SIGKILL: %lld ms (lease %d ms)\n",
               static_cast<long long>(handover.count()), kLeaseMs);

  // A graceful stop releases the Lease: the next candidate leads at its first try.
  EXPECT_EQ(b->Kill(SIGTERM), 0);
  EXPECT_EQ(holder(), "");
  const auto start = std::chrono::steady_clock::now();
  auto d = candidate("cand-d");
  ASSERT_TRUE(d->WaitEvent(is("leading"), std::chrono::seconds(10)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(kLeaseMs));
  auto lease = DecodeLease(c->Get(LeasePath("default", "it-leader"))->body);
  EXPECT_EQ(lease->transitions, 2);
  EXPECT_EQ(d->Kill(SIGTERM), 0);
}

}  // namespace
}  // namespace gpuheal::kube

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new gpuheal::testing::ControlPlaneEnv(false));
  return RUN_ALL_TESTS();
}
