// The whole controller on the fake API: its informers list and watch the fake (its watches stay
// open and deliver each change as it is made), it wins the Lease, its work queue feeds the
// Repairer, and Stop() releases the Lease. No control plane and no fixed sleeps: each step waits
// for the fake's objects to reach a state, waking at each change. test/integration/
// controller_test.cc runs the same controller against a real control plane.

#include <gtest/gtest.h>

#include <thread>

#include "controller/controller.h"
#include "core/keys.h"
#include "core/time.h"
#include "fakes/fake_api.h"

namespace gpuheal::controller {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::FakeApi;

// The controller owns its clients; both are this one fake.
class SharedFake final : public kube::Api {
 public:
  explicit SharedFake(FakeApi& api) : api_(api) {}
  Result<kube::Response> Request(const std::string& method, const std::string& path,
                                 const std::string& body,
                                 const std::string& content_type) override {
    return api_.Request(method, path, body, content_type);
  }
  Result<kube::Response> Watch(const std::string& collection_path,
                               const std::string& resource_version,
                               const std::function<bool(const kube::WatchEventRaw&)>& on_event,
                               std::chrono::seconds timeout,
                               const std::atomic<bool>* cancel) override {
    return api_.Watch(collection_path, resource_version, on_event, timeout, cancel);
  }

 private:
  FakeApi& api_;
};

constexpr auto kWait = 20s;  // a bound for a failing test, never waited by a passing one

class ControllerLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api.SetBlockingWatches(true);
    for (int i = 0; i < 10; ++i) AddNode("gpu-" + std::to_string(i));
  }

  void AddNode(const std::string& name, const std::string& pool = "a") {
    api.Put(kube::NodePath(name),
            {{"metadata", {{"labels", {{Policy{}.pool_label, pool}}}}},
             {"spec", json::object()},
             {"status",
              {{"capacity", {{"nvidia.com/gpu", "8"}}},
               {"conditions",
                json::array({Condition("Ready", "True", "KubeletReady"),
                             Condition("AcceleratedHardwareReady", "True", "GPUsHealthy")})}}}});
  }

  static json Condition(const std::string& type, const std::string& status,
                        const std::string& reason, const std::string& message = "") {
    return {{"type", type},
            {"status", status},
            {"reason", reason},
            {"message", message},
            {"lastTransitionTime", kube::RfcTime(std::chrono::system_clock::now())}};
  }

  // Xid 79 as the agent reports it.
  void Fault(const std::string& name) {
    auto n = *api.Object(kube::NodePath(name));
    n["status"]["conditions"] = json::array(
        {Condition("Ready", "True", "KubeletReady"),
         Condition("AcceleratedHardwareReady", "False", "NvidiaXID79Error",
                   "[catastrophic/isolate] GPU 0000:3b:00: GPU has fallen off the bus")});
    api.Put(kube::NodePath(name), n);
  }

  void AddPod(const std::string& name, const std::string& node) {
    api.Put(kube::PodPath("jobs", name),
            {{"spec",
              {{"nodeName", node},
               {"containers",
                {{{"name", "c"},
                  {"image", "trainer"},
                  {"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}}}}}}}},
             {"status", {{"phase", "Running"}}}});
  }

  bool Tainted(const std::string& node) const {
    auto n = api.Object(kube::NodePath(node));
    if (!n) return false;
    for (const auto& t : n->value("/spec/taints"_json_pointer, json::array()))
      if (t.value("key", "") == keys::kFaultTaint) return true;
    return false;
  }

  bool DrainedOrHeld(const std::string& node) const {
    auto r = RecordOf(node);
    return r && (r->contains("/status/phases/Drained"_json_pointer) ||
                 r->value("/status/gate"_json_pointer, "") == "pool");
  }

  std::optional<json> RecordOf(const std::string& node) const {
    for (const auto& r : api.List(kNodeRepairs))
      if (r.value("/spec/node"_json_pointer, "") == node) return r;
    return std::nullopt;
  }

  std::string Holder() const {
    auto lease = api.Object(kube::LeasePath("gpuheal-system", "gpuheal-controller"));
    return lease ? lease->value("/spec/holderIdentity"_json_pointer, "") : "";
  }

  // Starts the controller on the fake; Run() on its own thread, as main() runs it.
  void Start() {
    ControllerOptions opts;
    opts.identity = "replica-1";
    opts.listen = "";
    opts.workers = 2;
    opts.retry_period = 100ms;
    opts.renew_deadline = 1s;
    opts.lease_duration = 2s;
    opts.policy.checkpoint_window = 0s;  // evict at once
    opts.policy.catastrophic_checkpoint_window = 0s;
    opts.policy.toleration.clear();
    opts.policy.breaker_share = 0.5;
    auto c = Controller::Create(std::make_unique<SharedFake>(api),
                                std::make_unique<SharedFake>(api), opts);
    ASSERT_TRUE(c) << c.error().message;
    controller = std::move(*c);
    run = std::thread([this] { rc = controller->Run(); });
  }

  void TearDown() override {
    if (controller) controller->Stop();
    if (run.joinable()) run.join();
  }

  FakeApi api;
  std::unique_ptr<Controller> controller;
  std::thread run;
  int rc = -1;
};

TEST_F(ControllerLoopTest,
       AFaultSeenByTheWatchIsQuarantinedDrainedAndRecordedThenStopReleasesTheLease) {
  // A fault present before the start arrives by the informers' list; one made after it, by their
  // watch.
  Fault("gpu-1");
  AddPod("train-1", "gpu-1");
  AddPod("train-2", "gpu-2");
  AddPod("other", "gpu-3");
  Start();
  ASSERT_TRUE(api.WaitFor([&] { return Holder() == "replica-1"; }, kWait));
  ASSERT_TRUE(api.WaitFor([&] { return Tainted("gpu-1"); }, kWait));
  Fault("gpu-2");
  ASSERT_TRUE(api.WaitFor([&] { return Tainted("gpu-2"); }, kWait))
      << "a fault made after the start reaches the controller by its watch";
  // Each faulty node: cordoned, its pod evicted through the Eviction API, its record written.
  for (const std::string node : {"gpu-1", "gpu-2"}) {
    ASSERT_TRUE(api.WaitFor(
        [&] {
          auto r = RecordOf(node);
          return r && r->contains("status") && r->at("status").contains("phases") &&
                 r->at("status").at("phases").contains("Drained");
        },
        kWait))
        << node << ": " << (RecordOf(node) ? RecordOf(node)->dump() : "no record");
    EXPECT_TRUE(api.Object(kube::NodePath(node))->value("/spec/unschedulable"_json_pointer, false))
        << node;
  }
  const std::string pods = kube::PodPath("jobs");
  EXPECT_EQ(api.CountOk("POST", pods + "/train-1/eviction"), 1U);
  EXPECT_EQ(api.CountOk("POST", pods + "/train-2/eviction"), 1U);
  EXPECT_FALSE(api.Object(pods + "/train-1"));
  EXPECT_TRUE(api.Object(pods + "/other")) << "a healthy node's pod stays";
  EXPECT_EQ(api.Count("POST", "/eviction"), 2U);
  EXPECT_FALSE(Tainted("gpu-3"));

  controller->Stop();
  run.join();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(Holder(), "") << "a stopped controller releases its Lease for a successor";
}

TEST_F(ControllerLoopTest, StopBeforeLeadingEndsRunAndActsOnNothing) {
  Fault("gpu-1");
  api.Put(kube::LeasePath("gpuheal-system", "gpuheal-controller"),
          {{"spec",
            {{"holderIdentity", "replica-0"},
             {"leaseDurationSeconds", 3600},
             {"renewTime", kube::RfcTime(std::chrono::system_clock::now())}}}});
  Start();
  // The informers have listed (their watches are open) before the controller is stopped.
  ASSERT_TRUE(api.WaitFor([&] { return api.Count("WATCH", kube::NodePath()) > 0; }, kWait));
  controller->Stop();
  run.join();
  EXPECT_EQ(rc, 0);
  EXPECT_FALSE(Tainted("gpu-1")) << "only the Lease holder acts";
  EXPECT_EQ(Holder(), "replica-0");
}

// The gates count through the node cache's indexes: a pool's share out of service from that
// pool's nodes, the breaker from the faulty nodes and the count of GPU nodes.
TEST_F(ControllerLoopTest, ThePoolGateCountsEachPoolThroughTheIndex) {
  for (int i = 0; i < 30; ++i) AddNode("b-" + std::to_string(i), "b");
  for (const std::string n : {"gpu-1", "gpu-2", "gpu-3", "b-1", "b-2", "b-3", "b-4", "b-5"}) {
    Fault(n);
    AddPod("p-" + n, n);
  }
  Start();
  for (const std::string n : {"gpu-1", "gpu-2", "gpu-3", "b-1", "b-2", "b-3", "b-4", "b-5"}) {
    ASSERT_TRUE(api.WaitFor([&] { return DrainedOrHeld(n); }, kWait))
        << n << ": " << (RecordOf(n) ? RecordOf(n)->dump() : "no record");
    EXPECT_TRUE(Tainted(n)) << "the quarantine is never held";
  }
  // Pool a: 3 of 10 unhealthy, more than its 2 (20%): every repair there waits.
  for (const std::string n : {"gpu-1", "gpu-2", "gpu-3"}) {
    EXPECT_EQ(RecordOf(n)->value("/status/message"_json_pointer, ""),
              "pool gate: 3 of 10 nodes in pool \"a\" unhealthy, at most 2 repaired at once");
    EXPECT_TRUE(api.Object(kube::PodPath("jobs", "p-" + n))) << n;
  }
  // Pool b: 5 of 30, within its 6.
  for (const std::string n : {"b-1", "b-2", "b-3", "b-4", "b-5"}) {
    EXPECT_TRUE(RecordOf(n)->contains("/status/phases/Drained"_json_pointer)) << n;
    EXPECT_FALSE(RecordOf(n)->contains("/status/gate"_json_pointer)) << n;
    EXPECT_FALSE(api.Object(kube::PodPath("jobs", "p-" + n))) << n;
  }
  EXPECT_EQ(api.Count("POST", "/eviction"), 5U);
}

}  // namespace
}  // namespace gpuheal::controller
