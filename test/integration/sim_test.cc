// `gpuheal sim` against a real control plane with kube-controller-manager and kube-scheduler: its
// nodes register and stay alive as a kubelet's do, the scheduler places a Deployment's GPU pods on
// them and they run, a deleted pod goes after its (capped) grace period and its replacement runs,
// the checkpoint protocol is answered, and the nodes leave with the sim.

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "agent_process.h"
#include "core/time.h"
#include "kube_test_util.h"
#include "run_binary.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using gpuheal::testing::AgentProcess;
using gpuheal::testing::ControlPlaneEnv;
using gpuheal::testing::Eventually;
using nlohmann::json;

class SimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = gpuheal::testing::AdminClient();
    std::random_device rd;
    id_ = fmt::format("{:06x}", rd() & 0xffffff);
    (void)client_->Create(
        "/api/v1/namespaces",
        {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "work"}}}});
  }
  json Get(const std::string& path) {
    auto r = client_->Get(path);
    return r && r->ok() ? json::parse(r->body) : json();
  }
  // The node's AcceleratedHardwareReady condition ({} until the agent has written it).
  json AcceleratedHardwareReady(const std::string& node) {
    const json n = Get(kube::NodePath(node));
    if (!n.is_object() || !n.contains("status")) return json::object();
    for (const auto& c : n["status"].value("conditions", json::array())) {
      if (c["type"] == "AcceleratedHardwareReady") return c;
    }
    return json::object();
  }
  std::vector<json> Pods(const std::string& app) {
    std::vector<json> out;
    const json list = Get(kube::PodPath("work") + "?labelSelector=app%3D" + app);
    if (list.is_object()) {
      for (const auto& p : list["items"]) out.push_back(p);
    }
    return out;
  }
  std::unique_ptr<kube::Client> client_;
  std::string id_;
};

TEST_F(SimTest, NodesLiveLikeKubeletsAndRunWhatTheSchedulerPlaces) {
  const std::string prefix = "s" + id_;
  AgentProcess sim({GPUHEAL_BIN, "sim", "--kubeconfig", ControlPlaneEnv::kubeconfig(), "--nodes",
                    "4", "--pools", "2", "--standby", "1", "--prefix", prefix, "--lease-period",
                    "1s", "--checkpoint-delay", "300ms", "--max-termination", "1s"});
  auto started = sim.WaitEvent([](const json& j) { return j.value("sim", "") == "started"; }, 60s);
  ASSERT_TRUE(started);
  ASSERT_EQ((*started)["nodes"].size(), 6u) << "4 in service + 1 standby in each of 2 pools";

  std::set<std::string> standby, in_service;
  for (const auto& n : (*started)["nodes"])
    (n["standby"].get<bool>() ? standby : in_service).insert(n["name"].get<std::string>());
  for (const auto& n : (*started)["nodes"]) {
    const json node = Get(kube::NodePath(n["name"]));
    ASSERT_TRUE(node.is_object()) << n;
    EXPECT_EQ(node["metadata"]["labels"]["gpuheal.io/pool"], n["pool"]);
    EXPECT_EQ(node["status"]["capacity"]["nvidia.com/gpu"], "8");
    EXPECT_EQ(node["status"]["addresses"][0]["address"], n["ip"]);
    EXPECT_FALSE(node["status"]["nodeInfo"].value("kubeletVersion", "").empty());
    bool ready = false, tainted = false;
    for (const auto& c : node["status"]["conditions"])
      ready |= c["type"] == "Ready" && c["status"] == "True";
    for (const auto& t : node["spec"].value("taints", json::array()))
      tainted |= t["key"] == "gpuheal.io/standby";
    EXPECT_TRUE(ready) << node["status"]["conditions"];
    EXPECT_EQ(tainted, n["standby"].get<bool>());
  }
  // The node Lease is renewed, as kubelet's is (here every second).
  const std::string any = *in_service.begin();
  const std::string lease_path = kube::LeasePath("kube-node-lease", any);
  const std::string t0 = Get(lease_path)["spec"].value("renewTime", "");
  ASSERT_FALSE(t0.empty());
  ASSERT_TRUE(Eventually([&] { return Get(lease_path)["spec"].value("renewTime", "") > t0; }, 5s));

  // A Deployment of GPU pods: the scheduler places them on the sim's nodes (never the standby
  // ones), and they run.
  const std::string app = "sim-" + id_;
  const json container = {{"name", "trainer"},
                          {"image", "registry.invalid/trainer:1"},
                          {"resources", {{"limits", {{"nvidia.com/gpu", "2"}}}}}};
  const json pod_spec = {{"nodeSelector", {{"gpuheal.io/sim", "true"}}},
                         {"containers", json::array({container})}};
  const json labels = {{"app", app}};
  json deploy = {{"apiVersion", "apps/v1"},
                 {"kind", "Deployment"},
                 {"metadata", {{"name", app}, {"namespace", "work"}}}};
  deploy["spec"] = {{"replicas", 4},
                    {"selector", {{"matchLabels", labels}}},
                    {"template", {{"metadata", {{"labels", labels}}}, {"spec", pod_spec}}}};
  ASSERT_EQ(client_->Create("/apis/apps/v1/namespaces/work/deployments", deploy)->status, 201);
  auto all_running = [&] {
    auto pods = Pods(app);
    if (pods.size() != 4) return false;
    for (const auto& p : pods) {
      if (p["status"].value("phase", "") != "Running" || p["status"].value("podIP", "").empty())
        return false;
    }
    return true;
  };
  if (!Eventually(all_running, 60s)) {
    (void)sim.WaitLog([](const json&) { return false; }, 100ms);
    for (const auto& l : sim.logs())
      std::fprintf(stderr, "sim: %s\n", l.dump().substr(0, 400).c_str());
    FAIL() << json(Pods(app)).dump().substr(0, 2000);
  }
  for (const auto& p : Pods(app)) {
    EXPECT_TRUE(in_service.count(p["spec"]["nodeName"].get<std::string>()))
        << p["spec"]["nodeName"];
    EXPECT_EQ(p["status"]["containerStatuses"][0]["name"], "trainer");
    EXPECT_TRUE(p["status"]["containerStatuses"][0]["ready"].get<bool>());
  }

  // The checkpoint protocol: asked, the workload answers after its delay.
  const std::string first = Pods(app)[0]["metadata"]["name"];
  ASSERT_TRUE(client_
                  ->Patch(kube::PodPath("work", first), kube::PatchType::kMerge,
                          {{"metadata",
                            {{"annotations",
                              {{"gpuheal.io/checkpoint-requested",
                                kube::RfcTime(std::chrono::system_clock::now())}}}}}})
                  ->ok());
  ASSERT_TRUE(Eventually(
      [&] {
        return Get(kube::PodPath("work", first))["metadata"]
            .value("annotations", json::object())
            .contains("gpuheal.io/checkpoint-done");
      },
      5s));

  // A deleted pod (grace 30 s, capped at 1 s here) goes, and its replacement runs.
  const auto d0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(client_->Delete(kube::PodPath("work", first))->ok());
  ASSERT_TRUE(
      Eventually([&] { return client_->Get(kube::PodPath("work", first))->status == 404; }, 10s));
  EXPECT_GE(std::chrono::steady_clock::now() - d0, 900ms)
      << "the containers had their (capped) grace period";
  ASSERT_TRUE(Eventually(all_running, 30s));

  // The sim leaves: its nodes go with it.
  EXPECT_EQ(sim.Kill(SIGTERM), 0);
  for (const auto& n : (*started)["nodes"]) {
    EXPECT_TRUE(
        Eventually([&] { return client_->Get(kube::NodePath(n["name"]))->status == 404; }, 10s))
        << n;
  }
  (void)client_->Delete("/apis/apps/v1/namespaces/work/deployments/" + app);
}

// With --agents, each node has a gpuheal agent reading its own simulated kernel log: a fault
// injected into one node's log turns that node's condition False, and no other node's.
TEST_F(SimTest, AgentsReadEachNodesOwnKernelLog) {
  const std::string prefix = "a" + id_;
  char tmpl[] = "/tmp/gpuheal-sim-it-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  AgentProcess sim({GPUHEAL_BIN, "sim", "--kubeconfig", ControlPlaneEnv::kubeconfig(), "--nodes",
                    "2", "--pools", "1", "--standby", "0", "--prefix", prefix, "--agents",
                    "--state-dir", dir});
  auto started = sim.WaitEvent([](const json& j) { return j.value("sim", "") == "started"; }, 60s);
  ASSERT_TRUE(started);
  const std::string hit = (*started)["nodes"][0]["name"], other = (*started)["nodes"][1]["name"];
  auto condition = [&](const std::string& node) { return AcceleratedHardwareReady(node); };
  ASSERT_TRUE(Eventually(
      [&] {
        return condition(hit).value("status", "") == "True" &&
               condition(other).value("status", "") == "True";
      },
      20s))
      << "each agent reports its node healthy";
  auto run = gpuheal::testing::RunGpuheal(
      "inject --node " + hit + " --sim-dir " + dir + " --xid 79 --pci 0000:3b:00", true);
  ASSERT_EQ(run.code, 0) << run.out;
  ASSERT_TRUE(
      Eventually([&] { return condition(hit).value("reason", "") == "NvidiaXID79Error"; }, 10s))
      << condition(hit);
  EXPECT_EQ(condition(hit)["status"], "False");
  EXPECT_EQ(condition(other)["status"], "True");
  std::ifstream faults(dir + "/" + hit + "/faults.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(faults, line));
  EXPECT_EQ(json::parse(line).value("xid", 0), 79) << line;
  EXPECT_FALSE(json::parse(line).contains("injected"))
      << "the sim plays the kernel: its records are trusted";
  // A node the sim does not run: a clear error.
  auto bad = gpuheal::testing::RunGpuheal(
      "inject --node nope-" + id_ + " --sim-dir " + dir + " --xid 79", true);
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("no agent reads this node's kernel log"), std::string::npos) << bad.out;
  EXPECT_EQ(sim.Kill(SIGTERM), 0);
  std::filesystem::remove_all(dir);
}

// --process-runtime: a pod annotated sim.gpuheal.io/runtime=process runs its container as a
// process of this host (tools/workload here), at a pod IP of its own on the loopback interface,
// with its env's fieldRefs and $(VAR)s, the downward API's annotations, its readiness probe, its
// answer to gpuheal's checkpoint request relayed as the pod's annotation, its exit code in the
// pod's status, and SIGTERM within the grace period at deletion. Root.
TEST_F(SimTest, ProcessRuntimeRunsThePodsContainersAsProcesses) {
  if (geteuid() != 0) GTEST_SKIP() << "pod addresses on the loopback interface need root";
  const std::string prefix = "p" + id_;
  char tmpl[] = "/tmp/gpuheal-sim-it-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  AgentProcess sim({GPUHEAL_BIN, "sim", "--kubeconfig", ControlPlaneEnv::kubeconfig(), "--nodes",
                    "1", "--pools", "1", "--standby", "0", "--prefix", prefix, "--process-runtime",
                    "--state-dir", dir, "--max-termination", "3s"});
  auto started = sim.WaitEvent([](const json& j) { return j.value("sim", "") == "started"; }, 60s);
  ASSERT_TRUE(started);
  const std::string node = (*started)["nodes"][0]["name"];
  auto pod = [&](const std::string& name, json container, const std::string& restart = "Never") {
    json p = {{"apiVersion", "v1"}, {"kind", "Pod"}};
    p["metadata"] = {{"name", name},
                     {"namespace", "work"},
                     {"annotations", {{"sim.gpuheal.io/runtime", "process"}}}};
    container["env"] = json::array(
        {{{"name", "POD_IP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}},
         {{"name", "POD_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}}});
    p["spec"] = {{"nodeName", node},
                 {"restartPolicy", restart},
                 {"terminationGracePeriodSeconds", 30},
                 {"containers", json::array({container})}};
    // (403 until the namespace's default ServiceAccount exists.)
    long status = 0;
    Eventually(
        [&] {
          auto r = client_->Create(kube::PodPath("work"), p);
          status = r ? r->status : 0;
          return status != 403;
        },
        20s);
    return status;
  };
  const std::string serve = "serve-" + id_, train = "train-" + id_, fails = "fails-" + id_;
  json sc = {{"name", "serve"},
             {"image", "gpuheal-workload"},
             {"command", {GPUHEAL_WORKLOAD_BIN, "serve", "--listen", "$(POD_IP):8080"}},
             {"ports", {{{"name", "http"}, {"containerPort", 8080}}}},
             {"readinessProbe", {{"httpGet", {{"path", "/"}, {"port", "http"}}}}}};
  ASSERT_EQ(pod(serve, sc), 201);
  json tc = {
      {"name", "train"},
      {"image", "gpuheal-workload"},
      {"command",
       {GPUHEAL_WORKLOAD_BIN, "train", "--dir", dir + "/ckpt", "--step", "20ms", "--podinfo",
        "$(SIM_SANDBOX)/podinfo/annotations", "--answer", "$(SIM_SANDBOX)/checkpoint-done"}}};
  ASSERT_EQ(pod(train, tc), 201);
  json fc = {{"name", "fails"}, {"image", "sh"}, {"command", {"/bin/sh", "-c", "exit 3"}}};
  ASSERT_EQ(pod(fails, fc), 201);

  // Running and Ready (after its readiness probe), at an address of its own that answers.
  auto status = [&](const std::string& name) { return Get(kube::PodPath("work", name))["status"]; };
  ASSERT_TRUE(Eventually(
      [&] {
        const json st = status(serve);
        if (!st.is_object() || st.value("phase", "") != "Running") return false;
        for (const auto& c : st.value("conditions", json::array()))
          if (c["type"] == "Ready") return c["status"] == "True";
        return false;
      },
      20s))
      << status(serve).dump();
  const std::string ip = status(serve).value("podIP", "");
  EXPECT_TRUE(ip.starts_with("198.18.")) << ip;
  EXPECT_TRUE(status(serve)["containerStatuses"][0]["containerID"].get<std::string>().starts_with(
      "process://"));
  httplib::Client http(ip, 8080);
  auto answer = http.Get("/");
  ASSERT_TRUE(answer) << "nothing answered at " << ip << ":8080";
  EXPECT_EQ(answer->status, 200);

  // Probed on: a server whose GPU is lost (SIGUSR1) fails its probes, is not Ready after three
  // (the Service's endpoint goes), and its liveness probe has it restarted: the new process
  // (its GPU not lost) passes them and the pod is Ready again.
  const std::string live = "live-" + id_;
  json lc = sc;
  lc["readinessProbe"]["periodSeconds"] = 1;
  lc["livenessProbe"] = {{"httpGet", {{"path", "/"}, {"port", "http"}}},
                         {"periodSeconds", 1},
                         {"failureThreshold", 4}};
  ASSERT_EQ(pod(live, lc, "Always"), 201);
  auto ready = [&](const std::string& name) {
    for (const auto& c : status(name).value("conditions", json::array()))
      if (c["type"] == "Ready") return c["status"] == "True";
    return false;
  };
  ASSERT_TRUE(Eventually([&] { return ready(live); }, 20s)) << status(live).dump();
  const std::string first = status(live)["containerStatuses"][0]["containerID"];
  ASSERT_EQ(kill(std::stoi(first.substr(std::string("process://").size())), SIGUSR1), 0);
  const auto lost = std::chrono::steady_clock::now();
  EXPECT_TRUE(Eventually([&] { return !ready(live); }, 10s)) << status(live).dump();
  const auto unready_after = std::chrono::steady_clock::now() - lost;
  EXPECT_GE(unready_after, 2s) << "three failures a second apart";
  EXPECT_LE(unready_after, 5s);
  EXPECT_TRUE(Eventually(
      [&] {
        const json st = status(live);
        return st["containerStatuses"][0].value("restartCount", 0) == 1 && ready(live);
      },
      20s))
      << status(live).dump();
  EXPECT_NE(status(live)["containerStatuses"][0]["containerID"], first);

  // The checkpoint protocol, through the downward API's file and the workload's answer.
  ASSERT_TRUE(Eventually([&] { return status(train).value("phase", "") == "Running"; }, 20s));
  json ann = {{"metadata", {{"annotations", {{"gpuheal.io/checkpoint-requested", "now"}}}}}};
  ASSERT_TRUE(client_->Patch(kube::PodPath("work", train), kube::PatchType::kMerge, ann)->ok());
  EXPECT_TRUE(Eventually(
      [&] {
        return Get(kube::PodPath("work", train))["metadata"]["annotations"].contains(
            "gpuheal.io/checkpoint-done");
      },
      10s))
      << "the workload's answer, relayed by the sim";

  // A process that ends on its own: its exit code in the pod's status, the pod Failed.
  ASSERT_TRUE(Eventually([&] { return status(fails).value("phase", "") == "Failed"; }, 20s))
      << status(fails).dump();
  EXPECT_EQ(status(fails)["containerStatuses"][0]["state"]["terminated"]["exitCode"], 3);

  // Deleted: SIGTERM (serve stops and says so), then the pod object goes, within the grace.
  ASSERT_TRUE(client_->Delete(kube::PodPath("work", serve))->ok());
  EXPECT_TRUE(Eventually([&] { return !client_->Get(kube::PodPath("work", serve))->ok(); }, 10s));
  std::ifstream log(dir + "/pods/work_" + serve + "/serve.log");
  const std::string out((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(out.find("\"event\":\"exit\""), std::string::npos) << "it got SIGTERM: " << out;
  auto local = [&] {  // the pod's address is one of this host's
    ifaddrs* all = nullptr;
    if (getifaddrs(&all) != 0) return false;
    bool found = false;
    for (ifaddrs* a = all; a; a = a->ifa_next) {
      if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
      char text[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
      found |= ip == text;
    }
    freeifaddrs(all);
    return found;
  };
  EXPECT_TRUE(Eventually([&] { return !local(); }, 5s)) << "its address is gone with it";
  for (const auto& n : {train, fails, live})
    (void)client_->Delete(kube::PodPath("work", n), "", "", 0);
  EXPECT_EQ(sim.Kill(SIGTERM), 0);
  std::filesystem::remove_all(dir);
}

// --adopt: a Node that someone else registered (as Karpenter's kwok provider does: the object
// only, no kubelet) and that matches the selector gets the sim as its kubelet from when it
// appears — Ready, a Lease, an agent writing its conditions, its pods Running — and one that
// does not match is left alone; deleted by its provisioner, it is let go (no recreation).
TEST_F(SimTest, AdoptsTheNodesAProvisionerRegisters) {
  const std::string prefix = "p" + id_;
  char tmpl[] = "/tmp/gpuheal-sim-it-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  AgentProcess sim({GPUHEAL_BIN, "sim", "--kubeconfig", ControlPlaneEnv::kubeconfig(), "--nodes",
                    "0", "--pools", "1", "--standby", "0", "--prefix", prefix, "--agents",
                    "--state-dir", dir, "--adopt", "provisioner.test/pool=" + prefix});
  ASSERT_TRUE(sim.WaitEvent([](const json& j) { return j.value("sim", "") == "started"; }, 60s));
  auto node = [&](const std::string& name, const std::string& pool) {
    return json{
        {"apiVersion", "v1"},
        {"kind", "Node"},
        {"metadata",
         {{"name", name},
          {"labels", {{"provisioner.test/pool", pool}, {"gpuheal.io/pool", prefix + "-gpu"}}}}},
        {"spec", {{"providerID", "test://" + name}}}};
  };
  const std::string mine = prefix + "-launched", other = prefix + "-elsewhere";
  ASSERT_TRUE(client_->Create(kube::NodePath(), node(mine, prefix))->ok());
  ASSERT_TRUE(client_->Create(kube::NodePath(), node(other, "another"))->ok());
  auto ready = [&](const std::string& name) {
    for (const auto& c : Get(kube::NodePath(name))["status"].value("conditions", json::array()))
      if (c["type"] == "Ready") return c.value("status", "") == "True";
    return false;
  };
  ASSERT_TRUE(Eventually([&] { return ready(mine); }, 20s)) << Get(kube::NodePath(mine)).dump();
  EXPECT_TRUE(
      Eventually([&] { return AcceleratedHardwareReady(mine).value("status", "") == "True"; }, 20s))
      << "its agent reports it";
  EXPECT_TRUE(Get(kube::LeasePath("kube-node-lease", mine)).is_object()) << "its Lease";
  EXPECT_FALSE(ready(other)) << "a node the selector does not match is not adopted";
  EXPECT_EQ(Get(kube::NodePath(mine))["metadata"]["labels"].value("gpuheal.io/pool", ""),
            prefix + "-gpu");
  // A pod bound to it runs.
  json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", prefix + "-pod"}, {"namespace", "work"}}},
      {"spec",
       {{"nodeName", mine}, {"containers", json::array({{{"name", "c"}, {"image", "pause"}}})}}}};
  // (The namespace's default ServiceAccount may not exist yet: admission refuses the pod then.)
  std::string refused;
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = client_->Create(kube::PodPath("work"), pod);
        refused = r ? r->Describe() : r.error().message;
        return r && (r->ok() || r->status == 409);
      },
      20s))
      << refused;
  EXPECT_TRUE(Eventually(
      [&] {
        return Get(kube::PodPath("work", prefix + "-pod"))["status"].value("phase", "") ==
               "Running";
      },
      20s));
  (void)client_->Delete(kube::PodPath("work", prefix + "-pod"), "", "", 0);
  // Its provisioner deletes it: it stays deleted.
  ASSERT_TRUE(client_->Delete(kube::NodePath(mine))->ok());
  std::this_thread::sleep_for(2s);
  auto gone = client_->Get(kube::NodePath(mine));
  EXPECT_TRUE(gone && gone->status == 404);
  (void)client_->Delete(kube::NodePath(other));
  EXPECT_EQ(sim.Kill(SIGTERM), 0);
  std::filesystem::remove_all(dir);
}

// --real-kmsg: one node's agent reads the machine's /dev/kmsg, from its end, acting on injected
// records, so a plain `gpuheal inject` faults that node through the real kernel and no other.
TEST_F(SimTest, RealKmsgNodeIsFaultedThroughTheRealKernel) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to read and write /dev/kmsg";
  const std::string prefix = "k" + id_;
  char tmpl[] = "/tmp/gpuheal-sim-it-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string hit = prefix + "-0-0", other = prefix + "-0-1";
  // Already in the buffer before the sim starts: not this run's fault, never reported.
  std::random_device rd;
  const std::string pci = fmt::format("{:04x}:{:02x}:00", 0x1000 + rd() % 0xe000, rd() % 256);
  ASSERT_EQ(gpuheal::testing::RunGpuheal("inject --xid 48 --pci " + pci, true).code, 0);
  AgentProcess sim({GPUHEAL_BIN, "sim", "--kubeconfig", ControlPlaneEnv::kubeconfig(), "--nodes",
                    "2", "--pools", "1", "--standby", "0", "--prefix", prefix, "--agents",
                    "--state-dir", dir, "--real-kmsg", hit});
  ASSERT_TRUE(sim.WaitEvent([](const json& j) { return j.value("sim", "") == "started"; }, 60s));
  auto condition = [&](const std::string& node) { return AcceleratedHardwareReady(node); };
  ASSERT_TRUE(Eventually(
      [&] {
        return condition(hit).value("status", "") == "True" &&
               condition(other).value("status", "") == "True";
      },
      20s))
      << "the fault already in the buffer is not reported: " << condition(hit);
  auto run = gpuheal::testing::RunGpuheal("inject --xid 79 --pci " + pci, true);
  ASSERT_EQ(run.code, 0) << run.out;
  ASSERT_TRUE(
      Eventually([&] { return condition(hit).value("reason", "") == "NvidiaXID79Error"; }, 10s))
      << condition(hit);
  EXPECT_EQ(condition(other)["status"], "True");
  std::ifstream faults(dir + "/" + hit + "/faults.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(faults, line));
  EXPECT_EQ(json::parse(line).value("xid", 0), 79) << line;
  EXPECT_EQ(json::parse(line).value("injected", false), true)
      << "written from user space, accepted";
  EXPECT_EQ(sim.Kill(SIGTERM), 0);
  std::filesystem::remove_all(dir);
}

TEST_F(SimTest, BadFlagsAreUsageErrors) {
  AgentProcess a({GPUHEAL_BIN, "sim", "--kubeconfig", ControlPlaneEnv::kubeconfig(),
                  "--lease-period", "soon"});
  EXPECT_EQ(a.Kill(0), 2);
  AgentProcess b({GPUHEAL_BIN, "sim", "--kubeconfig", "/nonexistent"});
  EXPECT_EQ(b.Kill(0), 2);
  AgentProcess c(
      {GPUHEAL_BIN, "sim", "--kubeconfig", ControlPlaneEnv::kubeconfig(), "--real-kmsg", "x-0-0"});
  EXPECT_EQ(c.Kill(0), 2) << "--real-kmsg needs --agents";
  AgentProcess d({GPUHEAL_BIN, "sim", "--kubeconfig", ControlPlaneEnv::kubeconfig(), "--agents",
                  "--nodes", "1", "--prefix", "q" + id_, "--real-kmsg", "nope-0-0", "--state-dir",
                  "/tmp/gpuheal-sim-it-bad"});
  EXPECT_EQ(d.Kill(0), 2) << "--real-kmsg names no node of the sim";
  std::filesystem::remove_all("/tmp/gpuheal-sim-it-bad");
}

}  // namespace
}  // namespace gpuheal

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new gpuheal::testing::ControlPlaneEnv(true));
  return RUN_ALL_TESTS();
}
