#include "agent/diag_collectors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "agent/domain_monitors.h"
#include "core/curl_library.h"
#include "core/file.h"
#include "core/subprocess.h"
#include "sources/cri_client.h"
#include "sources/dcgm_source.h"
#include "sources/nvml_source.h"

extern char** environ;

namespace gpuheal {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kMaxKernelBytes = 32u << 20;  // far above any ring buffer (log_buf_len)
constexpr size_t kMaxFileBytes = 8u << 20;     // one pstore record, one /proc file
constexpr size_t kMaxJournalLines = 200000;
constexpr size_t kMaxCommandOutput = 16u << 20;

std::string ReadSmall(const std::string& path, size_t max = kMaxFileBytes) {
  auto text = ReadWholeFile(path);
  if (!text) return "";
  if (text->size() > max) text->resize(max);
  return *text;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// /dev/kmsg: "<prio>,<seq>,<usec>,<flags>;<message>\n[ KEY=VALUE\n]..." per read().
void CollectKernel(const CollectContext& ctx, Clock::time_point deadline, CollectorResult& out) {
  const int fd = open(ctx.kmsg_path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    out.error = fmt::format("cannot open {}: {}", ctx.kmsg_path, std::strerror(errno));
    return;
  }
  std::string text;
  std::vector<char> buf(8192 + 64);
  size_t records = 0, lost = 0;
  bool cut = false;
  while (true) {
    if (Clock::now() >= deadline) {
      out.error = "deadline reached while reading the ring buffer; what was read is kept";
      break;
    }
    const ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EPIPE) {  // overwritten while we read: the next read continues after it
        ++lost;
        continue;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN)
        out.error = fmt::format("read {}: {}", ctx.kmsg_path, std::strerror(errno));
      break;
    }
    if (n == 0) break;
    std::string_view rec(buf.data(), static_cast<size_t>(n));
    const size_t semi = rec.find(';');
    if (semi == std::string_view::npos) continue;
    std::string_view head = rec.substr(0, semi), body = rec.substr(semi + 1);
    unsigned long long prio = 0, seq = 0, usec = 0;
    std::sscanf(std::string(head).c_str(), "%llu,%llu,%llu", &prio, &seq, &usec);
    text += fmt::format("[{:6}.{:06}] <{}> seq={} {}", usec / 1000000, usec % 1000000, prio & 7,
                        seq, body);
    if (text.empty() || text.back() != '\n') text += '\n';
    ++records;
    if (text.size() > kMaxKernelBytes) {
      cut = true;
      break;
    }
  }
  close(fd);
  if (lost) text += fmt::format("# {} records were overwritten while the buffer was read\n", lost);
  out.files.push_back({"dmesg.txt", std::move(text), cut});
  out.files.push_back(
      {"summary.json", nlohmann::json{{"records", records}, {"overwritten", lost}}.dump() + "\n"});
}

void CollectPreviousBoot(const CollectContext& ctx, Clock::time_point, CollectorResult& out) {
  nlohmann::json summary = {{"pstore_dir", ctx.previous_boot.pstore},
                            {"journal_dir", ctx.previous_boot.journal}};
  nlohmann::json pstore = nlohmann::json::array();
  std::error_code ec;
  if (!ctx.previous_boot.pstore.empty()) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(ctx.previous_boot.pstore, ec)) {
      if (e.is_regular_file(ec)) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::string data = ReadSmall(f.string());
      pstore.push_back(f.filename().string());
      out.files.push_back({"pstore/" + f.filename().string(), std::move(data)});
    }
    if (auto crash = ReadPstoreCrash(ctx.previous_boot.pstore)) {
      summary["crash"] = {
          {"kind", crash->kind}, {"source", crash->source}, {"lines", crash->lines}};
    }
  }
  summary["pstore_files"] = pstore;
  if (!ctx.previous_boot.journal.empty() && fs::is_directory(ctx.previous_boot.journal, ec)) {
    auto boot = ReadJournalPreviousBoot(ctx.previous_boot.journal, ctx.boot_id, kMaxJournalLines);
    if (!boot) {
      summary["journal_error"] = boot.error().message;
      out.error = boot.error().message;
    } else {
      summary["journal_boot_id"] = boot->boot_id;
      summary["journal_lines"] = boot->lines.size();
      std::string text;
      for (const auto& l : boot->lines) text += l + "\n";
      if (!boot->lines.empty()) out.files.push_back({"journal-kernel.txt", std::move(text)});
      if (!summary.contains("crash")) {
        if (auto crash = FindCrashInLines(boot->lines)) {
          summary["crash"] = {
              {"kind", crash->kind}, {"source", "journal"}, {"lines", crash->lines}};
        }
      }
    }
  } else {
    summary["journal_error"] = "no persistent journal directory";
  }
  out.files.insert(out.files.begin(), {"summary.json", summary.dump(2) + "\n"});
}

void CollectNvml(const CollectContext& ctx, Clock::time_point, CollectorResult& out) {
  if (ctx.nvidia.nvml == NvidiaConfig::Use::kOff) {
    out.skipped = true;
    out.error = "nvidia.nvml is off";
    return;
  }
  auto src = NvmlSource::Open(ctx.nvidia.nvml_library);
  if (!src) {
    out.skipped = ctx.nvidia.nvml == NvidiaConfig::Use::kAuto;
    out.error = src.error().message;
    return;
  }
  NvmlSource& s = **src;
  const NvmlPoll poll = s.Poll();
  std::string text = fmt::format(
      "NVML library: {}\ndriver version: {}\nGPUs: {} (PCI bus: {} NVIDIA GPUs in sysfs)\n",
      ctx.nvidia.nvml_library, s.library().driver_version(), s.gpus().size(),
      CountPciGpus(ctx.sys_pci_devices));
  text += FormatNvmlReport(s, poll);
  out.files.push_back({"nvml.txt", std::move(text)});
}

void CollectDcgm(const CollectContext& ctx, Clock::time_point, CollectorResult& out) {
  if (!ctx.nvidia.dcgm) {
    out.skipped = true;
    out.error = "nvidia.dcgm.enabled is false";
    return;
  }
  DcgmOptions o;
  o.library = ctx.nvidia.dcgm_library;
  o.address = ctx.nvidia.dcgm_address;
  auto src = DcgmSource::Open(o, [](DcgmViolation) {});
  if (!src) {
    out.error = src.error().message;
    return;
  }
  auto incidents = (*src)->HealthCheck();
  if (!incidents) {
    out.error = incidents.error().message;
    return;
  }
  nlohmann::json j = {{"library", (*src)->library()},
                      {"gpu_ids", (*src)->gpu_ids()},
                      {"incidents", nlohmann::json::array()}};
  for (const auto& i : *incidents) {
    j["incidents"].push_back(
        {{"gpu_id", i.gpu_id}, {"system", i.system}, {"health", i.health}, {"message", i.message}});
  }
  out.files.push_back({"health.json", j.dump(2) + "\n"});
}

std::string FindProgram(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    size_t colon = p.find(':', start);
    if (colon == std::string::npos) colon = p.size();
    const std::string candidate = p.substr(start, colon - start) + "/" + name;
    if (colon > start && access(candidate.c_str(), X_OK) == 0) return candidate;
    start = colon + 1;
  }
  return "";
}

void CollectNvidiaSmi(const CollectContext& ctx, Clock::time_point deadline, CollectorResult& out) {
  const std::string prog = FindProgram(ctx.nvidia_smi);
  if (prog.empty()) {
    out.skipped = true;
    out.error = ctx.nvidia_smi.empty() ? "diagnostics.nvidia_smi is empty"
                                       : ctx.nvidia_smi + " is not on PATH";
    return;
  }
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  auto r = RunArgv({prog, "-q"}, std::max(left, milliseconds(1)), {}, kMaxCommandOutput);
  if (!r) {
    out.error = r.error().message;
    return;
  }
  if (r->timed_out)
    out.error = "nvidia-smi -q did not finish before the deadline";
  else if (r->exit_code != 0)
    out.error = fmt::format("nvidia-smi -q exited {}", r->exit_code);
  out.files.push_back({"nvidia-smi-q.txt", std::move(r->output), r->timed_out});
}

bool IsPciAddress(const std::string& s) {
  // dddd:bb:dd.f
  return s.size() == 12 && s[4] == ':' && s[7] == ':' && s[10] == '.';
}

nlohmann::json AerCounters(const std::string& file) {
  nlohmann::json j = nlohmann::json::object();
  const std::string text = ReadSmall(file);
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(start, nl - start);
    const size_t sp = line.rfind(' ');
    if (sp != std::string::npos) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(line.c_str() + sp + 1, &end, 10);
      if (end && *end == '\0') j[line.substr(0, sp)] = v;
    }
    start = nl + 1;
  }
  return j;
}

nlohmann::json PciDevice(const fs::path& dir, const std::string& role) {
  nlohmann::json d = {{"address", dir.filename().string()}, {"role", role}};
  for (const char* attr :
       {"vendor", "device", "subsystem_vendor", "subsystem_device", "class", "numa_node",
        "current_link_speed", "current_link_width", "max_link_speed", "max_link_width", "enable",
        "reset_method", "power_state"}) {
    std::error_code ec;
    if (fs::exists(dir / attr, ec)) d[attr] = Trim(ReadSmall((dir / attr).string(), 4096));
  }
  std::error_code ec;
  const fs::path driver = fs::read_symlink(dir / "driver", ec);
  if (!ec) d["driver"] = driver.filename().string();
  for (const char* aer : {"aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal"}) {
    if (fs::exists(dir / aer, ec)) d[aer] = AerCounters((dir / aer).string());
  }
  return d;
}

void CollectPcie(const CollectContext& ctx, Clock::time_point, CollectorResult& out) {
  std::error_code ec;
  std::map<std::string, nlohmann::json> devices;  // address -> device
  size_t nvidia = 0;
  for (const auto& e : fs::directory_iterator(ctx.sys_pci_devices, ec)) {
    const std::string vendor = Trim(ReadSmall((e.path() / "vendor").string(), 64));
    if (vendor != "0x10de") continue;
    ++nvidia;
    const std::string cls = Trim(ReadSmall((e.path() / "class").string(), 64));
    const std::string role = cls.rfind("0x03", 0) == 0     ? "gpu"
                             : cls.rfind("0x0680", 0) == 0 ? "nvswitch"
                                                           : "nvidia";
    nlohmann::json d = PciDevice(e.path(), role);
    // The bridges above it: the PCI addresses in its canonical sysfs path.
    const fs::path real = fs::canonical(e.path(), ec);
    std::vector<std::string> upstream;
    if (!ec) {
      for (fs::path p = real.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
        const std::string name = p.filename().string();
        if (!IsPciAddress(name)) continue;
        upstream.push_back(name);
        if (!devices.count(name)) devices[name] = PciDevice(p, "bridge");
      }
    }
    d["upstream"] = upstream;
    devices[e.path().filename().string()] = std::move(d);
  }
  if (ec && devices.empty()) {
    out.error = fmt::format("cannot list {}: {}", ctx.sys_pci_devices, ec.message());
  }
  nlohmann::json list = nlohmann::json::array();
  for (auto& [addr, d] : devices) list.push_back(std::move(d));
  out.files.push_back(
      {"devices.json",
       nlohmann::json{{"nvidia_devices", nvidia}, {"devices", list}}.dump(2) + "\n"});
}

void CollectSystem(const CollectContext& ctx, Clock::time_point, CollectorResult& out) {
  std::vector<std::string> missing;
  for (const char* f :
       {"interrupts", "meminfo", "cmdline", "modules", "uptime", "loadavg", "version", "cpuinfo"}) {
    auto text = ReadWholeFile(ctx.proc + "/" + f);
    if (!text) {
      missing.push_back(f);
      continue;
    }
    if (text->size() > kMaxFileBytes) text->resize(kMaxFileBytes);
    out.files.push_back({f, std::move(*text)});
  }
  if (auto os = ReadWholeFile(ctx.os_release)) out.files.push_back({"os-release", std::move(*os)});
  if (!missing.empty()) {
    std::string m;
    for (const auto& x : missing) m += (m.empty() ? "" : ", ") + ctx.proc + "/" + x;
    out.error = "cannot read " + m;
  }
}

void CollectAgent(const CollectContext& ctx, Clock::time_point, CollectorResult& out) {
  out.files.push_back({"state.json", ctx.agent_state.dump(2) + "\n"});
  out.files.push_back({"environment.txt", RedactedEnvironment()});
}

size_t WriteToString(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

void CollectRuntime(const CollectContext& ctx, Clock::time_point deadline, CollectorResult& out) {
  std::vector<std::string> errors;
  const auto left = [&] {
    return std::max(milliseconds(100),
                    std::chrono::duration_cast<milliseconds>(deadline - Clock::now()) / 2);
  };
  if (!ctx.cri_endpoint.empty()) {
    nlohmann::json j = {{"endpoint", ctx.cri_endpoint}};
    CriClient cri(ctx.cri_endpoint);
    auto v = cri.Version(left());
    if (v) {
      j["version"] = {{"runtime_name", v->runtime_name},
                      {"runtime_version", v->runtime_version},
                      {"runtime_api_version", v->runtime_api_version}};
      const CriStatus st = cri.Status(left());
      if (st.outcome == CriStatus::Outcome::kOk) {
        for (const auto& c : st.conditions) {
          j["conditions"].push_back({{"type", c.type},
                                     {"status", c.status},
                                     {"reason", c.reason},
                                     {"message", c.message}});
        }
      } else {
        j["status_error"] = st.error;
      }
    } else {
      j["error"] = v.error().message;
      errors.push_back("CRI " + ctx.cri_endpoint + ": " + v.error().message);
    }
    out.files.push_back({"cri.json", j.dump(2) + "\n"});
  }
  if (!ctx.kubelet_healthz.empty()) {
    std::string text;
    auto lib = LoadCurl();
    if (!lib) {
      text = "error: " + lib.error().message;
      errors.push_back(text);
    } else {
      const CurlLibrary& c = **lib;
      CURL* h = c.easy_init();
      std::string body;
      c.easy_setopt(h, CURLOPT_URL, ctx.kubelet_healthz.c_str());
      c.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
      c.easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(left().count()));
      c.easy_setopt(h, CURLOPT_WRITEFUNCTION, WriteToString);
      c.easy_setopt(h, CURLOPT_WRITEDATA, &body);
      const CURLcode rc = c.easy_perform(h);
      long code = 0;
      c.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
      c.easy_cleanup(h);
      if (rc != CURLE_OK) {
        text = fmt::format("GET {}: {}\n", ctx.kubelet_healthz, c.easy_strerror(rc));
        errors.push_back("kubelet: " + std::string(c.easy_strerror(rc)));
      } else {
        text = fmt::format("GET {}: {}\n{}\n", ctx.kubelet_healthz, code, body.substr(0, 4096));
      }
    }
    out.files.push_back({"kubelet-healthz.txt", std::move(text)});
  }
  for (const auto& e : errors) out.error += (out.error.empty() ? "" : "; ") + e;
}

using CollectFn = void (*)(const CollectContext&, Clock::time_point, CollectorResult&);

const std::vector<std::pair<std::string, CollectFn>>& Table() {
  static const std::vector<std::pair<std::string, CollectFn>> t = {
      {"kernel", CollectKernel},
      {"previous-boot", CollectPreviousBoot},
      {"nvml", CollectNvml},
      {"dcgm", CollectDcgm},
      {"nvidia-smi", CollectNvidiaSmi},
      {"pcie", CollectPcie},
      {"system", CollectSystem},
      {"agent", CollectAgent},
      {"runtime", CollectRuntime}};
  return t;
}

CollectorResult Run(const CollectContext& ctx, const std::string& name,
                    Clock::time_point deadline) {
  CollectorResult r;
  r.name = name;
  const auto started = Clock::now();
  for (const auto& [n, fn] : Table()) {
    if (n == name) fn(ctx, deadline, r);
  }
  r.duration = std::chrono::duration_cast<milliseconds>(Clock::now() - started);
  return r;
}

bool SecretName(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), ::toupper);
  for (const char* w : {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH"}) {
    if (name.find(w) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

CollectContext ContextFor(const AgentConfig& config) {
  CollectContext c;
  c.kmsg_path = config.kmsg_path;
  c.sys_pci_devices = config.nvidia.sysfs_pci_devices;
  c.previous_boot = config.previous_boot;
  c.nvidia = config.nvidia;
  c.nvidia_smi = config.diagnostics.nvidia_smi;
  c.cri_endpoint = config.monitors.runtime ? config.runtime.endpoint : "";
  c.kubelet_healthz = config.diagnostics.kubelet_healthz;
  c.timeout = config.diagnostics.collector_timeout;
  return c;
}

const std::vector<std::string>& CollectorNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& [name, fn] : Table()) n.push_back(name);
    return n;
  }();
  return names;
}

Result<std::vector<std::string>> SelectCollectors(const std::vector<std::string>& include,
                                                  const std::vector<std::string>& exclude) {
  const auto& all = CollectorNames();
  for (const auto* list : {&include, &exclude}) {
    for (const auto& n : *list) {
      if (std::find(all.begin(), all.end(), n) == all.end()) {
        std::string known;
        for (const auto& a : all) known += (known.empty() ? "" : ", ") + a;
        return Error{fmt::format("unknown collector \"{}\" (known: {})", n, known)};
      }
    }
  }
  std::vector<std::string> out;
  for (const auto& n : all) {
    if (!include.empty() && std::find(include.begin(), include.end(), n) == include.end()) continue;
    if (std::find(exclude.begin(), exclude.end(), n) != exclude.end()) continue;
    out.push_back(n);
  }
  return out;
}

CollectorResult RunCollector(const CollectContext& ctx, const std::string& name) {
  return Run(ctx, name, Clock::now() + ctx.timeout);
}

std::vector<CollectorResult> RunCollectors(const CollectContext& ctx,
                                           const std::vector<std::string>& names) {
  // Shared with the collectors' threads, which may outlive this call when one is late.
  struct Shared {
    CollectContext ctx;
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::optional<CollectorResult>> results;
    size_t done = 0;
  };
  auto shared = std::make_shared<Shared>();
  shared->ctx = ctx;
  shared->results.resize(names.size());
  const auto started = Clock::now();
  const auto deadline = started + ctx.timeout;
  for (size_t i = 0; i < names.size(); ++i) {
    std::thread([shared, i, name = names[i], deadline] {
      CollectorResult r = Run(shared->ctx, name, deadline);
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->results[i] = std::move(r);
      ++shared->done;
      shared->cv.notify_all();
    }).detach();
  }
  std::unique_lock<std::mutex> lock(shared->mu);
  // A little past the deadline: a collector that honours it has returned by then.
  shared->cv.wait_until(lock, deadline + milliseconds(250),
                        [&] { return shared->done == names.size(); });
  std::vector<CollectorResult> out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (shared->results[i]) {
      out.push_back(std::move(*shared->results[i]));
      continue;
    }
    CollectorResult late;
    late.name = names[i];
    late.timed_out = true;
    late.duration = std::chrono::duration_cast<milliseconds>(Clock::now() - started);
    late.error =
        fmt::format("deadline exceeded: not done after {} ms (diagnostics.collector_timeout)",
                    ctx.timeout.count());
    out.push_back(std::move(late));
  }
  return out;
}

Redactor::Redactor(std::vector<std::string> secrets) {
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    if (SecretName(kv.substr(0, eq))) secrets.push_back(kv.substr(eq + 1));
  }
  for (auto& s : secrets) {
    if (s.size() >= 6) secrets_.push_back(std::move(s));
  }
  // Longest first: a secret that contains another is replaced whole.
  std::sort(secrets_.begin(), secrets_.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  secrets_.erase(std::unique(secrets_.begin(), secrets_.end()), secrets_.end());
  for (
      const char* p : {
          R"re((?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,})re",
          R"re((?i)((?:token|password|passwd|secret|api[_-]?key|access[_-]?key|client-key-data)"?\s*[=:]\s*"?)[^\s",}&]+)re",
          R"re((X-Amz-(?:Signature|Credential|Security-Token)=)[^&\s"]+)re",
          R"re(()eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})re",
      }) {
    patterns_.push_back(std::make_unique<RE2>(p));
  }
}

std::string Redactor::Apply(std::string text) const {
  for (const auto& s : secrets_) {
    size_t at = 0;
    while ((at = text.find(s, at)) != std::string::npos) {
      text.replace(at, s.size(), "<redacted>");
      at += 10;
    }
  }
  for (const auto& re : patterns_) RE2::GlobalReplace(&text, *re, "\\1<redacted>");
  return text;
}

void Redactor::Apply(std::vector<CollectorResult>& results) const {
  for (auto& c : results) {
    for (auto& f : c.files) f.data = Apply(std::move(f.data));
    c.error = Apply(std::move(c.error));
  }
}

std::string RedactedEnvironment() {
  static const std::set<std::string> harmless = {"PATH",
                                                 "HOSTNAME",
                                                 "NODE_NAME",
                                                 "HOME",
                                                 "LANG",
                                                 "TZ",
                                                 "PWD",
                                                 "SHLVL",
                                                 "KUBERNETES_SERVICE_HOST",
                                                 "KUBERNETES_SERVICE_PORT",
                                                 "GPUHEAL_NVML_LIBRARY"};
  std::vector<std::string> lines;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    const std::string name = kv.substr(0, eq);
    if (eq == std::string::npos || !harmless.count(name) || SecretName(name)) {
      lines.push_back(name + "=<redacted>");
    } else {
      lines.push_back(kv);
    }
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace gpuheal
