// The Repairer on the fake Kubernetes API and a stepped clock: every rung, every gate, a failure
// of each API call, and a controller stopped after each write and restarted on what was saved.
// The same ladder runs against a real control plane in test/integration/controller_test.cc.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>

#include "controller/repair.h"
#include "core/keys.h"
#include "core/time.h"
#include "fakes/fake_api.h"
#include "fakes/fake_clock.h"
#include "fakes/session_bmc.h"

namespace gpuheal::controller {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::FakeApi;
using testing::FakeClock;

class RepairerTest : public ::testing::Test {
 protected:
  RepairerTest() {
    policy.checkpoint_window = 30s;
    policy.catastrophic_checkpoint_window = 5s;
    policy.probation = 2min;
    policy.toleration.clear();
    policy.default_toleration = 10min;
  }

  // A NodeRepair as the release before status.steps wrote it (test/fixtures/noderepair-v0),
  // stored in the fake API.
  std::string PutRecordOfTheReleaseBefore(const std::string& fixture) {
    std::ifstream f(std::string(GPUHEAL_SOURCE_DIR) + "/test/fixtures/noderepair-v0/" + fixture +
                    ".json");
    const json rec = json::parse(f);
    const std::string name = rec["metadata"]["name"];
    api.Put(kNodeRepairs + "/" + name, rec);
    return name;
  }

  World MakeWorld() {
    World w;
    w.node = [this](const std::string& n) -> std::optional<kube::Node> {
      auto o = api.Object(kube::NodePath(n));
      if (!o) return std::nullopt;
      auto d = kube::DecodeNode(o->dump());
      return d ? std::optional(*d) : std::nullopt;
    };
    w.nodes = [this] {
      std::vector<kube::Node> out;
      for (const auto& o : api.List(kube::NodePath()))
        if (auto d = kube::DecodeNode(o.dump())) out.push_back(*d);
      return out;
    };
    w.pods = [this](const std::string& n) {
      std::vector<kube::Pod> out;
      for (const auto& o : api.List(kube::PodPath("")))
        if (auto d = kube::DecodePod(o.dump()); d && d->node_name == n) out.push_back(*d);
      return out;
    };
    w.budgets = [this](const std::string& ns) {
      std::vector<kube::PodDisruptionBudget> out;
      for (const auto& o : api.List(kube::PdbPath(ns)))
        if (auto d = kube::DecodePdb(o.dump())) out.push_back(*d);
      return out;
    };
    w.repairs = [this](const std::string& n) {
      std::vector<kube::NodeRepair> out;
      for (const auto& o : api.List(kNodeRepairs))
        if (auto d = kube::DecodeNodeRepair(o.dump()); d && d->node == n) out.push_back(*d);
      return out;
    };
    return w;
  }

  // Healthy GPU nodes of another pool: a fault on one test node is not a correlated event.
  void SetUp() override { AddSpares(); }
  void AddSpares() {
    for (int i = 0; i < 10; ++i) AddNode("spare" + std::to_string(i), "spare");
  }

  std::unique_ptr<Repairer> Make() {
    return std::make_unique<Repairer>(api, clock, MakeWorld(), policy, false, metrics);
  }

  void AddNode(const std::string& name, const std::string& pool = "a", bool standby = false) {
    json node = {
        {"metadata", {{"labels", {{policy.pool_label, pool}}}}},
        {"spec", json::object()},
        {"status",
         {{"capacity", {{"nvidia.com/gpu", "8"}}},
          {"conditions", json::array({{{"type", "AcceleratedHardwareReady"},
                                       {"status", "True"},
                                       {"reason", "GPUsHealthy"},
                                       {"message", ""},
                                       {"lastTransitionTime", "2026-01-01T00:00:00Z"}}})}}}};
    if (standby)
      node["spec"]["taints"] = {
          {{"key", keys::kStandbyTaint}, {"value", "true"}, {"effect", "NoSchedule"}}};
    api.Put(kube::NodePath(name), node);
  }

  // AcceleratedHardwareReady=False as the agent writes it, since `ago`.
  void Fault(const std::string& name, const std::string& reason = "NvidiaXID79Error",
             std::chrono::seconds ago = 0s, const std::string& decision = "catastrophic/isolate") {
    auto n = *api.Object(kube::NodePath(name));
    n["status"]["conditions"] = {{{"type", "AcceleratedHardwareReady"},
                                  {"status", "False"},
                                  {"reason", reason},
                                  {"message", "[" + decision + "] GPU 0000:3b:00: test"},
                                  {"lastTransitionTime", kube::RfcTime(clock.Now() - ago)}}};
    api.Put(kube::NodePath(name), n);
  }

  // A critical fault of one GPU (Xid 94) in the agent's gpuheal.io/gpu-faults annotation; with
  // `holders`, the pods (of namespace "jobs") the agent read from the kubelet's PodResources as
  // holding it, else none named (the holders unknown).
  void CriticalGpuFault(const std::string& name,
                        std::optional<std::vector<std::string>> holders = std::nullopt) {
    json gpu = {{"severity", "critical"},
                {"reason", "NvidiaXID94Error"},
                {"xid", 94},
                {"count", 1},
                {"since", kube::RfcTime(clock.Now())}};
    if (holders) {
      gpu["pods"] = json::array();
      for (const auto& p : *holders)
        gpu["pods"].push_back({{"namespace", "jobs"}, {"name", p}, {"container", "c"}});
    }
    Annotate(kube::NodePath(name), keys::kGpuFaults, json{{"0000:3b:00.0", gpu}}.dump());
  }

  void Heal(const std::string& name) {
    auto n = *api.Object(kube::NodePath(name));
    n["status"]["conditions"] = {{{"type", "AcceleratedHardwareReady"},
                                  {"status", "True"},
                                  {"reason", "GPUsHealthy"},
                                  {"message", ""},
                                  {"lastTransitionTime", kube::RfcTime(clock.Now())}}};
    api.Put(kube::NodePath(name), n);
  }

  void AddPod(const std::string& name, const std::string& node, int gpus = 1,
              const json& labels = json::object()) {
    api.Put(kube::PodPath("jobs", name),
            {{"metadata", {{"labels", labels}}},
             {"spec",
              {{"nodeName", node},
               {"containers",
                {{{"name", "c"},
                  {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}}}}},
             {"status", {{"phase", "Running"}}}});
  }

  void Annotate(const std::string& path, std::string_view key, const std::string& value) {
    auto o = *api.Object(path);
    o["metadata"]["annotations"][std::string(key)] = value;
    api.Put(path, o);
  }

  // The discovery document of Cluster API's group (GET /apis/cluster.x-k8s.io), serving
  // `versions`, the preferred first.
  static nlohmann::json CapiGroup(const std::vector<std::string>& versions) {
    nlohmann::json doc = {{"kind", "APIGroup"}, {"apiVersion", "v1"}, {"name", "cluster.x-k8s.io"}};
    for (const auto& v : versions)
      doc["versions"].push_back({{"groupVersion", "cluster.x-k8s.io/" + v}, {"version", v}});
    doc["preferredVersion"] = doc["versions"][0];
    return doc;
  }

  std::vector<kube::NodeRepair> Records(const std::string& node) {
    return MakeWorld().repairs(node);
  }
  kube::NodeRepair Last(const std::string& node) {
    auto r = Records(node);
    EXPECT_FALSE(r.empty());
    std::sort(r.begin(), r.end(), [](auto& a, auto& b) { return a.meta.name < b.meta.name; });
    return r.empty() ? kube::NodeRepair{} : r.back();
  }
  kube::Node NodeObj(const std::string& name) {
    auto o = api.Object(kube::NodePath(name));
    if (!o) {
      ADD_FAILURE() << "no node " << name;
      return {};
    }
    auto n = kube::DecodeNode(o->dump());
    if (!n) {
      ADD_FAILURE() << n.error().message << ": " << o->dump();
      return {};
    }
    return *n;
  }
  bool Quarantined(const std::string& name) {
    const auto n = NodeObj(name);
    return n.unschedulable && HasTaint(n, keys::kFaultTaint, "", "");
  }

  // Reconciles `node` as the work queue would, stepping the clock by each requested wait, until
  // the reconcile asks for nothing or `limit` passes. Returns the reconciles it took.
  int Settle(Repairer& r, const std::string& node, std::chrono::seconds limit = 1h) {
    const auto end = clock.Now() + limit;
    int n = 0;
    while (clock.Now() < end && n < 500) {
      ++n;
      auto next = r.Reconcile(node);
      if (!next) break;
      clock.Advance(std::max<std::chrono::microseconds>(*next, 1ms));
    }
    return n;
  }

  // A Repairer with the controller's wake-up (counted in `wakes`) whose pod cache shows `node`'s
  // pods as they are now while `stale` holds: the watch delivers the deletions late.
  std::unique_ptr<Repairer> MakeStale(const std::string& node, const std::atomic<bool>& stale,
                                      std::atomic<int>& wakes) {
    auto w = MakeWorld();
    const auto before = w.pods(node);
    auto live = w.pods;
    w.pods = [&stale, before, live](const std::string& n) { return stale ? before : live(n); };
    w.wake = [&wakes](const std::string&) { ++wakes; };
    return std::make_unique<Repairer>(api, clock, std::move(w), policy, false, metrics);
  }
  // Reconciles `node` until its evictions are in the pool, then waits for the pool's wake-up.
  void DrainUntilWoken(Repairer& r, const std::string& node, const std::atomic<int>& wakes) {
    for (int i = 0; i < 20 && wakes == 0 && r.EvictionsBusy() == 0; ++i) {
      const auto next = r.Reconcile(node);
      ASSERT_TRUE(next);
      clock.Advance(std::max<std::chrono::microseconds>(*next, 1ms));
    }
    for (int i = 0; i < 500 && wakes == 0; ++i) std::this_thread::sleep_for(10ms);
  }

  // Nodes reconciled as the work queue would: always the one due first, the clock stepped to it.
  struct Due {
    RepairerTest& t;
    Repairer& r;
    std::map<std::string, std::chrono::system_clock::time_point> at;
    void Step() {
      auto first = std::min_element(at.begin(), at.end(),
                                    [](auto& a, auto& b) { return a.second < b.second; });
      if (first->second > t.clock.Now())
        t.clock.Advance(
            std::chrono::duration_cast<std::chrono::microseconds>(first->second - t.clock.Now()));
      const auto next = r.Reconcile(first->first);
      first->second = t.clock.Now() + (next ? std::max<std::chrono::microseconds>(*next, 1ms) : 1h);
    }
  };
  Due DueNow(Repairer& r, const std::vector<std::string>& nodes) {
    Due d{*this, r, {}};
    for (const auto& n : nodes) d.at[n] = clock.Now();
    return d;
  }

  // Each of `nodes` is draining and waits for PodDisruptionBudget `budget`, and every one of the
  // `asked` evictions was counted as a refusal.
  void ExpectHeldByBudget(const std::vector<std::string>& nodes, const std::string& budget,
                          size_t asked) {
    for (const auto& n : nodes) {
      const auto rec = Last(n);
      EXPECT_EQ(rec.phase, "Draining") << n;
      EXPECT_NE(rec.message.find("PodDisruptionBudget " + budget), std::string::npos)
          << rec.message;
    }
    EXPECT_NE(metrics.Render().find("gpuheal_controller_evictions_refused_total " +
                                    std::to_string(asked)),
              std::string::npos)
        << metrics.Render();
  }

  FakeApi api;
  FakeClock clock;
  Metrics metrics;
  Policy policy;
};

TEST_F(RepairerTest, AFaultIsQuarantinedAndRecordedInOneReconcile) {
  AddNode("n1");
  AddPod("p1", "n1");
  Fault("n1");
  auto r = Make();
  auto next = r->Reconcile("n1");
  ASSERT_TRUE(next);
  EXPECT_TRUE(Quarantined("n1"));
  const auto n = NodeObj("n1");
  EXPECT_TRUE(HasTaint(n, keys::kFaultTaint, "catastrophic", "NoExecute"))
      << "an isolating fault on a node the gates allow to disrupt: NoExecute";
  EXPECT_EQ(n.meta.annotations.at(std::string(keys::kCordonedAnnotation)), "true");
  // Two patches (NoSchedule at once, NoExecute once the gates allowed it), the second from the
  // version the first wrote: no 409, no read-modify-write.
  EXPECT_EQ(api.CountOk("PATCH", kube::NodePath("n1")), 2u);
  EXPECT_EQ(api.Count("PATCH", kube::NodePath("n1")), 2u);
  EXPECT_EQ(api.Count("PUT", kube::NodePath("n1")), 0u);
  EXPECT_EQ(api.Count("GET", kube::NodePath("n1")), 0u);
  const auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "CheckpointRequested");
  EXPECT_TRUE(rec.phase_times.count("Detected") && rec.phase_times.count("Quarantined"));
  EXPECT_EQ(rec.severity, "catastrophic");
  const auto pod = api.Object(kube::PodPath("jobs", "p1"));
  EXPECT_TRUE(pod->at("metadata").at("annotations").contains(keys::kCheckpointRequested));
  EXPECT_EQ(*next, 5s) << "the catastrophic checkpoint window";
  EXPECT_EQ(api.Count("POST", "/eviction"), 0u) << "not before the checkpoint window ends";
}

TEST_F(RepairerTest, TheLadderRunsToTheProviderAfterWindowAndToleration) {
  AddNode("n1");
  AddPod("p1", "n1");
  AddPod("p2", "n1", 0);
  policy.gpu_pods_only = true;
  Fault("n1");
  auto r = Make();
  Settle(*r, "n1");
  const auto rec = Last("n1");
  for (const char* p : {"Detected", "Quarantined", "CheckpointRequested", "Draining", "Drained"})
    EXPECT_TRUE(rec.phase_times.count(p)) << p;
  EXPECT_EQ(rec.evicted_pods, std::vector<std::string>{"jobs/p1"});
  EXPECT_FALSE(api.Object(kube::PodPath("jobs", "p1"))) << "evicted";
  EXPECT_TRUE(api.Object(kube::PodPath("jobs", "p2"))) << "not a GPU pod";
  EXPECT_EQ(api.CountOk("POST", "jobs/pods/p1/eviction"), 1u);
  EXPECT_NE(rec.message.find("provider none"), std::string::npos) << rec.message;
  // Drained at the end of the 5 s window; the provider after the 10 min toleration.
  const auto drained = kube::ParseTime(rec.phase_times.at("Drained"));
  const auto detected = kube::ParseTime(rec.phase_times.at("Detected"));
  EXPECT_GE(*drained - *detected, 5s);
  EXPECT_LT(*drained - *detected, 7s);
}

TEST_F(RepairerTest, ACheckpointDoneEndsTheWindowEarly) {
  AddNode("n1");
  AddPod("p1", "n1");
  Fault("n1", "NvidiaXID48Error", 0s, "fatal/isolate");
  auto r = Make();
  EXPECT_EQ(*r->Reconcile("n1"), 30s);
  Annotate(kube::PodPath("jobs", "p1"), keys::kCheckpointDone, "true");
  clock.Advance(1s);
  r->Reconcile("n1");
  EXPECT_EQ(api.Count("POST", "/eviction"), 1u) << "evicted 1 s in, not at 30 s";
}

TEST_F(RepairerTest, APodDisruptionBudgetHoldsTheDrainUntilItAllows) {
  AddNode("n1");
  AddPod("p1", "n1");
  Fault("n1");
  api.RefuseEvictions("/pods/p1");
  auto r = Make();
  Settle(*r, "n1", 60s);
  auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "Draining");
  EXPECT_TRUE(rec.evicted_pods.empty()) << "a refused pod leaves the list";
  EXPECT_NE(rec.message.find("PodDisruptionBudget"), std::string::npos) << rec.message;
  EXPECT_TRUE(api.Object(kube::PodPath("jobs", "p1")));
  api.AllowEvictions();
  Settle(*r, "n1", 10s);
  EXPECT_FALSE(api.Object(kube::PodPath("jobs", "p1")));
  EXPECT_TRUE(Last("n1").phase_times.count("Drained"));
}

// 429s are retried per budget: pods of one full budget on several nodes cost one probe per
// backoff step between them (1, 2, 4, 8, 16, 16 s ...), not one eviction per node every 2 s, and
// a pod of no budget on the same node is evicted at once.
TEST_F(RepairerTest, ABudgetThatRefusesIsAskedAgainOncePerBackoffAcrossNodes) {
  for (const char* n : {"n1", "n2", "n3"}) {
    AddNode(n, std::string("pool-") + n);
    AddPod(std::string("tr-") + n, n);
    Fault(n);
  }
  for (int i = 0; i < 12; ++i) AddNode("h" + std::to_string(i), "healthy");  // under the breaker
  AddPod("free", "n1");
  api.RefuseEvictions("/pods/tr-", "tr");
  auto r = Make();
  const auto end = clock.Now() + 60s;
  auto due = DueNow(*r, {"n1", "n2", "n3"});
  auto step = [&] { due.Step(); };
  while (clock.Now() < end) step();
  EXPECT_FALSE(api.Object(kube::PodPath("jobs", "free"))) << "a pod of no budget is not held";
  const size_t asked = api.Count("POST", "/pods/tr-");
  // 3 first tries, then probes at about 1, 3, 7, 15, 31, 47 s: far from 3 nodes x 30.
  EXPECT_GE(asked, 6u);
  EXPECT_LE(asked, 12u) << "one probe per backoff step across the three nodes";
  ExpectHeldByBudget({"n1", "n2", "n3"}, "jobs/tr", asked);
  // Room again: every node drains within one capped step.
  api.AllowEvictions();
  const auto allowed = clock.Now();
  for (int i = 0; i < 200 && clock.Now() < allowed + 20s; ++i) step();
  for (const char* n : {"n1", "n2", "n3"}) {
    EXPECT_FALSE(api.Object(kube::PodPath("jobs", std::string("tr-") + n))) << n;
    EXPECT_TRUE(Last(n).phase_times.count("Drained")) << n;
  }
}

// The drain groups a node's pods by the budget that selects them (the controller's budget
// informer): a group is asked one pod after another and stops at its first refusal, which holds
// the rest of it; pods of another budget or of none go on.
TEST_F(RepairerTest, PodsOfOneBudgetAreAskedInTurnAndTheGroupStopsAtItsRefusal) {
  AddNode("n1");
  for (int i = 0; i < 3; ++i) AddPod("tr" + std::to_string(i), "n1", 1, {{"app", "tr"}});
  AddPod("web0", "n1", 1, {{"app", "web"}});
  AddPod("free", "n1", 1, {{"app", "other"}});
  api.Put(kube::PdbPath("jobs", "tr"),
          {{"spec", {{"minAvailable", 3}, {"selector", {{"matchLabels", {{"app", "tr"}}}}}}}});
  api.Put(kube::PdbPath("jobs", "web"), json::parse(R"({"spec": {"maxUnavailable": 1,
      "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}}})"));
  api.Put(kube::PdbPath("jobs", "none"), {{"spec", {{"selector", nullptr}}}});
  Fault("n1");
  api.RefuseEvictions("/pods/tr", "tr");
  auto r = Make();
  // Up to the first reconcile that evicts: it asks one of tr's three pods.
  for (int i = 0; i < 100 && api.Count("POST", "/eviction") == 0; ++i) {
    const auto next = r->Reconcile("n1");
    ASSERT_TRUE(next);
    clock.Advance(std::max<std::chrono::microseconds>(*next, 1ms));
  }
  EXPECT_EQ(api.Count("POST", "/pods/tr"), 1u) << "tr's pods in turn, stopped at the refusal";
  EXPECT_EQ(api.Count("POST", "/eviction"), 3u) << "tr's first pod, web0 and free side by side";
  Settle(*r, "n1", 20s);
  EXPECT_LE(api.Count("POST", "/pods/tr"), 5u) << "1, 3, 7, 15 s: one pod per probe";
  EXPECT_FALSE(api.Object(kube::PodPath("jobs", "web0")));
  EXPECT_FALSE(api.Object(kube::PodPath("jobs", "free")));
  const auto rec = Last("n1");
  EXPECT_NE(rec.message.find("PodDisruptionBudget jobs/tr: 3 pod(s)"), std::string::npos)
      << rec.message;
  api.AllowEvictions();
  Settle(*r, "n1", 20s);
  for (int i = 0; i < 3; ++i)
    EXPECT_FALSE(api.Object(kube::PodPath("jobs", "tr" + std::to_string(i)))) << i;
  EXPECT_TRUE(Last("n1").phase_times.count("Drained"));
}

// A node's pods go eviction.parallel at a time, in batches; each answer is matched to its own pod:
// the refused ones leave the record's list, the others stay on it and are gone.
TEST_F(RepairerTest, ANodesPodsAreEvictedInParallelBatchesEachAnswerToItsPod) {
  policy.eviction_parallel = 4;
  AddNode("n1");
  for (int i = 0; i < 10; ++i) AddPod("w" + std::to_string(i) + "x", "n1");
  Fault("n1");
  api.RefuseEvictions("/pods/w2x");
  api.RefuseEvictions("/pods/w7x");
  auto r = Make();
  Settle(*r, "n1", 60s);
  EXPECT_GE(api.Count("POST", "/eviction"), 10u);
  for (int i = 0; i < 10; ++i) {
    const std::string name = "w" + std::to_string(i) + "x";
    EXPECT_EQ(api.Object(kube::PodPath("jobs", name)).has_value(), i == 2 || i == 7) << name;
  }
  auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "Draining");
  for (const auto& key : rec.evicted_pods) {
    EXPECT_NE(key, "jobs/w2x");
    EXPECT_NE(key, "jobs/w7x");
  }
  EXPECT_EQ(rec.evicted_pods.size(), 8u) << "the evicted pods stay listed";
  api.AllowEvictions();
  Settle(*r, "n1", 10s);
  EXPECT_TRUE(Last("n1").phase_times.count("Drained"));
}

// With a wake-up (the controller's work queue), a drain hands its evictions to the pool and
// returns; the pool wakes the node when they end, and the next reconcile applies their results:
// refused pods leave the record's list and wait for their budget, evicted ones are counted and
// not asked again.
TEST_F(RepairerTest, WithAWakeUpTheDrainDoesNotWaitAndTheNextReconcileTakesTheResults) {
  policy.checkpoint_window = 0s;
  AddNode("n1");
  for (int i = 0; i < 3; ++i) AddPod("tr" + std::to_string(i), "n1", 1, {{"app", "tr"}});
  for (int i = 0; i < 4; ++i) AddPod("w" + std::to_string(i), "n1");
  api.Put(kube::PdbPath("jobs", "tr"),
          {{"spec", {{"minAvailable", 3}, {"selector", {{"matchLabels", {{"app", "tr"}}}}}}}});
  Fault("n1");
  api.RefuseEvictions("/pods/tr", "tr");
  std::mutex mu;
  std::vector<std::string> woken;
  auto w = MakeWorld();
  w.wake = [&](const std::string& n) {
    std::lock_guard<std::mutex> lock(mu);
    woken.push_back(n);
  };
  Repairer r(api, clock, std::move(w), policy, false, metrics);
  auto idle = [&] {
    for (int i = 0; i < 500 && r.EvictionsBusy() > 0; ++i) std::this_thread::sleep_for(10ms);
    return r.EvictionsBusy() == 0;
  };
  for (int i = 0; i < 20 && api.Count("POST", "/eviction") == 0 && r.EvictionsBusy() == 0; ++i) {
    const auto next = r.Reconcile("n1");
    ASSERT_TRUE(next);
    clock.Advance(std::max<std::chrono::microseconds>(*next, 1ms));
  }
  ASSERT_TRUE(idle());
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(woken, std::vector<std::string>{"n1"}) << "woken once, when its evictions ended";
  }
  EXPECT_EQ(api.Count("POST", "/eviction"), 5u) << "tr's first pod, then the 4 pods of no budget";
  // The record's status written last before the first Eviction API call lists all seven. (What
  // the record says now depends on timing: a chain that ended before the drain's reconcile
  // returned has its refusal applied in that same reconcile.)
  size_t listed_before = 0;
  for (const auto& c : api.Calls()) {
    if (c.method == "POST" && c.path.find("/eviction") != std::string::npos) break;
    if (c.path.find("noderepairs") == std::string::npos || c.body.empty()) continue;
    const auto body = json::parse(c.body, nullptr, false);
    if (body.is_object() && body.contains("status") && body["status"].contains("evictedPods"))
      listed_before = body["status"]["evictedPods"].size();
  }
  EXPECT_EQ(listed_before, 7u) << "all listed before the Eviction API was called";
  (void)r.Reconcile("n1");
  auto rec = Last("n1");
  EXPECT_EQ(rec.evicted_pods.size(), 4u) << "tr's three left the list at the refusal";
  EXPECT_NE(rec.message.find("PodDisruptionBudget jobs/tr: 3 pod(s)"), std::string::npos)
      << rec.message;
  EXPECT_EQ(metrics.GetCounter("gpuheal_controller_evictions_total", "").value(), 4);
  EXPECT_EQ(metrics.GetCounter("gpuheal_controller_evictions_refused_total", "").value(), 1);
  api.AllowEvictions();
  for (int i = 0; i < 100 && !Last("n1").phase_times.count("Drained"); ++i) {
    const auto next = r.Reconcile("n1");
    ASSERT_TRUE(idle());
    clock.Advance(std::max<std::chrono::microseconds>(next.value_or(1s), 1ms));
  }
  EXPECT_TRUE(Last("n1").phase_times.count("Drained"));
  for (int i = 0; i < 3; ++i)
    EXPECT_FALSE(api.Object(kube::PodPath("jobs", "tr" + std::to_string(i)))) << i;
  EXPECT_EQ(metrics.GetCounter("gpuheal_controller_evictions_total", "").value(), 7);
  EXPECT_EQ(api.Count("POST", "/pods/w"), 4u) << "an evicted pod is not asked again";
  EXPECT_EQ(metrics.GetGauge("gpuheal_controller_evictions_pending", "").value(), 0);
}

// The cache may show an evicted pod still running when the pool wakes its node: it is not evicted
// a second time.
TEST_F(RepairerTest, APodEvictedButStillRunningInTheCacheIsNotEvictedAgain) {
  policy.checkpoint_window = 0s;
  AddNode("n1");
  for (int i = 0; i < 3; ++i) AddPod("w" + std::to_string(i), "n1");
  Fault("n1");
  std::atomic<bool> stale{true};
  std::atomic<int> wakes{0};
  auto rp = MakeStale("n1", stale, wakes);
  Repairer& r = *rp;
  DrainUntilWoken(r, "n1", wakes);
  ASSERT_EQ(wakes, 1);
  for (int i = 0; i < 3; ++i) {
    (void)r.Reconcile("n1");
    for (int j = 0; j < 500 && r.EvictionsBusy() > 0; ++j) std::this_thread::sleep_for(10ms);
    clock.Advance(500ms);
  }
  EXPECT_EQ(r.EvictionsBusy(), 0u);
  EXPECT_EQ(api.Count("POST", "/eviction"), 3u);
  stale = false;
  for (int i = 0; i < 5 && !Last("n1").phase_times.count("Drained"); ++i) {
    (void)r.Reconcile("n1");
    clock.Advance(500ms);
  }
  EXPECT_TRUE(Last("n1").phase_times.count("Drained"));
  EXPECT_EQ(api.Count("POST", "/eviction"), 3u);
}

// The same for a GPU-level drain: its holders, evicted by the pool and still shown running, are
// neither evicted again nor waited for; the other pod of the node stays.
TEST_F(RepairerTest, AGpuHolderEvictedButStillRunningInTheCacheIsNotEvictedAgain) {
  policy.checkpoint_window = 0s;
  AddNode("n1");
  for (int i = 0; i < 3; ++i) AddPod("w" + std::to_string(i), "n1");
  AddPod("other", "n1");
  CriticalGpuFault("n1", std::vector<std::string>{"w0", "w1", "w2"});
  std::atomic<bool> stale{true};
  std::atomic<int> wakes{0};
  auto rp = MakeStale("n1", stale, wakes);
  Repairer& r = *rp;
  DrainUntilWoken(r, "n1", wakes);
  ASSERT_EQ(wakes, 1);
  for (int i = 0; i < 5 && !Last("n1").phase_times.count("Drained"); ++i) {
    (void)r.Reconcile("n1");
    for (int j = 0; j < 500 && r.EvictionsBusy() > 0; ++j) std::this_thread::sleep_for(10ms);
    clock.Advance(500ms);
  }
  EXPECT_TRUE(Last("n1").phase_times.count("Drained")) << "the cache still shows them running";
  EXPECT_EQ(api.Count("POST", "/eviction"), 3u);
  stale = false;
  for (int i = 0; i < 3; ++i) {
    (void)r.Reconcile("n1");
    clock.Advance(500ms);
  }
  EXPECT_EQ(api.Count("POST", "/eviction"), 3u);
  EXPECT_TRUE(api.Object(kube::PodPath("jobs", "other")));
}

TEST_F(RepairerTest, TheReleaseWaitsForProbationAndUndoesOnlyWhatGpuhealDid) {
  AddNode("n1");
  Fault("n1");
  auto r = Make();
  Settle(*r, "n1", 20s);
  ASSERT_TRUE(Quarantined("n1"));
  Heal("n1");
  auto next = r->Reconcile("n1");
  ASSERT_TRUE(next);
  EXPECT_EQ(*next, 2min) << "probation";
  EXPECT_TRUE(Quarantined("n1"));
  clock.Advance(*next);
  EXPECT_FALSE(r->Reconcile("n1"));
  const auto n = NodeObj("n1");
  EXPECT_FALSE(n.unschedulable);
  EXPECT_FALSE(HasTaint(n, keys::kFaultTaint, "", ""));
  EXPECT_EQ(Last("n1").phase, "Recovered");
}

TEST_F(RepairerTest, AnOperatorsCordonOutlivesTheRelease) {
  AddNode("n1");
  auto n = *api.Object(kube::NodePath("n1"));
  n["spec"]["unschedulable"] = true;  // an operator's cordon, before the fault
  api.Put(kube::NodePath("n1"), n);
  Fault("n1");
  auto r = Make();
  Settle(*r, "n1", 20s);
  Heal("n1");
  clock.Advance(3min);
  r->Reconcile("n1");
  EXPECT_TRUE(NodeObj("n1").unschedulable) << "not ours to lift";
  EXPECT_FALSE(HasTaint(NodeObj("n1"), keys::kFaultTaint, "", ""));
}

TEST_F(RepairerTest, EachGateHoldsTheDrainButNeverTheQuarantine) {
  // Paused by label.
  AddNode("n1");
  AddPod("p1", "n1");
  auto n = *api.Object(kube::NodePath("n1"));
  n["metadata"]["labels"][std::string(keys::kPausedLabel)] = "true";
  api.Put(kube::NodePath("n1"), n);
  Fault("n1");
  auto r = Make();
  EXPECT_EQ(*r->Reconcile("n1"), 10s);
  EXPECT_TRUE(Quarantined("n1"));
  EXPECT_TRUE(HasTaint(NodeObj("n1"), keys::kFaultTaint, "catastrophic", "NoSchedule"))
      << "held: no NoExecute, which would evict past the gate";
  EXPECT_EQ(Last("n1").message.rfind("paused:", 0), 0u) << Last("n1").message;
  EXPECT_EQ(Last("n1").gate, "paused");
  EXPECT_EQ(api.Count("PATCH", "/pods/p1"), 0u) << "no checkpoint request while paused";
}

TEST_F(RepairerTest, ThePoolGateAllowsTwentyPercent) {
  for (int i = 0; i < 10; ++i) AddNode("n" + std::to_string(i));
  for (int i = 0; i < 10; ++i) AddNode("b" + std::to_string(i), "b");  // keeps the breaker shut
  for (int i = 0; i < 3; ++i) Fault("n" + std::to_string(i));
  auto r = Make();
  for (int i = 0; i < 3; ++i) r->Reconcile("n" + std::to_string(i));
  for (int i = 0; i < 3; ++i) {
    const auto rec = Last("n" + std::to_string(i));
    EXPECT_TRUE(Quarantined("n" + std::to_string(i)));
    EXPECT_EQ(rec.message.rfind("pool gate: 3 of 10 nodes in pool \"a\" unhealthy, at most 2", 0),
              0u)
        << rec.message;
    EXPECT_EQ(rec.gate, "pool");
  }
  // One heals: 2 of 10 are within the pool's share, the gate opens and says so.
  Heal("n0");
  r->Reconcile("n1");
  EXPECT_EQ(Last("n1").gate, "");
  EXPECT_TRUE(Last("n1").phase_times.count("Drained") || Last("n1").phase_times.count("Draining") ||
              Last("n1").phase_times.count("CheckpointRequested"))
      << Last("n1").phase;
}

TEST_F(RepairerTest, TheBreakerOpensOnACorrelatedEventAndClosesByHand) {
  for (int i = 0; i < 5; ++i) AddNode("n" + std::to_string(i), "p" + std::to_string(i));
  for (int i = 0; i < 5; ++i) Fault("n" + std::to_string(i));
  api.Put(kube::LeasePath("gpuheal", "gpuheal-controller"), {{"spec", {{"holderIdentity", "x"}}}});
  auto r = Make();
  r->SetBreakerKey("gpuheal", "gpuheal-controller");
  r->Reconcile("n0");
  EXPECT_EQ(Last("n0").message.rfind("circuit breaker open: 5 of 15 GPU nodes", 0), 0u)
      << Last("n0").message;
  EXPECT_EQ(Last("n0").gate, "breaker");
  EXPECT_TRUE(Quarantined("n0"));
  clock.Advance(3s);
  Annotate(kube::LeasePath("gpuheal", "gpuheal-controller"), keys::kBreakerReset,
           kube::RfcTime(clock.Now()));
  r->Reconcile("n0");
  EXPECT_EQ(Last("n0").message.find("circuit breaker"), std::string::npos) << Last("n0").message;
  EXPECT_EQ(Last("n0").gate, "") << "the breaker closed by hand holds nothing";
  r->FlushEvents();
  EXPECT_GE(api.Count("POST", "/events"), 1u) << "the breaker's Events on the Lease";
}

// A rack whose four nodes fault at once: one infrastructure incident. Each of its nodes is still
// quarantined and drained, but none is remediated (here: deleted) while a node of another rack,
// faulting at the same time, is. The operator's release on one node of the rack lets them go on.
class IncidentTest : public RepairerTest {
 protected:
  void SetUp() override {
    RepairerTest::SetUp();
    for (int i = 0; i < 10; ++i) AddNode("h" + std::to_string(i), "healthy");  // under the breaker
    policy.provider = Provider::kDeleteNode;
    policy.replacement_timeout = 0ms;
    policy.failure_domains.labels = {"example.com/rack"};
    policy.failure_domains.nodes = 3;
    policy.failure_domains.window = 5min;
    for (const char* n : {"r0", "r1", "r2", "r3", "out"}) {
      AddNode(n, std::string("pool-") + n);  // a pool each: the pool gate holds nothing
      Label(n, std::string(n) == "out" ? "B" : "A");
      AddPod(std::string("p-") + n, n);
      Fault(n);
    }
  }
  void Label(const std::string& node, const std::string& value) {
    auto o = *api.Object(kube::NodePath(node));
    o["metadata"]["labels"]["example.com/rack"] = value;
    api.Put(kube::NodePath(node), o);
  }
  const std::vector<std::string> rack = {"r0", "r1", "r2", "r3"};
};

TEST_F(IncidentTest, HoldsTheRacksRemediationButNotItsQuarantineOrDrain) {
  auto r = Make();
  for (const auto& n : rack) Settle(*r, n, 15min);
  Settle(*r, "out", 15min);
  EXPECT_FALSE(api.Object(kube::NodePath("out"))) << "the node of rack B is replaced";
  EXPECT_EQ(Last("out").phase, "Replaced");
  EXPECT_TRUE(Last("out").incident.empty());
  for (const auto& n : rack) {
    ASSERT_TRUE(api.Object(kube::NodePath(n))) << n << " must not be deleted";
    EXPECT_TRUE(Quarantined(n)) << n;
    EXPECT_FALSE(api.Object(kube::PodPath("jobs", "p-" + n))) << n << "'s pod is evicted";
    const auto rec = Last(n);
    EXPECT_EQ(rec.phase, "Drained") << n;
    EXPECT_FALSE(rec.phase_times.count("Remediating")) << n;
    EXPECT_EQ(rec.incident, "example.com/rack=A") << n;
    EXPECT_EQ(rec.message.rfind("infrastructure incident: 4 node(s) of example.com/rack=A", 0), 0u)
        << rec.message;
    EXPECT_EQ(rec.gate, "incident");
  }
  const std::string m = metrics.Render();
  EXPECT_NE(m.find("gpuheal_controller_incidents_open 1"), std::string::npos) << m;
  EXPECT_NE(m.find("gpuheal_controller_incidents_total 1"), std::string::npos) << m;
  EXPECT_NE(m.find("gpuheal_controller_blocked_total{gate=\"infrastructure incident\"}"),
            std::string::npos)
      << m;
  r->FlushEvents();
  size_t incident_events = 0;
  for (const auto& c : api.Calls()) {
    incident_events += c.method == "POST" && c.path.find("/events") != std::string::npos &&
                       c.body.find("\"InfrastructureIncident\"") != std::string::npos;
  }
  EXPECT_GE(incident_events, 4u) << "one on each node of the incident";

  // The operator releases the rack's nodes (kubectl annotate nodes -l example.com/rack=A): each
  // goes on to its remediation, whichever of them is deleted first.
  clock.Advance(1s);
  for (const auto& n : rack)
    Annotate(kube::NodePath(n), keys::kIncidentRelease, kube::RfcTime(clock.Now()));
  for (const auto& n : rack) Settle(*r, n, 1min);
  for (const auto& n : rack) {
    EXPECT_FALSE(api.Object(kube::NodePath(n))) << n << " is replaced after the release";
    EXPECT_EQ(Last(n).phase, "Replaced") << n;
  }
  EXPECT_NE(metrics.Render().find("gpuheal_controller_incidents_open 0"), std::string::npos);
}

TEST_F(IncidentTest, EndsWhenTheDomainRecovers) {
  auto r = Make();
  for (const auto& n : rack) Settle(*r, n, 15min);
  ASSERT_EQ(Last("r0").incident, "example.com/rack=A");
  // Two nodes of the rack come back on their own (the power is back): two faults are left, fewer
  // than an incident needs, and those two are repaired.
  Heal("r0");
  Heal("r1");
  for (const auto& n : {"r2", "r3"}) Settle(*r, n, 1min);
  for (const auto& n : {"r2", "r3"}) {
    EXPECT_EQ(Last(n).phase, "Replaced") << n;
    EXPECT_TRUE(Last(n).incident.empty()) << n;
  }
  EXPECT_TRUE(api.Object(kube::NodePath("r0")));
}

TEST_F(IncidentTest, ARungUnderWayGoesOn) {
  // Without failure domains the first node reaches its remediation; the incident that the policy
  // then names does not take it back.
  // (provider standby: the standby has the node's place, the record stays Remediating).
  policy.failure_domains.labels.clear();
  policy.provider = Provider::kStandby;
  AddNode("s-r0", "pool-r0", true);
  {
    auto r = Make();
    Settle(*r, "r0", 10min + 30s);
    ASSERT_EQ(Last("r0").phase, "Remediating");
  }
  policy.failure_domains.labels = {"example.com/rack"};
  auto r = Make();
  Settle(*r, "r1", 1min);
  ASSERT_EQ(Last("r1").incident, "example.com/rack=A") << "the rack's incident is open";
  r->Reconcile("r0");
  const auto rec = Last("r0");
  EXPECT_EQ(rec.phase, "Remediating");
  EXPECT_TRUE(rec.incident.empty());
  EXPECT_EQ(rec.message.find("infrastructure incident"), std::string::npos) << rec.message;
  EXPECT_EQ(rec.gate, "");
}

// Predictive drain: a GPU at risk on a node without a fault. Nothing is killed for a risk: the
// node is cordoned, its GPU pods checkpoint and go (drain-at-boundary) or finish
// (cordon-at-boundary), then the agent resets the GPU and the node is uncordoned.
class PredictiveTest : public RepairerTest {
 protected:
  void SetUp() override {
    RepairerTest::SetUp();
    policy.predictive = Policy::Predictive::kDrainAtBoundary;
    AddNode("n1");
    for (int i = 0; i < 4; ++i) AddNode("a" + std::to_string(i));  // the pool: 5 nodes
    AddPod("gpu", "n1");
    AddPod("cpu", "n1", 0);
  }
  void AtRisk(const std::string& node) {
    Annotate(kube::NodePath(node), keys::kGpuAtRisk,
             R"({"0000:3b:00":{"since":")" + kube::RfcTime(clock.Now()) +
                 R"(","signals":{"row_remap":1}}})");
  }
  void Answer(const std::string& node, const std::string& id, const std::string& state) {
    Annotate(kube::NodePath(node), keys::kGpuRecoveryStatus,
             json{{"id", id}, {"state", state}, {"gpus", json::object()}}.dump());
  }
};

TEST_F(PredictiveTest, ACheckpointedPodGoesThenTheGpuIsResetAndTheNodeUncordoned) {
  AtRisk("n1");
  auto r = Make();
  r->Reconcile("n1");
  auto n = NodeObj("n1");
  EXPECT_TRUE(n.unschedulable) << "no new work on the node";
  EXPECT_FALSE(HasTaint(n, keys::kFaultTaint, "", "")) << "a risk is not a fault: no taint";
  auto rec = Last("n1");
  EXPECT_EQ(rec.reason, "NvidiaGPUAtRisk");
  EXPECT_EQ(rec.severity, "warn");
  EXPECT_EQ(rec.phase, "Draining");
  const auto pod = *api.Object(kube::PodPath("jobs", "gpu"));
  EXPECT_TRUE(pod["metadata"]["annotations"].contains(keys::kCheckpointRequested));
  // Never evicted at a window's end: an hour later the pod is still there.
  Settle(*r, "n1", 1h);
  EXPECT_TRUE(api.Object(kube::PodPath("jobs", "gpu")));
  EXPECT_EQ(api.Count("POST", "/eviction"), 0u);
  // The workload checkpoints: it goes, and the agent is asked to reset the GPU.
  Annotate(kube::PodPath("jobs", "gpu"), keys::kCheckpointDone, "true");
  r->Reconcile("n1");
  EXPECT_FALSE(api.Object(kube::PodPath("jobs", "gpu")));
  EXPECT_TRUE(api.Object(kube::PodPath("jobs", "cpu"))) << "not a GPU pod";
  rec = Last("n1");
  EXPECT_EQ(rec.phase, "Remediating");
  EXPECT_EQ(rec.evicted_pods, std::vector<std::string>{"jobs/gpu"});
  const auto req = NodeObj("n1").meta.annotations.at(std::string(keys::kGpuRecoveryRequest));
  EXPECT_NE(req.find("0000:3b:00"), std::string::npos) << req;
  EXPECT_NE(req.find(rec.meta.name), std::string::npos) << req;
  // The agent resets it and clears the risk: uncordoned, Recovered.
  Answer("n1", rec.meta.name, "succeeded");
  Annotate(kube::NodePath("n1"), keys::kGpuAtRisk, "{}");
  r->Reconcile("n1");
  EXPECT_FALSE(NodeObj("n1").unschedulable);
  EXPECT_EQ(Last("n1").phase, "Recovered");
  EXPECT_NE(Last("n1").message.find("GPU reset by the node's agent"), std::string::npos);
}

TEST_F(PredictiveTest, CordonAtBoundaryWaitsForThePodsToFinish) {
  policy.predictive = Policy::Predictive::kCordonAtBoundary;
  AtRisk("n1");
  auto r = Make();
  Settle(*r, "n1", 1h);
  EXPECT_EQ(Last("n1").phase, "Draining");
  EXPECT_FALSE(api.Object(kube::PodPath("jobs", "gpu"))->at("metadata").contains("annotations"))
      << "no checkpoint asked";
  (void)api.Delete(kube::PodPath("jobs", "gpu"));  // the job ends
  r->Reconcile("n1");
  EXPECT_EQ(Last("n1").phase, "Remediating");
  // No answer: Failed, the node stays cordoned, and the same risk is not tried again.
  Settle(*r, "n1", 20min);
  EXPECT_EQ(Last("n1").phase, "Failed");
  EXPECT_TRUE(NodeObj("n1").unschedulable);
  clock.Advance(1min);
  r->Reconcile("n1");
  EXPECT_EQ(Records("n1").size(), 1u);
}

// A prediction that ended Failed leaves the node cordoned while the risk lasts; once the agent
// no longer reports it (the signals aged out), gpuheal's cordon goes. An operator's never does.
TEST_F(PredictiveTest, AFailedPredictionsCordonIsLiftedWhenTheRiskAgesOut) {
  policy.predictive = Policy::Predictive::kCordonAtBoundary;
  auto n = *api.Object(kube::NodePath("a0"));
  n["spec"]["unschedulable"] = true;  // an operator's cordon, before any risk
  api.Put(kube::NodePath("a0"), n);
  AtRisk("n1");
  AtRisk("a0");
  auto r = Make();
  Settle(*r, "n1", 1h);
  (void)api.Delete(kube::PodPath("jobs", "gpu"));  // the job ends
  Settle(*r, "n1", 20min);
  Settle(*r, "a0", 20min);
  ASSERT_EQ(Last("n1").phase, "Failed") << "the agent never answered";
  ASSERT_EQ(Last("a0").phase, "Failed");
  clock.Advance(1h);
  r->Reconcile("n1");
  EXPECT_TRUE(NodeObj("n1").unschedulable) << "still at risk: left for an operator";
  Annotate(kube::NodePath("n1"), keys::kGpuAtRisk, "{}");
  Annotate(kube::NodePath("a0"), keys::kGpuAtRisk, "{}");
  EXPECT_FALSE(r->Reconcile("n1"));
  EXPECT_FALSE(r->Reconcile("a0"));
  EXPECT_FALSE(NodeObj("n1").unschedulable) << "gpuheal's cordon lifted";
  EXPECT_FALSE(NodeObj("n1").meta.annotations.count(std::string(keys::kCordonedAnnotation)));
  const auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "Failed") << "the repair's outcome stands";
  EXPECT_TRUE(std::any_of(rec.actions.begin(), rec.actions.end(), [](const std::string& a) {
    return a.starts_with("the GPUs are no longer at risk at ") &&
           a.ends_with(": gpuheal's cordon lifted");
  }));
  EXPECT_EQ(Records("n1").size(), 1u);
  EXPECT_TRUE(NodeObj("a0").unschedulable) << "the operator's cordon stays";
  clock.Advance(1min);
  r->Reconcile("n1");
  const auto again = Last("n1").actions;
  EXPECT_EQ(std::count_if(again.begin(), again.end(),
                          [](const std::string& a) { return a.ends_with("cordon lifted"); }),
            1)
      << "lifted once";
}

TEST_F(PredictiveTest, NoneDoesNothingAndAFaultSupersedesAPrediction) {
  policy.predictive = Policy::Predictive::kNone;
  AtRisk("n1");
  {
    auto r = Make();
    r->Reconcile("n1");
    EXPECT_TRUE(Records("n1").empty());
    EXPECT_FALSE(NodeObj("n1").unschedulable);
  }
  policy.predictive = Policy::Predictive::kDrainAtBoundary;
  auto r = Make();
  r->Reconcile("n1");
  ASSERT_EQ(Last("n1").phase, "Draining");
  clock.Advance(1s);
  Fault("n1", "NvidiaXID48Error", 0s, "fatal/quarantine");
  clock.Advance(1s);
  r->Reconcile("n1");
  EXPECT_EQ(Last("n1").phase, "Failed");
  EXPECT_NE(Last("n1").message.find("superseded by a fault"), std::string::npos);
  clock.Advance(1s);
  r->Reconcile("n1");
  EXPECT_EQ(Records("n1").size(), 2u);
  EXPECT_TRUE(Quarantined("n1"));
}

TEST_F(PredictiveTest, ThePoolsShareOutOfServiceHoldsTheCordon) {
  AtRisk("n1");
  AtRisk("a0");
  auto r = Make();
  r->Reconcile("n1");
  r->Reconcile("a0");
  EXPECT_TRUE(NodeObj("n1").unschedulable);
  EXPECT_FALSE(NodeObj("a0").unschedulable) << "5 nodes, 20%: 1 at once, and n1 is out";
  EXPECT_EQ(Last("a0").message.rfind("pool gate: 1 of 5 nodes in pool \"a\" out of service", 0), 0u)
      << Last("a0").message;
  EXPECT_EQ(Last("a0").gate, "pool");
}

TEST_F(RepairerTest, TheAttemptCapBlocksAndLeavesTheNodeQuarantined) {
  policy.max_repairs = 1;
  AddNode("n1");
  Fault("n1", "NvidiaXID79Error", 0s);
  auto r = Make();
  Settle(*r, "n1", 20s);
  Heal("n1");
  clock.Advance(3min);
  Settle(*r, "n1", 1s);
  ASSERT_EQ(Last("n1").phase, "Recovered");
  clock.Advance(1min);
  Fault("n1");
  EXPECT_FALSE(r->Reconcile("n1"));
  const auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "Blocked");
  EXPECT_EQ(rec.attempts, 2);
  EXPECT_EQ(rec.message.rfind("HardwareInspection: 2 repairs", 0), 0u) << rec.message;
  EXPECT_EQ(rec.gate, "attempt-cap");
  EXPECT_TRUE(Quarantined("n1"));
}

TEST_F(RepairerTest, TheQuarantineFallsBackToReadModifyWriteOnAConflict) {
  AddNode("n1");
  Fault("n1");
  api.Fail("PATCH", "/api/v1/nodes/n1", 409);
  auto r = Make();
  r->Reconcile("n1");
  EXPECT_TRUE(Quarantined("n1"));
  EXPECT_GE(api.CountOk("PUT", "/api/v1/nodes/n1"), 1u);
}

TEST_F(RepairerTest, EachFailedCallIsRetriedAndNothingIsDoneTwice) {
  struct Case {
    const char* method;
    const char* path;
    long status;
  };
  for (const Case c : {Case{"PATCH", "/api/v1/nodes/n1", 500}, Case{"PUT", "/api/v1/nodes/n1", 503},
                       Case{"POST", "/noderepairs", 500}, Case{"PATCH", "/noderepairs/", 500},
                       Case{"GET", "/noderepairs/", 503}, Case{"PATCH", "/pods/p1", 500},
                       Case{"POST", "/eviction", 500}, Case{"POST", "/eviction", 429}}) {
    SCOPED_TRACE(std::string(c.method) + " " + c.path + " " + std::to_string(c.status));
    api.Reset();
    AddSpares();
    AddNode("n1");
    AddPod("p1", "n1");
    Fault("n1");
    api.Fail(c.method, c.path, c.status, 2);
    auto r = Make();
    Settle(*r, "n1", 15min);
    const auto recs = Records("n1");
    ASSERT_EQ(recs.size(), 1u) << "one episode";
    EXPECT_TRUE(recs[0].phase_times.count("Drained")) << recs[0].phase << ": " << recs[0].message;
    EXPECT_TRUE(Quarantined("n1"));
    EXPECT_FALSE(api.Object(kube::PodPath("jobs", "p1")));
  }
}

TEST_F(RepairerTest, TheGpuLevelRungAsksTheAgentAndEndsOnItsAnswer) {
  AddNode("n1");
  AddPod("p1", "n1");
  CriticalGpuFault("n1");
  auto r = Make();
  auto next = r->Reconcile("n1");
  ASSERT_TRUE(next);
  EXPECT_EQ(*next, policy.critical_request_timeout);
  EXPECT_FALSE(Quarantined("n1")) << "the node stays in service";
  const auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "Remediating");
  const auto req = NodeObj("n1").meta.annotations.at(std::string(keys::kGpuRecoveryRequest));
  EXPECT_NE(req.find(rec.meta.name), std::string::npos);
  // The agent answers: reset and verified.
  Annotate(kube::NodePath("n1"), keys::kGpuRecoveryStatus,
           json{{"id", rec.meta.name}, {"state", "succeeded"}, {"detail", "ok"}}.dump());
  clock.Advance(1s);
  EXPECT_FALSE(r->Reconcile("n1"));
  EXPECT_EQ(Last("n1").phase, "Recovered");
  EXPECT_TRUE(api.Object(kube::PodPath("jobs", "p1"))) << "nothing evicted by the controller";
}

// A GPU-level drain (the holders the agent read from PodResources) evicts through the same pool
// and budget backoff as a node's drain: three nodes' holders under one refusing budget are asked
// once per backoff step across the nodes, not each node every few seconds; the other pods of the
// nodes stay; once the budget allows, each GPU's holder goes and the agent is asked for the reset.
TEST_F(RepairerTest, AGpuLevelDrainBacksOffPerBudgetAcrossNodes) {
  for (const char* n : {"n1", "n2", "n3"}) {
    AddNode(n, std::string("pool-") + n);
    AddPod(std::string("tr-") + n, n);
    AddPod(std::string("other-") + n, n);
    CriticalGpuFault(n, std::vector<std::string>{std::string("tr-") + n});
  }
  api.RefuseEvictions("/pods/tr-", "tr");
  auto r = Make();
  const auto end = clock.Now() + 60s;
  auto due = DueNow(*r, {"n1", "n2", "n3"});
  auto step = [&] { due.Step(); };
  while (clock.Now() < end) step();
  const size_t asked = api.Count("POST", "/pods/tr-");
  // 3 first tries, then probes at about 1, 3, 7, 15, 31, 47 s: far from 3 nodes every 5 s.
  EXPECT_GE(asked, 6u);
  EXPECT_LE(asked, 12u) << "one probe per backoff step across the three nodes";
  EXPECT_EQ(api.Count("POST", "/pods/other-"), 0u) << "only the GPU's holders";
  ExpectHeldByBudget({"n1", "n2", "n3"}, "jobs/tr", asked);
  for (const char* n : {"n1", "n2", "n3"})
    EXPECT_FALSE(Quarantined(n)) << n << ": a GPU-level fault leaves the node in service";
  api.AllowEvictions();
  const auto allowed = clock.Now();
  for (int i = 0; i < 200 && clock.Now() < allowed + 20s; ++i) step();
  for (const char* n : {"n1", "n2", "n3"}) {
    EXPECT_FALSE(api.Object(kube::PodPath("jobs", std::string("tr-") + n))) << n;
    EXPECT_TRUE(api.Object(kube::PodPath("jobs", std::string("other-") + n))) << n;
    const auto rec = Last(n);
    EXPECT_TRUE(rec.phase_times.count("Drained")) << n;
    EXPECT_EQ(rec.evicted_pods, std::vector<std::string>{std::string("jobs/tr-") + n}) << n;
    EXPECT_TRUE(rec.phase_times.count("Remediating")) << n << ": the agent is asked for the reset";
  }
}

// A node-level episode still open (its fault cleared, the node in probation) when a critical
// GPU fault arrives: that episode is released as any healthy node's, and the GPU fault gets an
// episode of its own; the agent's recovery request never carries the old episode's name.
TEST_F(RepairerTest, AGpuFaultAfterANodeLevelEpisodeGetsItsOwnEpisode) {
  AddNode("n1");
  Fault("n1");
  auto r = Make();
  Settle(*r, "n1", 20s);
  ASSERT_TRUE(Quarantined("n1"));
  const std::string node_episode = Last("n1").meta.name;
  Heal("n1");
  CriticalGpuFault("n1");
  auto next = r->Reconcile("n1");
  ASSERT_TRUE(next);
  EXPECT_EQ(*next, 2min) << "the node-level episode's probation";
  EXPECT_FALSE(NodeObj("n1").meta.annotations.count(std::string(keys::kGpuRecoveryRequest)));
  clock.Advance(*next);
  next = r->Reconcile("n1");  // the release
  ASSERT_TRUE(next);
  EXPECT_FALSE(Quarantined("n1"));
  next = r->Reconcile("n1");  // the GPU's episode
  const auto recs = Records("n1");
  ASSERT_EQ(recs.size(), 2u);
  const auto gpu = Last("n1");
  EXPECT_NE(gpu.meta.name, node_episode);
  EXPECT_EQ(gpu.phase, "Remediating");
  for (const auto& rec : recs) {
    if (rec.meta.name == node_episode) {
      EXPECT_EQ(rec.phase, "Recovered");
    }
  }
  const auto req = NodeObj("n1").meta.annotations.at(std::string(keys::kGpuRecoveryRequest));
  EXPECT_NE(req.find(gpu.meta.name), std::string::npos) << req;
  EXPECT_FALSE(Quarantined("n1")) << "the node stays in service for one GPU";
}

TEST_F(RepairerTest, TheGpuLevelRungQuarantinesWhenTheAgentIsSilent) {
  AddNode("n1");
  CriticalGpuFault("n1");
  auto r = Make();
  Settle(*r, "n1", 1h);
  const auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "Failed");
  EXPECT_NE(rec.message.find("no answer from the node's agent"), std::string::npos) << rec.message;
  EXPECT_TRUE(Quarantined("n1"));
}

class RemediatorTest : public RepairerTest {
 protected:
  // n1 and n2 of pool "a" (pools.standby 1) faulty and past their drain; the Repairer that
  // took them there.
  std::unique_ptr<Repairer> TwoRepairedInAPoolOfOneStandby() {
    policy.standby_sizes["a"] = 1;
    AddNode("n1");
    AddNode("n2");
    Fault("n1");
    Fault("n2");
    auto r = Make();
    Settle(*r, "n1", 15min);
    Settle(*r, "n2", 15min);
    return r;
  }
};

// MTTR too: once per repair, when the pool has its capacity back. With a standby that is the
// promotion (rung standby); the node's own recovery afterwards is not counted again.
TEST_F(RemediatorTest, StandbyIsPromotedAtQuarantineAndTheNodeBecomesTheStandby) {
  policy.provider = Provider::kStandby;
  AddNode("n1");
  AddNode("s1", "a", true);
  Fault("n1");
  auto r = Make();
  auto mttr = [&](const std::string& rung) {
    const std::string m = metrics.Render();
    const std::string key =
        "gpuheal_controller_mttr_seconds_count{domain=\"AcceleratedHardwareReady\",rung=\"" + rung +
        "\"} ";
    const size_t at = m.find(key);
    return at == std::string::npos ? -1 : std::stoi(m.substr(at + key.size()));
  };
  EXPECT_EQ(mttr("standby"), 0) << "every domain's series exists from the start";
  r->Reconcile("n1");
  EXPECT_FALSE(HasTaint(NodeObj("s1"), keys::kStandbyTaint, "", "")) << "promoted at once";
  EXPECT_EQ(mttr("standby"), 1) << metrics.Render();
  Settle(*r, "n1", 15min);
  EXPECT_EQ(Last("n1").phase, "Remediating");
  Heal("n1");
  clock.Advance(3min);
  r->Reconcile("n1");
  EXPECT_TRUE(HasTaint(NodeObj("n1"), keys::kStandbyTaint, "true", "NoSchedule"));
  EXPECT_EQ(Last("n1").phase, "Recovered");
  EXPECT_EQ(mttr("standby"), 1);
  EXPECT_EQ(mttr("none"), 0) << "the capacity came back with the standby, not now";
}

// Without a standby, MTTR ends when the node's replacement joins (Replaced), by that rung.
TEST_F(RemediatorTest, MttrWithoutAStandbyEndsWhenTheRungRestoresTheNode) {
  policy.provider = Provider::kExec;
  policy.exec_command = {"/bin/true"};
  AddNode("n1");
  Fault("n1");
  auto r = Make();
  Settle(*r, "n1", 15min);
  ASSERT_EQ(Last("n1").phase, "Replaced");
  const std::string m = metrics.Render();
  EXPECT_NE(m.find("gpuheal_controller_mttr_seconds_count{domain=\"AcceleratedHardwareReady\",rung="
                   "\"exec\"} 1"),
            std::string::npos)
      << m;
}

// provider.name standby with a ladder: the standby is promoted at quarantine, then the ladder's
// rungs act on the node (here: delete-node).
TEST_F(RemediatorTest, TheStandbyIsPromotedAtQuarantineAndTheLadderRepairsTheNode) {
  policy.provider = Provider::kStandby;
  policy.ladder["catastrophic"] = {Provider::kDeleteNode};
  policy.replacement_timeout = 0ms;
  AddNode("n1");
  AddNode("s1", "a", true);
  Fault("n1");
  auto r = Make();
  r->Reconcile("n1");
  EXPECT_FALSE(HasTaint(NodeObj("s1"), keys::kStandbyTaint, "", "")) << "promoted at once";
  Settle(*r, "n1", 15min);
  EXPECT_FALSE(api.Object(kube::NodePath("n1")));
  EXPECT_EQ(Last("n1").phase, "Replaced");
  EXPECT_EQ(Last("n1").rung, "delete-node");
}

// A rung tried twice ({exec: 2}): the command runs once per try, the record counts the tries
// (status.rungAttempt), and the repair fails only after the last one.
TEST_F(RemediatorTest, ARungIsTriedItsAttemptsBeforeTheNext) {
  const std::string out = ::testing::TempDir() + "/exec-attempts-" + std::to_string(getpid());
  std::remove(out.c_str());
  policy.provider = Provider::kExec;
  policy.exec_command = {"/bin/sh", "-c", "echo try >> " + out + "; exit 1"};
  policy.ladder["catastrophic"] = {Provider::kExec, Provider::kExec};
  AddNode("n1");
  Fault("n1");
  auto r = Make();
  Settle(*r, "n1", 15min);
  const auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "Failed");
  EXPECT_EQ(rec.rung_index, 1);
  EXPECT_EQ(rec.rung_attempt, 2);
  std::ifstream f(out);
  std::string all((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(all, "try\ntry\n") << "one run per try";
  EXPECT_TRUE(std::any_of(rec.actions.begin(), rec.actions.end(), [](const std::string& a) {
    return a.starts_with("rung 1 exec failed at ") && a.ends_with("next: rung 2 exec");
  }));
}

// A node a rung acted on is released only once its kubelet says Ready again, not as soon as its
// agent's condition is True.
TEST_F(RemediatorTest, ARepairedNodeIsReleasedOnlyOnceReady) {
  policy.provider = Provider::kStandby;
  AddNode("n1");
  AddNode("s1", "a", true);
  Fault("n1");
  auto r = Make();
  Settle(*r, "n1", 15min);
  ASSERT_EQ(Last("n1").phase, "Remediating");
  Heal("n1");
  auto n = *api.Object(kube::NodePath("n1"));
  n["status"]["conditions"].push_back(
      {{"type", "Ready"}, {"status", "False"}, {"reason", "KubeletNotReady"}});
  api.Put(kube::NodePath("n1"), n);
  clock.Advance(3min);
  EXPECT_TRUE(r->Reconcile("n1"));
  EXPECT_TRUE(Quarantined("n1"));
  EXPECT_NE(Last("n1").message.find("waiting for the kubelet to report Ready"), std::string::npos)
      << Last("n1").message;
  n = *api.Object(kube::NodePath("n1"));
  n["status"]["conditions"][1]["status"] = "True";
  api.Put(kube::NodePath("n1"), n);
  Settle(*r, "n1", 1min);
  EXPECT_FALSE(Quarantined("n1"));
  EXPECT_EQ(Last("n1").phase, "Recovered");
}

TEST_F(RemediatorTest, DeleteNodeDeletesTheNodeObjectOnce) {
  policy.provider = Provider::kDeleteNode;
  policy.replacement_timeout = 0ms;  // Replaced at the deletion
  AddNode("n1");
  Fault("n1");
  auto r = Make();
  Settle(*r, "n1", 15min);
  EXPECT_FALSE(api.Object(kube::NodePath("n1")));
  EXPECT_EQ(api.Count("DELETE", "/api/v1/nodes/n1"), 1u);
  EXPECT_EQ(Last("n1").phase, "Replaced");
}

// A node as a provisioner brings it up: created now, Ready, its agent's condition True.
void JoinNode(FakeApi& api, FakeClock& clock, const std::string& name, const std::string& pool,
              const std::string& pool_label) {
  json cond = {{"type", "AcceleratedHardwareReady"},
               {"status", "True"},
               {"reason", "GPUsHealthy"},
               {"message", ""},
               {"lastTransitionTime", kube::RfcTime(clock.Now())}};
  json ready = cond;
  ready["type"] = "Ready";
  ready["reason"] = "KubeletReady";
  api.Put(kube::NodePath(name),
          {{"metadata",
            {{"labels", {{pool_label, pool}}},
             {"uid", "uid-" + name},
             {"creationTimestamp", kube::RfcTime(clock.Now())}}},
           {"spec", json::object()},
           {"status", {{"capacity", {{"nvidia.com/gpu", "8"}}}, {"conditions", {cond, ready}}}}});
}

// delete-node is half of a replacement: the repair stays Remediating until a node joins the
// pool after the deletion (Ready, the fault's condition True), which it claims
// (gpuheal.io/replaces) and, the pool being short of its standby, makes the standby.
TEST_F(RemediatorTest, DeleteNodeWaitsForTheReplacementAndRefillsTheStandby) {
  policy.provider = Provider::kDeleteNode;
  policy.standby_default = 1;
  AddNode("n1");
  // Not a replacement: it was there before the repair began.
  JoinNode(api, clock, "old", "a", policy.pool_label);
  AddNode("n2");
  clock.Advance(5s);
  Fault("n1");
  auto r = Make();
  Settle(*r, "n1", 11min);
  EXPECT_FALSE(api.Object(kube::NodePath("n1")));
  EXPECT_EQ(Last("n1").phase, "Remediating");
  EXPECT_NE(Last("n1").message.find("waiting until"), std::string::npos) << Last("n1").message;
  clock.Advance(30s);
  JoinNode(api, clock, "faulty-new", "a", policy.pool_label);
  Fault("faulty-new");
  JoinNode(api, clock, "other-pool", "b", policy.pool_label);
  clock.Advance(5s);
  EXPECT_TRUE(r->Reconcile("n1")) << "nothing in pool a is a replacement yet";
  EXPECT_EQ(Last("n1").phase, "Remediating");
  JoinNode(api, clock, "new", "a", policy.pool_label);
  Settle(*r, "n1", 1min);
  const auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "Replaced") << rec.message;
  EXPECT_EQ(rec.replacement, "new");
  const auto n = NodeObj("new");
  EXPECT_EQ(n.meta.annotations.at(std::string(keys::kReplaces)), rec.meta.name);
  EXPECT_TRUE(HasTaint(n, keys::kStandbyTaint, "true", "NoSchedule"))
      << "pool a had no standby: the replacement refills it";
  EXPECT_FALSE(NodeObj("other-pool").meta.annotations.count(std::string(keys::kReplaces)));
  EXPECT_EQ(api.Count("DELETE", "/api/v1/nodes/n1"), 1u);
}

// A provisioner that launches for pending pods (Karpenter) brings the new machine up while the
// drain evicts them, before gpuheal deletes the node: that node, created after the repair began,
// is the replacement as soon as the deletion went through.
TEST_F(RemediatorTest, ANodeThatJoinedDuringTheDrainIsTheReplacement) {
  policy.provider = Provider::kDeleteNode;
  AddNode("s1", "a", true);
  AddNode("n1");
  AddNode("n2");
  clock.Advance(5s);
  Fault("n1");
  auto r = Make();
  EXPECT_TRUE(r->Reconcile("n1"));  // quarantined, draining
  clock.Advance(3s);
  JoinNode(api, clock, "launched", "a", policy.pool_label);
  Settle(*r, "n1", 11min);
  const auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "Replaced") << rec.message;
  EXPECT_EQ(rec.replacement, "launched");
  EXPECT_EQ(api.Count("DELETE", "/api/v1/nodes/n1"), 1u) << "deleted all the same";
}

// A replacement is claimed by one repair: two nodes of a pool deleted, one node joining, one
// Replaced; the second joins the other.
TEST_F(RemediatorTest, OneReplacementReplacesOneNode) {
  policy.provider = Provider::kDeleteNode;
  policy.standby_default = 1;
  AddNode("s1", "a", true);  // the pool has its standby: replacements go into service
  AddNode("n1");
  AddNode("n2");
  Fault("n1");
  auto r = Make();
  Settle(*r, "n1", 11min);
  Fault("n2");
  Settle(*r, "n2", 11min);
  ASSERT_FALSE(api.Object(kube::NodePath("n2")));
  JoinNode(api, clock, "new1", "a", policy.pool_label);
  Settle(*r, "n1", 1min);
  Settle(*r, "n2", 10s);
  EXPECT_EQ(Last("n1").replacement, "new1") << Last("n1").phase << ": " << Last("n1").message;
  EXPECT_EQ(Last("n2").phase, "Remediating");
  EXPECT_FALSE(HasTaint(NodeObj("new1"), keys::kStandbyTaint, "", ""));
  JoinNode(api, clock, "new2", "a", policy.pool_label);
  Settle(*r, "n2", 1min);
  EXPECT_EQ(Last("n2").replacement, "new2");
  EXPECT_EQ(Last("n2").phase, "Replaced");
}

TEST_F(RemediatorTest, DeleteNodeFailsWhenNoReplacementJoinsInTime) {
  policy.provider = Provider::kDeleteNode;
  policy.replacement_timeout = 2min;
  AddNode("n1");
  Fault("n1");
  auto r = Make();
  Settle(*r, "n1", 11min);
  ASSERT_EQ(Last("n1").phase, "Remediating");
  Settle(*r, "n1", 3min);
  const auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "Failed");
  EXPECT_NE(rec.message.find("no replacement joined pool \"a\" within 120 s"), std::string::npos)
      << rec.message;
}

// pools.standby: a repaired node returns as the pool's standby while the pool has fewer; once
// the pool has its size, the next one goes back into service.
TEST_F(RemediatorTest, ARepairedNodeRefillsThePoolsStandbyUpToItsSize) {
  auto r = TwoRepairedInAPoolOfOneStandby();
  Heal("n1");
  clock.Advance(3min);
  Settle(*r, "n1", 1min);
  EXPECT_EQ(Last("n1").phase, "Recovered");
  EXPECT_TRUE(HasTaint(NodeObj("n1"), keys::kStandbyTaint, "true", "NoSchedule"));
  Heal("n2");
  clock.Advance(3min);
  Settle(*r, "n2", 1min);
  EXPECT_EQ(Last("n2").phase, "Recovered");
  EXPECT_FALSE(HasTaint(NodeObj("n2"), keys::kStandbyTaint, "", ""))
      << "the pool has its one standby: n2 returns to service";
  EXPECT_FALSE(Quarantined("n2"));
}

// Two repaired nodes of a pool of one standby released at once, the node cache not showing the
// first release yet when the second is decided: one standby, not two (read-your-writes).
TEST_F(RemediatorTest, ReleasesAtOnceDoNotTakeThePoolsLastStandbyPlaceTwice) {
  TwoRepairedInAPoolOfOneStandby();
  Heal("n1");
  Heal("n2");
  clock.Advance(3min);
  // The cache as it was before either release.
  auto w = MakeWorld();
  const std::vector<kube::Node> before = w.nodes();
  w.nodes = [before] { return before; };
  Repairer r(api, clock, std::move(w), policy, false, metrics);
  Settle(r, "n1", 1min);
  Settle(r, "n2", 1min);
  EXPECT_EQ(Last("n1").phase, "Recovered");
  EXPECT_EQ(Last("n2").phase, "Recovered");
  const int standbys = HasTaint(NodeObj("n1"), keys::kStandbyTaint, "", "") +
                       HasTaint(NodeObj("n2"), keys::kStandbyTaint, "", "");
  EXPECT_EQ(standbys, 1) << "the pool's one standby place, taken once";
  EXPECT_FALSE(Quarantined("n1"));
  EXPECT_FALSE(Quarantined("n2"));
}

TEST_F(RemediatorTest, DeleteNodeRefusesAnOwnerThatDoesNotNameTheNodeBack) {
  policy.provider = Provider::kDeleteNode;
  AddNode("n1");
  Annotate(kube::NodePath("n1"), kube::kCapiMachineAnnotation, "m-7");
  Annotate(kube::NodePath("n1"), kube::kCapiNamespaceAnnotation, "capi");
  api.Put("/apis/cluster.x-k8s.io", CapiGroup({"v1beta2", "v1beta1"}));
  api.Put("/apis/cluster.x-k8s.io/v1beta2/namespaces/capi/machines/m-7",
          {{"status", {{"nodeRef", {{"name", "another-node"}}}}}});
  Fault("n1");
  auto r = Make();
  Settle(*r, "n1", 15min);
  const auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "Failed");
  EXPECT_NE(rec.message.find("owner not proven"), std::string::npos) << rec.message;
  EXPECT_NE(rec.message.find("names node another-node"), std::string::npos)
      << "the Machine was read at v1beta2, the version the group serves first: " << rec.message;
  EXPECT_EQ(api.Count("GET", "/cluster.x-k8s.io/v1beta1/"), 0u);
  EXPECT_EQ(api.Count("DELETE", ""), 0u);
  EXPECT_TRUE(Quarantined("n1"));
}

// A Cluster API older than v1.11 serves only v1beta1: the Machine and the MachineHealthChecks are
// read there, and the proven owner deleted.
TEST_F(RemediatorTest, DeleteNodeReadsClusterApiAtV1beta1WhereOnlyThatIsServed) {
  policy.provider = Provider::kDeleteNode;
  AddNode("n1");
  Annotate(kube::NodePath("n1"), kube::kCapiMachineAnnotation, "m-7");
  Annotate(kube::NodePath("n1"), kube::kCapiNamespaceAnnotation, "capi");
  api.Put("/apis/cluster.x-k8s.io", CapiGroup({"v1beta1"}));
  api.Put("/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machines/m-7",
          {{"status", {{"nodeRef", {{"name", "n1"}}}}}});
  Fault("n1");
  auto r = Make();
  Settle(*r, "n1", 15min);
  EXPECT_EQ(api.CountOk("DELETE", "/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machines/m-7"),
            1u)
      << Last("n1").message;
  EXPECT_GE(api.Count("GET", "/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machinehealthchecks"),
            1u);
  EXPECT_EQ(api.Count("", "/cluster.x-k8s.io/v1beta2/"), 0u);
  EXPECT_EQ(api.Count("DELETE", kube::NodePath("n1")), 0u) << "the Machine is the owner";
}

// A provisioner's object as its controller writes it: created now, naming its node.
json Provisioned(const FakeClock& clock, const std::string& name, json labels, json status) {
  return {{"metadata",
           {{"name", name},
            {"uid", "uid-" + name},
            {"labels", std::move(labels)},
            {"creationTimestamp", kube::RfcTime(clock.Now())}}},
          {"status", std::move(status)}};
}

// delete-node on n1, which Karpenter's NodeClaim nc-1 owns, in pool "a" with a standby; n1 faulty.
class NodeClaimOwnedTest : public RemediatorTest {
 protected:
  void SetUp() override {
    RemediatorTest::SetUp();
    policy.provider = Provider::kDeleteNode;
    AddNode("s1", "a", true);
    AddNode("n1");
    AddNode("n2");
    api.Put("/apis/karpenter.sh/v1/nodeclaims/nc-1",
            Provisioned(clock, "nc-1", json::object(), {{"nodeName", "n1"}}));
    clock.Advance(5s);
    Fault("n1");
  }
  // Karpenter launches NodeClaim `claim` now, and its node `node` joins pool "a".
  void Launch(const std::string& claim, const std::string& node) {
    api.Put("/apis/karpenter.sh/v1/nodeclaims/" + claim,
            Provisioned(clock, claim, json::object(), {{"nodeName", node}}));
    JoinNode(api, clock, node, "a", policy.pool_label);
  }
};

// A NodeClaim-owned node is replaced only by the node of a NodeClaim created since the repair
// began: a Ready node that joins the pool on its own (an operator's, a scale-up for other pods)
// is not claimed.
TEST_F(NodeClaimOwnedTest, OnlyTheNodeOfANewNodeClaimReplacesIt) {
  auto r = Make();
  Settle(*r, "n1", 11min);
  ASSERT_EQ(api.CountOk("DELETE", "/apis/karpenter.sh/v1/nodeclaims/nc-1"), 1u)
      << Last("n1").message;
  ASSERT_EQ(Last("n1").phase, "Remediating") << Last("n1").message;
  JoinNode(api, clock, "stray", "a", policy.pool_label);
  clock.Advance(2s);
  EXPECT_TRUE(r->Reconcile("n1"));
  EXPECT_EQ(Last("n1").phase, "Remediating") << "no NodeClaim names stray";
  Launch("nc-2", "launched");
  Settle(*r, "n1", 1min);
  const auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "Replaced") << rec.message;
  EXPECT_EQ(rec.replacement, "launched");
  EXPECT_FALSE(NodeObj("stray").meta.annotations.count(std::string(keys::kReplaces)));
}

// A repair the release before left waiting for its NodeClaim's replacement (its record without
// status.steps) goes on through the migration: nc-1 is not deleted again, a stray node is not
// the replacement, the node of the new NodeClaim is.
TEST_F(NodeClaimOwnedTest, ARecordOfTheReleaseBeforeClaimsOnlyItsNodeClaimsNode) {
  clock.Advance(10min + 1s);  // the record's wait began at 00:10:05
  ASSERT_TRUE(api.Delete("/apis/karpenter.sh/v1/nodeclaims/nc-1"));  // as that controller did
  const size_t deletes = api.Count("DELETE", "/apis/karpenter.sh/v1/nodeclaims/");
  PutRecordOfTheReleaseBefore("nodeclaim-awaiting");
  auto r = Make();
  JoinNode(api, clock, "stray", "a", policy.pool_label);
  clock.Advance(2s);
  EXPECT_TRUE(r->Reconcile("n1"));
  EXPECT_EQ(Last("n1").phase, "Remediating") << Last("n1").message;
  EXPECT_FALSE(Last("n1").steps.empty()) << "the migrated steps were written";
  Launch("nc-2", "launched");
  Settle(*r, "n1", 1min);
  const auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "Replaced") << rec.message;
  EXPECT_EQ(rec.replacement, "launched");
  EXPECT_EQ(api.Count("DELETE", "/apis/karpenter.sh/v1/nodeclaims/"), deletes) << "none again";
}

// The provisioner's objects cannot be listed (a chart whose RBAC predates the list, say): no
// node is claimed on a guess, the record says why, and the wait still ends at its deadline.
TEST_F(NodeClaimOwnedTest, AProvisionerThatCannotBeListedStillEndsTheWaitAtItsDeadline) {
  policy.replacement_timeout = 2min;
  auto r = Make();
  Settle(*r, "n1", 11min);
  ASSERT_EQ(Last("n1").phase, "Remediating") << Last("n1").message;
  Launch("nc-2", "launched");
  api.Fail("GET", "/apis/karpenter.sh/v1/nodeclaims", 403, 1000);
  clock.Advance(1s);
  EXPECT_TRUE(r->Reconcile("n1"));
  EXPECT_NE(Last("n1").message.find("the provisioner's objects could not be listed"),
            std::string::npos)
      << Last("n1").message;
  Settle(*r, "n1", 3min);
  const auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "Failed") << rec.message;
  EXPECT_NE(rec.message.find("could not be listed: "), std::string::npos) << rec.message;
  EXPECT_TRUE(rec.replacement.empty());
}

// A Machine of a MachineDeployment is replaced by the node of that deployment's new Machine, not
// by another deployment's.
TEST_F(RemediatorTest, OnlyTheNodeOfItsDeploymentsNewMachineReplacesAMachinesNode) {
  policy.provider = Provider::kDeleteNode;
  AddNode("s1", "a", true);
  AddNode("n1");
  AddNode("n2");
  Annotate(kube::NodePath("n1"), kube::kCapiMachineAnnotation, "m-7");
  Annotate(kube::NodePath("n1"), kube::kCapiNamespaceAnnotation, "capi");
  api.Put("/apis/cluster.x-k8s.io", CapiGroup({"v1beta2", "v1beta1"}));
  const std::string machines = "/apis/cluster.x-k8s.io/v1beta2/namespaces/capi/machines/";
  const json gpu = {{"cluster.x-k8s.io/deployment-name", "md-gpu"},
                    {"cluster.x-k8s.io/set-name", "md-gpu-x1"}};
  api.Put(machines + "m-7", Provisioned(clock, "m-7", gpu, {{"nodeRef", {{"name", "n1"}}}}));
  clock.Advance(5s);
  Fault("n1");
  auto r = Make();
  Settle(*r, "n1", 11min);
  ASSERT_EQ(api.CountOk("DELETE", machines + "m-7"), 1u) << Last("n1").message;
  ASSERT_EQ(Last("n1").phase, "Remediating") << Last("n1").message;
  api.Put(machines + "m-9",
          Provisioned(clock, "m-9", {{"cluster.x-k8s.io/deployment-name", "md-other"}},
                      {{"nodeRef", {{"name", "other"}}}}));
  JoinNode(api, clock, "other", "a", policy.pool_label);
  clock.Advance(2s);
  EXPECT_TRUE(r->Reconcile("n1"));
  EXPECT_EQ(Last("n1").phase, "Remediating") << "md-other's machine does not replace md-gpu's";
  api.Put(machines + "m-8", Provisioned(clock, "m-8", gpu, {{"nodeRef", {{"name", "new"}}}}));
  JoinNode(api, clock, "new", "a", policy.pool_label);
  Settle(*r, "n1", 1min);
  const auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "Replaced") << rec.message;
  EXPECT_EQ(rec.replacement, "new");
  EXPECT_TRUE(std::count(rec.actions.begin(), rec.actions.end(),
                         "the replacement is the node of a new Machine with "
                         "cluster.x-k8s.io/deployment-name=md-gpu in namespace capi"))
      << "the record says which provisioner's object counts";
}

// The redfish rung with auth: session against a BMC double that speaks the session protocol,
// n1's entry in the administrator's ConfigMap; n1 has a fault.
class RedfishSessionTest : public RemediatorTest {
 protected:
  void SetUp() override {
    RemediatorTest::SetUp();
    ASSERT_GT(bmc.port(), 0);
    policy.provider = Provider::kRedfish;
    policy.redfish.session_auth = true;
    policy.redfish.endpoints_configmap = "ops/bmc";
    policy.redfish.allow_insecure_http = true;
    policy.redfish.request_timeout = 5s;
    api.Put("/api/v1/namespaces/ops/configmaps/bmc", {{"data", {{"n1", bmc.url()}}}});
    api.Put("/api/v1/namespaces/gpuheal-system/secrets/gpuheal-bmc",
            {{"data", {{"username", "YWRtaW4="}, {"password", "czNjcmV0"}}}});  // admin, s3cret
    AddNode("n1");
    Fault("n1");
  }

  // Reconciles until the BMC has the reset, then `polls` more of the wait's looks.
  void UntilResetThenPoll(Repairer& r, int polls) {
    for (int i = 0; i < 500 && bmc.resets == 0; ++i) {
      auto next = r.Reconcile("n1");
      ASSERT_TRUE(next) << "the repair stopped before the reset";
      clock.Advance(std::max<std::chrono::microseconds>(*next, 1ms));
    }
    ASSERT_EQ(bmc.resets, 1);
    for (int i = 0; i < polls; ++i) {
      auto next = r.Reconcile("n1");
      ASSERT_TRUE(next) << "the wait stopped";
      clock.Advance(std::max<std::chrono::microseconds>(*next, 1ms));
    }
  }

  testing::SessionBmc bmc;
};

// auth: session: one Redfish session carries the reset and every look at the BMC while the node
// comes back (it was a login and a logout per 2 s poll), a session the BMC ended is opened again
// once, and the last is logged out when the repair ends.
TEST_F(RedfishSessionTest, OneSessionPerWatchLoggedOutWhenTheRepairEnds) {
  auto r = Make();
  UntilResetThenPoll(*r, 10);
  EXPECT_GE(bmc.system_reads, 11) << "the wait looked at the BMC at each poll";
  EXPECT_EQ(bmc.logins, 1) << "one session for the reset and the wait's looks";
  EXPECT_EQ(bmc.logouts, 0);
  EXPECT_EQ(bmc.Sessions(), 1u);
  bmc.EndSessions();  // the BMC's idle timeout
  UntilResetThenPoll(*r, 5);
  EXPECT_EQ(bmc.logins, 2) << "the ended session opened again, once";
  Heal("n1");
  clock.Advance(3min);
  Settle(*r, "n1", 1min);
  ASSERT_EQ(Last("n1").phase, "Recovered") << Last("n1").message;
  EXPECT_EQ(bmc.logins, 2);
  EXPECT_EQ(bmc.logouts, 1) << "the watch's session logged out when the repair ended";
  EXPECT_EQ(bmc.Sessions(), 0u);
  EXPECT_EQ(bmc.resets, 1);
  EXPECT_EQ(bmc.basic_seen, 0);
}

// A controller of the release before sent the reset and stopped while the node came back: the
// record it left (no status.steps) is read through the migration, and this controller waits for
// the node without a second reset, then writes the steps once.
TEST_F(RedfishSessionTest, ARecordOfTheReleaseBeforeWaitsWithoutASecondReset) {
  clock.Advance(10min + 2s);  // the record's reset was at 00:10:00
  const std::string name = PutRecordOfTheReleaseBefore("redfish-reset-sent");
  auto r = Make();
  for (int i = 0; i < 5; ++i) {
    auto next = r->Reconcile("n1");
    ASSERT_TRUE(next) << Last("n1").message;
    clock.Advance(std::max<std::chrono::microseconds>(*next, 1ms));
  }
  EXPECT_EQ(bmc.resets, 0) << "the reset of the record's rung was sent before";
  const auto rec = Last("n1");
  EXPECT_EQ(rec.meta.name, name);
  EXPECT_EQ(rec.phase, "Remediating") << rec.message;
  ASSERT_FALSE(rec.steps.empty()) << "the migrated steps were written";
  EXPECT_TRUE(std::any_of(rec.steps.begin(), rec.steps.end(), [](const kube::RepairStep& s) {
    return s.kind == "BMCResetSent" && s.rung == 1;
  }));
  EXPECT_FALSE(std::any_of(rec.actions.begin(), rec.actions.end(), [](const std::string& a) {
    return a.starts_with("did not send the BMC reset again");
  })) << "the record says the BMC accepted it";
  Heal("n1");
  clock.Advance(3min);
  Settle(*r, "n1", 1min);
  EXPECT_EQ(Last("n1").phase, "Recovered") << Last("n1").message;
  EXPECT_EQ(bmc.resets, 0);
}

// The session ends and the BMC refuses a new one (its password rotated): the rung fails with the
// BMC's answer instead of looking on blind until recovery_timeout.
TEST_F(RedfishSessionTest, ARefusedNewSessionFailsTheRung) {
  auto r = Make();
  UntilResetThenPoll(*r, 2);
  bmc.EndSessions();
  bmc.SetPassword("rotated");
  Settle(*r, "n1", 1min);
  const auto rec = Last("n1");
  EXPECT_EQ(rec.phase, "Failed");
  EXPECT_NE(rec.message.find("the BMC refused a new Redfish session while the node came back"),
            std::string::npos)
      << rec.message;
  EXPECT_NE(rec.message.find("HTTP 401: Invalid credentials"), std::string::npos) << rec.message;
  EXPECT_EQ(bmc.logins, 1);
  EXPECT_EQ(bmc.resets, 1);
  EXPECT_TRUE(Quarantined("n1"));
}

TEST_F(RemediatorTest, ExecRunsTheCommandOnceWithTheNodeInItsEnvironment) {
  const std::string out = ::testing::TempDir() + "/exec-remediator-" + std::to_string(getpid());
  std::remove(out.c_str());
  policy.provider = Provider::kExec;
  policy.exec_command = {"/bin/sh", "-c", "echo \"$NODE_NAME $REASON\" >> " + out};
  AddNode("n1");
  Fault("n1");
  auto r = Make();
  Settle(*r, "n1", 15min);
  EXPECT_EQ(Last("n1").phase, "Replaced");
  std::ifstream f(out);
  std::string all((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(all, "n1 NvidiaXID79Error\n");
  std::remove(out.c_str());
}

// A controller stopped after its k-th write (the API unreachable from then on), then a new one
// started on what the cluster kept: for every k the repair ends as it does uninterrupted, each
// pod is evicted once and the remediation command runs at most once.
TEST_F(RemediatorTest, ACrashAfterAnyWriteContinuesWithoutRepeatingADisruptiveStep) {
  const std::string out = ::testing::TempDir() + "/exec-crash-" + std::to_string(getpid());
  policy.provider = Provider::kExec;
  policy.exec_command = {"/bin/sh", "-c", "echo ran >> " + out};
  size_t total_writes = 0;
  for (int k = 0;; ++k) {
    SCOPED_TRACE("stopped after write " + std::to_string(k));
    std::remove(out.c_str());
    api.Reset();
    AddSpares();
    AddNode("n1");
    AddPod("p1", "n1");
    AddPod("p2", "n1");
    Fault("n1");
    const size_t seeded = api.writes();
    api.Cut(k);
    {
      auto first = Make();
      Settle(*first, "n1", 15min);
    }
    const auto calls = api.Calls();
    const bool cut = std::any_of(calls.begin(), calls.end(),
                                 [](const FakeApi::Call& c) { return c.status == 0; });
    api.Heal();
    auto second = Make();
    Settle(*second, "n1", 15min);
    const auto recs = Records("n1");
    ASSERT_EQ(recs.size(), 1u);
    const auto& rec = recs[0];
    EXPECT_TRUE(Quarantined("n1"));
    EXPECT_FALSE(api.Object(kube::PodPath("jobs", "p1")));
    EXPECT_FALSE(api.Object(kube::PodPath("jobs", "p2")));
    EXPECT_LE(api.CountOk("POST", "jobs/pods/p1/eviction"), 1u);
    EXPECT_LE(api.CountOk("POST", "jobs/pods/p2/eviction"), 1u);
    std::ifstream f(out);
    std::string ran((std::istreambuf_iterator<char>(f)), {});
    EXPECT_LE(std::count(ran.begin(), ran.end(), '\n'), 1) << "the command ran twice";
    if (ran.empty()) {
      EXPECT_EQ(rec.phase, "Failed") << "stopped while it ran: outcome unknown, not repeated";
    } else {
      EXPECT_TRUE(rec.phase == "Replaced" || rec.phase == "Failed") << rec.phase;
    }
    if (!cut) {
      total_writes = api.writes() - seeded;
      EXPECT_EQ(rec.phase, "Replaced");
      break;
    }
    ASSERT_LT(k, 100) << "the ladder should end in far fewer writes";
  }
  EXPECT_GT(total_writes, 5u);
  std::remove(out.c_str());
}

}  // namespace
}  // namespace gpuheal::controller
