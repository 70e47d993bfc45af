// Decoding the API server's lists into gpuheal's typed projections: throughput, and the resident
// memory a controller's cache of 5,000 nodes and 150,000 pods costs.
//
// The lists are generated in the shape the API server sends (managedFields, kubelet conditions,
// images, container specs and statuses), page by page (500 items, as the informer lists), so the
// whole text never exists at once. Baseline in the same run: nlohmann::json parsing the same
// pages into a DOM, which is what a client without projections would keep.
//
//   bench_kube_decode [--nodes N] [--pods N]

#include <fmt/format.h>
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "kube/informer.h"
#include "kube/objects.h"

using namespace gpuheal::kube;

namespace {

size_t RssBytes() {
  malloc_trim(0);
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, rss = 0;
  f >> pages >> rss;
  return rss * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

std::string Uid(size_t i) {
  return fmt::format("{:08x}-6b1f-4c2a-9d3e-{:012x}", i * 2654435761u, i);
}

const char* kManaged =
    R"([{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":"2026-11-30T05:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:images":{},"f:nodeInfo":{"f:bootID":{}}}},"subresource":"status"}])";

std::string NodeJson(size_t i) {
  std::string images;
  for (int k = 0; k < 30; ++k) {
    images += fmt::format(
        R"({}{{"names":["nvcr.io/nvidia/pytorch@sha256:{:064x}","nvcr.io/nvidia/pytorch:25.{:02d}-py3"],"sizeBytes":{}}})",
        k ? "," : "", i * 31 + k, k, 9000000000 + k);
  }
  std::string conds;
  const char* types[] = {
      "MemoryPressure",           "DiskPressure", "PIDPressure",     "Ready",
      "AcceleratedHardwareReady", "KernelReady",  "NetworkingReady", "StorageReady",
      "ContainerRuntimeReady"};
  for (int k = 0; k < 9; ++k) {
    conds += fmt::format(
        R"({}{{"type":"{}","status":"{}","lastHeartbeatTime":"2026-11-30T05:00:00Z","lastTransitionTime":"2026-11-29T01:00:00Z","reason":"{}Healthy","message":"the {} check on this node reports no problem at this time"}})",
        k ? "," : "", types[k], k == 3 || k > 3 ? "True" : "False", types[k], types[k]);
  }
  return fmt::format(
      R"({{"metadata":{{"name":"gpu-node-{0:05d}","uid":"{1}","resourceVersion":"{2}","creationTimestamp":"2026-11-01T00:00:00Z","labels":{{"beta.kubernetes.io/arch":"amd64","beta.kubernetes.io/os":"linux","kubernetes.io/arch":"amd64","kubernetes.io/hostname":"gpu-node-{0:05d}","kubernetes.io/os":"linux","node.kubernetes.io/instance-type":"p5.48xlarge","topology.kubernetes.io/region":"us-east-1","topology.kubernetes.io/zone":"us-east-1a","nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3","nvidia.com/gpu.count":"8","nvidia.com/cuda.driver.major":"570","gpuheal.io/pool":"pool-{3}"}},"annotations":{{"node.alpha.kubernetes.io/ttl":"0","volumes.kubernetes.io/controller-managed-attach-detach":"true","csi.volume.kubernetes.io/nodeid":"{{\"ebs.csi.aws.com\":\"i-0{0:016x}\"}}","gpuheal.io/repair-state":"healthy"}},"managedFields":{4}}},"spec":{{"providerID":"aws:///us-east-1a/i-0{0:016x}","podCIDR":"10.{5}.{6}.0/24","taints":[{{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}}]}},"status":{{"capacity":{{"cpu":"192","memory":"2097152000Ki","nvidia.com/gpu":"8","pods":"110","ephemeral-storage":"3750000000Ki"}},"allocatable":{{"cpu":"191450m","memory":"2080000000Ki","nvidia.com/gpu":"8","pods":"110"}},"conditions":[{7}],"addresses":[{{"type":"InternalIP","address":"10.{5}.{6}.10"}},{{"type":"Hostname","address":"gpu-node-{0:05d}"}}],"daemonEndpoints":{{"kubeletEndpoint":{{"Port":10250}}}},"nodeInfo":{{"machineID":"{1}","systemUUID":"{1}","bootID":"{1}","kernelVersion":"6.8.0-1021-aws","osImage":"Ubuntu 24.04.1 LTS","containerRuntimeVersion":"containerd://1.7.24","kubeletVersion":"v1.37.2","kubeProxyVersion":"v1.37.2","operatingSystem":"linux","architecture":"amd64"}},"images":[{8}]}}}})", i,
      Uid(i), 100000 + i, i % 20, kManaged, i / 256 % 256, i % 256, conds, images);
}

std::string PodJson(size_t i, size_t nodes) {
  const size_t node = i % nodes;
  return fmt::format(
      R"({{"metadata":{{"name":"train-{0}-worker-{1}","generateName":"train-{0}-worker-","namespace":"team-{2}","uid":"{3}","resourceVersion":"{4}","creationTimestamp":"2026-11-30T01:00:00Z","labels":{{"app.kubernetes.io/name":"trainer","batch.kubernetes.io/job-name":"train-{0}","job-name":"train-{0}","controller-uid":"{3}","training.kubeflow.org/replica-index":"{1}"}},"annotations":{{"kubectl.kubernetes.io/default-container":"trainer","gpuheal.io/checkpoint-grace-seconds":"120"}},"ownerReferences":[{{"apiVersion":"batch/v1","kind":"Job","name":"train-{0}","uid":"{3}","controller":true,"blockOwnerDeletion":true}}],"managedFields":{5}}},"spec":{{"nodeName":"gpu-node-{6:05d}","restartPolicy":"Never","serviceAccountName":"trainer","schedulerName":"default-scheduler","tolerations":[{{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}}],"volumes":[{{"name":"dshm","emptyDir":{{"medium":"Memory"}}}},{{"name":"kube-api-access","projected":{{"sources":[{{"serviceAccountToken":{{"expirationSeconds":3607,"path":"token"}}}}]}}}}],"containers":[{{"name":"trainer","image":"nvcr.io/nvidia/pytorch:25.01-py3","command":["torchrun","--nnodes=8","train.py"],"env":[{{"name":"NCCL_DEBUG","value":"WARN"}},{{"name":"MASTER_ADDR","value":"train-{0}-worker-0"}}],"resources":{{"requests":{{"cpu":"90","memory":"900Gi","nvidia.com/gpu":"4"}},"limits":{{"nvidia.com/gpu":"4"}}}},"volumeMounts":[{{"name":"dshm","mountPath":"/dev/shm"}}]}}]}},"status":{{"phase":"Running","hostIP":"10.0.0.1","podIP":"10.1.{7}.{8}","startTime":"2026-11-30T01:00:05Z","qosClass":"Burstable","conditions":[{{"type":"Ready","status":"True","lastTransitionTime":"2026-11-30T01:01:00Z"}},{{"type":"ContainersReady","status":"True","lastTransitionTime":"2026-11-30T01:01:00Z"}},{{"type":"PodScheduled","status":"True","lastTransitionTime":"2026-11-30T01:00:00Z"}}],"containerStatuses":[{{"name":"trainer","ready":true,"restartCount":0,"image":"nvcr.io/nvidia/pytorch:25.01-py3","imageID":"nvcr.io/nvidia/pytorch@sha256:{9:064x}","containerID":"containerd://{9:064x}","started":true,"state":{{"running":{{"startedAt":"2026-11-30T01:00:30Z"}}}}}}]}}}})", i / 8, i % 8, i % 50, Uid(i + 1000000),
      200000 + i, kManaged, node, i / 256 % 256, i % 256, i);
}

template <typename Gen>
std::string Page(size_t from, size_t to, size_t total, const char* kind, Gen gen) {
  std::string s = fmt::format(
      R"({{"kind":"{}","apiVersion":"v1","metadata":{{"resourceVersion":"999999"{}}},"items":[)",
      kind, to < total ? R"(,"continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ")" : "");
  for (size_t i = from; i < to; ++i) {
    if (i > from) s += ',';
    s += gen(i);
  }
  s += "]}";
  return s;
}

struct Measure {
  double seconds = 0;
  size_t bytes = 0;
  size_t items = 0;
};

}  // namespace

int main(int argc, char** argv) {
  size_t n_nodes = 5000, n_pods = 150000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--nodes")) n_nodes = std::stoul(argv[i + 1]);
    if (!std::strcmp(argv[i], "--pods")) n_pods = std::stoul(argv[i + 1]);
  }
  constexpr size_t kPage = 500;
  using clk = std::chrono::steady_clock;

  // The cache, as the informer keeps it: objects by key, pods indexed by node.
  std::unordered_map<std::string, Node> nodes;
  std::unordered_map<std::string, Pod> pods;
  std::unordered_map<std::string, std::set<std::string>> pods_by_node;
  const size_t rss0 = RssBytes();

  Measure node_decode, pod_decode, node_dom, pod_dom;
  for (size_t from = 0; from < n_nodes; from += kPage) {
    const std::string page =
        Page(from, std::min(n_nodes, from + kPage), n_nodes, "NodeList", NodeJson);
    auto t0 = clk::now();
    auto list = DecodeNodeList(page);
    node_decode.seconds += std::chrono::duration<double>(clk::now() - t0).count();
    if (!list) {
      std::fprintf(stderr, "%s\n", list.error().message.c_str());
      return 1;
    }
    node_decode.bytes += page.size();
    node_decode.items += list->items.size();
    for (auto& n : list->items) {
      std::string key = ObjectKey(n);
      nodes.emplace(std::move(key), std::move(n));
    }
  }
  const size_t rss_nodes = RssBytes();
  for (size_t from = 0; from < n_pods; from += kPage) {
    const std::string page = Page(from, std::min(n_pods, from + kPage), n_pods, "PodList",
                                  [&](size_t i) { return PodJson(i, n_nodes); });
    auto t0 = clk::now();
    auto list = DecodePodList(page);
    pod_decode.seconds += std::chrono::duration<double>(clk::now() - t0).count();
    if (!list) {
      std::fprintf(stderr, "%s\n", list.error().message.c_str());
      return 1;
    }
    pod_decode.bytes += page.size();
    pod_decode.items += list->items.size();
    for (auto& p : list->items) {
      std::string key = ObjectKey(p);
      for (const auto& v : PodNodeIndex(p)) pods_by_node[v].insert(key);
      pods.emplace(std::move(key), std::move(p));
    }
  }
  const size_t rss_all = RssBytes();

  // Baseline: a generic DOM of the same pages (first 20 pages of each, then released).
  for (size_t from = 0; from < std::min(n_nodes, 20 * kPage); from += kPage) {
    const std::string page =
        Page(from, std::min(n_nodes, from + kPage), n_nodes, "NodeList", NodeJson);
    auto t0 = clk::now();
    auto j = nlohmann::json::parse(page);
    node_dom.seconds += std::chrono::duration<double>(clk::now() - t0).count();
    node_dom.bytes += page.size();
    node_dom.items += j["items"].size();
  }
  size_t dom_rss_per_pod = 0;
  {
    std::vector<nlohmann::json> kept;
    const size_t before = RssBytes();
    for (size_t from = 0; from < std::min(n_pods, 20 * kPage); from += kPage) {
      const std::string page = Page(from, std::min(n_pods, from + kPage), n_pods, "PodList",
                                    [&](size_t i) { return PodJson(i, n_nodes); });
      auto t0 = clk::now();
      auto j = nlohmann::json::parse(page);
      pod_dom.seconds += std::chrono::duration<double>(clk::now() - t0).count();
      pod_dom.bytes += page.size();
      pod_dom.items += j["items"].size();
      for (auto& item : j["items"]) kept.push_back(std::move(item));
    }
    dom_rss_per_pod = (RssBytes() - before) / std::max<size_t>(1, kept.size());
  }

  auto mbps = [](const Measure& m) { return m.bytes / 1e6 / m.seconds; };
  std::printf(
      "decode NodeList (simdjson projection): %zu nodes, %.1f MB in %.3f s: %.0f MB/s, %.0f "
      "nodes/s\n",
      node_decode.items, node_decode.bytes / 1e6, node_decode.seconds, mbps(node_decode),
      node_decode.items / node_decode.seconds);
  std::printf(
      "decode PodList  (simdjson projection): %zu pods, %.1f MB in %.3f s: %.0f MB/s, %.0f "
      "pods/s\n",
      pod_decode.items, pod_decode.bytes / 1e6, pod_decode.seconds, mbps(pod_decode),
      pod_decode.items / pod_decode.seconds);
  std::printf("baseline nlohmann DOM NodeList: %zu nodes, %.0f MB/s\n", node_dom.items,
              mbps(node_dom));
  std::printf("baseline nlohmann DOM PodList:  %zu pods, %.0f MB/s\n", pod_dom.items,
              mbps(pod_dom));
  std::printf("average object JSON: node %.0f bytes, pod %.0f bytes\n",
              double(node_decode.bytes) / node_decode.items,
              double(pod_decode.bytes) / pod_decode.items);
  std::printf(
      "resident per cached object: node %.0f bytes, pod %.0f bytes (incl. key and node index); "
      "a DOM pod costs %zu bytes\n",
      double(rss_nodes - rss0) / nodes.size(), double(rss_all - rss_nodes) / pods.size(),
      dom_rss_per_pod);
  std::printf(
      "cache of %zu nodes + %zu pods: %.1f MB resident (goal <= 300 MB); process RSS %.1f MB\n",
      nodes.size(), pods.size(), (rss_all - rss0) / 1e6, rss_all / 1e6);
  return (rss_all - rss0) <= 300'000'000 ? 0 : 1;
}
