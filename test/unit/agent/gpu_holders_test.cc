// The pods of a GPU: the kubelet's PodResources answer decoded, its device IDs mapped to GPUs as
// NVIDIA's device plugin names them, and the result published in gpuheal.io/gpu-faults and read
// back by the controller.

#include "agent/gpu_holders.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "controller/node_fault.h"
#include "core/gpu_faults.h"
#include "sources/pod_resources.h"

namespace gpuheal {
namespace {

std::string Corpus(const std::string& name) {
  std::ifstream in(std::string(GPUHEAL_SOURCE_DIR) + "/test/fuzz/corpus/pod_resources/" + name,
                   std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const std::vector<GpuIdentity> kGpus = {{"0000:1b:00", "GPU-a"}, {"0000:2b:00", "GPU-b"}};

TEST(PodResources, DecodesTheListAnswer) {
  const std::string body = Corpus("two-gpus-framed");
  auto m = UnframeGrpc(body);
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto uses = ParsePodResources(*m);
  ASSERT_TRUE(uses.ok()) << uses.error().message;
  ASSERT_EQ(uses->size(), 2u) << "containers without devices give nothing";
  EXPECT_EQ((*uses)[0], (PodDeviceUse{"ml", "trainer-0", "main", "nvidia.com/gpu", {"GPU-a"}}));
  EXPECT_EQ((*uses)[1], (PodDeviceUse{"ml", "trainer-1", "main", "nvidia.com/gpu", {"GPU-b::1"}}));
  // A pod's name and namespace after its containers on the wire still name it.
  auto reordered = ParsePodResources(Corpus("fields-reordered"));
  ASSERT_TRUE(reordered.ok());
  ASSERT_EQ(reordered->size(), 1u);
  EXPECT_EQ((*reordered)[0].namespace_, "ns");
  EXPECT_EQ((*reordered)[0].pod, "p");
  auto cut = ParsePodResources(Corpus("truncated"));
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message.find("podresources.v1"), std::string::npos) << cut.error().message;
  EXPECT_TRUE(ParsePodResources("")->empty()) << "no pods";
}

TEST(GpuHolders, MapsUuidsIndexesAndSharedReplicasToBusIds) {
  const std::vector<PodDeviceUse> uses = {
      {"ml", "a", "main", "nvidia.com/gpu", {"GPU-a"}},
      {"ml", "b", "main", "nvidia.com/gpu.shared", {"GPU-b::3"}},
      {"ml", "c", "side", "nvidia.com/gpu", {"1"}},
      {"ml", "a", "main", "nvidia.com/gpu", {"GPU-a"}},  // listed twice: held once
      {"ml", "nic", "main", "rdma/hca", {"mlx5_0"}},     // not a GPU resource
  };
  auto h = GpuHoldersOf(uses, {"nvidia.com/*"}, kGpus);
  ASSERT_TRUE(h.ok()) << h.error().message;
  ASSERT_EQ(h->size(), 2u);
  EXPECT_EQ(h->at("0000:1b:00"), (std::vector<GpuHolder>{{"ml", "a", "main"}}));
  EXPECT_EQ(h->at("0000:2b:00"),
            (std::vector<GpuHolder>{{"ml", "b", "main"}, {"ml", "c", "side"}}));
}

TEST(GpuHolders, AnUnmappableGpuDeviceMakesTheAnswerUnknown) {
  // A MIG device (or an index past the GPUs) might be on the faulty GPU: unknown, not "none".
  for (const char* id : {"MIG-abc", "7", "GPU-zzz", ""}) {
    auto h = GpuHoldersOf({{"ml", "m", "main", "nvidia.com/mig-1g.10gb", {id}}}, {"nvidia.com/*"},
                          kGpus);
    ASSERT_FALSE(h.ok()) << id;
    EXPECT_NE(h.error().message.find("names no GPU"), std::string::npos);
  }
  // Outside the configured resources it is not a GPU at all.
  EXPECT_TRUE(
      GpuHoldersOf({{"ml", "m", "main", "example.com/fpga", {"x"}}}, {"nvidia.com/gpu"}, kGpus)
          ->empty());
}

TEST(GpuHolders, PublishedInGpuFaultsAndReadByTheController) {
  GpuFaults faults;
  GpuFaultEntry e;
  e.reason = "NvidiaXID45Warning";
  e.xid = 45;
  e.since = std::chrono::sys_seconds(std::chrono::seconds(1796000000));
  e.pods = std::vector<GpuHolder>{{"ml", "a", "main"}};
  faults["0000:1b:00"] = e;
  e.pods = std::vector<GpuHolder>{};
  faults["0000:2b:00"] = e;
  const std::string json = GpuFaultsToJson(faults);
  EXPECT_NE(json.find(R"("pods":[{"namespace":"ml","name":"a","container":"main"}])"),
            std::string::npos)
      << json;
  auto back = ParseGpuFaults(json);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, faults);

  kube::Node n;
  n.meta.name = "n";
  n.meta.annotations["gpuheal.io/gpu-faults"] = json;
  auto f = controller::FaultOf(n);
  ASSERT_TRUE(f && f->gpu_level);
  ASSERT_TRUE(f->gpu_holders);
  EXPECT_EQ(*f->gpu_holders, std::vector<std::string>{"ml/a"});
  // One GPU whose holders the agent could not tell: the controller cannot evict just some.
  faults["0000:2b:00"].pods.reset();
  n.meta.annotations["gpuheal.io/gpu-faults"] = GpuFaultsToJson(faults);
  f = controller::FaultOf(n);
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->gpu_holders);

  for (
      const char* bad :
      {R"({"0000:1b:00": {"severity": "critical", "reason": "R", "since": "2026-01-01T00:00:00Z", "count": 1, "pods": {}}})",
       R"({"0000:1b:00": {"severity": "critical", "reason": "R", "since": "2026-01-01T00:00:00Z", "count": 1, "pods": [{"name": "a"}]}})"}) {
    auto r = ParseGpuFaults(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("\"pods\""), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace gpuheal
