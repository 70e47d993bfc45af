#include "drill/workloads.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>

#include "core/http_get.h"

namespace gpuheal::drill {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json Namespace(const std::string& ns) {
  json o = {{"apiVersion", "v1"}, {"kind", "Namespace"}};
  o["metadata"] = {{"name", ns}, {"labels", {{"gpuheal.io/drill", "true"}}}};
  return o;
}

json Budget(const std::string& ns, const std::string& app) {
  json pdb = {{"apiVersion", "policy/v1"}, {"kind", "PodDisruptionBudget"}};
  pdb["metadata"] = {{"name", app}, {"namespace", ns}};
  pdb["spec"]["maxUnavailable"] = 1;
  pdb["spec"]["selector"]["matchLabels"] = {{"app", app}};
  return pdb;
}

// A Deployment of process-runtime pods running `container`, in the drill's pools: at most one
// pod of it per node, or with DRA each pod holding one GPU through a claim of the template `gpu`.
json ProcessDeployment(const WorkloadSpec& w, const std::string& app, int replicas,
                       json container) {
  const bool dra = !w.dra_class.empty();
  if (dra) container["resources"]["claims"] = json::array({{{"name", "gpu"}}});
  json env = container.value("env", json::array());
  env.push_back(
      {{"name", "POD_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}});
  env.push_back(
      {{"name", "POD_IP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}});
  container["env"] = env;
  container["image"] = "gpuheal-workload (sim process runtime)";
  json term = json::object();
  term["matchExpressions"] =
      json::array({{{"key", "gpuheal.io/pool"}, {"operator", "In"}, {"values", w.pools}}});
  json spec = {{"terminationGracePeriodSeconds", 30}, {"containers", json::array({container})}};
  spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
      ["nodeSelectorTerms"] = json::array({term});
  if (dra) {
    spec["resourceClaims"] = json::array({{{"name", "gpu"}, {"resourceClaimTemplateName", "gpu"}}});
  } else {
    json anti = {{"topologyKey", "kubernetes.io/hostname"}};
    anti["labelSelector"]["matchLabels"] = {{"app", app}};
    spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
        json::array({anti});
  }
  json d = {{"apiVersion", "apps/v1"}, {"kind", "Deployment"}};
  d["metadata"] = {{"name", app}, {"namespace", w.ns}};
  d["spec"]["replicas"] = replicas;
  d["spec"]["selector"]["matchLabels"] = {{"app", app}};
  d["spec"]["template"]["metadata"]["labels"] = {{"app", app}};
  d["spec"]["template"]["metadata"]["annotations"] = {{"sim.gpuheal.io/runtime", "process"}};
  d["spec"]["template"]["spec"] = spec;
  return d;
}

// One GPU of the DeviceClass, for each pod's claim.
json ClaimTemplate(const WorkloadSpec& w) {
  json request = {{"name", "gpu"}, {"exactly", {{"deviceClassName", w.dra_class}}}};
  json t = {{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceClaimTemplate"}};
  t["metadata"] = {{"name", "gpu"}, {"namespace", w.ns}};
  t["spec"]["spec"]["devices"]["requests"] = json::array({request});
  return t;
}

}  // namespace

std::vector<json> ServiceObjects(const WorkloadSpec& w) {
  json c = {{"name", "serve"},
            {"command", {w.workload_bin, "serve", "--listen", "$(POD_IP):8080", "--cost", "2ms"}},
            {"ports", {{{"name", "http"}, {"containerPort", 8080}}}}};
  if (w.dra_class.empty()) c["resources"]["limits"]["nvidia.com/gpu"] = w.gpus;
  c["readinessProbe"] = {{"httpGet", {{"path", "/"}, {"port", "http"}}}, {"periodSeconds", 1}};
  c["livenessProbe"] = {{"httpGet", {{"path", "/"}, {"port", "http"}}}, {"periodSeconds", 1}};
  json svc = {{"apiVersion", "v1"}, {"kind", "Service"}};
  svc["metadata"] = {{"name", "serve"}, {"namespace", w.ns}};
  svc["spec"]["selector"] = {{"app", "serve"}};
  svc["spec"]["ports"] = json::array({{{"name", "http"}, {"port", 8080}, {"targetPort", "http"}}});
  std::vector<json> objs = {Namespace(w.ns), Budget(w.ns, "serve"), svc};
  if (!w.dra_class.empty()) objs.push_back(ClaimTemplate(w));
  objs.push_back(
      ProcessDeployment(w, "serve", w.dra_class.empty() ? w.nodes : w.nodes * w.gpus, c));
  return objs;
}

std::vector<json> TrainingObjects(const WorkloadSpec& w) {
  const bool dra = !w.dra_class.empty();
  const int replicas = dra ? w.nodes * w.gpus : w.nodes;
  std::vector<json> objs = {Namespace(w.ns)};
  if (dra) objs.push_back(ClaimTemplate(w));
  for (const std::string app : {"trainer", "trainer-periodic"}) {
    if (dra && app == "trainer-periodic") continue;
    json cmd = {w.workload_bin,
                "train",
                "--dir",
                w.checkpoint_dir + "/" + app,
                "--slots",
                std::to_string(replicas),
                "--step",
                fmt::format("{}ms", kTrainStepMs),
                "--every",
                fmt::format("{}s", kTrainEverySeconds),
                "--checkpoint-cost",
                fmt::format("{}ms", kTrainCheckpointMs),
                "--podinfo",
                "$(SIM_SANDBOX)/podinfo/annotations",
                "--answer",
                "$(SIM_SANDBOX)/checkpoint-done",
                "--lost-exit",
                fmt::format("{}s", kTrainLostExitSeconds)};
    if (app == "trainer-periodic") cmd.push_back("--ignore-requests");
    json c = {{"name", "train"}, {"command", cmd}};
    if (!dra) c["resources"]["limits"]["nvidia.com/gpu"] = std::max(1, w.gpus / 2);
    objs.push_back(Budget(w.ns, app));
    objs.push_back(ProcessDeployment(w, app, replicas, c));
  }
  return objs;
}

// --- the load ---------------------------------------------------------------------------------

// An EndpointSlice as the load balancer reads it: its ready endpoints' addresses and port.
struct LoadGenerator::Slice {
  kube::ObjectMeta meta;
  std::vector<std::string> ready;  // "ip:port"
};

static Result<LoadGenerator::Slice> DecodeSliceJson(const json& j) {
  LoadGenerator::Slice s;
  if (!j.is_object() || !j.contains("metadata")) return Error{"EndpointSlice: no metadata"};
  const json& m = j["metadata"];
  s.meta.name = m.value("name", "");
  s.meta.namespace_ = m.value("namespace", "");
  s.meta.uid = m.value("uid", "");
  s.meta.resource_version = m.value("resourceVersion", "");
  int port = 0;
  for (const auto& p : j.value("ports", json::array()))
    if (p.value("port", json()).is_number_integer()) port = p["port"].get<int>();
  for (const auto& e : j.value("endpoints", json::array())) {
    const json c = e.value("conditions", json::object());
    // Ready: a terminating endpoint is not (the EndpointSlice controller's own rule).
    const bool ready = c.value("ready", json()).is_boolean() ? c["ready"].get<bool>() : true;
    if (!ready || port == 0) continue;
    for (const auto& a : e.value("addresses", json::array()))
      if (a.is_string()) s.ready.push_back(fmt::format("{}:{}", a.get<std::string>(), port));
  }
  return s;
}

static Result<LoadGenerator::Slice> DecodeSlice(std::string_view text) {
  return DecodeSliceJson(json::parse(text, nullptr, false));
}

static Result<kube::List<LoadGenerator::Slice>> DecodeSliceList(std::string_view text) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("items")) return Error{"EndpointSliceList: not a list"};
  kube::List<LoadGenerator::Slice> out;
  out.resource_version = j["metadata"].value("resourceVersion", "");
  for (const auto& item : j["items"]) {
    auto s = DecodeSliceJson(item);
    if (!s) return s.error();
    out.items.push_back(std::move(*s));
  }
  return out;
}

int HttpGetStatus(const std::string& endpoint) {
  return gpuheal::HttpGetStatus("http://" + endpoint + "/", std::chrono::seconds(2),
                                "gpuheal-drill");
}

Result<std::unique_ptr<LoadGenerator>> LoadGenerator::Start(const kube::Config& cfg,
                                                            const std::string& ns,
                                                            const std::string& service, int rate) {
  if (rate < 1) return Error{"the load's rate must be 1 request/s or more"};
  std::unique_ptr<LoadGenerator> g(new LoadGenerator());
  g->rate_ = rate;
  auto c = kube::Client::Create(cfg);
  if (!c) return c.error();
  g->client_ = std::move(*c);
  g->slices_ = std::make_unique<kube::Informer<Slice>>(
      *g->client_,
      fmt::format("/apis/discovery.k8s.io/v1/namespaces/{}/endpointslices?labelSelector={}", ns,
                  kube::UrlEncode("kubernetes.io/service-name=" + service)),
      DecodeSliceList, DecodeSlice);
  g->slices_->Start();
  if (!g->slices_->WaitForSynced(30s))
    return Error{"the watch of the Service's EndpointSlices did not sync within 30 s"};
  return g;
}

LoadGenerator::~LoadGenerator() { Stop(); }

int LoadGenerator::ReadyEndpoints() const {
  int n = 0;
  for (const auto& s : slices_->Items()) n += static_cast<int>(s.ready.size());
  return n;
}

bool LoadGenerator::ListsReady(const std::string& ip) const {
  const std::string prefix = ip + ":";
  for (const auto& s : slices_->Items())
    for (const auto& e : s.ready)
      if (e.starts_with(prefix)) return true;
  return false;
}

void LoadGenerator::Go() {
  if (dispatcher_.joinable()) return;
  // Enough senders that a request waiting out a hung endpoint does not hold the others back.
  for (int i = 0; i < 8; ++i) workers_.emplace_back([this] { Worker(); });
  dispatcher_ = std::thread([this] { Dispatch(); });
}

void LoadGenerator::Stop() {
  stop_ = true;
  cv_.notify_all();
  if (dispatcher_.joinable()) dispatcher_.join();
  for (auto& w : workers_) w.join();
  workers_.clear();
  if (slices_) slices_->Stop();
}

std::vector<LoadSample> LoadGenerator::Samples() const {
  std::lock_guard<std::mutex> lock(mu_);
  auto out = samples_;
  std::sort(out.begin(), out.end(),
            [](const LoadSample& a, const LoadSample& b) { return a.due_us < b.due_us; });
  return out;
}

void LoadGenerator::Dispatch() {
  // Open loop: each request is due at its place in the schedule, whenever it is sent.
  const auto period = std::chrono::microseconds(1000000 / rate_);
  const auto start = std::chrono::steady_clock::now();
  const int64_t start_us = NowUs();
  auto next = start;
  while (!stop_) {
    std::this_thread::sleep_until(next);
    {
      std::lock_guard<std::mutex> lock(mu_);
      due_.push_back(start_us +
                     std::chrono::duration_cast<std::chrono::microseconds>(next - start).count());
    }
    cv_.notify_one();
    next += period;
  }
}

std::optional<std::string> LoadGenerator::NextEndpoint() {
  std::vector<std::string> ready;
  for (const auto& s : slices_->Items()) ready.insert(ready.end(), s.ready.begin(), s.ready.end());
  if (ready.empty()) return std::nullopt;
  std::sort(ready.begin(), ready.end());
  std::lock_guard<std::mutex> lock(mu_);
  return ready[rr_++ % ready.size()];
}

void LoadGenerator::Worker() {
  for (;;) {
    int64_t due = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !due_.empty(); });
      if (stop_) return;
      due = due_.front();
      due_.erase(due_.begin());
    }
    LoadSample s;
    s.due_us = due;
    if (auto ep = NextEndpoint()) {
      s.status = HttpGetStatus(*ep);
      s.ms = static_cast<double>(NowUs() - due) / 1000.0;
    }
    std::lock_guard<std::mutex> lock(mu_);
    samples_.push_back(s);
  }
}

ServiceFigures SummariseService(const std::vector<LoadSample>& samples, int64_t t0_us,
                                int64_t restored_us) {
  ServiceFigures f;
  std::vector<double> base, during;
  for (const auto& s : samples) {
    if (s.due_us < t0_us) {
      base.push_back(s.ms);
      ++f.baseline_requests;
      continue;
    }
    ++f.requests;
    if (restored_us == 0 || s.due_us <= restored_us) during.push_back(s.ms);
    if (s.ok()) continue;
    ++f.errors;
    const int64_t answered = s.due_us + static_cast<int64_t>(s.ms * 1000);
    if (!f.first_error_us || answered < f.first_error_us) f.first_error_us = answered;
    f.last_error_us = std::max(f.last_error_us, answered);
    if (restored_us && s.due_us > restored_us) ++f.errors_after_restored;
  }
  f.error_window_ms = f.last_error_us ? static_cast<double>(f.last_error_us - t0_us) / 1000.0 : 0;
  f.p50_ms = Percentile(during, 50);
  f.p99_ms = Percentile(during, 99);
  f.baseline_p99_ms = Percentile(base, 99);
  return f;
}

TrainingFigures SummariseTraining(const std::string& checkpoint_dir,
                                  const std::multimap<std::string, std::string>& faulty_pods) {
  TrainingFigures f;
  std::string missing;
  double worst = -1, worst_periodic = -1;
  bool all_resumed = true;
  std::set<std::string> unmeasured;  // Deployments with a rank not measured
  for (const auto& [app, pod] : faulty_pods) {
    ++f.ranks;
    // The slot the faulty GPU's pod held, what it reached, and the process after it.
    bool found = false;
    for (int k = 0; k < 4096 && !found; ++k) {
      std::ifstream in(fmt::format("{}/{}/slot-{}.jsonl", checkpoint_dir, app, k));
      if (!in) break;
      std::vector<json> ev;
      for (std::string line; std::getline(in, line);) {
        json j = json::parse(line, nullptr, false);
        if (j.is_object()) ev.push_back(std::move(j));
      }
      int64_t pid = 0, lost_step = -1, lost_partial = 0, exit_step = -1, resumed_step = -1;
      int64_t requested_step = -1, requested_ms = 0, requested_at = 0, resumed_at = 0;
      bool resumed = false;
      for (const auto& e : ev) {
        const std::string what = e.value("event", "");
        if (!pid) {
          if (what == "start" && e.value("pod", "") == pod) pid = e.value("pid", int64_t{0});
          continue;
        }
        if (e.value("pid", int64_t{0}) == pid) {
          if (what == "gpu_lost") {
            lost_step = e.value("step", int64_t{0});
            lost_partial = e.value("partial_ms", int64_t{0});
          } else if (what == "checkpoint" && e.value("why", "") == "requested") {
            requested_step = e.value("step", int64_t{0});
            requested_ms = e.value("took_ms", int64_t{0});
            requested_at = e.value("t_ms", int64_t{0});
          } else if (what == "exit") {
            exit_step = e.value("step", int64_t{0});
          }
        } else if (what == "start" && resumed_step < 0 && e.value("gpu", true)) {
          resumed_step = e.value("step", int64_t{0});
          resumed = e.value("resumed", false);
          resumed_at = e.value("t_ms", int64_t{0});
        }
      }
      if (!pid) continue;
      found = true;
      const int64_t reached = lost_step >= 0 ? lost_step : exit_step;
      if (reached < 0 || resumed_step < 0) {
        if (reached >= 0) ++f.stalled_ranks;
        unmeasured.insert(app);
        missing += fmt::format(
            "{}{}: {}", missing.empty() ? "" : "; ", pod,
            reached < 0 ? "no record of the step it reached"
                        : fmt::format("step {} reached, no process took its slot", reached));
        continue;
      }
      const double lost =
          (static_cast<double>(std::max<int64_t>(0, reached - resumed_step)) * kTrainStepMs +
           static_cast<double>(lost_partial)) /
          1000.0;
      if (app == "trainer") {
        const bool from_request = resumed && requested_step >= 0 && resumed_step == requested_step;
        all_resumed = all_resumed && from_request;
        f.detail += fmt::format("{}{}: step {} reached, checkpoint {}, resumed at step {}",
                                f.detail.empty() ? "" : "; ", pod, reached,
                                requested_step >= 0 ? "at step " + std::to_string(requested_step)
                                                    : std::string("never requested"),
                                resumed_step);
        if (lost <= worst) continue;
        worst = lost;
        f.steps_done = reached;
        f.checkpoint_ms = static_cast<double>(requested_ms);
        f.checkpoint_us = requested_at * 1000;
        f.resumed_us = resumed_at * 1000;
      } else {
        worst_periodic = std::max(worst_periodic, lost);
        f.detail += fmt::format("{}{}: step {} reached, resumed at step {} (periodic only)",
                                f.detail.empty() ? "" : "; ", pod, reached, resumed_step);
      }
    }
    if (!found) {
      unmeasured.insert(app);
      missing += fmt::format("{}{}: no slot log names it", missing.empty() ? "" : "; ", pod);
    }
  }
  // A rank not measured leaves its job's figure unmeasured: the worst rank is not known.
  f.work_lost_s = unmeasured.count("trainer") ? -1 : worst;
  f.resumed = f.work_lost_s >= 0 && all_resumed;
  f.periodic_only_work_lost_s = unmeasured.count("trainer-periodic") ? -1 : worst_periodic;
  if (!missing.empty()) f.detail += (f.detail.empty() ? "" : "; ") + missing;
  return f;
}

}  // namespace gpuheal::drill
