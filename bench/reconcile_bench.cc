// The CPU of one reconcile of a faulty node at 5,000 nodes, with the node cache's indexes (a pass
// visits the node's pool, the faulty nodes and a count of GPU nodes) against the same Repairer
// with the indexes off (every pass visits each cached node, as a cache without them does), in the
// same run, alternating. The cache is the controller's own Informer listing and watching an
// in-memory API server (the test fake), so no control plane runs and the figures are the
// Repairer's own work: nodes as kubelets and the agent write them (kubelet conditions, the agent's
// domains, a dozen labels), 15 pools, a rack label as the failure domain, and 100 faulty nodes of
// one pool, more than its 20% allowance, so every reconcile is one held at the pool gate (the
// steady state of a correlated event, reconciled every 10 s per node).
//
//   bench_reconcile [--nodes 5000] [--pools 15] [--faulty 100] [--rounds 20] [--repeat 3]

#include <fmt/format.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "controller/repair.h"
#include "core/clock.h"
#include "core/time.h"
#include "fakes/fake_api.h"
#include "kube/informer.h"
#include "serve/metrics.h"

using namespace gpuheal;
using nlohmann::json;

namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

json Cond(const std::string& type, const std::string& status, const std::string& reason,
          const std::string& message, const std::string& at) {
  return {{"type", type},       {"status", status},        {"reason", reason},
          {"message", message}, {"lastHeartbeatTime", at}, {"lastTransitionTime", at}};
}

json NodeJson(int i, int pools, bool faulty, const std::string& now) {
  const std::string name = fmt::format("gpu-node-{:05d}", i);
  json labels = {{"beta.kubernetes.io/arch", "amd64"},
                 {"beta.kubernetes.io/os", "linux"},
                 {"kubernetes.io/arch", "amd64"},
                 {"kubernetes.io/hostname", name},
                 {"kubernetes.io/os", "linux"},
                 {"node.kubernetes.io/instance-type", "p5.48xlarge"},
                 {"topology.kubernetes.io/region", "us-east-1"},
                 {"topology.kubernetes.io/zone", "us-east-1a"},
                 {"example.com/rack", fmt::format("rack-{}", i / 20)},
                 {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                 {"nvidia.com/gpu.count", "8"},
                 {"gpuheal.io/pool", fmt::format("pool-{}", i % pools)}};
  json conditions =
      json::array({Cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "", now),
                   Cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "", now),
                   Cond("PIDPressure", "False", "KubeletHasSufficientPID", "", now),
                   Cond("Ready", "True", "KubeletReady", "kubelet is posting ready status", now),
                   Cond("KernelReady", "True", "KernelHasNoFaults", "", now),
                   Cond("NetworkReady", "True", "NetworkHasNoFaults", "", now),
                   Cond("StorageReady", "True", "StorageHasNoFaults", "", now)});
  conditions.push_back(
      faulty ? Cond("AcceleratedHardwareReady", "False", "NvidiaXID79Error",
                    "[catastrophic/isolate] GPU 0000:3b:00: GPU has fallen off the bus", now)
             : Cond("AcceleratedHardwareReady", "True", "GPUsHealthy", "", now));
  return {{"metadata", {{"labels", labels}}},
          {"spec", {{"providerID", fmt::format("aws:///us-east-1a/i-0{:016x}", i)}}},
          {"status",
           {{"capacity", {{"cpu", "192"}, {"nvidia.com/gpu", "8"}, {"pods", "110"}}},
            {"allocatable", {{"cpu", "191450m"}, {"nvidia.com/gpu", "8"}, {"pods", "110"}}},
            {"conditions", conditions}}}};
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 5000, pools = 15, faulty = 100, rounds = 20, repeat = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const int v = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--nodes")) nodes = v;
    if (!std::strcmp(argv[i], "--pools")) pools = v;
    if (!std::strcmp(argv[i], "--faulty")) faulty = v;
    if (!std::strcmp(argv[i], "--rounds")) rounds = v;
    if (!std::strcmp(argv[i], "--repeat")) repeat = v;
  }
  testing::FakeApi api;
  api.SetBlockingWatches(true);
  const std::string now = kube::RfcTime(std::chrono::system_clock::now());
  std::vector<std::string> targets;
  for (int i = 0; i < nodes; ++i) {
    // The faulty nodes: the first of pool-0.
    const bool bad = i % pools == 0 && static_cast<int>(targets.size()) < faulty;
    if (bad) targets.push_back(fmt::format("gpu-node-{:05d}", i));
    api.Put(kube::NodePath(fmt::format("gpu-node-{:05d}", i)), NodeJson(i, pools, bad, now));
  }
  controller::Policy policy;
  policy.checkpoint_window = std::chrono::seconds(0);
  policy.failure_domains.labels = {"example.com/rack"};

  // The controller's caches, with its indexes (controller.cc).
  kube::Informer<kube::Node> node_cache(api, kube::NodePath(), kube::DecodeNodeList,
                                        kube::DecodeNode);
  node_cache.AddIndex("pool", [&](const kube::Node& n) {
    return std::vector<std::string>{controller::PoolOf(n, policy)};
  });
  node_cache.AddIndex("fault", [](const kube::Node& n) {
    return controller::FaultOf(n) ? std::vector<std::string>{"faulty"} : std::vector<std::string>{};
  });
  node_cache.AddIndex("gpus", [](const kube::Node& n) {
    return n.gpu_capacity > 0 ? std::vector<std::string>{"yes"} : std::vector<std::string>{};
  });
  kube::Informer<kube::NodeRepair> repair_cache(api, controller::kNodeRepairs,
                                                kube::DecodeNodeRepairList, kube::DecodeNodeRepair);
  repair_cache.AddIndex("node",
                        [](const kube::NodeRepair& r) { return std::vector<std::string>{r.node}; });
  node_cache.Start();
  repair_cache.Start();
  if (!node_cache.WaitForSynced(std::chrono::seconds(120)) ||
      !repair_cache.WaitForSynced(std::chrono::seconds(120))) {
    std::fprintf(stderr, "the caches did not sync\n");
    return 1;
  }

  controller::World plain;
  plain.node = [&](const std::string& n) { return node_cache.Get(n); };
  plain.nodes = [&] { return node_cache.Items(); };
  plain.each_node = [&](const controller::World::NodeFn& fn) { node_cache.ForEach(fn); };
  plain.pods = [](const std::string&) { return std::vector<kube::Pod>{}; };
  plain.repairs = [&](const std::string& n) { return repair_cache.ByIndex("node", n); };
  controller::World indexed = plain;
  indexed.each_pool_node = [&](const std::string& pool, const controller::World::NodeFn& fn) {
    node_cache.ForEachIn("pool", pool, fn);
  };
  indexed.each_faulty_node = [&](const controller::World::NodeFn& fn) {
    node_cache.ForEachIn("fault", "faulty", fn);
  };
  indexed.gpu_nodes = [&] { return node_cache.CountIn("gpus", "yes"); };

  SystemClock clock;
  Metrics metrics;
  controller::Repairer without(api, clock, plain, policy, false, metrics);
  controller::Repairer with(api, clock, indexed, policy, false, metrics);

  // Every faulty node to its steady state (quarantined, recorded, held at the pool gate), and the
  // caches caught up with what that wrote.
  for (int pass = 0; pass < 3; ++pass) {
    for (const auto& t : targets) with.Reconcile(t);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  with.FlushEvents();
  auto rec = repair_cache.ByIndex("node", targets[0]);
  std::printf("%d nodes in %d pools, %zu faulty in pool-0; a reconcile's record: %s\n", nodes,
              pools, targets.size(), rec.empty() ? "none" : rec[0].message.c_str());

  // CPU seconds of `rounds` reconciles of every faulty node.
  auto measure = [&](controller::Repairer& r) {
    const double c0 = ThreadCpuSeconds();
    for (int i = 0; i < rounds; ++i)
      for (const auto& t : targets) r.Reconcile(t);
    return (ThreadCpuSeconds() - c0) / (static_cast<double>(rounds) * targets.size());
  };
  for (int rep = 1; rep <= repeat; ++rep) {
    const double before = measure(without);
    const double after = measure(with);
    std::printf(
        "run %d: reconcile CPU per held faulty node: without indexes %.1f us, with %.1f us "
        "(%.1fx less)\n",
        rep, before * 1e6, after * 1e6, before / after);
  }
  node_cache.Stop();
  repair_cache.Stop();
  return 0;
}
