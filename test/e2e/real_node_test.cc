// End to end on a real node: this machine as a Kubernetes node (containerd, runc, CNI, a kubelet
// built from the control plane's own Kubernetes module; scripts/real-node.sh) and gpuheal
// installed with its Helm chart from the image scripts/build-image.sh built. The tests run in
// order and build on each other:
//   1. the chart lints clean and renders exactly the checked-in manifests (golden);
//   2. `helm install`: the agent runs on the real node, the controller becomes Ready;
//   3. an Xid 79 written to the host's /dev/kmsg: condition, taint, the kubelet stops the
//      workload, its replacement runs elsewhere (simulated nodes); the timeline is printed;
//   2b. a real Prometheus (scripts/build-peer.sh) finds the agent and the controller through the
//      chart's scrape config (Kubernetes service discovery against this API server);
//   3b. every metric docs/metrics.md and docs/controller.md list is in that Prometheus with its
//      type, every dashboard panel's query returns data, and the quarantine alert fires;
//   4. `helm upgrade` with a changed config reaches the agent; the node's own kubelet cannot
//      write the Node keys that steer the controller (the chart's admission policy);
//   5. `helm uninstall` leaves no gpuheal taint, annotation, cordon or condition on any node;
//   6. the agent as a host service (deploy/systemd/gpuheal-agent-kubelet.service's command line)
//      with the kubelet's own credentials: it reports its Node; writing another Node is refused;
//   7. the node's containerd frozen and restarted: ContainerRuntimeReady False and back;
//   8. a device plugin's GPUs (the NVML double's, advertised to the kubelet): a critical fault of
//      one GPU evicts just the pod the kubelet's PodResources names, the GPU is reset, the node is
//      never tainted or cordoned.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "apply_manifest.h"
#include "kube/client.h"
#include "kube/objects.h"
#include "local_control_plane.h"
#include "nvml_scenario.h"
#include "run_binary.h"

extern char** environ;

namespace gpuheal::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kNs = "gpuheal-system";
const std::string kPci = "0000:3b:00";

void StopPrometheus();  // the Prometheus of test 2b, if it runs

class RealNodeEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "a real node needs root (containerd, cgroups, /dev/kmsg)";
    std::string log;
    cp_ = LocalControlPlane::Up(true, {}, &log, "--with-node");
    ASSERT_TRUE(cp_) << "control plane with a real node did not come up:\n" << log;
  }
  void TearDown() override {
    StopPrometheus();
    cp_.reset();
  }
  static LocalControlPlane* cp() { return cp_.get(); }

 private:
  static inline std::unique_ptr<LocalControlPlane> cp_;
};

std::unique_ptr<kube::Client> ClientFrom(const std::string& kubeconfig) {
  auto cfg = kube::LoadKubeconfig(kubeconfig);
  EXPECT_TRUE(cfg.ok()) << cfg.error().message;
  cfg->timeout = 10s;
  auto c = kube::Client::Create(std::move(*cfg), kube::RetryPolicy{2, 20ms, 200ms});
  EXPECT_TRUE(c.ok());
  return std::move(*c);
}

bool Eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout,
                std::chrono::milliseconds every = 50ms) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(every);
  }
  return cond();
}

// A child process (gpuheal sim, the host-service agent) killed with SIGTERM when it goes.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv, const std::string& log) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Child() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(50ms);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  bool running() const { return pid_ > 0 && kill(pid_, 0) == 0; }

 private:
  pid_t pid_ = -1;
};

// A free TCP port on loopback (the kernel's choice, released at once for the child to bind).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// The real Prometheus of tests 2b and 3b, started once and kept until the tier ends.
struct PrometheusPeer {
  std::unique_ptr<Child> process;
  std::string url;  // http://127.0.0.1:PORT

  // GET url + path with URL-encoded query parameters; the decoded JSON body (null on failure).
  json Api(const std::string& path, const std::vector<std::pair<std::string, std::string>>& q) {
    std::string cmd = "curl -sS --max-time 10 --get";
    for (const auto& [k, v] : q) {
      std::string quoted;
      for (char c : v) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      cmd += " --data-urlencode '" + k + "=" + quoted + "'";
    }
    auto r = RunShell(cmd + " '" + url + path + "' 2>&1");
    if (r.code != 0) return json();
    return json::parse(r.out, nullptr, false);
  }
};
PrometheusPeer& Prometheus() {
  static PrometheusPeer p;
  return p;
}

void StopPrometheus() { Prometheus().process.reset(); }

// The metrics a documentation table lists: name -> (type, labelled).
std::map<std::string, std::pair<std::string, bool>> DocumentedMetrics(const std::string& doc) {
  std::map<std::string, std::pair<std::string, bool>> out;
  const std::regex row(
      R"(^\|\s*`(gpuheal_[a-z_]+)`\s*\|\s*(counter|gauge|histogram)\s*\|([^|]*)\|)");
  std::ifstream in(std::string(GPUHEAL_SOURCE_DIR) + doc);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row))
      out[m[1]] = {m[2], std::string(m[3]).find('`') != std::string::npos};
  }
  return out;
}

class RealNode : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RealNodeEnv::cp()) GTEST_SKIP() << "no real node";
    cp_ = RealNodeEnv::cp();
    dir_ = cp_->dir();
    node_ = cp_->Printed("NODE");
    helm_ = cp_->Printed("HELM");
    pause_ = cp_->Printed("PAUSE_IMAGE");
    ASSERT_FALSE(node_.empty());
    ASSERT_FALSE(helm_.empty());
    ASSERT_FALSE(pause_.empty());
    client_ = ClientFrom(cp_->kubeconfig());
    const std::string server = client_->config().server;
    api_port_ = server.substr(server.rfind(':') + 1);
    WriteTestValues();
  }

  // Runs helm with this control plane's kubeconfig and private Helm directories.
  RunResult Helm(const std::string& args) {
    return RunShell("KUBECONFIG=" + cp_->kubeconfig() + " HELM_CACHE_HOME=" + dir_ +
                    "/helm HELM_CONFIG_HOME=" + dir_ + "/helm HELM_DATA_HOME=" + dir_ + "/helm " +
                    helm_ + " " + args + " 2>&1");
  }
  std::string Chart() const { return std::string(GPUHEAL_SOURCE_DIR) + "/deploy/helm/gpuheal"; }

  // The values a test bed needs: the local image, injected faults accepted, and the API server
  // on loopback (no kube-proxy here) from the host's network. The controller runs on the real
  // node too, so it tolerates gpuheal's taint.
  void WriteTestValues() {
    std::ofstream(dir_ + "/values-test.yaml")
        << "image: {repository: gpuheal, tag: dev, pullPolicy: Never}\n"
        << "kubernetesAPI: {host: 127.0.0.1, port: \"" << api_port_
        << "\"}\n"
        // A fresh state directory, and only kernel records from now on: what other tests wrote
        // into this machine's kernel log earlier is not this node's fault.
        << "agent:\n  acceptInjected: true\n  hostNetwork: true\n"
        << "  stateHostPath: " << dir_ << "/agent-state\n"
        << "  config: {kmsg_start: end}\n"
        << "metrics: {scrapeConfig: {enabled: true, interval: 1s}}\n"
        << "controller:\n  replicas: 1\n  hostNetwork: true\n"
        << "  nodeSelector: {kubernetes.io/hostname: " << node_ << "}\n"
        << "  tolerations: [{key: gpuheal.io/gpu-fault, operator: Exists}]\n"
        << "  policy:\n    checkpoint: {window: 1s, catastrophic_window: 1s}\n"
        << "    probation: 1h\n";
  }

  json Get(const std::string& path) {
    auto r = client_->Get(path);
    if (!r || !r->ok()) return json();
    return json::parse(r->body, nullptr, false);
  }
  json NodeObj(const std::string& name) { return Get(kube::NodePath(name)); }
  json Pods(const std::string& ns, const std::string& selector) {
    return Get(kube::PodPath(ns) + "?labelSelector=" + kube::UrlEncode(selector))
        .value("items", json::array());
  }
  static bool PodReady(const json& pod) {
    if (pod["status"].value("phase", "") != "Running") return false;
    if (pod["metadata"].contains("deletionTimestamp")) return false;
    for (const auto& c : pod["status"].value("conditions", json::array()))
      if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
    return false;
  }
  std::string ConditionStatus(const json& node, const std::string& type) {
    for (const auto& c : node["status"].value("conditions", json::array()))
      if (c.value("type", "") == type) return c.value("status", "");
    return "";
  }
  std::string Describe(const std::string& ns, const std::string& selector) {
    std::string out;
    for (const auto& p : Pods(ns, selector))
      out += p["metadata"].value("name", "") + " on " + p["spec"].value("nodeName", "") + ": " +
             p["status"].dump() + "\n";
    return out;
  }
  // Running task ids in the node's containerd.
  std::string Tasks() {
    return RunShell("ctr --address " + dir_ + "/node/containerd/containerd.sock -n k8s.io tasks ls")
        .out;
  }

  LocalControlPlane* cp_ = nullptr;
  std::string dir_, node_, helm_, pause_, api_port_;
  std::unique_ptr<kube::Client> client_;
};

// 1. The chart is clean and is the one source of deploy/kubernetes and deploy/crds.
TEST_F(RealNode, ChartLintsCleanAndRendersTheCheckedInManifests) {
  auto lint = Helm("lint --strict " + Chart());
  EXPECT_EQ(lint.code, 0) << lint.out;
  EXPECT_NE(lint.out.find("0 chart(s) failed"), std::string::npos) << lint.out;
  auto lint_test = Helm("lint --strict " + Chart() + " -f " + dir_ + "/values-test.yaml");
  EXPECT_EQ(lint_test.code, 0) << lint_test.out;
  // Its kubeVersion: a cluster older than 1.32 is refused with the reason.
  auto old_cluster = Helm("template gpuheal " + Chart() + " --kube-version 1.31.0");
  EXPECT_NE(old_cluster.code, 0) << old_cluster.out;
  EXPECT_NE(old_cluster.out.find("kubeVersion"), std::string::npos) << old_cluster.out;
  EXPECT_EQ(Helm("template gpuheal " + Chart() + " --kube-version 1.32.0").code, 0);
  auto golden = RunShell("bash " + std::string(GPUHEAL_SOURCE_DIR) +
                         "/scripts/gen-deploy.sh --check " + helm_ + " 2>&1");
  EXPECT_EQ(golden.code, 0) << golden.out;
}

// 2. helm install: the agent on the real node (and only GPU nodes), the controller Ready.
TEST_F(RealNode, HelmInstallRunsTheAgentAndTheController) {
  auto r =
      Helm("install gpuheal " + Chart() + " -f " + dir_ + "/values-test.yaml --wait --timeout 3m");
  ASSERT_EQ(r.code, 0) << r.out << Describe(kNs, "app.kubernetes.io/part-of=gpuheal");
  json ns = Get("/api/v1/namespaces/" + kNs);
  EXPECT_EQ(ns["metadata"]["labels"].value("pod-security.kubernetes.io/enforce", ""), "privileged");
  ASSERT_TRUE(Eventually(
      [&] {
        for (const auto& p : Pods(kNs, "app.kubernetes.io/name=gpuheal-agent"))
          if (p["spec"].value("nodeName", "") == node_ && PodReady(p)) return true;
        return false;
      },
      60s))
      << Describe(kNs, "app.kubernetes.io/name=gpuheal-agent");
  ASSERT_TRUE(Eventually(
      [&] {
        for (const auto& p : Pods(kNs, "app.kubernetes.io/name=gpuheal-controller"))
          if (PodReady(p)) return true;
        return false;
      },
      60s))
      << Describe(kNs, "app.kubernetes.io/name=gpuheal-controller");
  // The agent in its pod reached the API server: its conditions are on the real node.
  ASSERT_TRUE(Eventually(
      [&] { return ConditionStatus(NodeObj(node_), "AcceleratedHardwareReady") == "True"; }, 30s))
      << NodeObj(node_)["status"].dump();
  // The controller holds the lease.
  json lease = Get("/apis/coordination.k8s.io/v1/namespaces/" + kNs + "/leases");
  EXPECT_FALSE(lease.value("items", json::array()).empty()) << lease.dump();
}

// 2b. A real Prometheus reads the chart's scrape config (the ConfigMap gpuheal-prometheus-scrape,
// file gpuheal.yaml, named in scrape_config_files as a user would) and the chart's alerts; its
// Kubernetes service discovery runs against this API server (kubeconfig_file added: it runs on
// the host, not in a pod), and both jobs' targets are up.
TEST_F(RealNode, APrometheusFindsTheAgentAndTheControllerThroughTheChartsScrapeConfig) {
  const char* prom_dir = std::getenv("GPUHEAL_PROMETHEUS");
  if (prom_dir == nullptr || !*prom_dir)
    GTEST_SKIP() << "GPUHEAL_PROMETHEUS is not set (scripts/run-tests.sh sets it)";
  json cm = Get("/api/v1/namespaces/" + kNs + "/configmaps/gpuheal-prometheus-scrape");
  ASSERT_TRUE(cm.is_object() && cm["data"].contains("gpuheal.yaml")) << cm.dump();
  YAML::Node scrape = YAML::Load(cm["data"]["gpuheal.yaml"].get<std::string>());
  std::set<std::string> jobs;
  for (auto job : scrape["scrape_configs"]) {
    jobs.insert(job["job_name"].as<std::string>());
    for (auto sd : job["kubernetes_sd_configs"]) sd["kubeconfig_file"] = cp_->kubeconfig();
  }
  ASSERT_EQ(jobs, (std::set<std::string>{"gpuheal-agent", "gpuheal-controller"}));
  const std::string pdir = dir_ + "/prometheus";
  std::filesystem::create_directories(pdir + "/data");
  std::ofstream(pdir + "/gpuheal.yaml") << YAML::Dump(scrape) << "\n";
  // The chart's alerts, as the promtool tier reads them (all-features.yaml is the chart's render).
  YAML::Node rules;
  for (const auto& doc : YAML::LoadAllFromFile(std::string(GPUHEAL_SOURCE_DIR) +
                                               "/test/golden/helm/all-features.yaml"))
    if (doc.IsMap() && doc["kind"] && doc["kind"].as<std::string>() == "PrometheusRule")
      rules["groups"] = doc["spec"]["groups"];
  ASSERT_TRUE(rules["groups"]);
  std::ofstream(pdir + "/rules.yaml") << YAML::Dump(rules) << "\n";
  std::ofstream(pdir + "/prometheus.yml")
      << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
      << "scrape_config_files: [gpuheal.yaml]\n"
      << "rule_files: [rules.yaml]\n";
  const int port = FreePort();
  ASSERT_GT(port, 0);
  auto& prom = Prometheus();
  prom.url = "http://127.0.0.1:" + std::to_string(port);
  prom.process = std::make_unique<Child>(
      std::vector<std::string>{std::string(prom_dir) + "/bin/prometheus",
                               "--config.file=" + pdir + "/prometheus.yml",
                               "--storage.tsdb.path=" + pdir + "/data",
                               "--web.listen-address=127.0.0.1:" + std::to_string(port)},
      pdir + "/prometheus.log");
  std::map<std::string, std::string> health;  // job -> the last target's health
  const bool up = Eventually(
      [&] {
        json t = prom.Api("/api/v1/targets", {{"state", "active"}});
        health.clear();
        if (!t.is_object()) return false;
        for (const auto& a : t["data"].value("activeTargets", json::array()))
          health[a["labels"].value("job", "")] = a.value("health", "");
        return health["gpuheal-agent"] == "up" && health["gpuheal-controller"] == "up";
      },
      60s, 200ms);
  std::ifstream log(pdir + "/prometheus.log");
  const std::string log_text((std::istreambuf_iterator<char>(log)),
                             std::istreambuf_iterator<char>());
  ASSERT_TRUE(up) << "targets: " << json(health).dump() << "\nprometheus.log:\n"
                  << log_text.substr(log_text.size() > 4000 ? log_text.size() - 4000 : 0);
}

// 3. The fault on the host's kernel log, through the real kubelet, to the replacement Running.
TEST_F(RealNode, AnXidOnTheHostStopsTheWorkloadAndItRunsElsewhere) {
  // The workload lands on the real node: the only node until the simulated ones register.
  json deploy = {
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata", {{"name", "training"}, {"namespace", "default"}}},
      {"spec",
       {{"replicas", 1},
        {"selector", {{"matchLabels", {{"app", "training"}}}}},
        {"template",
         {{"metadata", {{"labels", {{"app", "training"}}}}},
          {"spec",
           {{"terminationGracePeriodSeconds", 5},
            {"containers",
             {{{"name", "main"}, {"image", pause_}, {"imagePullPolicy", "Never"}}}}}}}}}}};
  auto created = client_->Create("/apis/apps/v1/namespaces/default/deployments", deploy);
  ASSERT_TRUE(created.ok() && created->status == 201) << (created ? created->Describe() : "");
  std::string pod_name, container_id;
  ASSERT_TRUE(Eventually(
      [&] {
        for (const auto& p : Pods("default", "app=training")) {
          if (p["spec"].value("nodeName", "") != node_ || !PodReady(p)) continue;
          pod_name = p["metadata"]["name"];
          container_id = p["status"]["containerStatuses"][0].value("containerID", "");
          return true;
        }
        return false;
      },
      90s))
      << Describe("default", "app=training");
  const std::string task = container_id.substr(container_id.find("://") + 3);
  ASSERT_NE(Tasks().find(task), std::string::npos) << "the workload's container runs in containerd";

  // Simulated GPU nodes where the replacement may run.
  Child sim({GPUHEAL_BIN, "sim", "--kubeconfig", cp_->kubeconfig(), "--nodes", "2", "--pools", "1",
             "--standby", "0", "--prefix", "e2e"},
            dir_ + "/sim.log");
  ASSERT_TRUE(Eventually(
      [&] {
        int ready = 0;
        for (const auto& n : Get(kube::NodePath() + "?labelSelector=gpuheal.io%2Fsim%3Dtrue")
                                 .value("items", json::array()))
          ready += ConditionStatus(n, "Ready") == "True";
        return ready == 2;
      },
      30s));

  // T0: the driver's line on the host's kernel log.
  const auto t0 = Clock::now();
  auto inj = RunGpuheal("inject --xid 79 --pci " + kPci);
  ASSERT_EQ(inj.code, 0) << inj.out;
  std::vector<std::pair<std::string, double>> timeline;
  auto mark = [&](const std::string& what) {
    timeline.emplace_back(what,
                          std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  };
  mark("kernel line (/dev/kmsg)");
  bool cond = false, taint = false, terminating = false, gone = false, replaced = false;
  std::string replacement_node;
  const bool done = Eventually(
      [&] {
        json n = NodeObj(node_);
        if (!cond && ConditionStatus(n, "AcceleratedHardwareReady") == "False") {
          cond = true;
          mark("condition False (agent pod)");
        }
        if (!taint) {
          for (const auto& t : n["spec"].value("taints", json::array()))
            if (t.value("key", "") == "gpuheal.io/gpu-fault") {
              taint = true;
              mark("taint " + t.value("value", "") + ":" + t.value("effect", ""));
            }
        }
        json old = Get(kube::PodPath("default", pod_name));
        if (!terminating && (old.is_null() || old["metadata"].contains("deletionTimestamp"))) {
          terminating = true;
          mark("workload terminating");
        }
        if (!gone && old.is_null()) {
          gone = true;  // the kubelet confirmed its containers stopped
          mark("kubelet stopped the workload");
        }
        if (!replaced) {
          for (const auto& p : Pods("default", "app=training")) {
            if (p["metadata"]["name"] == pod_name || !PodReady(p)) continue;
            replaced = true;
            replacement_node = p["spec"].value("nodeName", "");
            mark("replacement Running on " + replacement_node);
          }
        }
        return cond && taint && gone && replaced;
      },
      90s, 10ms);
  std::string report = "\n  real node " + node_ + ", Xid 79 on GPU " + kPci + "\n";
  for (const auto& [what, ms] : timeline) {
    char line[160];
    snprintf(line, sizeof line, "  T+%9.1f ms  %s\n", ms, what.c_str());
    report += line;
  }
  std::cout << report << std::flush;
  ASSERT_TRUE(done) << report << Describe("default", "app=training")
                    << NodeObj(node_)["spec"].dump();
  EXPECT_NE(replacement_node, node_);
  EXPECT_EQ(Tasks().find(task), std::string::npos)
      << "the workload's container still runs in containerd:\n"
      << Tasks();
  // The repair is on record.
  json repairs = Get("/apis/gpuheal.io/v1alpha1/noderepairs");
  bool recorded = false;
  for (const auto& r : repairs.value("items", json::array()))
    recorded |= r["spec"].value("node", "") == node_;
  EXPECT_TRUE(recorded) << repairs.dump();
  (void)client_->Delete("/apis/apps/v1/namespaces/default/deployments/training");
}

// 3b. After the fault of test 3, from the real Prometheus: every documented metric of the agent
// (docs/metrics.md) and the controller (docs/controller.md) with its type (the targets' metadata;
// a metric without labels also as a sample), every panel of the chart's Grafana dashboard answers
// (each query valid, at least one per panel with a value), and GpuhealNodeQuarantined fires.
TEST_F(RealNode, EveryDocumentedMetricAndEveryDashboardPanelAnswersFromPrometheus) {
  auto& prom = Prometheus();
  if (!prom.process || !prom.process->running()) GTEST_SKIP() << "no Prometheus (test 2b)";
  // One scrape after the fault's repair steps, so that what test 3 saw is in Prometheus.
  std::this_thread::sleep_for(3s);
  for (const auto& [doc, job] :
       {std::pair<std::string, std::string>{"/docs/metrics.md", "gpuheal-agent"},
        {"/docs/controller.md", "gpuheal-controller"}}) {
    const auto documented = DocumentedMetrics(doc);
    ASSERT_GT(documented.size(), 10u) << doc;
    json meta = prom.Api("/api/v1/targets/metadata", {{"match_target", "{job=\"" + job + "\"}"}});
    ASSERT_TRUE(meta.is_object() && meta.value("status", "") == "success") << meta.dump();
    std::map<std::string, std::string> scraped;  // metric -> type
    for (const auto& m : meta["data"]) scraped[m.value("metric", "")] = m.value("type", "");
    // A feature's metrics exist only while it runs (docs/metrics.md), and these are off here: no
    // DCGM host engine, no NVML library on this node, Kubernetes mode, no runtime check.
    const std::set<std::string> feature_off = {"gpuheal_dcgm_up",
                                               "gpuheal_dcgm_connection_errors_total",
                                               "gpuheal_nvml_event_to_fault_seconds",
                                               "gpuheal_nvml_poll_cpu_seconds_per_gpu",
                                               "gpuheal_slurm_up",
                                               "gpuheal_slurm_failures_total",
                                               "gpuheal_container_runtime_ready",
                                               "gpuheal_container_runtime_status_seconds"};
    for (const auto& [name, shape] : documented) {
      const auto& [type, labelled] = shape;
      if (feature_off.count(name)) {
        EXPECT_FALSE(scraped.count(name)) << name << " is served with its feature off";
        continue;
      }
      // A labelled family has series only once something happened: its type, where it has any.
      if (labelled && !scraped.count(name)) continue;
      EXPECT_EQ(scraped.count(name) ? scraped[name] : "(not scraped)", type)
          << name << " (" << doc << ") from job " << job;
      if (labelled) continue;
      const std::string series = type == "histogram" ? name + "_count" : name;
      json q = prom.Api("/api/v1/query", {{"query", series + "{job=\"" + job + "\"}"}});
      EXPECT_FALSE(q["data"].value("result", json::array()).empty())
          << series << " has no sample from job " << job << ": " << q.dump();
    }
  }
  // The quarantine of test 3 counted, and the alert on it.
  json quarantined =
      prom.Api("/api/v1/query",
               {{"query", "sum(gpuheal_controller_repair_phases_total{phase=\"Quarantined\"})"}});
  ASSERT_FALSE(quarantined["data"].value("result", json::array()).empty()) << quarantined.dump();
  EXPECT_EQ(quarantined["data"]["result"][0]["value"][1], "1") << quarantined.dump();
  std::string alerts_seen;
  EXPECT_TRUE(Eventually(
      [&] {
        json a = prom.Api("/api/v1/alerts", {});
        alerts_seen = a.dump();
        for (const auto& al : a["data"].value("alerts", json::array()))
          if (al["labels"].value("alertname", "") == "GpuhealNodeQuarantined" &&
              al.value("state", "") == "firing")
            return true;
        return false;
      },
      20s, 500ms))
      << alerts_seen;

  // The dashboard, as Grafana would run it (its range variables given values).
  std::ifstream in(std::string(GPUHEAL_SOURCE_DIR) +
                   "/deploy/helm/gpuheal/dashboards/gpuheal.json");
  const json dash = json::parse(in, nullptr, false);
  ASSERT_TRUE(dash.is_object() && !dash.value("panels", json::array()).empty());
  for (const auto& panel : dash["panels"]) {
    const std::string title = panel.value("title", "");
    int answered = 0;
    std::string results;
    for (const auto& t : panel.value("targets", json::array())) {
      std::string expr = t.value("expr", "");
      for (const auto& [var, value] :
           {std::pair<std::string, std::string>{"$__rate_interval", "5m"},
            {"$__range", "1h"},
            {"$__interval", "1m"}}) {
        for (size_t i; (i = expr.find(var)) != std::string::npos;)
          expr.replace(i, var.size(), value);
      }
      json q = prom.Api("/api/v1/query", {{"query", expr}});
      EXPECT_EQ(q.value("status", ""), "success") << title << ": " << expr << "\n" << q.dump();
      bool value = false;
      for (const auto& r : q["data"].value("result", json::array())) {
        const std::string v = r["value"][1];
        value |= v != "NaN";
      }
      answered += value;
      results += "\n  " + expr + " -> " + q["data"].value("result", json::array()).dump();
    }
    EXPECT_GT(answered, 0) << "dashboard panel \"" << title << "\" returned no data:" << results;
  }
}

// 4. helm upgrade with a changed config: the agents restart on it.
TEST_F(RealNode, HelmUpgradeWithAChangedConfigReachesTheAgent) {
  auto agent_on_node = [&]() -> json {
    for (const auto& p : Pods(kNs, "app.kubernetes.io/name=gpuheal-agent"))
      if (p["spec"].value("nodeName", "") == node_) return p;
    return json();
  };
  const json before = agent_on_node();
  ASSERT_FALSE(before.is_null());
  auto r =
      Helm("upgrade gpuheal " + Chart() + " -f " + dir_ +
           "/values-test.yaml --set agent.config.recovery.quiet_period=7m --wait --timeout 3m");
  ASSERT_EQ(r.code, 0) << r.out;
  json cm = Get("/api/v1/namespaces/" + kNs + "/configmaps/gpuheal-agent-config");
  ASSERT_NE(cm["data"].value("agent.yaml", "").find("quiet_period: 7m"), std::string::npos)
      << cm.dump();
  json after;
  ASSERT_TRUE(Eventually(
      [&] {
        after = agent_on_node();
        return !after.is_null() && after["metadata"]["uid"] != before["metadata"]["uid"] &&
               PodReady(after);
      },
      120s))
      << Describe(kNs, "app.kubernetes.io/name=gpuheal-agent");
  // What the new agent's container reads: the kubelet's copy of the ConfigMap for that pod.
  const std::string uid = after["metadata"]["uid"];
  std::ifstream in(dir_ + "/node/kubelet/pods/" + uid +
                   "/volumes/kubernetes.io~configmap/config/agent.yaml");
  std::stringstream seen;
  seen << in.rdbuf();
  EXPECT_NE(seen.str().find("quiet_period: 7m"), std::string::npos) << seen.str();
}

// 4b. The chart installed, the node's own kubelet (its client certificate, system:node:<name>)
// cannot write the keys that steer the controller on its own Node: NodeRestriction lets it write
// its own Node's annotations and most labels, and the chart's gpuheal-node-steering-keys policy
// refuses these. A key that steers nothing still goes through, so the refusals are the policy's.
TEST_F(RealNode, TheKubeletCannotSteerTheController) {
  auto as_kubelet = ClientFrom(dir_ + "/node/kubelet.kubeconfig");
  auto patch = [&](const json& body) {
    auto r = as_kubelet->Patch(kube::NodePath(node_), kube::PatchType::kMerge, body);
    return r.ok() ? std::make_pair(static_cast<int>(r->status), r->Describe())
                  : std::make_pair(-1, r.error().message);
  };
  const json before = NodeObj(node_);
  const std::vector<std::pair<std::string, json>> refused = {
      {"gpuheal.io/bmc-endpoint",
       {{"metadata", {{"annotations", {{"gpuheal.io/bmc-endpoint", "http://127.0.0.1:9"}}}}}}},
      {"gpuheal.io/replaces",
       {{"metadata", {{"annotations", {{"gpuheal.io/replaces", "someone-elses-repair"}}}}}}},
      {"gpuheal.io/pool", {{"metadata", {{"labels", {{"gpuheal.io/pool", "another-pool"}}}}}}},
  };
  for (const auto& [key, body] : refused) {
    auto [code, text] = patch(body);
    EXPECT_EQ(code, 403) << key << ": " << text;
    EXPECT_NE(text.find("gpuheal-node-steering-keys"), std::string::npos) << key << ": " << text;
  }
  // The standby taint: NodeRestriction already refuses a kubelet's taint changes; refused either
  // way.
  json taints = before["spec"].value("taints", json::array());
  taints.push_back({{"key", "gpuheal.io/standby"}, {"value", "true"}, {"effect", "NoSchedule"}});
  auto [code, text] = patch({{"spec", {{"taints", taints}}}});
  EXPECT_EQ(code, 403) << text;
  const json after = NodeObj(node_);
  EXPECT_EQ(after["metadata"].value("annotations", json::object()).dump(),
            before["metadata"].value("annotations", json::object()).dump());
  EXPECT_EQ(after["metadata"]["labels"].dump(), before["metadata"]["labels"].dump());
  EXPECT_EQ(after["spec"].value("taints", json::array()).dump(),
            before["spec"].value("taints", json::array()).dump());
  // Its own Node is otherwise its to write.
  EXPECT_EQ(patch({{"metadata", {{"annotations", {{"example.com/probe", "1"}}}}}}).first, 200);
  (void)client_->Patch(kube::NodePath(node_), kube::PatchType::kMerge,
                       {{"metadata", {{"annotations", {{"example.com/probe", nullptr}}}}}});
}

// 5. helm uninstall: nothing of gpuheal stays on any node.
TEST_F(RealNode, HelmUninstallLeavesNoTaintAnnotationOrCondition) {
  // Give every node something to clean: the real node carries the quarantine of test 3; a
  // simulated node with a standby taint and an annotation of the agent's.
  auto sim_node = client_->Create(
      kube::NodePath(),
      {{"apiVersion", "v1"},
       {"kind", "Node"},
       {"metadata",
        {{"name", "e2e-standby"},
         {"annotations", {{"gpuheal.io/gpu-faults", "{}"}, {"example.com/keep", "x"}}},
         {"labels", {{"gpuheal.io/pool", "e2e"}}}}},
       {"spec",
        {{"taints",
          {{{"key", "gpuheal.io/standby"}, {"value", "true"}, {"effect", "NoSchedule"}}}}}}});
  ASSERT_TRUE(sim_node.ok() && sim_node->status == 201) << (sim_node ? sim_node->Describe() : "");
  // The pre-delete hook's cleanup waits for gpuheal's pods to go, and deletes at once those bound
  // to nodes that are gone (test 3's simulated nodes, with their agent pods). Measured alone: the
  // pods gone 4 s after the Job starts (the controller and the agent end their watches together),
  // the Job done at 7 s, then helm's wait for the chart's namespace, which kube-controller-
  // manager's namespace controller starts to empty only 5 s after its deletion: 14 s. The bound
  // is a regression guard; the pods seen meanwhile are printed for a run that exceeds it.
  const auto began = std::chrono::steady_clock::now();
  std::atomic<bool> watching{true};
  std::thread watch([&] {  // (diagnostics: gpuheal's pods while the uninstall runs)
    while (watching) {
      std::string line;
      for (const auto& p : Get(kube::PodPath(kNs)).value("items", json::array()))
        line += p["metadata"].value("name", "") + "@" + p["spec"].value("nodeName", "") +
                (p["metadata"].contains("deletionTimestamp") ? "(deleting) " : " ");
      std::cout << "T+"
                << std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count()
                << " " << line << "\n";
      std::this_thread::sleep_for(2s);
    }
  });
  auto r = Helm("uninstall gpuheal --wait --timeout 5m --debug");
  watching = false;
  watch.join();
  ASSERT_EQ(r.code, 0) << r.out;
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::cout << "helm uninstall --wait took " << took << " s\n";
  EXPECT_LE(took, 30.0) << r.out;
  json nodes = Get(kube::NodePath()).value("items", json::array());
  ASSERT_FALSE(nodes.empty());
  for (const auto& n : nodes) {
    const std::string name = n["metadata"]["name"];
    for (const auto& t : n["spec"].value("taints", json::array()))
      EXPECT_NE(t.value("key", "").rfind("gpuheal.io/", 0), 0u) << name << ": " << t.dump();
    const json annotations = n["metadata"].value("annotations", json::object());
    for (const auto& [k, v] : annotations.items())
      EXPECT_NE(k.rfind("gpuheal.io/", 0), 0u) << name << ": " << k;
    EXPECT_FALSE(n["spec"].value("unschedulable", false)) << name;
    for (const auto& c : n["status"].value("conditions", json::array()))
      for (const char* t : {"AcceleratedHardwareReady", "KernelReady", "NetworkingReady",
                            "StorageReady", "ContainerRuntimeReady"})
        EXPECT_NE(c.value("type", ""), t) << name;
  }
  json kept = NodeObj("e2e-standby");
  EXPECT_EQ(kept["metadata"]["annotations"].value("example.com/keep", ""), "x");
  EXPECT_EQ(kept["metadata"]["labels"].value("gpuheal.io/pool", ""), "e2e") << "labels stay";
  EXPECT_TRUE(
      Eventually([&] { return Pods(kNs, "app.kubernetes.io/part-of=gpuheal").empty(); }, 60s));
  (void)client_->Delete(kube::NodePath("e2e-standby"));
}

// 6. The agent as a host service with the kubelet's credentials (system:node:<name>): the unit's
// own command line, its paths replaced by the test bed's.
TEST_F(RealNode, HostServiceReportsWithTheKubeletsCredentialsAndOnlyForItsNode) {
  const std::string unit =
      std::string(GPUHEAL_SOURCE_DIR) + "/deploy/systemd/gpuheal-agent-kubelet.service";
  std::ifstream in(unit);
  ASSERT_TRUE(in) << unit;
  std::string line, exec;
  std::map<std::string, std::string> env;
  while (std::getline(in, line)) {
    if (line.rfind("ExecStart=", 0) == 0) exec = line.substr(10);
    if (line.rfind("Environment=", 0) == 0) {
      const std::string kv = line.substr(12);
      env[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
    }
  }
  ASSERT_FALSE(exec.empty());
  // The test bed's paths for the unit's defaults.
  env["GPUHEAL_KUBECONFIG"] = dir_ + "/node/kubelet.kubeconfig";
  env["GPUHEAL_NODE_NAME"] = node_;
  const std::string config = dir_ + "/host-agent.yaml";
  std::ofstream(config)
      << "accept_injected: true\nkmsg_start: end\nlisten: 127.0.0.1:0\nstate_dir: " << dir_
      << "/host-agent-state\n";
  std::vector<std::string> argv;
  std::istringstream words(exec);
  for (std::string w; words >> w;) {
    if (w == "/usr/local/bin/gpuheal") w = GPUHEAL_BIN;
    if (w == "/etc/gpuheal/agent.yaml") w = config;
    for (const auto& [k, v] : env) {
      const std::string ref = "${" + k + "}";
      if (auto at = w.find(ref); at != std::string::npos) w.replace(at, ref.size(), v);
    }
    ASSERT_EQ(w.find("${"), std::string::npos) << "unresolved variable in " << exec;
    argv.push_back(w);
  }
  Child agent(argv, dir_ + "/host-agent.log");
  ASSERT_TRUE(Eventually(
      [&] {
        return ConditionStatus(NodeObj(node_), "AcceleratedHardwareReady") == "True" ||
               !agent.running();
      },
      30s));
  ASSERT_TRUE(agent.running()) << RunShell("cat " + dir_ + "/host-agent.log").out;
  auto inj = RunGpuheal("inject --xid 79 --pci " + kPci);
  ASSERT_EQ(inj.code, 0) << inj.out;
  ASSERT_TRUE(Eventually(
      [&] { return ConditionStatus(NodeObj(node_), "AcceleratedHardwareReady") == "False"; }, 20s))
      << RunShell("tail -20 " + dir_ + "/host-agent.log").out;

  // The same credentials cannot write another Node: NodeRestriction, no RBAC needed.
  ASSERT_EQ(
      client_
          ->Create(kube::NodePath(),
                   {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "e2e-other"}}}})
          ->status,
      201);
  auto as_kubelet = ClientFrom(dir_ + "/node/kubelet.kubeconfig");
  auto refused = as_kubelet->Patch(
      kube::NodePath("e2e-other") + "/status", kube::PatchType::kStrategicMerge,
      {{"status",
        {{"conditions",
          {{{"type", "AcceleratedHardwareReady"}, {"status", "False"}, {"reason", "Forged"}}}}}}});
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 403) << refused->Describe();
  EXPECT_NE(ConditionStatus(NodeObj("e2e-other"), "AcceleratedHardwareReady"), "False");
  (void)client_->Delete(kube::NodePath("e2e-other"));
}

// 7. The node's own containerd (the one its kubelet runs the pods in), seen by the agent's runtime
// monitor through CRI: frozen with SIGSTOP, then killed and started again. The chart is
// uninstalled by now, so no controller quarantines the node meanwhile.
TEST_F(RealNode, TheNodesContainerdFrozenAndRestartedTurnsContainerRuntimeReadyFalseAndBack) {
  const std::string node_dir = dir_ + "/node", sock = node_dir + "/containerd/containerd.sock";
  auto pid_of = [&] {
    const auto r = RunShell("awk '$1 == \"containerd\" {print $2}' " + node_dir + "/pids");
    return r.code == 0 && !r.out.empty() ? static_cast<pid_t>(std::stol(r.out)) : pid_t{-1};
  };
  const pid_t pid = pid_of();
  ASSERT_GT(pid, 0) << "no containerd in " << node_dir << "/pids";
  const std::string config = dir_ + "/runtime-agent.yaml";
  std::ofstream(config) << "kmsg_start: end\nlisten: \"\"\nstate_dir: " << dir_
                        << "/runtime-agent-state\nruntime:\n  endpoint: unix://" << sock
                        << "\n  period: 200ms\n  timeout: 1s\n";
  Child agent({GPUHEAL_BIN, "agent", "--kubeconfig", node_dir + "/kubelet.kubeconfig",
               "--node-name", node_, "--config", config},
              dir_ + "/runtime-agent.log");
  auto runtime_is = [&](const std::string& status, const std::string& reason) {
    return Eventually(
        [&] {
          for (const auto& c : NodeObj(node_)["status"].value("conditions", json::array()))
            if (c.value("type", "") == "ContainerRuntimeReady")
              return c.value("status", "") == status && c.value("reason", "") == reason;
          return false;
        },
        20s);
  };
  auto log = [&] { return RunShell("tail -20 " + dir_ + "/runtime-agent.log").out; };
  ASSERT_TRUE(runtime_is("True", "ContainerRuntimeIsReady")) << log();

  kill(pid, SIGSTOP);
  const bool frozen_seen = runtime_is("False", "ContainerRuntimeUnresponsive");
  kill(pid, SIGCONT);
  ASSERT_TRUE(frozen_seen) << log();
  ASSERT_TRUE(runtime_is("True", "ContainerRuntimeIsReady")) << log();

  // Killed and started again as the test bed starts it; the pods' shims outlive it.
  kill(pid, SIGKILL);
  ASSERT_TRUE(runtime_is("False", "ContainerRuntimeUnreachable")) << log();
  auto restarted = RunShell("setsid containerd --config " + node_dir + "/containerd.toml >> " +
                            dir_ + "/containerd.log 2>&1 < /dev/null & echo $!");
  ASSERT_EQ(restarted.code, 0);
  // real-node.sh down stops it by this pid.
  RunShell("sed -i 's/^containerd .*/containerd " +
           restarted.out.substr(0, restarted.out.find('\n')) + "/' " + node_dir + "/pids");
  ASSERT_TRUE(runtime_is("True", "ContainerRuntimeIsReady")) << log();
}

// The kubelet's device-plugin checkpoint: which pod UID holds which device ID (the kubelet's own
// record, read as the truth the agent's PodResources answer is checked against).
std::map<std::string, std::string> DeviceHolders(const std::string& resource) {
  std::ifstream in("/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint");
  std::stringstream ss;
  ss << in.rdbuf();
  const json j = json::parse(ss.str(), nullptr, false);
  std::map<std::string, std::string> out;
  if (!j.is_object()) return out;
  for (const auto& e : j["Data"].value("PodDeviceEntries", json::array())) {
    if (e.value("ResourceName", "") != resource) continue;
    auto add = [&](const json& ids) {
      for (const auto& id : ids)
        if (id.is_string()) out[id.get<std::string>()] = e.value("PodUID", "");
    };
    const json& ids = e["DeviceIDs"];
    if (ids.is_array()) add(ids);
    if (ids.is_object())
      for (const auto& [numa, list] : ids.items()) add(list);
  }
  return out;
}

// 8. Four pods on four GPUs of a device plugin; Xid 45 on one GPU: the agent names its pod from
// the kubelet's PodResources, the controller evicts that pod alone, the agent resets the GPU
// through the NVML double, and a new pod is placed on it. The node is never tainted or cordoned.
TEST_F(RealNode, ADevicePluginGpuFaultEvictsOnlyThePodHoldingIt) {
  const std::string node_dir = dir_ + "/node", work = dir_ + "/gpu-scoped";
  std::filesystem::create_directories(work + "/sysfs");
  const int buses[] = {0x1b, 0x2b, 0x3b, 0x4b};
  std::vector<std::string> uuids;
  json devices = json::array();
  for (int i = 0; i < 4; ++i) {
    char uuid[64], bus[32];
    std::snprintf(uuid, sizeof(uuid), "GPU-7e57d0c0-0000-4000-8000-00000000000%d", i);
    std::snprintf(bus, sizeof(bus), "00000000:%02X:00.0", buses[i]);
    uuids.push_back(uuid);
    devices.push_back(HealthyDevice(TestGpu{bus, "", uuid}));
  }
  const std::string scenario = work + "/gpus.json";
  std::ofstream(scenario) << json({{"driver_version", "570.86.15"}, {"devices", devices}}).dump(2);
  const std::string faulty_pci = "0000:3b:00", faulty_uuid = uuids[2];

  // The device plugin: nvidia.com/gpu devices named by the double's UUIDs.
  std::vector<std::string> plugin_argv = {DEVICE_PLUGIN, "--resource", "nvidia.com/gpu"};
  for (const auto& u : uuids) plugin_argv.insert(plugin_argv.end(), {"--device", u});
  Child plugin(plugin_argv, work + "/device-plugin.log");
  auto plugin_log = [&] { return RunShell("tail -20 " + work + "/device-plugin.log").out; };
  ASSERT_TRUE(Eventually(
      [&] { return NodeObj(node_)["status"]["allocatable"].value("nvidia.com/gpu", "") == "4"; },
      60s))
      << "the kubelet did not take the device plugin's GPUs:\n"
      << plugin_log();

  // The workload: four pods, one GPU each.
  const std::string ns = "gpu-work";
  (void)client_->Create(
      "/api/v1/namespaces",
      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
  auto make_pod = [&](const std::string& name) {
    json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"app", "gpu"}}}}},
                {"spec",
                 {{"terminationGracePeriodSeconds", 1},
                  {"nodeSelector", {{"kubernetes.io/hostname", node_}}},
                  {"containers",
                   {{{"name", "main"},
                     {"image", pause_},
                     {"imagePullPolicy", "Never"},
                     {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}};
    // A new namespace has no default ServiceAccount for a moment: the API refuses its pods.
    std::string last;
    const bool made = Eventually(
        [&] {
          auto r = client_->Create(kube::PodPath(ns), pod);
          last = r ? r->Describe() : r.error().message;
          return r.ok() && r->status == 201;
        },
        20s, 200ms);
    EXPECT_TRUE(made) << name << ": " << last;
    return made;
  };
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(make_pod("trainer-" + std::to_string(i)));
  std::map<std::string, std::string> uid_of;  // pod name -> UID
  ASSERT_TRUE(Eventually(
      [&] {
        uid_of.clear();
        for (const auto& p : Pods(ns, "app=gpu"))
          if (PodReady(p)) uid_of[p["metadata"]["name"]] = p["metadata"]["uid"];
        return uid_of.size() == 4;
      },
      90s))
      << Describe(ns, "app=gpu");
  // Which pod holds the faulty GPU, as the kubelet recorded its allocation.
  const auto holders = DeviceHolders("nvidia.com/gpu");
  ASSERT_EQ(holders.size(), 4u) << "the kubelet's checkpoint names the four allocations";
  std::string victim;
  for (const auto& [name, uid] : uid_of)
    if (holders.count(faulty_uuid) && holders.at(faulty_uuid) == uid) victim = name;
  ASSERT_FALSE(victim.empty());

  // The agent with the kubelet's credentials, NVML through the double, PodResources from the
  // node's kubelet; the controller (the chart is uninstalled by now) on the admin's credentials.
  const std::string config = work + "/agent.yaml";
  std::ofstream(config) << "accept_injected: true\nkmsg_start: end\nlisten: \"\"\nstate_dir: "
                        << work << "/agent-state\n"
                        << "previous_boot: {enabled: false}\n"
                        << "runtime: {endpoint: \"unix://" << node_dir
                        << "/containerd/containerd.sock\"}\n"
                        << "nvidia:\n  poll_period: 1h\n  sysfs_pci_devices: " << work
                        << "/sysfs\n  reset:\n    command: [\"" << NVML_DOUBLE_CTL
                        << "\", \"reset\", \"" << scenario << "\", \"{bus_id}\"]\n"
                        << "pod_resources:\n  socket: " << node_dir
                        << "/kubelet/pod-resources/kubelet.sock\n";
  setenv("GPUHEAL_NVML_SCENARIO", scenario.c_str(), 1);
  Child agent({GPUHEAL_BIN, "agent", "--kubeconfig", node_dir + "/kubelet.kubeconfig",
               "--node-name", node_, "--config", config, "--nvml-library", NVML_DOUBLE},
              work + "/agent.log");
  unsetenv("GPUHEAL_NVML_SCENARIO");
  auto agent_log = [&] { return RunShell("tail -30 " + work + "/agent.log").out; };
  ASSERT_TRUE(Eventually(
      [&] {
        const json n = NodeObj(node_);
        return ConditionStatus(n, "AcceleratedHardwareReady") == "True" &&
               ConditionStatus(n, "ContainerRuntimeReady") == "True";
      },
      30s))
      << agent_log();
  // The chart is uninstalled by now; Helm leaves its CRDs (and this test may run alone).
  EnsureCrd(*client_, "noderepairs.yaml", kube::kNodeRepairsPath);
  EnsureCrd(*client_, "nodediagnostics.yaml", kube::kNodeDiagnosticsPath);
  // The earlier tests' repair records belong to the uninstalled chart's controller; this
  // controller starts without them (the controller's handling of an episode left open when a
  // GPU fault arrives is a unit test: AGpuFaultAfterANodeLevelEpisodeGetsItsOwnEpisode).
  for (const auto& rec : Get(std::string(kube::kNodeRepairsPath)).value("items", json::array())) {
    if (rec["spec"].value("node", "") == node_)
      (void)client_->Delete(std::string(kube::kNodeRepairsPath) + "/" +
                            rec["metadata"].value("name", ""));
  }
  const std::string policy = work + "/policy.yaml";
  std::ofstream(policy) << "breaker:\n  share_percent: 100\n"
                        << "checkpoint: {window: 1s, catastrophic_window: 1s}\n";
  Child controller(
      {GPUHEAL_BIN, "controller", "--kubeconfig", cp_->kubeconfig(), "--policy", policy, "--listen",
       "", "--lease-namespace", "default", "--lease-name", "e2e-gpu-scoped"},
      work + "/controller.log");
  auto controller_log = [&] { return RunShell("tail -30 " + work + "/controller.log").out; };
  ASSERT_TRUE(Eventually(
      [&] {
        return RunShell("grep -q '\"controller started\"' " + work + "/controller.log").code == 0;
      },
      30s))
      << controller_log();

  const auto t0 = Clock::now();
  auto since_t0 = [&] {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  auto inj = RunGpuheal("inject --xid 45 --pci " + faulty_pci);
  ASSERT_EQ(inj.code, 0) << inj.out;
  // The agent names the victim as the faulty GPU's only holder.
  json entry;
  ASSERT_TRUE(Eventually(
      [&] {
        const json n = NodeObj(node_);
        const json faults = json::parse(
            n["metadata"].value("annotations", json::object()).value("gpuheal.io/gpu-faults", "{}"),
            nullptr, false);
        if (!faults.is_object() || !faults.contains(faulty_pci)) return false;
        entry = faults[faulty_pci];
        return entry.contains("pods");
      },
      20s))
      << agent_log();
  ASSERT_EQ(entry["pods"].size(), 1u) << entry.dump();
  EXPECT_EQ(entry["pods"][0].value("namespace", ""), ns);
  EXPECT_EQ(entry["pods"][0].value("name", ""), victim);
  EXPECT_EQ(entry["pods"][0].value("container", ""), "main");

  // The victim goes, the GPU is reset through the double, the fault clears; the node is never
  // tainted or cordoned and the other three pods keep running.
  bool tainted = false, victim_gone = false, cleared = false;
  auto resets = [&] {
    std::ifstream in(scenario);
    std::stringstream ss;
    ss << in.rdbuf();
    const json s = json::parse(ss.str(), nullptr, false);
    if (!s.is_object()) return -1;
    for (const auto& d : s["devices"])
      if (d.value("bus_id", "") == "00000000:3B:00.0") return d.value("resets", 0);
    return -1;
  };
  ASSERT_TRUE(Eventually(
      [&] {
        const json n = NodeObj(node_);
        for (const auto& t : n["spec"].value("taints", json::array()))
          if (t.value("key", "").rfind("gpuheal.io/", 0) == 0) tainted = true;
        if (n["spec"].value("unschedulable", false)) tainted = true;
        bool present = false;
        for (const auto& p : Pods(ns, "app=gpu"))
          if (p["metadata"].value("name", "") == victim) present = true;
        if (!present && !victim_gone)
          std::printf("T+%.0f ms: %s evicted\n", since_t0(), victim.c_str());
        victim_gone = victim_gone || !present;
        const std::string faults =
            n["metadata"].value("annotations", json::object()).value("gpuheal.io/gpu-faults", "");
        cleared = victim_gone && faults == "{}";
        if (cleared)
          std::printf("T+%.0f ms: GPU %s reset, its fault cleared\n", since_t0(),
                      faulty_pci.c_str());
        return tainted || cleared;
      },
      90s, 100ms))
      << "victim gone " << victim_gone << "\nagent:\n"
      << agent_log() << "\ncontroller:\n"
      << controller_log();
  EXPECT_FALSE(tainted) << "the node was tainted or cordoned for one GPU";
  EXPECT_EQ(resets(), 1) << "the faulty GPU was reset once, through NVML's double";
  int others = 0;
  for (const auto& p : Pods(ns, "app=gpu")) {
    const std::string name = p["metadata"]["name"];
    if (name == victim) continue;
    EXPECT_TRUE(PodReady(p)) << name;
    EXPECT_EQ(p["metadata"].value("uid", ""), uid_of[name]) << name << " was replaced";
    ++others;
  }
  EXPECT_EQ(others, 3);

  // A new pod is placed on the freed GPU.
  ASSERT_TRUE(make_pod("trainer-new"));
  std::string new_uid;
  ASSERT_TRUE(Eventually(
      [&] {
        for (const auto& p : Pods(ns, "app=gpu"))
          if (p["metadata"].value("name", "") == "trainer-new" && PodReady(p))
            new_uid = p["metadata"].value("uid", "");
        return !new_uid.empty();
      },
      60s))
      << Describe(ns, "app=gpu");
  const auto after = DeviceHolders("nvidia.com/gpu");
  ASSERT_TRUE(after.count(faulty_uuid));
  EXPECT_EQ(after.at(faulty_uuid), new_uid) << "the new pod holds the reset GPU";
  (void)client_->Delete("/api/v1/namespaces/" + ns);
}

}  // namespace
}  // namespace gpuheal::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new gpuheal::testing::RealNodeEnv);
  return RUN_ALL_TESTS();
}
