// `gpuheal controller` against a real control plane with kube-controller-manager (PDB status,
// node lifecycle) and the shipped NodeRepair CRD. No kubelet runs: the tests write Node
// conditions as the agent would and pod status as a kubelet would. Each test uses its own nodes
// in its own pool; windows are made short through the policy rather than slept.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "agent_process.h"
#include "apply_manifest.h"
#include "bmc/redfish.h"
#include "bmc_emulator.h"
#include "controller/repair.h"
#include "core/object_names.h"
#include "core/time.h"
#include "kube_test_util.h"
#include "run_binary.h"
#include "serve/metrics.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using gpuheal::testing::AgentProcess;
using gpuheal::testing::ControlPlaneEnv;
using gpuheal::testing::Eventually;
using nlohmann::json;

const std::string& kRepairs = controller::kNodeRepairs;

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = gpuheal::testing::AdminClient();
    static bool crd = false;
    if (!crd) {
      gpuheal::testing::ApplyManifest(
          *client_, std::string(GPUHEAL_SOURCE_DIR) + "/deploy/crds/noderepairs.yaml");
      // Karpenter's and Cluster API's own CRDs (scripts/build-peer-crds.sh).
      const std::string peer = PeerCrdDir();
      ASSERT_FALSE(peer.empty()) << "scripts/build-peer-crds.sh found no CRDs";
      for (const char* f : {"karpenter.sh_nodeclaims.yaml", "cluster.x-k8s.io_machines.yaml",
                            "cluster.x-k8s.io_machinehealthchecks.yaml"})
        gpuheal::testing::ApplyManifest(*client_, peer + "/" + f);
      ASSERT_TRUE(Eventually(
          [&] {
            for (const char* p :
                 {"/apis/karpenter.sh/v1/nodeclaims", "/apis/cluster.x-k8s.io/v1beta1/machines",
                  "/apis/cluster.x-k8s.io/v1beta1/machinehealthchecks"}) {
              auto r = client_->Get(p);
              if (!r || r->status != 200) return false;
            }
            return true;
          },
          30s));
      ASSERT_TRUE(Eventually(
          [&] {
            auto r = client_->Get(kRepairs);
            return r && r->status == 200;
          },
          30s));
      (void)client_->Create(
          "/api/v1/namespaces",
          {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "work"}}}});
      crd = true;
    }
    std::random_device rd;
    id_ = fmt::format("{:06x}", rd() & 0xffffff);
    char tmpl[] = "/tmp/gpuheal-ctl-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    // SIGTERM: a controller releases its Lease on the way out, so the next test's leads at once.
    for (auto& c : controllers_) {
      if (c->pid() > 0) {
        EXPECT_EQ(c->Kill(SIGTERM), 0) << "SIGTERM: a clean exit, the Lease released";
      }
    }
    controllers_.clear();
    bmc_.reset();
    for (const auto& n : nodes_) (void)client_->Delete(kube::NodePath(n));
    for (const auto& sl : slices_)
      (void)client_->Delete("/apis/resource.k8s.io/v1/resourceslices/" + sl);
    for (const auto& c : claims_)
      (void)client_->Delete("/apis/resource.k8s.io/v1/namespaces/work/resourceclaims/" + c);
    std::filesystem::remove_all(dir_);
  }

  std::string Node(const std::string& suffix, const json& labels = json::object()) {
    const std::string name = "ctl-" + id_ + "-" + suffix;
    json n = {{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata", {{"name", name}, {"labels", {{"gpuheal.io/pool", "p-" + id_}}}}}};
    for (auto& [k, v] : labels.items()) n["metadata"]["labels"][k] = v;
    EXPECT_EQ(client_->Create(kube::NodePath(), n)->status, 201);
    (void)client_->Patch(
        kube::NodePath(name) + "/status", kube::PatchType::kStrategicMerge,
        {{"status",
          {{"capacity", {{"nvidia.com/gpu", "8"}}},
           {"allocatable", {{"nvidia.com/gpu", "8"}}},
           {"conditions", {Cond("AcceleratedHardwareReady", "True", "NvidiaGPUIsReady")}}}}});
    nodes_.push_back(name);
    return name;
  }
  static json Cond(const std::string& type, const std::string& status, const std::string& reason) {
    return {{"type", type},
            {"status", status},
            {"reason", reason},
            {"message", "test"},
            {"lastHeartbeatTime", kube_time()},
            {"lastTransitionTime", kube_time()}};
  }
  static std::string kube_time() {
    const std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
  }
  void SetCondition(const std::string& node, const std::string& status, const std::string& reason) {
    auto r = client_->Patch(
        kube::NodePath(node) + "/status", kube::PatchType::kStrategicMerge,
        {{"status", {{"conditions", {Cond("AcceleratedHardwareReady", status, reason)}}}}});
    ASSERT_TRUE(r && r->ok());
  }
  json GetNode(const std::string& node) {
    auto r = client_->Get(kube::NodePath(node));
    return r && r->ok() ? json::parse(r->body) : json();
  }
  bool HasTaint(const std::string& node, const std::string& key, const std::string& value = "",
                const std::string& effect = "") {
    const json n = GetNode(node);
    if (!n.is_object()) return false;
    for (const auto& t : n["spec"].value("taints", json::array())) {
      if (t.value("key", "") == key && (value.empty() || t.value("value", "") == value) &&
          (effect.empty() || t.value("effect", "") == effect)) {
        return true;
      }
    }
    return false;
  }
  bool Cordoned(const std::string& node) {
    return GetNode(node)["spec"].value("unschedulable", false);
  }
  std::vector<json> Repairs(const std::string& node) {
    auto r = client_->Get(kRepairs + "?labelSelector=gpuheal.io%2Fnode%3D" + NodeLabelValue(node));
    std::vector<json> out;
    if (r && r->ok()) {
      const json list = json::parse(r->body);  // kept alive: the loop walks inside it
      for (const auto& i : list["items"]) out.push_back(i);
    }
    return out;
  }
  static json Status(const json& record) { return record.value("status", json::object()); }
  std::string Message(const std::string& node) {
    auto rs = Repairs(node);
    return rs.empty() ? "" : Status(rs.back()).value("message", "");
  }
  std::string Phase(const std::string& node) {
    auto rs = Repairs(node);
    return rs.empty() ? "" : Status(rs.back()).value("phase", "");
  }
  void Pod(const std::string& name, const std::string& node, const json& labels = json::object(),
           const std::string& ns = "work") {
    ASSERT_TRUE(Eventually(
        [&] {
          return client_
                     ->Create(kube::PodPath(ns), gpuheal::testing::PodJson(ns, name, node, labels))
                     ->status == 201;
        },
        20s));
    const json status = {{"status",
                          {{"phase", "Running"},
                           {"conditions",
                            {{{"type", "Ready"}, {"status", "True"}},
                             {{"type", "ContainersReady"}, {"status", "True"}}}}}}};
    ASSERT_TRUE(
        client_
            ->Patch(kube::PodPath(ns, name) + "/status", kube::PatchType::kStrategicMerge, status)
            ->ok());
  }
  bool PodGone(const std::string& name, const std::string& ns = "work") {
    auto r = client_->Get(kube::PodPath(ns, name));
    return r &&
           (r->status == 404 || json::parse(r->body)["metadata"].contains("deletionTimestamp"));
  }
  json PodJson(const std::string& name, const std::string& ns = "work") {
    return json::parse(client_->Get(kube::PodPath(ns, name))->body);
  }

  AgentProcess& StartController(const std::string& policy, std::vector<std::string> extra = {}) {
    const std::string file = fmt::format("{}/policy-{}.yaml", dir_, controllers_.size());
    // The cluster-wide breaker would count other tests' nodes: off unless a test sets it.
    std::ofstream(file) << (policy.find("breaker:") == std::string::npos
                                ? "breaker:\n  share_percent: 100\n"
                                : "")
                        << policy;
    std::vector<std::string> args = {
        GPUHEAL_BIN,         "controller", "--kubeconfig", ControlPlaneEnv::kubeconfig(),
        "--policy",          file,         "--listen",     "",
        "--lease-namespace", "default"};
    args.insert(args.end(), extra.begin(), extra.end());
    controllers_.push_back(std::make_unique<AgentProcess>(args));
    auto& c = *controllers_.back();
    EXPECT_TRUE(
        c.WaitLog([](const json& j) { return j.value("msg", "") == "controller started"; }, 30s));
    return c;
  }

  // The redfish provider's credentials Secret (user `user`) and the administrator's endpoints
  // ConfigMap (node name -> entry); their NAMESPACE/NAME for the policy.
  std::string BmcSecret(const std::string& name, const std::string& password,
                        const std::string& user = "admin") {
    EXPECT_EQ(client_
                  ->Create("/api/v1/namespaces/default/secrets",
                           {{"apiVersion", "v1"},
                            {"kind", "Secret"},
                            {"metadata", {{"name", name}}},
                            {"stringData", {{"username", user}, {"password", password}}}})
                  ->status,
              201);
    return "default/" + name;
  }
  std::string BmcEndpoints(const json& data) {
    const std::string name = "bmc-endpoints-" + id_;
    (void)client_->Delete("/api/v1/namespaces/default/configmaps/" + name);
    EXPECT_EQ(client_
                  ->Create("/api/v1/namespaces/default/configmaps", {{"apiVersion", "v1"},
                                                                     {"kind", "ConfigMap"},
                                                                     {"metadata", {{"name", name}}},
                                                                     {"data", data}})
                  ->status,
              201);
    return "default/" + name;
  }
  // A node's own gpuheal.io/bmc-endpoint, as its kubelet could write it.
  void AnnotateBmcEndpoint(const std::string& node, const std::string& url) {
    ASSERT_TRUE(client_
                    ->Patch(kube::NodePath(node), kube::PatchType::kMerge,
                            {{"metadata", {{"annotations", {{"gpuheal.io/bmc-endpoint", url}}}}}})
                    ->ok());
  }
  // `node` faults; its BMC rung is refused before any request: Failed, "BMC reset not sent", a
  // RemediationFailed Event, still out of service, and nothing reached `stand_in`.
  void ExpectRungRefusedWithoutContact(const std::string& node,
                                       const gpuheal::testing::ConnectionCounter& stand_in) {
    SetCondition(node, "False", "NvidiaXID79Error");
    ASSERT_TRUE(Eventually([&] { return Phase(node) == "Failed"; }, 30s))
        << Phase(node) << " " << Message(node);
    EXPECT_NE(Message(node).find("BMC reset not sent"), std::string::npos) << Message(node);
    EXPECT_TRUE(Eventually([&] { return EventReasons(node).count("RemediationFailed") > 0; }, 5s));
    EXPECT_TRUE(HasTaint(node, "gpuheal.io/gpu-fault") && Cordoned(node)) << "stays out of service";
    EXPECT_EQ(stand_in.connections(), 0);
  }
  // The redfish provider's BMC for `node`: sushy-tools' emulator (plain http on loopback), a
  // credentials Secret with `password`, the node's entry in the endpoints ConfigMap; returns the
  // policy that uses them.
  std::string Bmc(const std::string& node, const std::string& password) {
    std::filesystem::create_directories(dir_ + "/bmc");
    bmc_ = std::make_unique<gpuheal::testing::BmcEmulator>(
        dir_ + "/bmc",
        std::vector<gpuheal::testing::BmcEmulator::System>{
            {"5e0c4a8e-0000-4000-8000-0000000000b1", node, "On"}},
        "s3cret");
    const std::string secret = BmcSecret("bmc-" + id_, password);
    const std::string endpoints = BmcEndpoints({{node, bmc_->url()}});
    return fmt::format(
        "toleration:\n  AcceleratedHardwareReady: 1s\nprobation: 1s\n"
        "provider:\n  name: redfish\n  redfish:\n    credentials_secret: {}\n"
        "    endpoints_configmap: {}\n    allowed_endpoints: [127.0.0.1/32]\n"
        "    allow_insecure_http: true\n"
        "    reset_types: [PowerCycle, ForceRestart]\n    request_timeout: 2s\n",
        secret, endpoints);
  }
  bool RecordHas(const std::string& node, const std::string& text) {
    auto rs = Repairs(node);
    return !rs.empty() &&
           Status(rs.back()).value("actions", json::array()).dump().find(text) != std::string::npos;
  }
  // A kubeconfig with a token of the shipped gpuheal-controller ServiceAccount ("" on failure).
  std::string ControllerTokenKubeconfig() {
    auto tr = client_->Create(
        "/api/v1/namespaces/gpuheal-system/serviceaccounts/gpuheal-controller/token",
        {{"apiVersion", "authentication.k8s.io/v1"},
         {"kind", "TokenRequest"},
         {"spec", {{"expirationSeconds", 3600}}}});
    EXPECT_EQ(tr->status, 201) << tr->Describe();
    if (!tr || tr->status != 201) return "";
    const std::string kc = dir_ + "/controller.kubeconfig";
    gpuheal::testing::WriteTokenKubeconfig(kc, client_->config().server,
                                           json::parse(tr->body)["status"]["token"]);
    return kc;
  }
  // A controller with a 2 s lease, so that a SIGKILLed leader's successor takes over within
  // seconds; returns once it leads.
  static const std::vector<std::string>& ShortLease() {
    static const std::vector<std::string> lease = {
        "--lease-duration", "2s", "--renew-deadline", "1500ms", "--retry-period", "300ms"};
    return lease;
  }
  void StartLeader(const std::string& policy) {
    StartController(policy, ShortLease());
    ASSERT_TRUE(controllers_.back()->WaitLog(
        [](const json& j) { return j.value("msg", "") == "started leading"; }, 30s));
  }
  // The lines an exec remediation command appended to `file`.
  static std::vector<std::string> Lines(const std::string& file) {
    std::ifstream in(file);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

  // What the node's agent publishes (core/gpu_faults.h) and answers (agent/recovery_request.h).
  void SetGpuFaults(const std::string& node, const json& faults) {
    ASSERT_TRUE(
        client_
            ->Patch(kube::NodePath(node) + "/status", kube::PatchType::kMerge,
                    {{"metadata", {{"annotations", {{"gpuheal.io/gpu-faults", faults.dump()}}}}}})
            ->ok());
  }
  void AnswerRecovery(const std::string& node, const std::string& id, const std::string& state) {
    const json st = {{"id", id},
                     {"state", state},
                     {"gpus",
                      {{"0000:3b:00",
                        {{"step", state == "succeeded" ? "verify" : "reset"},
                         {"ok", state == "succeeded"},
                         {"message", "test"}}}}}};
    ASSERT_TRUE(client_
                    ->Patch(kube::NodePath(node) + "/status", kube::PatchType::kMerge,
                            {{"metadata",
                              {{"annotations", {{"gpuheal.io/gpu-recovery-status", st.dump()}}}}}})
                    ->ok());
  }
  json RecoveryRequest(const std::string& node) {
    const json ann = GetNode(node)["metadata"].value("annotations", json::object());
    return ann.contains("gpuheal.io/gpu-recovery-request")
               ? json::parse(ann["gpuheal.io/gpu-recovery-request"].get<std::string>())
               : json();
  }
  std::set<std::string> EventReasons(const std::string& node) {
    std::set<std::string> out;
    auto r = client_->Get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D" +
                          node);
    if (r && r->ok()) {
      const json list = json::parse(r->body);
      for (const auto& e : list["items"]) out.insert(e.value("reason", ""));
    }
    return out;
  }
  static std::string PeerCrdDir() {
    if (const char* d = std::getenv("GPUHEAL_PEER_CRDS"); d && *d) return d;
    auto r = gpuheal::testing::RunShell("bash " + std::string(GPUHEAL_SOURCE_DIR) +
                                        "/scripts/build-peer-crds.sh");
    const auto at = r.out.find("PEER_CRDS=");
    if (r.code != 0 || at == std::string::npos) return "";
    std::string dir = r.out.substr(at + 10);
    while (!dir.empty() && (dir.back() == '\n' || dir.back() == '\r')) dir.pop_back();
    return dir;
  }
  // A Cluster API Machine (the real CRD's required spec) in cluster `cluster` whose
  // status.nodeRef names `owned` (written through the status subresource, as its controller
  // does), and `annotated`'s annotations naming it.
  void CapiMachine(const std::string& name, const std::string& owned, const std::string& annotated,
                   const json& labels = json::object(), const std::string& cluster = "c1") {
    ASSERT_EQ(
        client_
            ->Create("/apis/cluster.x-k8s.io/v1beta1/namespaces/work/machines",
                     {{"apiVersion", "cluster.x-k8s.io/v1beta1"},
                      {"kind", "Machine"},
                      {"metadata", {{"name", name}, {"namespace", "work"}, {"labels", labels}}},
                      {"spec",
                       {{"clusterName", cluster},
                        {"bootstrap", {{"dataSecretName", name + "-bootstrap"}}},
                        {"infrastructureRef",
                         {{"apiVersion", "infrastructure.cluster.x-k8s.io/v1beta1"},
                          {"kind", "DockerMachine"},
                          {"name", name}}}}}})
            ->status,
        201);
    ASSERT_TRUE(
        client_
            ->Patch("/apis/cluster.x-k8s.io/v1beta1/namespaces/work/machines/" + name + "/status",
                    kube::PatchType::kMerge,
                    {{"status", {{"nodeRef", {{"kind", "Node"}, {"name", owned}}}}}})
            ->ok());
    ASSERT_TRUE(client_
                    ->Patch(kube::NodePath(annotated), kube::PatchType::kMerge,
                            {{"metadata",
                              {{"annotations",
                                {{"cluster.x-k8s.io/machine", name},
                                 {"cluster.x-k8s.io/cluster-namespace", "work"}}}}}})
                    ->ok());
  }
  // A Karpenter NodeClaim (the real CRD's required spec) whose status names the node (nodeName)
  // or its provider id, written through the status subresource as Karpenter does.
  void KarpenterNodeClaim(const std::string& name, const json& status,
                          const json& annotations = json::object()) {
    ASSERT_EQ(client_
                  ->Create("/apis/karpenter.sh/v1/nodeclaims",
                           {{"apiVersion", "karpenter.sh/v1"},
                            {"kind", "NodeClaim"},
                            {"metadata", {{"name", name}, {"annotations", annotations}}},
                            {"spec",
                             {{"nodeClassRef",
                               {{"group", "karpenter.k8s.aws"},
                                {"kind", "EC2NodeClass"},
                                {"name", "default"}}},
                              {"requirements",
                               {{{"key", "kubernetes.io/arch"},
                                 {"operator", "In"},
                                 {"values", {"amd64"}}}}}}}})
                  ->status,
              201);
    ASSERT_TRUE(client_
                    ->Patch("/apis/karpenter.sh/v1/nodeclaims/" + name + "/status",
                            kube::PatchType::kMerge, {{"status", status}})
                    ->ok());
  }
  // The manual key: the operator acknowledges the faults so far (a second later: whole seconds).
  void ResetBreakerByHand() {
    std::this_thread::sleep_for(1s);
    ASSERT_TRUE(
        client_
            ->Patch(kube::LeasePath("default", "gpuheal-controller"), kube::PatchType::kMerge,
                    {{"metadata", {{"annotations", {{"gpuheal.io/breaker-reset", kube_time()}}}}}})
            ->ok());
  }
  // A ResourceSlice for `node` as NVIDIA's DRA driver publishes one: four GPUs gpu-0..gpu-3 with
  // their PCI bus ids (gpu-1 is 0000:3b:00, the GPU the tests fault).
  void PublishGpuSlice(const std::string& node) {
    json devices = json::array();
    const char* buses[] = {"0000:1b:00.0", "0000:3b:00.0", "0000:5b:00.0", "0000:7b:00.0"};
    for (int i = 0; i < 4; ++i) {
      devices.push_back({{"name", fmt::format("gpu-{}", i)},
                         {"attributes",
                          {{"pciBusID", {{"string", buses[i]}}},
                           {"index", {{"int", i}}},
                           {"uuid", {{"string", fmt::format("GPU-{}-{}", id_, i)}}}}}});
    }
    const json slice = {{"apiVersion", "resource.k8s.io/v1"},
                        {"kind", "ResourceSlice"},
                        {"metadata", {{"name", node + "-gpu.nvidia.com"}}},
                        {"spec",
                         {{"driver", "gpu.nvidia.com"},
                          {"nodeName", node},
                          {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
                          {"devices", devices}}}};
    auto r = client_->Create("/apis/resource.k8s.io/v1/resourceslices", slice);
    ASSERT_TRUE(r && (r->status == 201 || r->status == 409)) << (r ? r->Describe() : "");
    slices_.push_back(node + "-gpu.nvidia.com");
  }
  bool CheckpointAsked(const std::string& pod) {
    return PodJson(pod)["metadata"]
        .value("annotations", json::object())
        .contains("gpuheal.io/checkpoint-requested");
  }
  // The workload's answer: its checkpoint is done.
  void CheckpointDone(const std::string& pod) {
    ASSERT_TRUE(
        client_
            ->Patch(kube::PodPath("work", pod), kube::PatchType::kMerge,
                    {{"metadata", {{"annotations", {{"gpuheal.io/checkpoint-done", "true"}}}}}})
            ->ok());
  }
  // A ResourceClaim in namespace work allocated to `device` of `node`'s pool and reserved for
  // `pod`, as kube-scheduler would leave it.
  void AllocatedClaim(const std::string& name, const std::string& node, const std::string& device,
                      const std::string& pod) {
    const json c = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceClaim"},
        {"metadata", {{"name", name}, {"namespace", "work"}}},
        {"spec",
         {{"devices",
           {{"requests",
             {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}}}}}}}}};
    auto r = client_->Create("/apis/resource.k8s.io/v1/namespaces/work/resourceclaims", c);
    ASSERT_TRUE(r && r->status == 201) << (r ? r->Describe() : "");
    claims_.push_back(name);
    const json status = {{"status",
                          {{"allocation",
                            {{"devices",
                              {{"results",
                                {{{"request", "gpu"},
                                  {"driver", "gpu.nvidia.com"},
                                  {"pool", node},
                                  {"device", device}}}}}}}},
                           {"reservedFor",
                            {{{"resource", "pods"},
                              {"name", pod},
                              {"uid", PodJson(pod)["metadata"]["uid"].get<std::string>()}}}}}}};
    auto st = client_->Patch(
        "/apis/resource.k8s.io/v1/namespaces/work/resourceclaims/" + name + "/status",
        kube::PatchType::kMerge, status);
    ASSERT_TRUE(st && st->ok()) << (st ? st->Describe() : "");
  }
  // The DeviceTaintRules selecting `device` of `node`'s pool.
  std::vector<json> RulesFor(const std::string& node, const std::string& device) {
    std::vector<json> out;
    auto r = client_->Get("/apis/resource.k8s.io/v1/devicetaintrules");
    if (!r || !r->ok()) return out;
    const json list = json::parse(r->body);
    for (const auto& i : list["items"]) {
      const json sel = i["spec"].value("deviceSelector", json::object());
      if (sel.value("pool", "") == node && sel.value("device", "") == device) out.push_back(i);
    }
    return out;
  }
  static json CriticalXid45() {
    return {{"0000:3b:00",
             {{"severity", "critical"},
              {"reason", "NvidiaXID45Warning"},
              {"xid", 45},
              {"since", kube_time()},
              {"count", 1}}}};
  }

  std::unique_ptr<kube::Client> client_;
  std::string id_, dir_;
  std::vector<std::string> nodes_;
  std::vector<std::string> slices_;  // ResourceSlices a test published
  std::vector<std::string> claims_;  // ResourceClaims (namespace work) a test made
  std::vector<std::unique_ptr<AgentProcess>> controllers_;
  std::unique_ptr<gpuheal::testing::BmcEmulator> bmc_;  // the redfish tests' BMC
};

TEST_F(ControllerTest, FatalFaultQuarantinesAtOnceAndRecoveryInsideTheWindowReleases) {
  const std::string a = Node("a");
  auto& c = StartController(
      "probation: 1s\ntoleration:\n  default: 1h\n  AcceleratedHardwareReady: 1h\nprovider:\n  "
      "name: delete-node\n");
  ASSERT_TRUE(
      c.WaitLog([](const json& j) { return j.value("msg", "") == "started leading"; }, 30s));
  SetCondition(a, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually(
      [&] { return HasTaint(a, "gpuheal.io/gpu-fault", "fatal", "NoSchedule") && Cordoned(a); },
      10s));
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Drained"; }, 10s))
      << Phase(a);  // no pods: drained at once
  auto rec = Repairs(a).back();
  EXPECT_EQ(rec["spec"]["trigger"]["reason"], "NvidiaXID48Error");
  EXPECT_EQ(rec["spec"]["trigger"]["severity"], "fatal");
  EXPECT_TRUE(Status(rec).value("phases", json::object()).contains("Quarantined"));
  EXPECT_EQ(GetNode(a)["metadata"]["annotations"]["gpuheal.io/cordoned"], "true");
  // The fault clears before the toleration window: released after probation, not remediated.
  SetCondition(a, "True", "NvidiaGPUIsReady");
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Recovered"; }, 15s)) << Phase(a);
  EXPECT_FALSE(HasTaint(a, "gpuheal.io/gpu-fault"));
  EXPECT_FALSE(Cordoned(a));
  EXPECT_TRUE(GetNode(a).is_object()) << "the delete-node provider never ran";
  EXPECT_EQ(Repairs(a).size(), 1u);
}

TEST_F(ControllerTest, LostGpuIsNoExecuteAndAnotherWritersTaintsSurvive) {
  const std::string a = Node("a");
  // Another writer's taint and cordon state are there first.
  ASSERT_TRUE(client_
                  ->Update(kube::NodePath(a),
                           [](json& n) {
                             n["spec"]["taints"] = json::array({{{"key", "example.com/maintenance"},
                                                                 {"value", "x"},
                                                                 {"effect", "NoSchedule"}}});
                             return true;
                           })
                  ->ok());
  StartController("probation: 1s\n");
  // Fatal first; the fault then worsens: the taint follows it, one gpuheal taint at a time.
  SetCondition(a, "False", "NvidiaXID48Error");
  ASSERT_TRUE(
      Eventually([&] { return HasTaint(a, "gpuheal.io/gpu-fault", "fatal", "NoSchedule"); }, 10s));
  SetCondition(a, "False", "NvidiaGPUFallenOffBus");
  ASSERT_TRUE(Eventually(
      [&] { return HasTaint(a, "gpuheal.io/gpu-fault", "catastrophic", "NoExecute"); }, 10s));
  EXPECT_FALSE(HasTaint(a, "gpuheal.io/gpu-fault", "fatal"));
  EXPECT_TRUE(HasTaint(a, "example.com/maintenance"));
  // A concurrent writer adds a taint during quarantine; the release keeps it too.
  ASSERT_TRUE(client_
                  ->Update(kube::NodePath(a),
                           [](json& n) {
                             n["spec"]["taints"].push_back({{"key", "example.com/late"},
                                                            {"value", "y"},
                                                            {"effect", "NoSchedule"}});
                             return true;
                           })
                  ->ok());
  SetCondition(a, "True", "NvidiaGPUIsReady");
  ASSERT_TRUE(Eventually([&] { return !HasTaint(a, "gpuheal.io/gpu-fault"); }, 15s));
  EXPECT_TRUE(HasTaint(a, "example.com/maintenance"));
  EXPECT_TRUE(HasTaint(a, "example.com/late"));
}

// Quarantine is one PATCH from the informer's copy of the Node, its resourceVersion a
// precondition. A copy a moment behind another writer is refused (409) and the quarantine falls
// back to a read-modify-write, so that writer's taint survives; from a current copy, the other
// taints go back whole (a NoExecute taint keeps its timeAdded, which its tolerationSeconds count
// from).
TEST_F(ControllerTest, QuarantineFromAStaleCacheLosesNoOtherWritersTaint) {
  const std::string a = Node("a");
  const std::string b = Node("b");
  auto snapshot = [&](const std::string& n) {
    return *kube::DecodeNode(client_->Get(kube::NodePath(n))->body);
  };
  ASSERT_TRUE(client_
                  ->Update(kube::NodePath(b),
                           [](json& n) {
                             n["spec"]["taints"] =
                                 json::array({{{"key", "example.com/draining"},
                                               {"value", "x"},
                                               {"effect", "NoExecute"},
                                               {"timeAdded", "2026-11-30T04:00:00Z"}}});
                             return true;
                           })
                  ->ok());
  SetCondition(a, "False", "NvidiaXID48Error");
  SetCondition(b, "False", "NvidiaXID48Error");
  std::map<std::string, kube::Node> cache = {{a, snapshot(a)}, {b, snapshot(b)}};
  // After `a` was cached, another writer taints it: the cached copy is now stale.
  ASSERT_TRUE(
      client_
          ->Update(kube::NodePath(a),
                   [](json& n) {
                     n["spec"]["taints"] = json::array(
                         {{{"key", "example.com/late"}, {"value", "y"}, {"effect", "NoSchedule"}}});
                     return true;
                   })
          ->ok());

  controller::World w;
  w.node = [&](const std::string& n) -> std::optional<kube::Node> { return cache.at(n); };
  w.nodes = [&] { return std::vector<kube::Node>{cache.at(a), cache.at(b)}; };
  w.pods = [](const std::string&) { return std::vector<kube::Pod>{}; };
  w.repairs = [](const std::string&) { return std::vector<kube::NodeRepair>{}; };
  auto policy = controller::ParsePolicy(
      "breaker: {share_percent: 100}\npools: {max_unavailable_percent: 100}\n", "test.yaml");
  ASSERT_TRUE(policy);
  Metrics metrics;
  SystemClock clock;
  {
    controller::Repairer r(*client_, clock, w, *policy, false, metrics);
    (void)r.Reconcile(a);
    (void)r.Reconcile(b);
  }
  EXPECT_TRUE(HasTaint(a, "gpuheal.io/gpu-fault", "fatal", "NoSchedule"));
  EXPECT_TRUE(HasTaint(a, "example.com/late"))
      << "the stale copy's write was refused, not applied over the other writer";
  EXPECT_TRUE(Cordoned(a));
  EXPECT_TRUE(HasTaint(b, "gpuheal.io/gpu-fault", "fatal", "NoSchedule"));
  bool kept = false;
  const json nb = GetNode(b);  // kept alive: the loop walks inside it
  for (const auto& t : nb["spec"]["taints"]) {
    kept = kept || (t.value("key", "") == "example.com/draining" &&
                    t.value("timeAdded", "") == "2026-11-30T04:00:00Z");
  }
  EXPECT_TRUE(kept) << nb["spec"]["taints"].dump();
  EXPECT_TRUE(Cordoned(b));
  EXPECT_EQ(GetNode(b)["metadata"]["annotations"].value("gpuheal.io/cordoned", ""), "true");
  for (const auto& n : {a, b}) {
    for (const auto& rec : Repairs(n))
      (void)client_->Delete(kRepairs + "/" + rec["metadata"].value("name", ""));
  }
}

// A burst: while other nodes wait in the work queue, a faulty node is quarantined and its record
// (several API writes) left for after them, once; the record then carries the quarantine's time.
TEST_F(ControllerTest, InABurstEveryQuarantineGoesBeforeAnyRecord) {
  const std::string a = Node("a");
  const std::string b = Node("b");
  SetCondition(a, "False", "NvidiaXID48Error");
  SetCondition(b, "False", "NvidiaXID48Error");
  auto fresh = [&](const std::string& n) -> std::optional<kube::Node> {
    return *kube::DecodeNode(client_->Get(kube::NodePath(n))->body);
  };
  bool backlog = true;
  controller::World w;
  w.node = fresh;
  w.nodes = [&] { return std::vector<kube::Node>{*fresh(a), *fresh(b)}; };
  w.pods = [](const std::string&) { return std::vector<kube::Pod>{}; };
  w.repairs = [&](const std::string& n) {
    std::vector<kube::NodeRepair> out;
    for (const auto& r : Repairs(n)) out.push_back(*kube::DecodeNodeRepair(r.dump()));
    return out;
  };
  w.backlog = [&] { return backlog; };
  auto policy = controller::ParsePolicy(
      "breaker: {share_percent: 100}\npools: {max_unavailable_percent: 100}\n", "test.yaml");
  ASSERT_TRUE(policy);
  Metrics metrics;
  SystemClock clock;
  controller::Repairer r(*client_, clock, w, *policy, false, metrics);
  // Whole microseconds, as the record writes them: the first reconcile may read the clock less
  // than a microsecond later (CI caught the truncated time landing before an unfloored `before`).
  const auto before =
      std::chrono::floor<std::chrono::microseconds>(std::chrono::system_clock::now());
  EXPECT_EQ(r.Reconcile(a), std::chrono::milliseconds(0)) << "back of the queue";
  EXPECT_EQ(r.Reconcile(b), std::chrono::milliseconds(0));
  EXPECT_TRUE(HasTaint(a, "gpuheal.io/gpu-fault", "fatal", "NoSchedule") && Cordoned(a));
  EXPECT_TRUE(HasTaint(b, "gpuheal.io/gpu-fault", "fatal", "NoSchedule") && Cordoned(b));
  EXPECT_TRUE(Repairs(a).empty() && Repairs(b).empty()) << "no record yet";
  const auto after = std::chrono::system_clock::now();
  std::this_thread::sleep_for(200ms);
  (void)r.Reconcile(a);  // still a backlog, but deferred once already: the record now
  backlog = false;
  (void)r.Reconcile(b);
  for (const auto& n : {a, b}) {
    auto recs = Repairs(n);
    ASSERT_EQ(recs.size(), 1u) << n;
    const json phases = Status(recs[0]).value("phases", json::object());
    for (const char* phase : {"Quarantined", "Detected"}) {
      const auto t = kube::ParseTime(phases.value(phase, ""));
      ASSERT_TRUE(t) << phases.dump();
      EXPECT_TRUE(before <= *t && *t <= after)
          << phase << " at the quarantine's time, not the record's: " << phases.dump();
    }
    (void)client_->Delete(kRepairs + "/" + recs[0]["metadata"].value("name", ""));
  }
}

TEST_F(ControllerTest, CheckpointDoneEvictsEarlyAndABudgetHoldsEviction) {
  const std::string a = Node("a"), b = Node("b");
  Pod("ckpt-" + id_, a, {{"app", "ckpt-" + id_}});
  Pod("sys-" + id_, a, json::object(), "kube-system");
  Pod("tr0-" + id_, a, {{"app", "tr-" + id_}});
  Pod("tr1-" + id_, b, {{"app", "tr-" + id_}});
  json pdb = {
      {"apiVersion", "policy/v1"},
      {"kind", "PodDisruptionBudget"},
      {"metadata", {{"name", "tr-" + id_}, {"namespace", "work"}}},
      {"spec", {{"minAvailable", 2}, {"selector", {{"matchLabels", {{"app", "tr-" + id_}}}}}}}};
  ASSERT_EQ(client_->Create(kube::PdbPath("work"), pdb)->status, 201);
  StartController("checkpoint:\n  window: 60s\n");
  SetCondition(a, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually(
      [&] {
        return PodJson("ckpt-" + id_)["metadata"]
            .value("annotations", json::object())
            .contains("gpuheal.io/checkpoint-requested");
      },
      10s));
  EXPECT_FALSE(PodGone("ckpt-" + id_))
      << "the window is 60 s: nothing evicted before the workloads say done";
  const auto t0 = std::chrono::steady_clock::now();
  for (const std::string& p : {"ckpt-" + id_, "tr0-" + id_}) {
    (void)client_->Patch(
        kube::PodPath("work", p), kube::PatchType::kMerge,
        {{"metadata", {{"annotations", {{"gpuheal.io/checkpoint-done", "true"}}}}}});
  }
  ASSERT_TRUE(Eventually([&] { return PodGone("ckpt-" + id_); }, 15s));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 15s)
      << "evicted once checkpointed, long before the window";
  // The budget (minAvailable 2 of 2) holds tr0; kube-system is never drained.
  std::this_thread::sleep_for(2s);
  EXPECT_FALSE(PodGone("tr0-" + id_));
  EXPECT_FALSE(PodGone("sys-" + id_, "kube-system"));
  EXPECT_EQ(Phase(a), "Draining");
  EXPECT_NE(Message(a).find("PodDisruptionBudget work/tr-" + id_), std::string::npos)
      << "the budget named in the API server's refusal, retried on its own backoff: " << Message(a);
  // Room in the budget: the eviction goes through, the node is drained.
  Pod("tr2-" + id_, b, {{"app", "tr-" + id_}});
  ASSERT_TRUE(Eventually([&] { return PodGone("tr0-" + id_); }, 30s));
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Drained"; }, 15s)) << Phase(a);
  auto evicted = Status(Repairs(a).back())["evictedPods"];
  EXPECT_EQ(std::count(evicted.begin(), evicted.end(), "work/ckpt-" + id_), 1)
      << "each pod evicted once: " << evicted.dump();
  EXPECT_EQ(std::count(evicted.begin(), evicted.end(), "work/tr0-" + id_), 1);
}

// The controller never evicts itself: quarantining and draining the node its own pod runs on
// (its namespace from the downward API's POD_NAMESPACE, as the chart sets it; here with no
// skip.namespaces at all) takes the other workloads away and leaves the controller's pods.
TEST_F(ControllerTest, TheControllerNeverEvictsItselfFromItsOwnNode) {
  const std::string a = Node("a");
  const std::string self_ns = "gpuheal-self-" + id_;
  ASSERT_EQ(
      client_
          ->Create("/api/v1/namespaces",
                   {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", self_ns}}}})
          ->status,
      201);
  Pod("controller-" + id_, a, json::object(), self_ns);
  Pod("work-" + id_, a);
  setenv("POD_NAMESPACE", self_ns.c_str(), 1);
  setenv("POD_NAME", ("controller-" + id_).c_str(), 1);
  auto& c = StartController("checkpoint:\n  window: 1s\nskip:\n  namespaces: []\n");
  unsetenv("POD_NAMESPACE");
  unsetenv("POD_NAME");
  EXPECT_TRUE(std::any_of(c.logs().begin(), c.logs().end(), [&](const json& j) {
    return j.value("msg", "") == "controller started" && j.value("own_namespace", "") == self_ns;
  })) << "the start line names the namespace whose pods are never evicted";
  SetCondition(a, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually([&] { return PodGone("work-" + id_); }, 20s));
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Drained"; }, 15s)) << Phase(a);
  auto node = kube::DecodeNode(client_->Get(kube::NodePath(a))->body);
  EXPECT_TRUE(node->unschedulable) << "the controller's own node is quarantined like any other";
  EXPECT_FALSE(PodGone("controller-" + id_, self_ns)) << "its own pod was evicted";
  EXPECT_FALSE(PodJson("controller-" + id_, self_ns)["metadata"]
                   .value("annotations", json::object())
                   .contains("gpuheal.io/checkpoint-requested"))
      << "nor asked to checkpoint";
  const auto evicted = Status(Repairs(a).back())["evictedPods"];
  EXPECT_EQ(evicted, json::array({"work/work-" + id_})) << evicted.dump();
  (void)client_->Delete("/api/v1/namespaces/" + self_ns);
}

// The checkpoint window counts from when the request was made, to the millisecond: phase times
// with whole seconds made a 1 s window end anywhere between 0 and 1 s after the request.
TEST_F(ControllerTest, ACheckpointWindowIsNeverCutShort) {
  const std::string a = Node("a");
  Pod("slow-" + id_, a);
  StartController("checkpoint:\n  window: 1s\n");
  SetCondition(a, "False", "NvidiaXID48Error");
  auto poll = [&](const std::function<bool()>& f) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!f() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
    return std::chrono::steady_clock::now();
  };
  const auto requested = poll([&] {
    return PodJson("slow-" + id_)["metadata"]
        .value("annotations", json::object())
        .contains("gpuheal.io/checkpoint-requested");
  });
  const auto gone = poll([&] { return PodGone("slow-" + id_); });
  ASSERT_TRUE(PodGone("slow-" + id_));
  // Seen by polling every ~10 ms (plus a GET): the true gap is at most that much longer.
  EXPECT_GE(gone - requested, 900ms)
      << "the pod never said done: evicted only when its 1 s window ended";
}

TEST_F(ControllerTest, AfterTheTolerationWindowTheProviderRemediates) {
  const std::string a = Node("a");
  StartController(
      "toleration:\n  AcceleratedHardwareReady: 2s\nprovider:\n  name: delete-node\n  "
      "replacement_timeout: 0s\n");
  SetCondition(a, "False", "NvidiaXID79Error");
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Replaced"; }, 20s)) << Phase(a);
  EXPECT_FALSE(GetNode(a).is_object()) << "the Node was deleted";
  auto rec = Repairs(a).back();
  for (const char* p : {"Detected", "Quarantined", "Drained", "Remediating", "Replaced"}) {
    EXPECT_TRUE(Status(rec).value("phases", json::object()).contains(p)) << p << ": " << rec.dump();
  }
}

TEST_F(ControllerTest, GatesPausedOptOutAndPoolsOfOneAndFour) {
  // Pool of 4: two unhealthy exceed 20% (rounded up: 1): both held, quarantine goes on.
  std::vector<std::string> pool;
  for (int i = 0; i < 4; ++i) pool.push_back(Node(fmt::format("p{}", i)));
  const std::string paused =
      Node("paused", {{"gpuheal.io/paused", "true"}, {"gpuheal.io/pool", "solo1-" + id_}});
  const std::string optout =
      Node("optout", {{"gpuheal.io/managed", "false"}, {"gpuheal.io/pool", "solo2-" + id_}});
  const std::string solo = Node("solo", {{"gpuheal.io/pool", "solo3-" + id_}});
  Pod("pp-" + id_, paused);
  Pod("sp-" + id_, solo);
  StartController("checkpoint:\n  window: 1s\n");
  for (const auto& n : {pool[0], pool[1], paused, optout, solo})
    SetCondition(n, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually(
      [&] {
        return HasTaint(pool[0], "gpuheal.io/gpu-fault") &&
               HasTaint(pool[1], "gpuheal.io/gpu-fault");
      },
      10s));
  ASSERT_TRUE(Eventually(
      [&] {
        return Repairs(pool[0]).size() == 1 &&
               Message(pool[0]).find("pool gate") != std::string::npos;
      },
      10s));
  // A pool of one still repairs its one node.
  ASSERT_TRUE(Eventually([&] { return PodGone("sp-" + id_); }, 15s));
  // Paused: quarantined, not drained.
  ASSERT_TRUE(Eventually([&] { return HasTaint(paused, "gpuheal.io/gpu-fault"); }, 10s));
  std::this_thread::sleep_for(2s);
  EXPECT_FALSE(PodGone("pp-" + id_));
  EXPECT_NE(Message(paused).find("paused"), std::string::npos);
  // Opted out: untouched.
  EXPECT_FALSE(HasTaint(optout, "gpuheal.io/gpu-fault"));
  EXPECT_TRUE(Repairs(optout).empty());
}

TEST_F(ControllerTest, DryRunWritesOnlyItsRecords) {
  const std::string a = Node("a");
  Pod("dr-" + id_, a);
  StartController("checkpoint:\n  window: 1s\n", {"--dry-run"});
  SetCondition(a, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually([&] { return Message(a).find("dry-run") != std::string::npos; }, 15s));
  EXPECT_FALSE(HasTaint(a, "gpuheal.io/gpu-fault"));
  EXPECT_FALSE(Cordoned(a));
  EXPECT_FALSE(PodGone("dr-" + id_));
  EXPECT_FALSE(PodJson("dr-" + id_)["metadata"]
                   .value("annotations", json::object())
                   .contains("gpuheal.io/checkpoint-requested"));
  const auto actions = Status(Repairs(a).back()).value("actions", json::array());
  EXPECT_NE(actions.dump().find("would evict work/dr-" + id_), std::string::npos) << actions.dump();
}

TEST_F(ControllerTest, TwoControllersOnlyTheLeaderActsAndAKilledLeaderIsReplaced) {
  const std::string a = Node("a"), b = Node("b");
  auto& one = StartController("probation: 1s\n", {"--id", "one-" + id_});
  ASSERT_TRUE(
      one.WaitLog([](const json& j) { return j.value("msg", "") == "started leading"; }, 30s));
  auto& two = StartController("probation: 1s\n", {"--id", "two-" + id_});
  SetCondition(a, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually([&] { return HasTaint(a, "gpuheal.io/gpu-fault"); }, 10s));
  EXPECT_FALSE(
      two.WaitLog([](const json& j) { return j.value("msg", "") == "started leading"; }, 2s));
  EXPECT_EQ(Repairs(a).size(), 1u) << "one record: only the leader acts";
  one.Kill(SIGKILL);
  ASSERT_TRUE(
      two.WaitLog([](const json& j) { return j.value("msg", "") == "started leading"; }, 40s));
  SetCondition(b, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually([&] { return HasTaint(b, "gpuheal.io/gpu-fault"); }, 10s));
  // The successor continues the first one's repair rather than opening another.
  SetCondition(a, "True", "NvidiaGPUIsReady");
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Recovered"; }, 15s));
  EXPECT_EQ(Repairs(a).size(), 1u);
}

TEST_F(ControllerTest, PoolOfTenRepairsTwoAtOnceAndHoldsAtThree) {
  std::vector<std::string> pool;
  for (int i = 0; i < 10; ++i)
    pool.push_back(Node(fmt::format("t{}", i), {{"gpuheal.io/pool", "ten-" + id_}}));
  for (int i = 0; i < 3; ++i) Pod(fmt::format("ten{}-{}", i, id_), pool[static_cast<size_t>(i)]);
  // 3 unhealthy of 10 is more than 20% (2): every repair of the pool holds; quarantine goes on.
  // The faults are on the Nodes before the controller starts: set one by one against a running
  // controller, the first could be seen alone (1 of 10) and have its checkpoint asked for.
  for (int i = 0; i < 3; ++i)
    SetCondition(pool[static_cast<size_t>(i)], "False", "NvidiaXID48Error");
  StartController("checkpoint:\n  window: 60s\n");
  ASSERT_TRUE(Eventually(
      [&] {
        for (int i = 0; i < 3; ++i) {
          if (Message(pool[static_cast<size_t>(i)]).find("pool gate: 3 of 10") == std::string::npos)
            return false;
        }
        return true;
      },
      10s))
      << Message(pool[0]);
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(HasTaint(pool[static_cast<size_t>(i)], "gpuheal.io/gpu-fault"));
  EXPECT_FALSE(PodJson("ten0-" + id_)["metadata"]
                   .value("annotations", json::object())
                   .contains("gpuheal.io/checkpoint-requested"));
  // One recovers: 2 of 10 is within the gate, the other two go on.
  SetCondition(pool[2], "True", "NvidiaGPUIsReady");
  ASSERT_TRUE(Eventually(
      [&] {
        return PodJson("ten0-" + id_)["metadata"]
                   .value("annotations", json::object())
                   .contains("gpuheal.io/checkpoint-requested") &&
               PodJson("ten1-" + id_)["metadata"]
                   .value("annotations", json::object())
                   .contains("gpuheal.io/checkpoint-requested");
      },
      20s))
      << Message(pool[0]);
}

TEST_F(ControllerTest, AttemptCapBlocksARepairPastTheCapAsHardwareInspection) {
  const std::string a = Node("a");
  StartController("probation: 1s\nattempts:\n  max: 1\n  window: 1h\n");
  SetCondition(a, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Drained"; }, 10s)) << Phase(a);
  SetCondition(a, "True", "NvidiaGPUIsReady");
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Recovered"; }, 15s)) << Phase(a);
  std::this_thread::sleep_for(1100ms);  // a new lastTransitionTime: a new fault
  SetCondition(a, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually([&] { return Repairs(a).size() == 2 && Phase(a) == "Blocked"; }, 10s))
      << Phase(a);
  EXPECT_NE(Message(a).find("HardwareInspection"), std::string::npos) << Message(a);
  EXPECT_EQ(Status(Repairs(a).back())["attempts"], 2);
  EXPECT_TRUE(HasTaint(a, "gpuheal.io/gpu-fault")) << "left quarantined";
  ASSERT_TRUE(Eventually([&] { return EventReasons(a).count("Blocked") > 0; }, 10s));
}

TEST_F(ControllerTest, DrainTimeoutForceDeletesWhatABudgetHolds) {
  const std::string a = Node("a");
  Pod("dt0-" + id_, a, {{"app", "dt-" + id_}});
  json pdb = {
      {"apiVersion", "policy/v1"},
      {"kind", "PodDisruptionBudget"},
      {"metadata", {{"name", "dt-" + id_}, {"namespace", "work"}}},
      {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "dt-" + id_}}}}}}}};
  ASSERT_EQ(client_->Create(kube::PdbPath("work"), pdb)->status, 201);
  StartController(
      "checkpoint:\n  window: 1s\neviction:\n  drain_timeout: 3s\n  after_drain_timeout: "
      "force-delete\n");
  SetCondition(a, "False", "NvidiaXID48Error");
  ASSERT_TRUE(
      Eventually([&] { return Message(a).find("PodDisruptionBudget") != std::string::npos; }, 15s))
      << Message(a);
  EXPECT_FALSE(PodGone("dt0-" + id_));
  ASSERT_TRUE(Eventually(
      [&] { return client_->Get(kube::PodPath("work", "dt0-" + id_))->status == 404; }, 20s));
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Drained"; }, 10s)) << Phase(a);
  EXPECT_NE(Status(Repairs(a).back())["actions"].dump().find("force-deleted"), std::string::npos);
}

// The critical rung: a critical fault of one GPU (from the agent's gpuheal.io/gpu-faults) is a
// request to the node's agent to drain and reset that GPU; the node stays in service throughout.
TEST_F(ControllerTest, CriticalGpuFaultAsksTheAgentForAResetAndTheNodeStaysInService) {
  const std::string a = Node("a");
  Pod("cr-" + id_, a);
  StartController("checkpoint:\n  window: 1s\n");
  SetGpuFaults(a, CriticalXid45());
  ASSERT_TRUE(Eventually([&] { return RecoveryRequest(a).is_object(); }, 10s));
  const json req = RecoveryRequest(a);
  EXPECT_EQ(req["gpus"], json::array({"0000:3b:00"}));
  auto rec = Repairs(a).back();
  EXPECT_EQ(req["id"], rec["metadata"]["name"]);
  EXPECT_EQ(rec["spec"]["trigger"]["severity"], "critical");
  EXPECT_EQ(rec["spec"]["trigger"]["gpus"], json::array({"0000:3b:00"}));
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Remediating"; }, 10s))
      << Phase(a);  // written after the request
  std::this_thread::sleep_for(2s);
  EXPECT_FALSE(HasTaint(a, "gpuheal.io/gpu-fault")) << "the node's other GPUs stay in service";
  EXPECT_FALSE(Cordoned(a));
  EXPECT_FALSE(PodGone("cr-" + id_)) << "the agent drains the GPU; the controller evicts nothing";
  // The agent answers: reset and verified; its fault list empties.
  AnswerRecovery(a, req["id"], "succeeded");
  SetGpuFaults(a, json::object());
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Recovered"; }, 10s)) << Phase(a);
  EXPECT_EQ(Repairs(a).size(), 1u);
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = EventReasons(a);
        return r.count("Detected") && r.count("GPURecoveryRequested") && r.count("Remediating") &&
               r.count("Recovered");
      },
      10s))
      << json(EventReasons(a)).dump();
}

// Where the cluster's DRA driver names the GPUs (a ResourceSlice with pciBusID attributes), a
// critical fault of one GPU also takes it out of the scheduler's hands: a DeviceTaintRule
// (resource.k8s.io/v1) selecting just that device, NoSchedule, removed once the agent reset it;
// the pod whose claim holds that device (and no other) checkpoints and is evicted before the
// reset. The node is neither tainted nor cordoned.
TEST_F(ControllerTest, ACriticalGpuFaultTaintsJustThatDeviceWhereDraNamesIt) {
  const std::string a = Node("a");
  PublishGpuSlice(a);
  const std::string on_faulty = "dra-faulty-" + id_, on_other = "dra-fine-" + id_;
  Pod(on_faulty, a);
  Pod(on_other, a);
  AllocatedClaim("claim-faulty-" + id_, a, "gpu-1", on_faulty);
  AllocatedClaim("claim-fine-" + id_, a, "gpu-2", on_other);
  StartController("checkpoint:\n  window: 30s\n");
  SetGpuFaults(a, CriticalXid45());
  // The pod holding the faulty GPU, and only it, checkpoints and goes before the reset.
  ASSERT_TRUE(Eventually([&] { return CheckpointAsked(on_faulty); }, 10s)) << Message(a);
  EXPECT_FALSE(RecoveryRequest(a).is_object()) << "no reset while its pod runs";
  CheckpointDone(on_faulty);
  ASSERT_TRUE(Eventually([&] { return PodGone(on_faulty); }, 15s)) << Message(a);
  ASSERT_TRUE(Eventually([&] { return RecoveryRequest(a).is_object(); }, 10s)) << Message(a);
  EXPECT_FALSE(PodGone(on_other)) << "the pod of another GPU stays";
  EXPECT_FALSE(CheckpointAsked(on_other));
  EXPECT_EQ(Status(Repairs(a).back())["evictedPods"], json::array({"work/" + on_faulty}));
  const auto rules = RulesFor(a, "gpu-1");
  ASSERT_EQ(rules.size(), 1u) << "one rule, for the faulty GPU's device";
  EXPECT_EQ(rules[0]["spec"]["deviceSelector"]["driver"], "gpu.nvidia.com");
  EXPECT_EQ(rules[0]["spec"]["taint"]["key"], "gpuheal.io/gpu-fault");
  EXPECT_EQ(rules[0]["spec"]["taint"]["value"], "critical");
  EXPECT_EQ(rules[0]["spec"]["taint"]["effect"], "NoSchedule");
  for (const char* other : {"gpu-0", "gpu-2", "gpu-3"}) EXPECT_TRUE(RulesFor(a, other).empty());
  EXPECT_FALSE(HasTaint(a, "gpuheal.io/gpu-fault"));
  EXPECT_FALSE(Cordoned(a));
  AnswerRecovery(a, RecoveryRequest(a)["id"], "succeeded");
  SetGpuFaults(a, json::object());
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Recovered"; }, 10s)) << Phase(a);
  EXPECT_TRUE(Eventually([&] { return RulesFor(a, "gpu-1").empty(); }, 10s))
      << "the rule is removed after the verified reset";
}

// Predictive drain with DRA: the GPU at risk is tainted alone, the pod holding a claim allocated
// to it (and no other pod of the node) is asked to checkpoint and evicted once it did, the GPU is
// reset, and the rule removed; the node is never cordoned.
TEST_F(ControllerTest, PredictiveDrainTakesOnlyThePodOfTheGpuAtRiskWhereDraNamesIt) {
  const std::string a = Node("a");
  PublishGpuSlice(a);
  const std::string on_risky = "dra-risky-" + id_, on_other = "dra-other-" + id_;
  Pod(on_risky, a);
  Pod(on_other, a);
  // The claims, allocated as the scheduler would: one to gpu-1 (0000:3b:00), one to gpu-2.
  AllocatedClaim("claim-risky-" + id_, a, "gpu-1", on_risky);
  AllocatedClaim("claim-other-" + id_, a, "gpu-2", on_other);
  StartController("predictive:\n  action: drain-at-boundary\n");
  ASSERT_TRUE(
      client_
          ->Patch(kube::NodePath(a) + "/status", kube::PatchType::kMerge,
                  {{"metadata",
                    {{"annotations",
                      {{"gpuheal.io/gpu-at-risk", R"({"0000:3b:00":{"since":")" + kube_time() +
                                                      R"(","signals":{"row_remap":1}}})"}}}}}})
          ->ok());
  ASSERT_TRUE(Eventually([&] { return RulesFor(a, "gpu-1").size() == 1; }, 10s));
  EXPECT_EQ(RulesFor(a, "gpu-1")[0]["spec"]["taint"]["value"], "at-risk");
  ASSERT_TRUE(Eventually([&] { return CheckpointAsked(on_risky); }, 10s));
  EXPECT_FALSE(CheckpointAsked(on_other)) << "the pod of another GPU is not asked";
  EXPECT_FALSE(Cordoned(a)) << "the node and its other GPUs keep serving";
  CheckpointDone(on_risky);
  ASSERT_TRUE(Eventually([&] { return PodGone(on_risky); }, 15s)) << Message(a);
  ASSERT_TRUE(Eventually([&] { return RecoveryRequest(a).is_object(); }, 10s)) << Message(a);
  EXPECT_FALSE(PodGone(on_other));
  const std::string id = RecoveryRequest(a)["id"];
  AnswerRecovery(a, id, "succeeded");
  ASSERT_TRUE(client_
                  ->Patch(kube::NodePath(a) + "/status", kube::PatchType::kMerge,
                          {{"metadata", {{"annotations", {{"gpuheal.io/gpu-at-risk", "{}"}}}}}})
                  ->ok());
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Recovered"; }, 10s)) << Message(a);
  EXPECT_TRUE(RulesFor(a, "gpu-1").empty());
  EXPECT_FALSE(Cordoned(a));
}

TEST_F(ControllerTest, AFailedGpuResetQuarantinesTheNodeUntilTheFaultClears) {
  const std::string a = Node("a");
  StartController("probation: 1s\n");
  SetGpuFaults(a, CriticalXid45());
  ASSERT_TRUE(Eventually([&] { return RecoveryRequest(a).is_object(); }, 10s));
  AnswerRecovery(a, RecoveryRequest(a)["id"], "failed");
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Failed"; }, 10s)) << Phase(a);
  EXPECT_TRUE(HasTaint(a, "gpuheal.io/gpu-fault", "critical", "NoSchedule"));
  EXPECT_TRUE(Cordoned(a));
  EXPECT_NE(Message(a).find("GPU 0000:3b:00: reset: test"), std::string::npos) << Message(a);
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(Repairs(a).size(), 1u) << "the same fault: no second request";
  // A reboot clears the fault (the agent's list empties): the node is released.
  SetGpuFaults(a, json::object());
  ASSERT_TRUE(
      Eventually([&] { return !HasTaint(a, "gpuheal.io/gpu-fault") && !Cordoned(a); }, 15s));
}

TEST_F(ControllerTest, ANodeLevelFaultSupersedesAGpuLevelRepair) {
  const std::string a = Node("a");
  StartController("probation: 1s\n");
  SetGpuFaults(a, CriticalXid45());
  ASSERT_TRUE(Eventually([&] { return RecoveryRequest(a).is_object(); }, 10s));
  std::this_thread::sleep_for(1100ms);  // a later lastTransitionTime than the GPU episode's start
  SetCondition(a, "False", "NvidiaXID79Error");
  ASSERT_TRUE(Eventually(
      [&] {
        return Repairs(a).size() == 2 &&
               HasTaint(a, "gpuheal.io/gpu-fault", "catastrophic", "NoExecute");
      },
      10s));
  const auto rs = Repairs(a);
  EXPECT_EQ(Status(rs[0]).value("phase", ""), "Failed");
  EXPECT_NE(Status(rs[0]).value("message", "").find("superseded by a node-level fault"),
            std::string::npos);
  EXPECT_EQ(rs[1]["spec"]["trigger"]["severity"], "catastrophic");
}

TEST_F(ControllerTest, BreakerHoldsEvictionAndClosesByHandOrAfterAQuietPeriod) {
  const std::string a = Node("a"), b = Node("b", {{"gpuheal.io/pool", "q-" + id_}});
  Pod("br-" + id_, a);
  Pod("bq-" + id_, b);
  // Any recent fault trips a 1% breaker; it closes only by hand (quiet 1h) in the first part.
  auto& c = StartController(
      "checkpoint:\n  window: 1s\nbreaker:\n  share_percent: 1\n  window: 1h\n  quiet: 1h\n");
  SetCondition(a, "False", "NvidiaXID48Error");
  ASSERT_TRUE(
      Eventually([&] { return Message(a).find("circuit breaker open") != std::string::npos; }, 10s))
      << Message(a);
  EXPECT_TRUE(HasTaint(a, "gpuheal.io/gpu-fault"))
      << "quarantine goes on while the breaker is open";
  std::this_thread::sleep_for(2s);
  EXPECT_FALSE(PodGone("br-" + id_));
  // `gpuheal status` tells an operator the same: the breaker open, the pool's quarantined node,
  // the repair in flight.
  // Its pool's standby target comes from the controller's policy ConfigMap.
  const std::string policy_cm = "policy-" + id_;
  ASSERT_EQ(
      client_
          ->Create(
              "/api/v1/namespaces/default/configmaps",
              {{"apiVersion", "v1"},
               {"kind", "ConfigMap"},
               {"metadata", {{"name", policy_cm}, {"namespace", "default"}}},
               {"data", {{"policy.yaml", "pools:\n  standby: {default: 1, p-" + id_ + ": 2}\n"}}}})
          ->status,
      201);
  const std::string status_cmd =
      "status --summary -o json --lease-namespace default -l "
      "gpuheal.io/pool=p-" +
      id_ + " --policy-configmap default/" + policy_cm + " --kubeconfig " +
      ControlPlaneEnv::kubeconfig();
  json summary;
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = gpuheal::testing::RunGpuheal(status_cmd, false);
        summary = json::parse(r.out, nullptr, false);
        return r.code == 0 && summary.is_object() && summary["breaker"]["state"] == "open";
      },
      10s))
      << summary.dump();
  ASSERT_EQ(summary["pools"].size(), 1u) << summary.dump();
  EXPECT_EQ(summary["pools"][0]["pool"], "p-" + id_);
  EXPECT_EQ(summary["pools"][0]["quarantined"], 1);
  EXPECT_EQ(summary["pools"][0]["unhealthy"], 1);
  EXPECT_EQ(summary["pools"][0]["standby"], 0);
  EXPECT_EQ(summary["pools"][0]["standby_target"], 2) << summary.dump();
  EXPECT_FALSE(summary.contains("policy_error")) << summary.dump();
  bool in_flight = false;
  for (const auto& r : summary["repairs_in_flight"]) {
    if (r["node"] != a) continue;
    in_flight = true;
    EXPECT_EQ(r.value("gate", ""), "breaker") << "the record's status.gate" << summary.dump();
  }
  EXPECT_TRUE(in_flight) << summary.dump();
  ResetBreakerByHand();
  ASSERT_TRUE(Eventually([&] { return PodGone("br-" + id_); }, 30s)) << Message(a);
  ASSERT_TRUE(
      c.WaitLog([](const json& j) { return j.value("msg", "") == "circuit breaker closed"; }, 5s));
  EXPECT_TRUE(Eventually(
      [&] {
        auto r = gpuheal::testing::RunGpuheal(status_cmd, false);
        summary = json::parse(r.out, nullptr, false);
        return r.code == 0 && summary.is_object() && summary["breaker"]["state"] == "closed";
      },
      10s))
      << summary.dump();
  const auto table = gpuheal::testing::RunGpuheal("status --lease-namespace default --kubeconfig " +
                                                  ControlPlaneEnv::kubeconfig());
  EXPECT_NE(table.out.find("CIRCUIT BREAKER: closed since"), std::string::npos) << table.out;
  // Without the policy's ConfigMap (the default name is not in this cluster): targets unknown,
  // said so, and the rest as before.
  EXPECT_NE(table.out.find("standby targets unknown: ConfigMap "
                           "gpuheal-system/gpuheal-controller-policy"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("REPAIRS IN FLIGHT:"), std::string::npos) << table.out;
  c.Kill(SIGTERM);
  // A short window and quiet period: the breaker opens, then closes by itself.
  auto& d = StartController(
      "checkpoint:\n  window: 1s\nbreaker:\n  share_percent: 1\n  window: 3s\n  quiet: 1s\n");
  std::this_thread::sleep_for(1s);
  SetCondition(b, "False", "NvidiaXID48Error");
  ASSERT_TRUE(
      d.WaitLog([](const json& j) { return j.value("msg", "") == "circuit breaker opened"; }, 10s));
  ASSERT_TRUE(Eventually([&] { return PodGone("bq-" + id_); }, 30s)) << Message(b);
  EXPECT_TRUE(
      d.WaitLog([](const json& j) { return j.value("msg", "") == "circuit breaker closed"; }, 5s));
}

// Failure domains on the real API server: four nodes of one rack faulting together are one
// infrastructure incident (quarantined and drained, not deleted); a node of another rack faulting
// with them is replaced; `gpuheal status` shows the incident; the operator's release of the rack's
// nodes lets the four be replaced.
TEST_F(ControllerTest, ARackFaultingAtOnceIsOneIncidentThatHoldsRemediation) {
  const std::string label = "example.com/rack-" + id_;
  std::vector<std::string> rack;
  for (int i = 0; i < 4; ++i) {
    // A pool each: the pool gate holds nothing here.
    rack.push_back(Node(fmt::format("r{}", i),
                        {{label, "r12"}, {"gpuheal.io/pool", fmt::format("r{}-{}", i, id_)}}));
    Pod(fmt::format("rk{}-{}", i, id_), rack.back());
  }
  const std::string out = Node("out", {{label, "r13"}, {"gpuheal.io/pool", "out-" + id_}});
  StartController(fmt::format(
      "checkpoint:\n  window: 1s\ntoleration:\n  AcceleratedHardwareReady: 2s\nprovider:\n  "
      "name: delete-node\n  replacement_timeout: 0s\nfailure_domains:\n  labels: [{}]\n  "
      "nodes: 3\n  window: 5m\n",
      label));
  for (const auto& n : rack) SetCondition(n, "False", "NvidiaXID79Error");
  SetCondition(out, "False", "NvidiaXID79Error");
  ASSERT_TRUE(Eventually([&] { return Phase(out) == "Replaced"; }, 30s)) << Message(out);
  const std::string domain = label + "=r12";
  ASSERT_TRUE(Eventually(
      [&] {
        return std::all_of(rack.begin(), rack.end(), [&](const std::string& n) {
          auto rs = Repairs(n);
          return !rs.empty() && Status(rs.back()).value("incident", "") == domain;
        });
      },
      20s));
  std::this_thread::sleep_for(3s);  // past the 2 s toleration: held, not late
  for (size_t i = 0; i < rack.size(); ++i) {
    const auto& n = rack[i];
    EXPECT_TRUE(GetNode(n).is_object()) << n << " must not be deleted";
    EXPECT_TRUE(HasTaint(n, "gpuheal.io/gpu-fault")) << n;
    EXPECT_TRUE(PodGone(fmt::format("rk{}-{}", i, id_))) << n << ": drained while held";
    EXPECT_EQ(Message(n).rfind("infrastructure incident: 4 node(s) of " + domain, 0), 0u)
        << Message(n);
    EXPECT_FALSE(Status(Repairs(n).back()).value("phases", json::object()).contains("Remediating"));
  }
  EXPECT_TRUE(
      Eventually([&] { return EventReasons(rack[0]).count("InfrastructureIncident"); }, 10s));
  // `gpuheal status` names the incident and the nodes it holds.
  json summary;
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = gpuheal::testing::RunGpuheal(
            "status --summary -o json --lease-namespace default -l " + label + "=r12" +
                " --kubeconfig " + ControlPlaneEnv::kubeconfig(),
            false);
        summary = json::parse(r.out, nullptr, false);
        if (r.code != 0 || !summary.is_object()) return false;
        for (const auto& i : summary["incidents"]) {
          if (i["domain"] == domain && i["held_nodes"].size() == 4) return true;
        }
        return false;
      },
      10s))
      << summary.dump();
  const auto table = gpuheal::testing::RunGpuheal(
      "status --summary --lease-namespace default --kubeconfig " + ControlPlaneEnv::kubeconfig());
  EXPECT_NE(table.out.find(domain + "  remediation held on 4 node(s)"), std::string::npos)
      << table.out;
  // The operator releases the rack's nodes: the four are replaced, whichever goes first.
  for (const auto& n : rack) {
    ASSERT_TRUE(client_
                    ->Patch(kube::NodePath(n), kube::PatchType::kMerge,
                            {{"metadata",
                              {{"annotations", {{"gpuheal.io/incident-release", kube_time()}}}}}})
                    ->ok());
  }
  for (const auto& n : rack) {
    EXPECT_TRUE(Eventually([&] { return Phase(n) == "Replaced"; }, 30s)) << n << ": " << Message(n);
  }
}

// A catastrophic fault's NoExecute would have Kubernetes' taint manager evict every pod past the
// breaker: while a gate holds the node is NoSchedule (and its pods stay); NoExecute once it opens.
TEST_F(ControllerTest, ACatastrophicFaultIsNoExecuteOnlyWhenTheGatesAllowIt) {
  const std::string a = Node("a");
  Pod("ce-" + id_, a);
  StartController(
      "checkpoint:\n  window: 30s\nbreaker:\n  share_percent: 1\n  window: 1h\n  quiet: 1h\n");
  SetCondition(a, "False", "NvidiaGPUFallenOffBus");
  ASSERT_TRUE(
      Eventually([&] { return Message(a).find("circuit breaker open") != std::string::npos; }, 10s))
      << Message(a);
  EXPECT_TRUE(HasTaint(a, "gpuheal.io/gpu-fault", "catastrophic", "NoSchedule") && Cordoned(a));
  std::this_thread::sleep_for(
      2s);  // the taint manager acts within milliseconds of a NoExecute taint
  EXPECT_FALSE(HasTaint(a, "gpuheal.io/gpu-fault", "", "NoExecute"));
  EXPECT_FALSE(PodGone("ce-" + id_))
      << "the breaker holds every disruption, the taint manager's too";
  ResetBreakerByHand();
  ASSERT_TRUE(Eventually(
      [&] { return HasTaint(a, "gpuheal.io/gpu-fault", "catastrophic", "NoExecute"); }, 30s))
      << Message(a);
  // The 30 s checkpoint window is not waited: the taint manager takes the pod at once.
  ASSERT_TRUE(Eventually([&] { return PodGone("ce-" + id_); }, 10s));
  EXPECT_NE(Status(Repairs(a).back())["actions"].dump().find("NoExecute once the gates allowed it"),
            std::string::npos);
}

TEST_F(ControllerTest, DeleteNodeDeletesTheOwningMachineOrNodeClaim) {
  const std::string capi = Node("capi"), karp = Node("karp", {{"gpuheal.io/pool", "k-" + id_}}),
                    prov = Node("prov", {{"gpuheal.io/pool", "kp-" + id_}});
  CapiMachine("m-" + id_, capi, capi);
  KarpenterNodeClaim("nc-" + id_, {{"nodeName", karp}});
  // A NodeClaim whose node has not been named yet is matched by its provider id.
  ASSERT_TRUE(client_
                  ->Patch(kube::NodePath(prov), kube::PatchType::kMerge,
                          {{"spec", {{"providerID", "sim://" + prov}}}})
                  ->ok());
  KarpenterNodeClaim("ncp-" + id_, {{"providerID", "sim://" + prov}});
  StartController(
      "toleration:\n  AcceleratedHardwareReady: 1s\nprovider:\n  name: delete-node\n  "
      "replacement_timeout: 0s\n");
  for (const auto& n : {capi, karp, prov}) SetCondition(n, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually(
      [&] {
        return Phase(capi) == "Replaced" && Phase(karp) == "Replaced" && Phase(prov) == "Replaced";
      },
      20s))
      << Phase(capi) << Phase(karp) << Phase(prov);
  EXPECT_EQ(
      client_->Get("/apis/cluster.x-k8s.io/v1beta1/namespaces/work/machines/m-" + id_)->status,
      404);
  EXPECT_EQ(client_->Get("/apis/karpenter.sh/v1/nodeclaims/nc-" + id_)->status, 404);
  EXPECT_EQ(client_->Get("/apis/karpenter.sh/v1/nodeclaims/ncp-" + id_)->status, 404);
  EXPECT_TRUE(GetNode(capi).is_object()) << "the owner's controller removes the Node, not gpuheal";
  EXPECT_TRUE(GetNode(karp).is_object());
  EXPECT_NE(
      Status(Repairs(capi).back())["actions"].dump().find("Cluster API Machine work/m-" + id_),
      std::string::npos);
  EXPECT_NE(Status(Repairs(karp).back())["actions"].dump().find("Karpenter NodeClaim nc-" + id_),
            std::string::npos);
}

// Karpenter's opt-out: karpenter.sh/do-not-disrupt=true on the Node (or its NodeClaim) holds
// the NodeClaim's deletion; the node stays quarantined and drained, and the replacement goes on
// once the annotation is gone.
TEST_F(ControllerTest, DeleteNodeRespectsKarpentersDoNotDisrupt) {
  const std::string a = Node("a"), b = Node("b", {{"gpuheal.io/pool", "dnd-" + id_}});
  KarpenterNodeClaim("dnd-a-" + id_, {{"nodeName", a}});
  KarpenterNodeClaim("dnd-b-" + id_, {{"nodeName", b}}, {{"karpenter.sh/do-not-disrupt", "true"}});
  ASSERT_TRUE(
      client_
          ->Patch(kube::NodePath(a), kube::PatchType::kMerge,
                  {{"metadata", {{"annotations", {{"karpenter.sh/do-not-disrupt", "true"}}}}}})
          ->ok());
  StartController(
      "toleration:\n  AcceleratedHardwareReady: 1s\nprovider:\n  name: delete-node\n  "
      "replacement_timeout: 0s\n");
  SetCondition(a, "False", "NvidiaXID48Error");
  SetCondition(b, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually(
      [&] {
        return Message(a).find("karpenter.sh/do-not-disrupt=true on the Node") !=
                   std::string::npos &&
               Message(b).find("karpenter.sh/do-not-disrupt=true on NodeClaim dnd-b-" + id_) !=
                   std::string::npos;
      },
      20s))
      << Message(a) << " | " << Message(b);
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(client_->Get("/apis/karpenter.sh/v1/nodeclaims/dnd-a-" + id_)->status, 200);
  EXPECT_EQ(client_->Get("/apis/karpenter.sh/v1/nodeclaims/dnd-b-" + id_)->status, 200);
  EXPECT_TRUE(HasTaint(a, "gpuheal.io/gpu-fault") && Cordoned(a));
  // The operator lifts it on the Node: the next reconcile deletes the NodeClaim.
  ASSERT_TRUE(
      client_
          ->Patch(kube::NodePath(a), kube::PatchType::kMerge,
                  {{"metadata", {{"annotations", {{"karpenter.sh/do-not-disrupt", nullptr}}}}}})
          ->ok());
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Replaced"; }, 20s)) << Message(a);
  EXPECT_EQ(client_->Get("/apis/karpenter.sh/v1/nodeclaims/dnd-a-" + id_)->status, 404);
  EXPECT_EQ(client_->Get("/apis/karpenter.sh/v1/nodeclaims/dnd-b-" + id_)->status, 200);
}

// A Cluster API MachineHealthCheck that selects the node's Machine owns its remediation: gpuheal
// quarantines and drains, does not delete the Machine, and when the MHC deletes it (played here:
// the Machine and then its Node go) the repair ends Replaced. A MachineHealthCheck of another
// cluster, or one whose selector does not match, changes nothing.
TEST_F(ControllerTest, DeleteNodeDefersToAMachineHealthCheck) {
  const std::string a = Node("a"), b = Node("b", {{"gpuheal.io/pool", "mhc-" + id_}});
  CapiMachine("mhc-a-" + id_, a, a, {{"pool", "gpu-" + id_}}, "c1");
  CapiMachine("mhc-b-" + id_, b, b, {{"pool", "cpu-" + id_}}, "c1");
  for (const auto& [name, cluster, pool] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"gpu-" + id_, "c1", "gpu-" + id_}, {"other-cluster-" + id_, "c2", "cpu-" + id_}}) {
    ASSERT_EQ(client_
                  ->Create("/apis/cluster.x-k8s.io/v1beta1/namespaces/work/machinehealthchecks",
                           {{"apiVersion", "cluster.x-k8s.io/v1beta1"},
                            {"kind", "MachineHealthCheck"},
                            {"metadata", {{"name", name}, {"namespace", "work"}}},
                            {"spec",
                             {{"clusterName", cluster},
                              {"selector",
                               {{"matchExpressions",
                                 {{{"key", "pool"}, {"operator", "In"}, {"values", {pool}}}}}}}}}})
                  ->status,
              201);
  }
  StartController(
      "toleration:\n  AcceleratedHardwareReady: 1s\nprovider:\n  name: delete-node\n  "
      "replacement_timeout: 0s\n");
  SetCondition(a, "False", "NvidiaXID48Error");
  SetCondition(b, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually(
      [&] {
        return Message(a).find("MachineHealthCheck work/gpu-" + id_ + " selects") !=
                   std::string::npos &&
               Phase(b) == "Replaced";
      },
      20s))
      << Message(a) << " | " << Phase(b) << " " << Message(b);
  EXPECT_EQ(
      client_->Get("/apis/cluster.x-k8s.io/v1beta1/namespaces/work/machines/mhc-b-" + id_)->status,
      404)
      << "no MachineHealthCheck of its cluster selects b's Machine: gpuheal deleted it";
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(
      client_->Get("/apis/cluster.x-k8s.io/v1beta1/namespaces/work/machines/mhc-a-" + id_)->status,
      200)
      << "the MachineHealthCheck's to delete";
  EXPECT_TRUE(HasTaint(a, "gpuheal.io/gpu-fault") && Cordoned(a));
  // The MachineHealthCheck acts: the Machine goes, then its Node.
  ASSERT_TRUE(
      client_->Delete("/apis/cluster.x-k8s.io/v1beta1/namespaces/work/machines/mhc-a-" + id_)
          ->ok());
  ASSERT_TRUE(client_->Delete(kube::NodePath(a))->ok());
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Replaced"; }, 20s)) << Message(a);
  EXPECT_EQ(Repairs(a).size(), 1u);
}

// The Node's annotations are writable by the agent's identity: naming another node's Machine must
// not get that Machine deleted. Ownership is proven by the Machine's status.nodeRef; without it
// the repair ends Failed (the node stays quarantined) and nothing is deleted.
TEST_F(ControllerTest, DeleteNodeNeverDeletesAMachineThatDoesNotOwnTheNode) {
  const std::string liar = Node("liar"), other = Node("other", {{"gpuheal.io/pool", "o-" + id_}});
  CapiMachine("victim-" + id_, other, liar);
  StartController(
      "toleration:\n  AcceleratedHardwareReady: 1s\nprovider:\n  name: delete-node\n  "
      "replacement_timeout: 0s\n");
  SetCondition(liar, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually([&] { return Phase(liar) == "Failed"; }, 20s))
      << Phase(liar) << " " << Message(liar);
  EXPECT_EQ(
      client_->Get("/apis/cluster.x-k8s.io/v1beta1/namespaces/work/machines/victim-" + id_)->status,
      200)
      << "the Machine of another node survives";
  EXPECT_TRUE(GetNode(liar).is_object());
  EXPECT_NE(Message(liar).find("owner not proven"), std::string::npos) << Message(liar);
  EXPECT_NE(Message(liar).find("status.nodeRef names node " + other), std::string::npos)
      << Message(liar);
  EXPECT_TRUE(HasTaint(liar, "gpuheal.io/gpu-fault") && Cordoned(liar))
      << "the node stays out of service";
  ASSERT_TRUE(Eventually([&] { return EventReasons(liar).count("RemediationFailed") > 0; }, 10s));
}

// `gpuheal cleanup` (the Helm chart's pre-delete hook): gpuheal's taints, annotations, cordon
// and conditions go from every node; another writer's taint, annotation, condition and cordon,
// and every label, stay. --dry-run changes nothing; --stop-namespace deletes only the matching
// workloads.
TEST_F(ControllerTest, CleanupTakesGpuhealOffEveryNodeAndNothingElse) {
  const std::string a = Node("clean-a"), b = Node("clean-b");
  auto mark = [&](const std::string& name, bool gpuheal_cordon) {
    ASSERT_TRUE(
        client_
            ->Update(
                kube::NodePath(name),
                [&](json& n) {
                  n["spec"]["unschedulable"] = true;
                  n["spec"]["taints"] = json::array(
                      {{{"key", "gpuheal.io/gpu-fault"},
                        {"value", "fatal"},
                        {"effect", "NoSchedule"}},
                       {{"key", "gpuheal.io/standby"}, {"value", "true"}, {"effect", "NoSchedule"}},
                       {{"key", "example.com/other"}, {"effect", "NoSchedule"}}});
                  auto& ann = n["metadata"]["annotations"];
                  ann["gpuheal.io/gpu-faults"] = "{}";
                  ann["gpuheal.io/gpu-recovery-request"] = "x";
                  ann["example.com/keep"] = "yes";
                  if (gpuheal_cordon) ann["gpuheal.io/cordoned"] = "true";
                  return true;
                })
            ->ok());
    ASSERT_TRUE(client_
                    ->Patch(kube::NodePath(name) + "/status", kube::PatchType::kStrategicMerge,
                            {{"status",
                              {{"conditions",
                                {Cond("AcceleratedHardwareReady", "False", "NvidiaXID79Error"),
                                 Cond("KernelReady", "True", "KernelHasNoFault"),
                                 Cond("SomeoneElsesCondition", "False", "Theirs")}}}}})
                    ->ok());
  };
  mark(a, true);
  mark(b, false);  // cordoned by someone else: that cordon stays
  const std::string kc = ControlPlaneEnv::kubeconfig();

  auto dry = gpuheal::testing::RunGpuheal("cleanup --dry-run --kubeconfig " + kc);
  ASSERT_EQ(dry.code, 0) << dry.out;
  EXPECT_NE(dry.out.find("would clean " + a +
                         ": 2 taint(s), 3 annotation(s), 1 cordon(s), 2 "
                         "condition(s)"),
            std::string::npos)
      << dry.out;
  // Only the taints this test set are counted: kube-controller-manager adds its own
  // node.kubernetes.io/ taints to a test Node that never heartbeats, at any moment.
  auto untouched = kube::DecodeNode(client_->Get(kube::NodePath(a))->body);
  const auto ours = std::count_if(
      untouched->taints.begin(), untouched->taints.end(),
      [](const auto& t) { return !std::string_view(t.key).starts_with("node.kubernetes.io/"); });
  EXPECT_EQ(ours, 3) << "--dry-run changed nothing";

  // Workloads to stop: the matching Deployment goes, another stays.
  (void)client_->Create(
      "/api/v1/namespaces",
      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "clean-" + id_}}}});
  auto deployment = [&](const std::string& name, const std::string& app) {
    json d = {{"apiVersion", "apps/v1"},
              {"kind", "Deployment"},
              {"metadata", {{"name", name}, {"labels", {{"app", app}}}}},
              {"spec",
               {{"replicas", 0},
                {"selector", {{"matchLabels", {{"app", app}}}}},
                {"template",
                 {{"metadata", {{"labels", {{"app", app}}}}},
                  {"spec", {{"containers", {{{"name", "c"}, {"image", "x"}}}}}}}}}}};
    ASSERT_EQ(client_->Create("/apis/apps/v1/namespaces/clean-" + id_ + "/deployments", d)->status,
              201);
  };
  deployment("gpuheal-controller", "gpuheal-controller");
  deployment("bystander", "bystander");
  // A matching pod bound to a node that is gone (a simulated node deleted with its agent's pod
  // on it): no kubelet will stop it, so it is deleted at once, not waited for.
  json orphan = gpuheal::testing::PodJson("clean-" + id_, "orphan", "gone-" + id_,
                                          {{"app", "gpuheal-controller"}});
  long created = 0;  // (403 until the namespace's default ServiceAccount exists)
  Eventually(
      [&] {
        auto r = client_->Create(kube::PodPath("clean-" + id_), orphan);
        created = r ? r->status : 0;
        return created != 403;
      },
      20s);
  ASSERT_EQ(created, 201);
  const auto began = std::chrono::steady_clock::now();
  auto run =
      gpuheal::testing::RunGpuheal("cleanup --kubeconfig " + kc + " --stop-namespace clean-" + id_ +
                                   " --stop-selector app=gpuheal-controller");
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_LT(std::chrono::steady_clock::now() - began, 10s);
  EXPECT_NE(run.out.find("deleted pod/orphan (its node gone-" + id_ + " is gone)"),
            std::string::npos)
      << run.out;
  EXPECT_EQ(client_->Get(kube::PodPath("clean-" + id_, "orphan"))->status, 404);
  EXPECT_NE(run.out.find("deleted deployments/gpuheal-controller"), std::string::npos) << run.out;
  EXPECT_EQ(
      client_->Get("/apis/apps/v1/namespaces/clean-" + id_ + "/deployments/gpuheal-controller")
          ->status,
      404);
  EXPECT_EQ(
      client_->Get("/apis/apps/v1/namespaces/clean-" + id_ + "/deployments/bystander")->status,
      200);
  // Kubernetes' own controllers add their taints, annotations and conditions to these
  // kubelet-less nodes: only gpuheal's must be gone, and the others' written above stay.
  for (const auto& name : {a, b}) {
    const json n = json::parse(client_->Get(kube::NodePath(name))->body);
    std::set<std::string> taints, annotations, conditions;
    for (const auto& t : n["spec"].value("taints", json::array())) taints.insert(t["key"]);
    const json ann = n["metadata"].value("annotations", json::object());
    for (const auto& [k, v] : ann.items()) annotations.insert(k);
    for (const auto& c : n["status"]["conditions"]) conditions.insert(c["type"]);
    for (const auto* keys : {&taints, &annotations})
      for (const auto& k : *keys) EXPECT_NE(k.rfind("gpuheal.io/", 0), 0u) << name << ": " << k;
    EXPECT_TRUE(taints.count("example.com/other")) << name;
    EXPECT_TRUE(annotations.count("example.com/keep")) << name;
    EXPECT_TRUE(conditions.count("SomeoneElsesCondition")) << name;
    EXPECT_FALSE(conditions.count("AcceleratedHardwareReady") || conditions.count("KernelReady"))
        << name;
    EXPECT_EQ(n["metadata"]["labels"].value("gpuheal.io/pool", ""), "p-" + id_) << "labels stay";
    EXPECT_EQ(n["spec"].value("unschedulable", false), name == b)
        << name << ": only gpuheal's own cordon is lifted";
  }
  // A second run has nothing left to do for these nodes.
  auto again = gpuheal::testing::RunGpuheal("cleanup --dry-run --kubeconfig " + kc);
  EXPECT_EQ(again.out.find(a + ":"), std::string::npos) << again.out;
  // Flags that do not go together, and a kubeconfig that is not there.
  EXPECT_EQ(gpuheal::testing::RunGpuheal("cleanup --kubeconfig " + kc + " --stop-namespace x").code,
            2);
  EXPECT_EQ(gpuheal::testing::RunGpuheal("cleanup --kubeconfig /nonexistent").code, 2);
}

// The controller with nothing but the shipped RBAC (deploy/kubernetes/controller.yaml): a token of
// its ServiceAccount takes a node through quarantine, checkpoint, eviction, the NodeRepair record,
// Events and delete-node of a Karpenter NodeClaim, and another through the GPU-level request.
TEST_F(ControllerTest, TheShippedRbacIsEnoughForEveryRung) {
  (void)client_->Create(
      "/api/v1/namespaces",
      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "gpuheal-system"}}}});
  static bool applied = false;
  if (!applied) {
    for (const YAML::Node& doc : YAML::LoadAllFromFile(std::string(GPUHEAL_SOURCE_DIR) +
                                                       "/deploy/kubernetes/controller.yaml")) {
      json obj = kube::YamlToJson(doc);
      if (obj["kind"] == "Deployment")
        continue;  // no kubelet here to run it: the binary runs below
      auto r = client_->Create(*kube::CollectionPath(obj), obj);
      ASSERT_TRUE(r.ok() && (r->status == 201 || r->status == 409))
          << obj["kind"] << ": " << (r ? r->Describe() : "");
    }
    applied = true;
  }
  const std::string kc = ControllerTokenKubeconfig();
  ASSERT_FALSE(kc.empty());
  const std::string a = Node("a"), b = Node("b", {{"gpuheal.io/pool", "rb-" + id_}});
  Pod("rb-" + id_, a);
  KarpenterNodeClaim("rb-" + id_, {{"nodeName", a}});
  const std::string file = dir_ + "/rbac-policy.yaml";
  std::ofstream(file) << "breaker: {share_percent: 100}\ncheckpoint: {window: 1s}\n"
                         "toleration: {AcceleratedHardwareReady: 3s}\nprovider: {name: "
                         "delete-node, replacement_timeout: 0s}\n";
  controllers_.push_back(std::make_unique<AgentProcess>(
      std::vector<std::string>{GPUHEAL_BIN, "controller", "--kubeconfig", kc, "--policy", file,
                               "--listen", "", "--lease-namespace", "gpuheal-system"}));
  ASSERT_TRUE(controllers_.back()->WaitLog(
      [](const json& j) { return j.value("msg", "") == "started leading"; }, 30s));
  SetCondition(a, "False", "NvidiaXID48Error");
  SetGpuFaults(b, CriticalXid45());
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Replaced"; }, 30s))
      << Phase(a) << " " << Message(a);
  EXPECT_TRUE(PodGone("rb-" + id_));
  EXPECT_EQ(client_->Get("/apis/karpenter.sh/v1/nodeclaims/rb-" + id_)->status, 404);
  EXPECT_TRUE(Eventually([&] { return EventReasons(a).count("Quarantined") > 0; }, 5s));
  ASSERT_TRUE(Eventually([&] { return RecoveryRequest(b).is_object(); }, 10s));
  EXPECT_EQ(Phase(b), "Remediating");
  (void)controllers_.back()->WaitLog([](const json&) { return false; },
                                     1s);  // read every line so far
  for (const auto& line : controllers_.back()->logs()) {
    EXPECT_EQ(line.dump().find("403"), std::string::npos) << line.dump();
  }
}

// Crash safety: the controller is SIGKILLed again and again while it takes a node through every
// phase (short lease so a successor takes over within seconds). The repair completes once: one
// record, each pod evicted once, the remediation command run once.
TEST_F(ControllerTest, SigkillAtEveryPhaseCompletesTheRepairExactlyOnce) {
  const std::string a = Node("a");
  for (int i = 0; i < 3; ++i) Pod(fmt::format("k{}-{}", i, id_), a);
  const std::string ran = dir_ + "/ran";
  const std::string policy = fmt::format(
      "checkpoint:\n  window: 2s\ntoleration:\n  AcceleratedHardwareReady: 6s\n"
      "provider:\n  name: exec\n  command: [/bin/sh, -c, \"echo $NODE_NAME $REASON >> {}\"]\n",
      ran);
  StartLeader(policy);
  SetCondition(a, "False", "NvidiaXID48Error");
  std::mt19937 rng(std::random_device{}());
  std::set<std::string> phases_seen_at_kill;
  for (int kill = 0; kill < 8 && Phase(a) != "Replaced"; ++kill) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng() % 900));
    phases_seen_at_kill.insert(Phase(a));
    controllers_.back()->Kill(SIGKILL);
    StartLeader(policy);
  }
  // A controller that misses its renew deadline (1.5 s here, on a loaded machine) stops acting
  // and campaigns again in the same process: nothing restarts it.
  auto done = [&] {
    const std::string p = Phase(a);
    return p == "Replaced" || p == "Failed";
  };
  if (!Eventually(done, 40s)) {
    // What the controllers said, for a failure seen only in CI.
    for (auto& c : controllers_) {
      (void)c->WaitLog([](const json&) { return false; }, 100ms);
      for (const auto& line : c->logs()) std::cerr << line.dump() << "\n";
      std::cerr << "-- next controller --\n";
    }
    for (const auto& rec : Repairs(a)) std::cerr << rec.dump() << "\n";
    FAIL() << "phase " << Phase(a) << ", " << Message(a);
  }
  // A kill between the command's start and its result leaves the outcome unknown: the successor
  // ends the repair Failed rather than run it twice (RemediationOutcomeUnknownIsNeverRunTwice).
  const bool unknown = Phase(a) == "Failed";
  if (unknown) {
    EXPECT_NE(Message(a).find("outcome unknown"), std::string::npos) << Message(a);
  }
  EXPECT_GE(phases_seen_at_kill.size(), 3u) << "kills landed in several phases";
  EXPECT_EQ(Repairs(a).size(), 1u);
  const auto evicted = Status(Repairs(a).back())["evictedPods"];
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(std::count(evicted.begin(), evicted.end(), fmt::format("work/k{}-{}", i, id_)), 1)
        << evicted.dump();
    EXPECT_TRUE(PodGone(fmt::format("k{}-{}", i, id_)));
  }
  EXPECT_TRUE(controllers_.back()->Running()) << "the last controller still runs";
  const auto lines = Lines(ran);
  const int runs = static_cast<int>(lines.size());
  for (const auto& line : lines) EXPECT_EQ(line, a + " NvidiaXID48Error");
  if (unknown) {
    EXPECT_LE(runs, 1) << "the remediation ran at most once";
  } else {
    EXPECT_EQ(runs, 1) << "the remediation ran exactly once";
  }
}

// The controller dies while its remediation command runs: the successor cannot know how the
// command ended. It does not run it again (a second reboot or reimage) and does not wait for
// ever: the repair ends Failed, outcome unknown, and the node stays quarantined.
TEST_F(ControllerTest, RemediationOutcomeUnknownIsNeverRunTwice) {
  const std::string a = Node("a");
  const std::string ran = dir_ + "/ran", started = dir_ + "/started";
  const std::string policy = fmt::format(
      "toleration:\n  AcceleratedHardwareReady: 1s\n"
      "provider:\n  name: exec\n"
      "  command: [/bin/sh, -c, \"echo $NODE_NAME >> {}; sleep 2; echo $NODE_NAME >> {}\"]\n",
      started, ran);
  StartLeader(policy);
  SetCondition(a, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Remediating"; }, 20s))
      << Phase(a) << " " << Message(a);
  // The phase is recorded before the command is spawned: kill only once it runs.
  ASSERT_TRUE(Eventually([&] { return Lines(started).size() == 1; }, 10s));
  controllers_.back()->Kill(SIGKILL);  // the command (its own process group) runs on
  StartController(policy, ShortLease());
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Failed"; }, 20s))
      << Phase(a) << " " << Message(a);
  EXPECT_NE(Message(a).find("outcome unknown"), std::string::npos) << Message(a);
  const json actions = Status(Repairs(a).back())["actions"];
  EXPECT_NE(actions.dump().find("did not run /bin/sh again"), std::string::npos) << actions.dump();
  EXPECT_TRUE(Eventually([&] { return EventReasons(a).count("RemediationFailed") > 0; }, 5s));
  EXPECT_TRUE(HasTaint(a, "gpuheal.io/gpu-fault") && Cordoned(a))
      << "the node stays out of service";
  std::this_thread::sleep_for(3s);  // the first command finishes; nothing runs a second
  EXPECT_EQ(Lines(ran).size(), 1u);
  EXPECT_EQ(Repairs(a).size(), 1u);
}

// A node name of 246 characters (a valid DNS subdomain) is longer than a label value (63) and
// leaves no room for "-<unix ms>" in a record name (253): both are cut and hashed, and the
// repair goes on as for any node.
TEST_F(ControllerTest, ANodeNameTooLongForALabelStillGetsItsRecord) {
  const std::string suffix = std::string(58, 'x') + "." + std::string(58, 'y') + "." +
                             std::string(58, 'z') + "." + std::string(58, 'w');
  const std::string a = Node(suffix);
  ASSERT_EQ(a.size(), 246u);
  StartLeader("probation: 1s\n");
  SetCondition(a, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Quarantined" || Phase(a) == "Drained"; }, 20s))
      << Phase(a) << " " << Message(a);
  const json record = Repairs(a).back();
  EXPECT_EQ(record["spec"]["node"], a);
  EXPECT_LE(record["metadata"]["name"].get<std::string>().size(), 253u);
  EXPECT_EQ(record["metadata"]["labels"]["gpuheal.io/node"].get<std::string>().size(), 63u);
  SetCondition(a, "True", "NvidiaGPUIsReady");
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Recovered"; }, 20s)) << Phase(a);
  EXPECT_FALSE(HasTaint(a, "gpuheal.io/gpu-fault"));
  EXPECT_EQ(Repairs(a).size(), 1u);
}

// Records of finished episodes age out after records.keep; an open episode's record stays.
TEST_F(ControllerTest, FinishedRecordsAreDeletedAfterRecordsKeep) {
  const std::string a = Node("a"), b = Node("b");
  StartLeader("probation: 1s\nattempts: {window: 2s}\nrecords: {keep: 3s}\n");
  SetCondition(a, "False", "NvidiaXID48Error");
  SetCondition(b, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Quarantined" || Phase(a) == "Drained"; }, 20s));
  SetCondition(a, "True", "NvidiaGPUIsReady");
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Recovered"; }, 20s)) << Phase(a);
  const auto recovered = std::chrono::steady_clock::now();
  ASSERT_TRUE(Eventually([&] { return Repairs(a).empty(); }, 20s)) << "deleted after keep";
  EXPECT_GE(std::chrono::steady_clock::now() - recovered, 2s) << "not before keep (3 s)";
  EXPECT_FALSE(Repairs(b).empty()) << "an open episode's record stays";
  EXPECT_TRUE(controllers_.back()->WaitLog(
      [](const json& j) {
        return j.value("msg", "").starts_with("deleted the NodeRepair records") &&
               j.value("count", 0) >= 1;
      },
      5s));
}

// The redfish provider (sushy-tools' emulator as the node's BMC): the reset is sent once, even
// across a controller killed while it waits for the node; the test plays the node coming back
// (its agent reports the fault cleared once the BMC shows it powered on again), and the usual
// probation releases it.
TEST_F(ControllerTest, RedfishPowerCyclesTheNodeOnceAndItsReturnReleasesIt) {
  const std::string a = Node("a");
  const std::string policy = Bmc(a, "s3cret") + "    recovery_timeout: 2m\n";
  StartLeader(policy);
  SetCondition(a, "False", "NvidiaXID79Error");
  ASSERT_TRUE(Eventually([&] { return RecordHas(a, "BMC accepted ForceRestart"); }, 30s))
      << Phase(a) << " " << Message(a);
  const auto reset_at = std::chrono::steady_clock::now();
  EXPECT_EQ(Phase(a), "Remediating");
  EXPECT_NE(Message(a).find("waiting up to 2 min"), std::string::npos) << Message(a);
  EXPECT_TRUE(HasTaint(a, "gpuheal.io/gpu-fault") && Cordoned(a));
  // An operator's `gpuheal bmc` finds the same BMC and credentials through the Node and the
  // Secret, and will not reset a node whose repair is power-cycling it.
  const std::string bmc_args = fmt::format(
      "{} --credentials-secret default/bmc-{} --endpoints-configmap default/bmc-endpoints-{} "
      "--allow-insecure-http --kubeconfig {}",
      a, id_, id_, ControlPlaneEnv::kubeconfig());
  auto st = gpuheal::testing::RunGpuheal("bmc status -o json " + bmc_args, false);
  ASSERT_EQ(st.code, 0) << st.out;
  EXPECT_EQ(json::parse(st.out)["name"], a) << st.out;
  auto refused = gpuheal::testing::RunGpuheal("bmc reset " + bmc_args);
  EXPECT_EQ(refused.code, 1) << refused.out;
  EXPECT_NE(refused.out.find("is Remediating node " + a), std::string::npos) << refused.out;
  // A successor never sends a second reset: the record says one was sent.
  controllers_.back()->Kill(SIGKILL);
  StartController(policy, ShortLease());
  // The node: down, then up again; its agent then reports the GPU healthy. The emulator applies
  // the restart 1 to 11 s after the reset, from a whole second: an Off of a few milliseconds may
  // end before the first look, so On more than 12 s after the reset counts as back too.
  bmc::RedfishClient client(*bmc::ParseEndpoint(bmc_->url()), {"admin", "s3cret"}, {});
  bool was_off = false;
  ASSERT_TRUE(Eventually(
      [&] {
        auto s = client.System();
        if (s && s->power_state == "Off") was_off = true;
        return (was_off || std::chrono::steady_clock::now() - reset_at > 12s) && s &&
               s->power_state == "On";
      },
      30s));
  SetCondition(a, "True", "NvidiaGPUIsReady");
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Recovered"; }, 30s))
      << Phase(a) << " " << Message(a);
  EXPECT_FALSE(HasTaint(a, "gpuheal.io/gpu-fault"));
  EXPECT_FALSE(Cordoned(a));
  EXPECT_EQ(bmc_->Resets(), 1) << bmc_->Log();
  EXPECT_EQ(Repairs(a).size(), 1u);
}

TEST_F(ControllerTest, RedfishAWrongPasswordFailsTheRepairWithoutAReset) {
  const std::string a = Node("a");
  StartLeader(Bmc(a, "not-the-password"));
  SetCondition(a, "False", "NvidiaXID79Error");
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Failed"; }, 30s))
      << Phase(a) << " " << Message(a);
  EXPECT_NE(Message(a).find("BMC reset not sent"), std::string::npos) << Message(a);
  EXPECT_NE(Message(a).find("HTTP 401"), std::string::npos) << Message(a);
  EXPECT_TRUE(Eventually([&] { return EventReasons(a).count("RemediationFailed") > 0; }, 5s));
  EXPECT_TRUE(HasTaint(a, "gpuheal.io/gpu-fault") && Cordoned(a)) << "stays out of service";
  EXPECT_EQ(bmc_->Resets(), 0) << bmc_->Log();
}

TEST_F(ControllerTest, RedfishANodeThatDoesNotComeBackFailsAfterTheRecoveryTimeout) {
  const std::string a = Node("a");
  StartLeader(Bmc(a, "s3cret") + "    recovery_timeout: 4s\n");
  SetCondition(a, "False", "NvidiaXID79Error");
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Failed"; }, 40s))
      << Phase(a) << " " << Message(a);
  EXPECT_NE(Message(a).find("did not come back with its fault cleared within 4 s"),
            std::string::npos)
      << Message(a);
  EXPECT_TRUE(RecordHas(a, "BMC accepted ForceRestart"));
  EXPECT_TRUE(HasTaint(a, "gpuheal.io/gpu-fault") && Cordoned(a));
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(bmc_->Resets(), 1) << bmc_->Log();
}

// The BMC trust boundary (docs/controller.md, "The BMC rung"). Root on a node holds its
// kubelet's credentials, and NodeRestriction lets a kubelet write its own Node's annotations: a
// compromised node points its gpuheal.io/bmc-endpoint at a host of its own and faults its GPU.
// By default the annotation is not read: the reset goes to the administrator's ConfigMap
// endpoint, and the node's stand-in receives no connection.
TEST_F(ControllerTest, RedfishACompromisedNodesOwnEndpointNeverReceivesTheBmcPassword) {
  const std::string a = Node("a");
  gpuheal::testing::ConnectionCounter stand_in;
  const std::string policy = Bmc(a, "s3cret") + "    recovery_timeout: 2m\n";
  AnnotateBmcEndpoint(a, stand_in.url("http"));
  StartLeader(policy);
  SetCondition(a, "False", "NvidiaXID79Error");
  ASSERT_TRUE(Eventually([&] { return RecordHas(a, "BMC accepted ForceRestart"); }, 30s))
      << Phase(a) << " " << Message(a);
  EXPECT_TRUE(RecordHas(a, "from ConfigMap default/bmc-endpoints-" + id_ +
                               ", credentials from Secret default/bmc-" + id_))
      << Status(Repairs(a).back()).dump();
  EXPECT_EQ(stand_in.connections(), 0);
  EXPECT_EQ(bmc_->Resets(), 1) << bmc_->Log();
}

// With the Node's annotation named as a source, an endpoint outside allowed_endpoints is refused
// before any request: the repair fails with the reason and an Event, and a stand-in listening at
// that address receives no connection.
TEST_F(ControllerTest, RedfishAnEndpointOutsideTheAllowListIsNeverContacted) {
  const std::string a = Node("a");
  gpuheal::testing::ConnectionCounter stand_in("127.0.0.1");
  const std::string secret = BmcSecret("bmc-" + id_, "s3cret");
  const std::string endpoints = BmcEndpoints({{"another-node", "https://127.0.0.2"}});
  AnnotateBmcEndpoint(a, stand_in.url("http"));
  StartLeader(fmt::format(
      "toleration: {{AcceleratedHardwareReady: 1s}}\nprovider:\n  name: redfish\n  redfish:\n"
      "    credentials_secret: {}\n    endpoints_configmap: {}\n"
      "    endpoint_sources: [node-annotation, configmap]\n"
      "    allowed_endpoints: [127.0.0.2/32]\n    allow_insecure_http: true\n",
      secret, endpoints));
  ExpectRungRefusedWithoutContact(a, stand_in);
  EXPECT_NE(Message(a).find("127.0.0.1 is outside provider.redfish.allowed_endpoints "
                            "(127.0.0.2/32) (from annotation gpuheal.io/bmc-endpoint)"),
            std::string::npos)
      << Message(a);
}

// Plain http is refused unless the policy allows it, whatever the source: the password would
// cross the network in clear. Nothing is sent.
TEST_F(ControllerTest, RedfishPlainHttpIsRefusedUnlessThePolicyAllowsIt) {
  const std::string a = Node("a");
  gpuheal::testing::ConnectionCounter stand_in("127.0.0.1");
  const std::string secret = BmcSecret("bmc-" + id_, "s3cret");
  const std::string endpoints = BmcEndpoints({{a, stand_in.url("http")}});
  StartLeader(fmt::format(
      "toleration: {{AcceleratedHardwareReady: 1s}}\nprovider:\n  name: redfish\n  redfish:\n"
      "    credentials_secret: {}\n    endpoints_configmap: {}\n"
      "    allowed_endpoints: [127.0.0.1/32]\n",
      secret, endpoints));
  ExpectRungRefusedWithoutContact(a, stand_in);
  EXPECT_NE(Message(a).find("is plain http"), std::string::npos) << Message(a);
  EXPECT_NE(Message(a).find("allow_insecure_http"), std::string::npos) << Message(a);
}

// Credentials per node (or per group of nodes): each ConfigMap entry names its Secret, and each
// node's repair uses its own. The emulator knows two users, one per node; the policy's default
// Secret holds neither, so a reset that used it would be refused (401).
TEST_F(ControllerTest, RedfishEachNodeUsesTheCredentialsItsEntryNames) {
  const std::string a = Node("a"), b = Node("b");
  const std::string uuid_a = "5e0c4a8e-0000-4000-8000-0000000000d1";
  const std::string uuid_b = "5e0c4a8e-0000-4000-8000-0000000000d2";
  std::filesystem::create_directories(dir_ + "/bmc");
  bmc_ = std::make_unique<gpuheal::testing::BmcEmulator>(
      dir_ + "/bmc",
      std::vector<gpuheal::testing::BmcEmulator::System>{{uuid_a, a, "On"}, {uuid_b, b, "On"}},
      std::vector<std::pair<std::string, std::string>>{{"rack-a", "pass-a"}, {"rack-b", "pass-b"}});
  const std::string fleet = BmcSecret("bmc-" + id_, "not-any-users", "fleet");
  BmcSecret("bmc-a-" + id_, "pass-a", "rack-a");
  BmcSecret("bmc-b-" + id_, "pass-b", "rack-b");
  auto entry = [&](const std::string& uuid, const std::string& secret) {
    return fmt::format("endpoint: {}/redfish/v1/Systems/{}\ncredentials_secret: {}\n", bmc_->url(),
                       uuid, secret);
  };
  const std::string endpoints = BmcEndpoints(
      {{a, entry(uuid_a, "bmc-a-" + id_)}, {b, entry(uuid_b, "default/bmc-b-" + id_)}});
  StartLeader(fmt::format(
      "toleration: {{AcceleratedHardwareReady: 1s}}\nbreaker: {{share_percent: 100}}\n"
      "pools: {{max_unavailable_percent: 100}}\nprovider:\n  name: redfish\n  redfish:\n"
      "    credentials_secret: {}\n    endpoints_configmap: {}\n"
      "    allowed_endpoints: [127.0.0.1/32]\n    allow_insecure_http: true\n"
      "    reset_types: [ForceRestart]\n    request_timeout: 2s\n    recovery_timeout: 2m\n",
      fleet, endpoints));
  SetCondition(a, "False", "NvidiaXID79Error");
  SetCondition(b, "False", "NvidiaXID79Error");
  ASSERT_TRUE(Eventually(
      [&] {
        return RecordHas(a, "BMC accepted ForceRestart") &&
               RecordHas(b, "BMC accepted ForceRestart");
      },
      40s))
      << Phase(a) << " " << Message(a) << " | " << Phase(b) << " " << Message(b);
  EXPECT_TRUE(RecordHas(a, "credentials from Secret default/bmc-a-" + id_));
  EXPECT_TRUE(RecordHas(b, "credentials from Secret default/bmc-b-" + id_));
  EXPECT_TRUE(RecordHas(a, "/redfish/v1/Systems/" + uuid_a));
  EXPECT_TRUE(RecordHas(b, "/redfish/v1/Systems/" + uuid_b));
  EXPECT_EQ(bmc_->Resets(), 2) << bmc_->Log();
}

// The repair ladder: a power cycle that does not bring a lost GPU back falls through to the
// node's replacement (its Karpenter NodeClaim deleted); a fatal fault's failing exec command
// falls through to delete-node as well. Each rung is recorded (rung, rungIndex, an action).
// The repair ends when the replacement joins: the test plays the provisioners (Karpenter deletes
// the Node of a deleted NodeClaim and brings up a new NodeClaim and Node; a machine whose Node
// object was deleted is replaced by a new one), and gpuheal claims each replacement
// (gpuheal.io/replaces) and refills the pool's standby (pools.standby: 1) from it.
TEST_F(ControllerTest, RedfishLadderFallsThroughToReplacingTheNode) {
  const std::string pool_b = "lad-" + id_;
  const std::string a = Node("a"), b = Node("b", {{"gpuheal.io/pool", pool_b}});
  // Pool b has its standby: b's replacement goes into service. Pool a has none.
  const std::string sb = Node("b-standby", {{"gpuheal.io/pool", pool_b}});
  ASSERT_TRUE(client_
                  ->Patch(kube::NodePath(sb), kube::PatchType::kMerge,
                          {{"spec",
                            {{"taints",
                              {{{"key", "gpuheal.io/standby"},
                                {"value", "true"},
                                {"effect", "NoSchedule"}}}}}}})
                  ->ok());
  KarpenterNodeClaim("lad-a-" + id_, {{"nodeName", a}});
  const std::string policy = Bmc(a, "s3cret") +
                             "    recovery_timeout: 3s\n"
                             "  command: [/bin/false]\n"
                             "  replacement_timeout: 60s\n"
                             "pools: {standby: 1}\n"
                             "ladder:\n  catastrophic: [{redfish: 2}, delete-node]\n"
                             "  fatal: [exec, delete-node]\n";
  StartLeader(policy);
  SetCondition(a, "False", "NvidiaXID79Error");
  SetCondition(b, "False", "NvidiaXID48Error");
  // Karpenter: the NodeClaim is gone, so is its Node; a new NodeClaim and its Node join.
  ASSERT_TRUE(Eventually(
      [&] { return client_->Get("/apis/karpenter.sh/v1/nodeclaims/lad-a-" + id_)->status == 404; },
      40s))
      << Phase(a) << " " << Message(a);
  ASSERT_TRUE(Eventually([&] { return !GetNode(b).is_object(); }, 40s)) << Message(b);
  EXPECT_EQ(Phase(a), "Remediating") << "deleted, not replaced yet: " << Message(a);
  ASSERT_TRUE(client_->Delete(kube::NodePath(a))->ok());
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(Phase(a), "Remediating") << Message(a);
  EXPECT_NE(Message(a).find("waiting until"), std::string::npos) << Message(a);
  const std::string a2 = Node("a2"), b2 = Node("b2", {{"gpuheal.io/pool", pool_b}});
  KarpenterNodeClaim("lad-a2-" + id_, {{"nodeName", a2}});
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(Phase(a), "Remediating") << "a node that is not Ready has not joined";
  const auto ready = std::chrono::steady_clock::now();
  for (const auto& n : {a2, b2}) {
    ASSERT_TRUE(client_
                    ->Patch(kube::NodePath(n) + "/status", kube::PatchType::kStrategicMerge,
                            {{"status", {{"conditions", {Cond("Ready", "True", "KubeletReady")}}}}})
                    ->ok());
  }
  // Seen on the Node's update, not at the waiting repairs' next look (every 10 s; the last was
  // when a2 and b2 were created, 1.5 s before they turned Ready).
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Replaced" && Phase(b) == "Replaced"; }, 3s))
      << "not seen within 3 s of the nodes turning Ready: " << Phase(a) << " " << Message(a)
      << " | " << Phase(b) << " " << Message(b);
  EXPECT_LT(std::chrono::steady_clock::now() - ready, 3s);
  const json ra = Status(Repairs(a).back()), rb = Status(Repairs(b).back());
  EXPECT_EQ(ra["replacement"], a2);
  EXPECT_EQ(rb["replacement"], b2);
  EXPECT_EQ(GetNode(a2)["metadata"]["annotations"]["gpuheal.io/replaces"],
            Repairs(a).back()["metadata"]["name"]);
  EXPECT_TRUE(HasTaint(a2, "gpuheal.io/standby", "true", "NoSchedule"))
      << "pool a had no standby: its replacement is the standby";
  EXPECT_FALSE(HasTaint(b2, "gpuheal.io/standby")) << "pool b has its standby";
  EXPECT_EQ(ra["rung"], "delete-node");
  EXPECT_EQ(ra["rungIndex"], 2);
  EXPECT_EQ(ra["rungAttempt"], 1);
  const std::string acts = ra["actions"].dump();
  EXPECT_NE(acts.find("BMC accepted ForceRestart"), std::string::npos) << acts;
  EXPECT_NE(acts.find("rung 1 redfish failed"), std::string::npos) << acts;
  EXPECT_NE(acts.find("next: rung 2 redfish"), std::string::npos) << acts;
  EXPECT_NE(acts.find("rung 2 redfish failed"), std::string::npos) << acts;
  EXPECT_NE(acts.find("did not come back with its fault cleared within 3 s"), std::string::npos)
      << acts;
  EXPECT_NE(acts.find("deleted Karpenter NodeClaim lad-a-" + id_), std::string::npos) << acts;
  EXPECT_EQ(client_->Get("/apis/karpenter.sh/v1/nodeclaims/lad-a-" + id_)->status, 404);
  EXPECT_EQ(bmc_->Resets(), 2) << "{redfish: 2}: two power cycles, then the next rung";
  EXPECT_EQ(rb["rung"], "delete-node");
  EXPECT_NE(rb["actions"].dump().find("ran /bin/false: exit 1"), std::string::npos) << rb.dump();
  EXPECT_NE(rb["actions"].dump().find("rung 1 exec failed"), std::string::npos) << rb.dump();
  EXPECT_TRUE(Eventually([&] { return EventReasons(a).count("RemediationFailed") > 0; }, 5s))
      << "the rung's failure is an Event";
  EXPECT_FALSE(EventReasons(a).count("Failed")) << "the repair itself did not fail";
  EXPECT_EQ(Repairs(a).size(), 1u);
}

// The chart's RBAC for provider redfish (rendered with it in test/golden/helm/all-features.yaml)
// is enough for the BMC rung: the Secret and the endpoints ConfigMap it names, read with a
// ServiceAccount token; the BMC found through the ConfigMap (no annotation on the Node).
TEST_F(ControllerTest, RedfishTheChartsRbacIsEnoughForTheBmcRung) {
  (void)client_->Create(
      "/api/v1/namespaces",
      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "gpuheal-system"}}}});
  for (const YAML::Node& doc : YAML::LoadAllFromFile(std::string(GPUHEAL_SOURCE_DIR) +
                                                     "/test/golden/helm/all-features.yaml")) {
    if (!doc.IsMap() || !doc["kind"]) continue;
    json obj = kube::YamlToJson(doc);
    const std::string kind = obj["kind"];
    if (kind != "ServiceAccount" && kind != "Role" && kind != "RoleBinding" &&
        kind != "ClusterRole" && kind != "ClusterRoleBinding")
      continue;
    if (obj["metadata"]["name"].get<std::string>().rfind("gpuheal-controller", 0) != 0) continue;
    const std::string collection = *kube::CollectionPath(obj);
    const std::string path = collection + "/" + obj["metadata"]["name"].get<std::string>();
    auto r = client_->Create(collection, obj);
    ASSERT_TRUE(r.ok() && (r->status == 201 || r->status == 409)) << kind;
    if (r->status == 409) {  // the default-values objects of another test: take the chart's
      auto u = client_->Update(path, [&](json& cur) {
        obj["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"];
        cur = obj;
        return true;
      });
      ASSERT_TRUE(u && u->ok()) << kind << ": " << (u ? u->Describe() : u.error().message);
    }
  }
  const std::string a = Node("a");
  std::filesystem::create_directories(dir_ + "/bmc");
  bmc_ = std::make_unique<gpuheal::testing::BmcEmulator>(
      dir_ + "/bmc",
      std::vector<gpuheal::testing::BmcEmulator::System>{
          {"5e0c4a8e-0000-4000-8000-0000000000c1", a, "On"}},
      "s3cret");
  for (const auto& [kind, body] : std::vector<std::pair<std::string, json>>{
           {"secrets", {{"stringData", {{"username", "admin"}, {"password", "s3cret"}}}}},
           {"configmaps", {{"data", {{a, bmc_->url()}}}}}}) {
    json obj = body;
    obj["apiVersion"] = "v1";
    obj["kind"] = kind == "secrets" ? "Secret" : "ConfigMap";
    obj["metadata"] = {{"name", kind == "secrets" ? "gpuheal-bmc" : "gpuheal-bmc-endpoints"}};
    const std::string collection = "/api/v1/namespaces/gpuheal-system/" + kind;
    (void)client_->Delete(collection + "/" + obj["metadata"]["name"].get<std::string>());
    ASSERT_TRUE(Eventually([&] { return client_->Create(collection, obj)->status == 201; }, 10s))
        << kind;
  }
  const std::string kc = ControllerTokenKubeconfig();
  ASSERT_FALSE(kc.empty());
  const std::string file = dir_ + "/rbac-policy.yaml";
  std::ofstream(file)
      << "breaker: {share_percent: 100}\ntoleration: {AcceleratedHardwareReady: 1s}\n"
         "provider:\n  name: redfish\n  redfish:\n"
         "    credentials_secret: gpuheal-system/gpuheal-bmc\n"
         "    endpoints_configmap: gpuheal-system/gpuheal-bmc-endpoints\n"
         "    allow_insecure_http: true\n"
         "    reset_types: [ForceRestart]\n";
  controllers_.push_back(std::make_unique<AgentProcess>(
      std::vector<std::string>{GPUHEAL_BIN, "controller", "--kubeconfig", kc, "--policy", file,
                               "--listen", "", "--lease-namespace", "gpuheal-system"}));
  ASSERT_TRUE(controllers_.back()->WaitLog(
      [](const json& j) { return j.value("msg", "") == "started leading"; }, 30s));
  SetCondition(a, "False", "NvidiaXID79Error");
  ASSERT_TRUE(Eventually([&] { return RecordHas(a, "BMC accepted ForceRestart"); }, 30s))
      << Phase(a) << " " << Message(a);
  EXPECT_EQ(bmc_->Resets(), 1);
  (void)controllers_.back()->WaitLog([](const json&) { return false; }, 1s);
  for (const auto& line : controllers_.back()->logs()) {
    EXPECT_EQ(line.dump().find("403"), std::string::npos) << line.dump();
  }
}

// An API server outage longer than the renew deadline (a 2 s lease here): the controller stops
// acting and stands for election again in the same process, informer caches kept, and acts again
// afterwards. Last in this binary: the outage restarts the API server of every later test.
TEST_F(ControllerTest, AnApiOutagePastTheRenewDeadlineKeepsTheControllerAndItActsAgain) {
  const std::string a = Node("a"), b = Node("b");
  StartLeader("probation: 1s\n");
  auto& c = *controllers_.back();
  SetCondition(a, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually([&] { return HasTaint(a, "gpuheal.io/gpu-fault"); }, 10s));
  const std::string script =
      "bash " + std::string(GPUHEAL_SOURCE_DIR) + "/scripts/control-plane.sh ";
  ASSERT_EQ(std::system((script + "stop-apiserver --dir " + ControlPlaneEnv::dir()).c_str()), 0);
  // Past the renew deadline: it steps down (and would have exited before).
  const bool lost =
      c.WaitLog([](const json& j) { return j.value("msg", "").starts_with("lost leadership"); },
                20s)
          .has_value();
  ASSERT_EQ(std::system((script + "start-apiserver --dir " + ControlPlaneEnv::dir()).c_str()), 0);
  ASSERT_TRUE(lost) << "the controller never noticed the outage";
  ASSERT_TRUE(c.WaitLog([](const json& j) { return j.value("msg", "") == "started leading"; }, 60s))
      << "leads again";
  EXPECT_TRUE(c.Running()) << "the same process";
  SetCondition(b, "False", "NvidiaXID48Error");
  ASSERT_TRUE(Eventually([&] { return HasTaint(b, "gpuheal.io/gpu-fault") && Cordoned(b); }, 20s))
      << "a new fault is quarantined";
  // The repair from before the outage goes on too: released after its fault clears.
  SetCondition(a, "True", "NvidiaGPUIsReady");
  ASSERT_TRUE(Eventually([&] { return Phase(a) == "Recovered"; }, 20s)) << Phase(a);
  EXPECT_EQ(Repairs(a).size(), 1u);
}

}  // namespace
}  // namespace gpuheal

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new gpuheal::testing::ControlPlaneEnv(true));
  return RUN_ALL_TESTS();
}
