// Round trips on a real loopback control plane (scripts/control-plane.sh, started and stopped by
// this program): one node status PATCH, and the delivery of the change it makes to a watcher.
// Baseline in the same run: a GET of the same node (the cheapest authenticated round trip).
//
//   bench_kube_roundtrip [--iterations N]

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "kube/client.h"
#include "kube/objects.h"
#include "local_control_plane.h"

using namespace gpuheal::kube;
using clk = std::chrono::steady_clock;

using gpuheal::bench::Report;

namespace {

nlohmann::json StatusPatch(int seq) {
  return {{"status",
           {{"conditions",
             {{{"type", "AcceleratedHardwareReady"},
               {"status", seq % 2 ? "False" : "True"},
               {"reason", seq % 2 ? "NvidiaXID79Error" : "NvidiaGPUIsReady"},
               {"message", "seq " + std::to_string(seq)},
               {"lastHeartbeatTime", "2026-11-30T05:00:00Z"},
               {"lastTransitionTime", "2026-11-30T05:00:00Z"}}}}}}};
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 500;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iterations")) iterations = std::stoi(argv[i + 1]);
  }
  std::string log;
  auto cp = gpuheal::testing::LocalControlPlane::Up(false, {}, &log);
  if (!cp) {
    std::fprintf(stderr, "control plane did not come up:\n%s", log.c_str());
    return 1;
  }
  int rc = 0;
  {
    auto cfg = LoadKubeconfig(cp->kubeconfig());
    cfg->qps = 0;  // no client-side limit: measure the server
    auto client = Client::Create(std::move(*cfg));
    Client& c = **client;
    (void)c.Create(
        NodePath(),
        {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "bench-node"}}}});
    const std::string path = NodePath("bench-node");
    for (int i = 0; i < 50; ++i) (void)c.Get(path);  // warm the connection and the server

    std::vector<double> get_us, patch_us, watch_us;
    for (int i = 0; i < iterations; ++i) {
      auto t0 = clk::now();
      auto r = c.Get(path);
      get_us.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
      if (!r || !r->ok()) rc = 1;
    }

    // The watcher notes when each seq arrives; the writer notes when it sent it.
    std::vector<clk::time_point> sent(iterations), seen(iterations);
    std::atomic<bool> stop{false};
    std::atomic<int> received{0};
    auto rv = DecodeNode(c.Get(path)->body)->meta.resource_version;
    std::thread watcher([&] {
      while (!stop) {
        (void)c.Watch(
            NodePath() + "?fieldSelector=metadata.name%3Dbench-node", rv,
            [&](const WatchEventRaw& ev) {
              if (!ev.resource_version.empty()) rv = ev.resource_version;
              auto n = DecodeNode(ev.object);
              if (!n) return true;
              for (const auto& cond : n->conditions) {
                if (cond.type != "AcceleratedHardwareReady" || !cond.message.starts_with("seq "))
                  continue;
                const int seq = std::stoi(cond.message.substr(4));
                if (seq >= 0 && seq < iterations) {
                  seen[seq] = clk::now();
                  ++received;
                }
              }
              return !stop;
            },
            std::chrono::seconds(60), &stop);
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the watch is established
    for (int i = 0; i < iterations; ++i) {
      sent[i] = clk::now();
      auto r = c.Patch(path + "/status", PatchType::kStrategicMerge, StatusPatch(i));
      patch_us.push_back(std::chrono::duration<double, std::micro>(clk::now() - sent[i]).count());
      if (!r || !r->ok()) rc = 1;
      // One change in flight at a time, as the agent writes a transition.
      const auto deadline = clk::now() + std::chrono::seconds(5);
      while (received.load() <= i && clk::now() < deadline) std::this_thread::yield();
      if (received.load() > i)
        watch_us.push_back(std::chrono::duration<double, std::micro>(seen[i] - sent[i]).count());
    }
    stop = true;
    watcher.join();
    Report("baseline: GET node", get_us);
    Report("status PATCH (strategic merge, one condition)", patch_us);
    Report("PATCH sent -> watch event received", watch_us);
    if (static_cast<int>(watch_us.size()) != iterations) {
      std::printf("watch missed %d of %d changes\n", iterations - static_cast<int>(watch_us.size()),
                  iterations);
      rc = 1;
    }
  }
  return rc;
}
