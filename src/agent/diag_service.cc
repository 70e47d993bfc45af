#include "agent/diag_service.h"

#include <fmt/format.h>

#include <filesystem>

#include "agent/diag_upload.h"
#include "core/log.h"
#include "core/time.h"

namespace gpuheal {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

bool Terminal(const std::string& phase) { return phase == "Succeeded" || phase == "Failed"; }

std::string Now() { return kube::MicroTime(std::chrono::system_clock::now()); }

}  // namespace

DiagnosticService::DiagnosticService(std::unique_ptr<kube::Api> api, DiagnosticServiceOptions o,
                                     Metrics& metrics)
    : api_(std::move(api)),
      o_(std::move(o)),
      metrics_(metrics),
      collect_seconds_(
          &metrics.GetHistogram("gpuheal_diagnostic_collect_seconds",
                                "From a NodeDiagnostic request's start to its bundle written",
                                {0.5, 1, 2, 3, 5, 7, 10, 20, 60})),
      last_bundle_bytes_(&metrics.GetGauge("gpuheal_diagnostic_last_bundle_bytes",
                                           "Size of the last bundle built")) {}

DiagnosticService::~DiagnosticService() { Stop(); }

Status DiagnosticService::Start() {
  std::error_code ec;
  fs::create_directories(o_.config.dir, ec);
  if (ec) {
    return Error{
        fmt::format("diagnostics.dir {}: cannot create it: {} (set diagnostics.dir to a "
                    "writable directory, or diagnostics.enabled: false)",
                    o_.config.dir, ec.message())};
  }
  fs::permissions(o_.config.dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  informer_ = std::make_unique<kube::Informer<kube::NodeDiagnostic>>(
      *api_,
      std::string(kube::kNodeDiagnosticsPath) +
          "?fieldSelector=" + kube::UrlEncode("spec.nodeName=" + o_.node_name),
      kube::DecodeNodeDiagnosticList, kube::DecodeNodeDiagnostic);
  informer_->SetHandlers(
      {[this](const kube::NodeDiagnostic& d) { OnRequest(d); },
       [this](const kube::NodeDiagnostic&, const kube::NodeDiagnostic& d) { OnRequest(d); },
       nullptr});
  worker_ = std::thread([this] { Work(); });
  informer_->Start();
  return Status::Ok();
}

void DiagnosticService::Stop() {
  if (informer_) informer_->Stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cancel_ = true;
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void DiagnosticService::OnRequest(const kube::NodeDiagnostic& d) {
  if (d.node_name != o_.node_name || Terminal(d.phase) || d.meta.deleting) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (handled_.count(d.meta.name) || queued_.count(d.meta.name)) return;
  queued_.insert(d.meta.name);
  queue_.push_back(d.meta.name);
  cv_.notify_all();
}

void DiagnosticService::Work() {
  auto next_sweep = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (std::chrono::steady_clock::now() >= next_sweep) {
      lock.unlock();
      Sweep();
      lock.lock();
      next_sweep = std::chrono::steady_clock::now() + o_.sweep_period;
      continue;
    }
    if (queue_.empty()) {
      cv_.wait_until(lock, next_sweep, [this] { return stop_ || !queue_.empty(); });
      continue;
    }
    const std::string name = queue_.front();
    queue_.pop_front();
    queued_.erase(name);
    handled_.insert(name);
    lock.unlock();
    bool started = true;
    if (auto d = informer_->Get(name); d && !Terminal(d->phase)) started = Handle(*d);
    lock.lock();
    if (!started) {
      // The API server did not take the first status write: again in a while, after the others.
      handled_.erase(name);
      cv_.wait_for(lock, std::chrono::seconds(2), [this] { return stop_; });
      if (!queued_.count(name)) {
        queued_.insert(name);
        queue_.push_back(name);
      }
    }
  }
}

long DiagnosticService::Patch(const std::string& name, const nlohmann::json& status) {
  auto r = api_->Patch(std::string(kube::kNodeDiagnosticsPath) + "/" + name + "/status",
                       kube::PatchType::kMerge, {{"status", status}});
  if (!r || !r->ok()) {
    Log("warn", "diagnostics: cannot write the request's status",
        {{"request", name}, {"error", r ? r->Describe() : r.error().message}});
  }
  return r ? r->status : 0;
}

bool DiagnosticService::Handle(const kube::NodeDiagnostic& d) {
  const auto started = std::chrono::steady_clock::now();
  const std::string start_time = Now();
  auto elapsed = [&] {
    return std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - started)
        .count();
  };
  auto outcomes = [&](const std::string& phase) -> Counter& {
    return metrics_.GetCounter("gpuheal_diagnostics_total",
                               "NodeDiagnostic requests this agent answered, by outcome",
                               {{"phase", phase}});
  };
  auto fail = [&](const std::string& message, nlohmann::json extra = nlohmann::json::object()) {
    extra["phase"] = "Failed";
    extra["message"] = message;
    extra["completionTime"] = Now();
    extra["durationMs"] = elapsed();
    Patch(d.meta.name, extra);
    outcomes("Failed").Inc();
    Log("warn", "diagnostics: request failed", {{"request", d.meta.name}, {"message", message}});
  };
  auto names = SelectCollectors(d.include, d.exclude);
  if (!names) {
    fail("spec.include/exclude: " + names.error().message);
    return true;
  }
  const bool resumed = d.phase == "Collecting" || d.phase == "Uploading";
  const long first =
      Patch(d.meta.name, {{"phase", "Collecting"},
                          {"startTime", start_time},
                          {"message", fmt::format("{}collecting {} on {}",
                                                  resumed ? "taken up again after an agent "
                                                            "restart: "
                                                          : "",
                                                  fmt::join(*names, ", "), o_.node_name)}});
  if (first == 404) return true;  // deleted meanwhile
  if (first < 200 || first >= 300) return false;
  Log("info", "diagnostics: collecting", {{"request", d.meta.name}, {"collectors", *names}});
  CollectContext ctx = o_.context;
  if (o_.agent_state) ctx.agent_state = o_.agent_state();
  std::vector<CollectorResult> results = RunCollectors(ctx, *names);
  std::vector<std::string> secrets = o_.secrets;
  if (const size_t q = d.upload_url.find('?'); q != std::string::npos)
    secrets.push_back(d.upload_url.substr(q + 1));
  Redactor(secrets).Apply(results);
  const std::string path = o_.config.dir + "/" + d.meta.name + ".tar.gz";
  BundleHeader h{o_.node_name, d.meta.name, GPUHEAL_VERSION, start_time};
  auto info = WriteBundle(path, h, std::move(results), o_.config.max_bytes);
  if (!info) {
    fail("building the bundle: " + info.error().message);
    return true;
  }
  // The collectors as the manifest says (after the size cap).
  nlohmann::json collectors = nlohmann::json::array();
  for (const auto& c : info->manifest["collectors"]) {
    nlohmann::json j = {{"name", c["name"]},
                        {"files", c["files"].size()},
                        {"bytes", c["bytes"]},
                        {"durationMs", c["duration_ms"]},
                        {"truncated", c["truncated"]}};
    if (!c["error"].get<std::string>().empty()) j["error"] = c["error"];
    collectors.push_back(std::move(j));
  }
  nlohmann::json bundle = {{"size", info->size},
                           {"sha256", info->sha256},
                           {"nodePath", path},
                           {"buildMs", info->build.count()}};
  collect_seconds_->Observe(static_cast<double>(elapsed()) / 1000.0);
  last_bundle_bytes_->Set(static_cast<double>(info->size));
  if (d.upload_url.empty()) {
    Patch(d.meta.name,
          {{"phase", "Succeeded"},
           {"message", fmt::format("bundle kept on the node at {} for {} s (no spec.upload)", path,
                                   o_.config.retention.count() / 1000)},
           {"completionTime", Now()},
           {"durationMs", elapsed()},
           {"bundle", bundle},
           {"collectors", collectors}});
    outcomes("Succeeded").Inc();
    return true;
  }
  bundle["location"] = UrlWithoutQuery(d.upload_url);
  Patch(d.meta.name, {{"phase", "Uploading"},
                      {"message", fmt::format("uploading {} bytes", info->size)},
                      {"bundle", bundle},
                      {"collectors", collectors}});
  UploadOptions uo;
  uo.timeout = o_.config.upload_timeout;
  uo.attempts = o_.config.upload_attempts;
  uo.cancel = &cancel_;
  UploadResult up = UploadFile(path, d.upload_url, uo);
  // The agent is stopping: the request stays Uploading, and the next agent takes it up again.
  if (!up.ok && cancel_) return true;
  // A server's error text may echo the request: never the URL's signature.
  up.message = Redactor(secrets).Apply(up.message);
  if (!up.ok) {
    // The bundle stays on the node for the retention time: the status says where.
    fail(up.message + fmt::format("; the bundle stays on the node at {} for {} s", path,
                                  o_.config.retention.count() / 1000),
         {{"attempts", up.attempts}, {"bundle", bundle}, {"collectors", collectors}});
    return true;
  }
  Patch(d.meta.name, {{"phase", "Succeeded"},
                      {"message", up.message},
                      {"attempts", up.attempts},
                      {"completionTime", Now()},
                      {"durationMs", elapsed()}});
  outcomes("Succeeded").Inc();
  Log("info", "diagnostics: bundle uploaded",
      {{"request", d.meta.name}, {"bytes", info->size}, {"ms", elapsed()}});
  return true;
}

void DiagnosticService::Sweep() {
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& e : fs::directory_iterator(o_.config.dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".tar.gz") && !name.ends_with(".part")) continue;
    std::error_code tec;
    const auto t = fs::last_write_time(e.path(), tec);
    if (tec || now - t < o_.config.retention) continue;
    fs::remove(e.path(), tec);
    if (!tec) Log("info", "diagnostics: bundle past its retention deleted", {{"file", name}});
  }
}

}  // namespace gpuheal
