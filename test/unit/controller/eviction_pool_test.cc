// The eviction pool on a blocking eviction function: chains of several nodes run side by side up
// to the pool's concurrency and the per-node limit, a chain stops at its first 429, each node is
// woken once its last chain ends, and its results wait for Take.

#include "controller/eviction_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

namespace gpuheal::controller {
namespace {

using namespace std::chrono_literals;

// Evictions that block until released; counts how many ran at once.
class Gate {
 public:
  Result<kube::Response> Evict(const std::string& ns, const std::string& name) {
    std::unique_lock<std::mutex> lock(mu_);
    asked_.push_back(ns + "/" + name);
    ++running_;
    max_running_ = std::max(max_running_, running_);
    cv_.notify_all();
    cv_.wait(lock, [this] { return open_; });
    --running_;
    if (refuse_.count(name)) return kube::Response{429, R"({"kind":"Status","code":429})"};
    return kube::Response{201, "{}"};
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Waits until `n` evictions are blocked at once; false after 5 s.
  bool WaitRunning(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 5s, [&] { return running_ >= n; });
  }
  void Refuse(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    refuse_.insert(name);
  }
  int max_running() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_running_;
  }
  std::vector<std::string> asked() {
    std::lock_guard<std::mutex> lock(mu_);
    return asked_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int running_ = 0, max_running_ = 0;
  std::set<std::string> refuse_;
  std::vector<std::string> asked_;
};

class Woken {
 public:
  void Wake(const std::string& node) {
    std::lock_guard<std::mutex> lock(mu_);
    ++count_[node];
    cv_.notify_all();
  }
  bool WaitFor(const std::string& node) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 5s, [&] { return count_[node] > 0; });
  }
  int count(const std::string& node) {
    std::lock_guard<std::mutex> lock(mu_);
    return count_[node];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, int> count_;
};

std::vector<EvictionTarget> Chain(const std::string& prefix, int n) {
  std::vector<EvictionTarget> c;
  for (int i = 0; i < n; ++i)
    c.push_back({"ns", prefix + std::to_string(i), "uid-" + prefix + std::to_string(i)});
  return c;
}

TEST(EvictionPoolTest, SubmitReturnsAtOnceAndChainsRunSideBySideUpToTheConcurrency) {
  Gate gate;
  Woken woken;
  EvictionPool pool([&](const std::string& ns, const std::string& n) { return gate.Evict(ns, n); },
                    [&](const std::string& n) { woken.Wake(n); }, 4);
  // Three nodes of two single-pod chains each: 6 chains, at most 4 at once.
  for (const std::string node : {"a", "b", "c"})
    pool.Submit(node, {Chain(node + "x", 1), Chain(node + "y", 1)}, 8);
  EXPECT_TRUE(pool.Pending("ns/ax0"));
  EXPECT_TRUE(gate.WaitRunning(4)) << "four chains in flight while Submit has returned";
  EXPECT_EQ(pool.Busy(), 6u);
  EXPECT_EQ(pool.PendingPods(), 6u);
  EXPECT_TRUE(pool.Take("a").empty()) << "nothing ended yet";
  gate.Open();
  for (const std::string node : {"a", "b", "c"}) ASSERT_TRUE(woken.WaitFor(node)) << node;
  EXPECT_EQ(gate.max_running(), 4);
  EXPECT_FALSE(pool.Pending("ns/ax0"));
  EXPECT_EQ(pool.PendingPods(), 0u);
  for (const std::string node : {"a", "b", "c"}) {
    EXPECT_EQ(woken.count(node), 1) << "woken once, when its last chain ended";
    auto out = pool.Take(node);
    ASSERT_EQ(out.size(), 2u) << node;
    for (const auto& chain : out) {
      ASSERT_EQ(chain.size(), 1u);
      EXPECT_TRUE(chain[0].sent);
      ASSERT_TRUE(chain[0].result);
      EXPECT_EQ(chain[0].result->status, 201);
      EXPECT_EQ(chain[0].pod.ns, "ns");
      EXPECT_EQ(chain[0].pod.uid, "uid-" + chain[0].pod.name);
    }
    EXPECT_TRUE(pool.Take(node).empty()) << "taken once";
  }
  EXPECT_EQ(pool.Busy(), 0u);
}

TEST(EvictionPoolTest, ANodeGetsAtMostPerNodeChainsAtOnceAndOtherNodesTheirTurn) {
  Gate gate;
  Woken woken;
  EvictionPool pool([&](const std::string& ns, const std::string& n) { return gate.Evict(ns, n); },
                    [&](const std::string& n) { woken.Wake(n); }, 8);
  std::vector<std::vector<EvictionTarget>> many;
  for (int i = 0; i < 6; ++i) many.push_back(Chain("a" + std::to_string(i) + "-", 1));
  pool.Submit("a", std::move(many), 2);
  pool.Submit("b", {Chain("b", 1)}, 2);
  ASSERT_TRUE(gate.WaitRunning(3));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(gate.max_running(), 3) << "node a's two slots and node b's chain";
  const auto asked = gate.asked();
  EXPECT_NE(std::find(asked.begin(), asked.end(), "ns/b0"), asked.end())
      << "b is not queued behind a's six";
  gate.Open();
  ASSERT_TRUE(woken.WaitFor("a"));
  ASSERT_TRUE(woken.WaitFor("b"));
  EXPECT_EQ(pool.Take("a").size(), 6u);
  EXPECT_EQ(gate.max_running(), 3);
}

TEST(EvictionPoolTest, AChainStopsAtItsFirstRefusalAndTheRestIsNotSent) {
  Gate gate;
  gate.Refuse("t1");
  gate.Open();
  Woken woken;
  EvictionPool pool([&](const std::string& ns, const std::string& n) { return gate.Evict(ns, n); },
                    [&](const std::string& n) { woken.Wake(n); }, 4);
  pool.Submit("a", {Chain("t", 4)}, 8);
  ASSERT_TRUE(woken.WaitFor("a"));
  auto out = pool.Take("a");
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].size(), 4u);
  EXPECT_TRUE(out[0][0].sent);
  EXPECT_EQ(out[0][0].result->status, 201);
  EXPECT_TRUE(out[0][1].sent);
  EXPECT_EQ(out[0][1].result->status, 429);
  EXPECT_FALSE(out[0][2].sent);
  EXPECT_FALSE(out[0][3].sent);
  EXPECT_EQ(gate.asked(), (std::vector<std::string>{"ns/t0", "ns/t1"}));
}

TEST(EvictionPoolTest, CancelDropsTheChainsNotStarted) {
  Gate gate;
  Woken woken;
  EvictionPool pool([&](const std::string& ns, const std::string& n) { return gate.Evict(ns, n); },
                    [&](const std::string& n) { woken.Wake(n); }, 1);
  pool.Submit("a", {Chain("x", 1), Chain("y", 1), Chain("z", 1)}, 8);
  ASSERT_TRUE(gate.WaitRunning(1));
  pool.Cancel("a");
  EXPECT_FALSE(pool.Pending("ns/y0"));
  EXPECT_TRUE(pool.Pending("ns/x0")) << "in flight: it ends";
  gate.Open();
  ASSERT_TRUE(woken.WaitFor("a"));
  auto out = pool.Take("a");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0][0].pod.name, "x0");
  EXPECT_EQ(gate.asked(), (std::vector<std::string>{"ns/x0"}));
}

TEST(EvictionPoolTest, WithoutAWakeUpSubmitEvictsBeforeItReturns) {
  Gate gate;
  gate.Open();
  EvictionPool pool([&](const std::string& ns, const std::string& n) { return gate.Evict(ns, n); },
                    nullptr, 4);
  pool.Submit("a", {Chain("x", 2), Chain("y", 1)}, 2);
  EXPECT_EQ(gate.asked().size(), 3u);
  EXPECT_EQ(pool.Take("a").size(), 2u);
  EXPECT_EQ(pool.Busy(), 0u);
}

// Destroying the pool while an eviction is in flight waits for it; the queued ones are dropped.
TEST(EvictionPoolTest, DestroyingThePoolEndsTheEvictionsInFlight) {
  Gate gate;
  std::atomic<int> wakes{0};
  auto pool = std::make_unique<EvictionPool>(
      [&](const std::string& ns, const std::string& n) { return gate.Evict(ns, n); },
      [&](const std::string&) { ++wakes; }, 1);
  pool->Submit("a", {Chain("x", 1), Chain("y", 1)}, 8);
  ASSERT_TRUE(gate.WaitRunning(1));
  std::thread opener([&] {
    std::this_thread::sleep_for(50ms);
    gate.Open();
  });
  pool.reset();
  opener.join();
  EXPECT_EQ(gate.asked(), (std::vector<std::string>{"ns/x0"}));
}

}  // namespace
}  // namespace gpuheal::controller
