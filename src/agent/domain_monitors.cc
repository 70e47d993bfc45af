#include "agent/domain_monitors.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fnmatch.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <systemd/sd-journal.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/dl_symbol.h"
#include "core/file.h"
#include "core/reasons.h"
#include "parse/kernel_parser.h"
#include "parse/keyword_scan.h"

namespace gpuheal {
namespace {

using SteadyClock = std::chrono::steady_clock;

Fault Observed(std::string_view reason, Condition c, FaultKind kind, std::string device,
               std::string message, std::string source, Severity sev = Severity::kFatal) {
  Fault f;
  f.kind = kind;
  f.reason = std::string(reason);
  f.condition = std::string(ToString(c));
  f.severity = sev;
  f.device = std::move(device);
  f.message = std::move(message);
  f.source = std::move(source);
  f.action = DefaultAction(sev);
  return f;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

bool InterfaceWatched(const std::vector<std::string>& patterns, const std::string& name) {
  for (const std::string& p : patterns) {
    if (fnmatch(p.c_str(), name.c_str(), 0) == 0) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Network

Result<std::unique_ptr<LinkMonitor>> LinkMonitor::Start(const NetworkMonitorConfig& config,
                                                        EventLoop& loop, MonitorQueue& queue,
                                                        Metrics& metrics, DomainSink sink) {
  auto watch = LinkWatch::Open();
  if (!watch) return watch.error();
  std::unique_ptr<LinkMonitor> m(new LinkMonitor(config, loop, metrics, std::move(sink)));
  m->watch_ = std::move(*watch);
  LinkMonitor* self = m.get();
  if (auto s = loop.Watch(m->watch_->fd(), EPOLLIN, [self](uint32_t) { self->OnReadable(); }); !s) {
    return s.error();
  }
  // An interface or port that vanished before a restart is still missing after it.
  for (const std::string& d : m->sink_.active_devices("netlink")) m->seen_.insert(d);
  for (const std::string& d : m->sink_.active_devices("infiniband")) m->ib_seen_.insert(d);
  if (auto s = m->watch_->RequestDump(); !s) return s.error();
  if (!config.infiniband_sysfs.empty()) {
    queue.Add(std::make_unique<FunctionMonitor>("infiniband-ports", config.infiniband_period,
                                                [self](ProcCache&) { self->CheckInfiniBand(); }));
  }
  return m;
}

LinkMonitor::~LinkMonitor() {
  if (watch_) loop_.Unwatch(watch_->fd());
}

void LinkMonitor::OnReadable() {
  bool done = false;
  auto s = watch_->Drain([this](const LinkState& l) { OnLink(l); }, &done);
  if (!s) {
    // Events were dropped: ask for the whole table again; what it says is the truth.
    sink_.log("warn", "network link monitor: " + s.error().message + "; reading every link again",
              {});
    links_.clear();
    dumped_ = false;
    if (auto d = watch_->RequestDump(); !d) {
      sink_.log("error", "network link monitor: " + d.error().message, {});
    }
    return;
  }
  if (done) dumped_ = true;
  if (dumped_) Report();
}

bool LinkMonitor::Required(const std::string& name) const {
  return std::find(config_.required.begin(), config_.required.end(), name) !=
         config_.required.end();
}

void LinkMonitor::OnLink(const LinkState& l) {
  if (!Required(l.name) && !InterfaceWatched(config_.interfaces, l.name)) return;
  metrics_
      .GetCounter("gpuheal_network_link_events_total", "rtnetlink events of watched interfaces",
                  {{"interface", l.name}})
      .Inc();
  auto it = links_.find(l.name);
  const bool had_carrier = it != links_.end() && it->second.admin_up && it->second.carrier;
  if (l.deleted) {
    if (it != links_.end()) links_.erase(it);
  } else {
    links_[l.name] = l;
  }
  seen_.insert(l.name);
  const bool has_carrier = !l.deleted && l.admin_up && l.carrier;
  if (!dumped_ || !had_carrier || has_carrier) return;
  // A loss of link: flapping is that, repeated within the window.
  metrics_
      .GetCounter("gpuheal_network_link_losses_total",
                  "Times a watched interface lost its link (down, no carrier or removed)",
                  {{"interface", l.name}})
      .Inc();
  auto& q = losses_[l.name];
  const auto now = SteadyClock::now();
  q.push_back(now);
  while (!q.empty() && now - q.front() > config_.flap_window) q.pop_front();
  if (static_cast<int>(q.size()) >= config_.flap_count) {
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(config_.flap_window).count();
    sink_.fault(Observed(
        reason::kNetworkInterfaceFlapping, Condition::kNetworkingReady, FaultKind::kNetwork, l.name,
        fmt::format("{} lost its link {} times within {}s", l.name, q.size(), secs), "netlink",
        Severity::kWarn));
    q.clear();
  }
}

void LinkMonitor::Report() {
  std::set<std::string> names = seen_;
  names.insert(config_.required.begin(), config_.required.end());
  std::vector<Fault> faults;
  for (const std::string& name : names) {
    const bool required = Required(name);
    if (!required && !InterfaceWatched(config_.interfaces, name)) continue;  // config changed
    auto it = links_.find(name);
    if (it == links_.end()) {
      faults.push_back(Observed(
          reason::kNetworkInterfaceMissing, Condition::kNetworkingReady, FaultKind::kNetwork, name,
          required && !seen_.contains(name)
              ? fmt::format("{} (required by network.required) does not exist", name)
              : fmt::format("{} vanished (the kernel removed the interface)", name),
          "netlink"));
      continue;
    }
    const LinkState& l = it->second;
    if (!l.admin_up) {
      faults.push_back(Observed(reason::kInterfaceNotUp, Condition::kNetworkingReady,
                                FaultKind::kNetwork, name,
                                fmt::format("{} is administratively down", name), "netlink"));
    } else if (!l.carrier) {
      faults.push_back(Observed(reason::kInterfaceNotRunning, Condition::kNetworkingReady,
                                FaultKind::kNetwork, name,
                                fmt::format("{} has no carrier (operstate {})", name,
                                            l.operstate.empty() ? "unknown" : l.operstate),
                                "netlink"));
    }
  }
  sink_.observed("netlink", std::move(faults));
}

void LinkMonitor::CheckInfiniBand() {
  // /sys/class/infiniband/<dev>/ports/<n>/state "4: ACTIVE", phys_state "5: LinkUp".
  std::vector<Fault> faults;
  std::set<std::string> present;
  std::error_code ec;
  const std::filesystem::path root(config_.infiniband_sysfs);
  if (std::filesystem::is_directory(root, ec)) {
    std::vector<std::filesystem::path> devs;
    for (const auto& d : std::filesystem::directory_iterator(root, ec)) devs.push_back(d.path());
    std::sort(devs.begin(), devs.end());
    for (const auto& dev : devs) {
      std::vector<std::filesystem::path> ports;
      for (const auto& p : std::filesystem::directory_iterator(dev / "ports", ec))
        ports.push_back(p.path());
      std::sort(ports.begin(), ports.end());
      for (const auto& port : ports) {
        const std::string name = dev.filename().string() + "/" + port.filename().string();
        present.insert(name);
        ib_seen_.insert(name);
        const std::string state = Trim(ReadWholeFile((port / "state").string()).value_or(""));
        const std::string phys = Trim(ReadWholeFile((port / "phys_state").string()).value_or(""));
        const bool active = state.find("ACTIVE") != std::string::npos;
        const bool link_up = phys.empty() || phys.find("LinkUp") != std::string::npos;
        if (!active || !link_up) {
          faults.push_back(Observed(
              reason::kInfiniBandPortDown, Condition::kNetworkingReady, FaultKind::kNetwork, name,
              fmt::format("InfiniBand port {}: state \"{}\", phys_state \"{}\"", name,
                          state.empty() ? "unreadable" : state, phys.empty() ? "-" : phys),
              "infiniband"));
        }
      }
    }
  }
  for (const std::string& name : ib_seen_) {
    if (!present.contains(name)) {
      faults.push_back(Observed(reason::kInfiniBandPortDown, Condition::kNetworkingReady,
                                FaultKind::kNetwork, name,
                                fmt::format("InfiniBand port {} vanished", name), "infiniband"));
    }
  }
  sink_.observed("infiniband", std::move(faults));
}

// ---------------------------------------------------------------------------------------------
// Storage

Result<std::unique_ptr<MountMonitor>> MountMonitor::Start(const StorageMonitorConfig& config,
                                                          EventLoop& loop, MonitorQueue& queue,
                                                          DomainSink sink) {
  std::unique_ptr<MountMonitor> m(new MountMonitor(config, loop, std::move(sink)));
  MountMonitor* self = m.get();
  auto table = MountTableWatch::Open(config.mountinfo);
  if (!table) return table.error();
  m->table_.emplace(std::move(*table));
  // The kernel flags the mount table POLLPRI|POLLERR on every mount, unmount and remount.
  if (auto s = loop.Watch(m->table_->fd(), EPOLLPRI,
                          [self](uint32_t) {
                            self->ReadTable();
                            self->Report();
                          });
      !s) {
    return s.error();
  }
  auto timer = loop.AddTimer([self](uint32_t) { self->Report(); });
  if (!timer) return timer.error();
  m->deadline_timer_ = *timer;
  // A path that did not answer before a restart stays unanswered until a stat says otherwise.
  for (const std::string& d : m->sink_.active_devices("mount")) m->unresponsive_.insert(d);
  m->ReadTable();
  m->StartProbes();
  m->Report();
  queue.Add(std::make_unique<FunctionMonitor>("storage-mounts", config.period, [self](ProcCache&) {
    self->StartProbes();
    self->Report();
  }));
  return m;
}

MountMonitor::~MountMonitor() {
  if (table_) loop_.Unwatch(table_->fd());
}

void MountMonitor::ReadTable() {
  auto t = table_->Read();
  if (!t) {
    sink_.log("warn", "storage monitor: " + t.error().message, {});
    return;
  }
  mounts_ = std::move(*t);
}

void MountMonitor::StartProbes() {
  bool started = false;
  for (const std::string& path : config_.paths) {
    auto& p = probes_[path];
    if (p && !p->done) continue;  // still waiting for the last one: never two at once
    if (p) last_error_[path] = p->error;
    p = std::make_shared<Probe>();
    p->started = SteadyClock::now();
    // Detached: a stat on a dead NFS server or a hung FUSE daemon may never return, and the
    // agent must be able to go on (and to exit) without it.
    std::thread([p, path] {
      struct stat st;
      p->error = stat(path.c_str(), &st) == 0 ? 0 : errno;
      p->done = true;
    }).detach();
    started = true;
  }
  if (started) {
    loop_.ArmTimer(deadline_timer_, config_.stat_timeout + std::chrono::milliseconds(1));
  }
}

void MountMonitor::Report() {
  std::vector<Fault> faults;
  std::set<std::string> unresponsive;
  const auto now = SteadyClock::now();
  for (const std::string& path : config_.paths) {
    auto it = probes_.find(path);
    int error = last_error_.contains(path) ? last_error_[path] : 0;
    bool overdue = false, pending = false;
    double waited = 0;
    if (it != probes_.end() && it->second) {
      const Probe& p = *it->second;
      if (p.done) {
        error = p.error;
        last_error_[path] = p.error;
      } else {
        waited = std::chrono::duration<double>(now - p.started).count();
        overdue = now - p.started >= config_.stat_timeout;
        pending = !overdue;
      }
    }
    // A stat in flight decides nothing: the last answered one does (`error`), and before any
    // answered in this run, what was reported before (a restart while the path hangs).
    if (overdue || (pending && !last_error_.contains(path) && unresponsive_.contains(path))) {
      unresponsive.insert(path);
      faults.push_back(Observed(reason::kStorageMountUnresponsive, Condition::kStorageReady,
                                FaultKind::kStorage, path,
                                fmt::format("stat({}) has not answered for {:.1f}s (deadline {}ms)",
                                            path, waited, config_.stat_timeout.count()),
                                "mount"));
      continue;
    }
    if (error != 0 && error != ENOENT) {
      unresponsive.insert(path);
      faults.push_back(
          Observed(reason::kStorageMountUnresponsive, Condition::kStorageReady, FaultKind::kStorage,
                   path, fmt::format("stat({}) failed: {}", path, strerror(error)), "mount"));
      continue;
    }
    if (error == ENOENT) continue;  // nothing there to watch (yet)
    auto m = MountOf(mounts_, path);
    if (m && m->read_only) {
      faults.push_back(Observed(
          reason::kStorageMountReadOnly, Condition::kStorageReady, FaultKind::kStorage, path,
          fmt::format("{} is on {} ({} {}) mounted read-only (mount options {}, filesystem "
                      "options {})",
                      path, m->mount_point, m->fstype, m->source, m->options, m->super_options),
          "mount"));
    }
  }
  unresponsive_ = std::move(unresponsive);
  sink_.observed("mount", std::move(faults));
}

// ---------------------------------------------------------------------------------------------
// Container runtime

Result<std::unique_ptr<RuntimeMonitor>> RuntimeMonitor::Start(const RuntimeMonitorConfig& config,
                                                              EventLoop& loop, Metrics& metrics,
                                                              DomainSink sink) {
  std::unique_ptr<RuntimeMonitor> m(new RuntimeMonitor(config, loop, metrics, std::move(sink)));
  m->thread_ = std::thread([self = m.get()] { self->Run(); });
  return m;
}

RuntimeMonitor::~RuntimeMonitor() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cancel_ = true;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RuntimeMonitor::Run() {
  CriClient client(config_.endpoint);
  client.SetCancel(&cancel_);
  bool have_version = false;
  for (;;) {
    CriStatus st = client.Status(config_.timeout);
    if (cancel_) return;
    if (st.outcome == CriStatus::Outcome::kOk && !have_version) {
      if (auto v = client.Version(config_.timeout)) {
        have_version = true;
        std::string text = fmt::format("{} {} (CRI {})", v->runtime_name, v->runtime_version,
                                       v->runtime_api_version);
        loop_.Post([this, text] { version_ = text; });
      }
    }
    if (st.outcome != CriStatus::Outcome::kOk) have_version = false;
    loop_.Post([this, st] { OnStatus(st); });
    std::unique_lock<std::mutex> l(mu_);
    if (cv_.wait_for(l, config_.period, [this] { return stop_; })) return;
  }
}

void RuntimeMonitor::OnStatus(const CriStatus& st) {
  const std::string& ep = config_.endpoint;
  std::vector<Fault> faults;
  std::string outcome = "ready";
  auto add = [&](std::string_view reason, std::string message) {
    faults.push_back(Observed(reason, Condition::kContainerRuntimeReady, FaultKind::kRuntime, ep,
                              std::move(message), "cri"));
    outcome = std::string(reason);
  };
  if (st.outcome == CriStatus::Outcome::kOk) seen_ = true;
  if (st.outcome == CriStatus::Outcome::kUnreachable && !seen_ &&
      sink_.active_devices("cri").empty()) {
    // No runtime on this host yet (a node without Kubernetes, or the agent started first): a
    // socket that never answered is not a runtime that failed. Once it answers, losing it is.
    if (last_outcome_ != "absent") {
      sink_.log("info", "container runtime: no CRI runtime answers yet; watching for it",
                {{"endpoint", ep}, {"detail", st.error}});
      last_outcome_ = "absent";
    }
    sink_.observed("cri", {});
    return;
  }
  switch (st.outcome) {
    case CriStatus::Outcome::kUnreachable:
    case CriStatus::Outcome::kError:
      add(reason::kContainerRuntimeUnreachable,
          fmt::format("CRI Status on {} failed: {}", ep, st.error));
      break;
    case CriStatus::Outcome::kDeadline:
      add(reason::kContainerRuntimeUnresponsive,
          fmt::format("CRI Status on {} did not answer within {}ms", ep, config_.timeout.count()));
      break;
    case CriStatus::Outcome::kOk: {
      bool runtime_seen = false;
      for (const CriCondition& c : st.conditions) {
        if (c.type == "RuntimeReady") {
          runtime_seen = true;
          if (!c.status) {
            add(reason::kContainerRuntimeNotReady,
                fmt::format("{}: RuntimeReady false: {} {}", version_.empty() ? ep : version_,
                            c.reason, c.message));
          }
        } else if (c.type == "NetworkReady" && !c.status && config_.network_ready) {
          add(reason::kContainerRuntimeNetworkNotReady,
              fmt::format("{}: NetworkReady false: {} {}", version_.empty() ? ep : version_,
                          c.reason, c.message));
        }
      }
      if (!runtime_seen) {
        add(reason::kContainerRuntimeNotReady,
            fmt::format("{}: CRI Status names no RuntimeReady condition", ep));
      }
      break;
    }
  }
  metrics_
      .GetGauge("gpuheal_container_runtime_status_seconds",
                "How long the last CRI Status call took")
      .Set(std::chrono::duration<double>(st.took).count());
  metrics_
      .GetGauge("gpuheal_container_runtime_ready",
                "1 when the last CRI Status said the runtime (and its network) is ready")
      .Set(faults.empty() ? 1 : 0);
  if (outcome != last_outcome_) {
    sink_.log(faults.empty() ? "info" : "warn", "container runtime: " + outcome,
              {{"endpoint", ep},
               {"runtime", version_},
               {"detail", faults.empty() ? std::string() : faults.front().message}});
    last_outcome_ = outcome;
  }
  sink_.observed("cri", std::move(faults));
}

// ---------------------------------------------------------------------------------------------
// The previous boot

std::optional<PreviousBootCrash> FindCrashInLines(const std::vector<std::string>& lines) {
  static const KeywordScanner scanner(KernelKeywords());
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view m = lines[i];
    // pstore and console lines carry "<level>[ seconds] " in front of the message.
    if (m.size() > 2 && m[0] == '<') {
      const size_t gt = m.find('>');
      if (gt != std::string_view::npos && gt < 5) m.remove_prefix(gt + 1);
    }
    if (!m.empty() && m[0] == '[') {
      const size_t close = m.find("] ");
      if (close != std::string_view::npos && close < 24) m.remove_prefix(close + 2);
    }
    const auto sig = ParseKernel(m, scanner.Scan(m));
    if (!sig) continue;
    const std::string_view r = sig->reason;
    if (r != reason::kKernelPanic && r != reason::kKernelOops && r != reason::kKernelBug &&
        r != reason::kKernelMachineCheck && r != reason::kKernelHardLockup) {
      continue;
    }
    PreviousBootCrash c;
    c.kind = std::string(r);
    for (size_t j = i; j < lines.size() && j < i + 10; ++j) c.lines.push_back(lines[j]);
    c.lines[0] = std::string(m);
    return c;
  }
  return std::nullopt;
}

std::optional<PreviousBootCrash> ReadPstoreCrash(const std::string& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind("dmesg-", 0) == 0) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    auto text = ReadWholeFile(f.string());
    if (!text) continue;
    std::vector<std::string> lines;
    size_t start = 0;
    while (start < text->size()) {
      size_t nl = text->find('\n', start);
      if (nl == std::string::npos) nl = text->size();
      lines.push_back(text->substr(start, nl - start));
      start = nl + 1;
    }
    if (auto c = FindCrashInLines(lines)) {
      c->source = "pstore " + f.filename().string();
      return c;
    }
  }
  return std::nullopt;
}

namespace {

// libsystemd's journal reader, loaded when a journal is read (once per boot) rather than linked:
// it and its compression libraries would otherwise sit in every agent's memory for good.
struct JournalApi {
  decltype(&sd_journal_open_directory) open_directory = nullptr;
  decltype(&sd_journal_close) close = nullptr;
  decltype(&sd_journal_add_match) add_match = nullptr;
  decltype(&sd_journal_seek_tail) seek_tail = nullptr;
  decltype(&sd_journal_previous) previous = nullptr;
  decltype(&sd_journal_get_monotonic_usec) get_monotonic_usec = nullptr;
  decltype(&sd_journal_get_data) get_data = nullptr;
  decltype(&sd_id128_to_string) id128_to_string = nullptr;
  void* handle = nullptr;

  static Result<JournalApi> Load() {
    JournalApi a;
    auto opened = OpenLibrary("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL,
                              "the agent reads the previous boot's journal through it; install "
                              "libsystemd0");
    if (!opened) return opened.error();
    a.handle = *opened;
    std::string missing;
    if (!ResolveSymbol(a.handle, "sd_journal_open_directory", a.open_directory, missing) ||
        !ResolveSymbol(a.handle, "sd_journal_close", a.close, missing) ||
        !ResolveSymbol(a.handle, "sd_journal_add_match", a.add_match, missing) ||
        !ResolveSymbol(a.handle, "sd_journal_seek_tail", a.seek_tail, missing) ||
        !ResolveSymbol(a.handle, "sd_journal_previous", a.previous, missing) ||
        !ResolveSymbol(a.handle, "sd_journal_get_monotonic_usec", a.get_monotonic_usec, missing) ||
        !ResolveSymbol(a.handle, "sd_journal_get_data", a.get_data, missing) ||
        !ResolveSymbol(a.handle, "sd_id128_to_string", a.id128_to_string, missing)) {
      dlclose(a.handle);
      return Error{"libsystemd.so.0 has no " + missing + ": systemd 229 or newer is needed"};
    }
    return a;
  }
};

}  // namespace

Result<JournalBoot> ReadJournalPreviousBoot(const std::string& dir,
                                            const std::string& current_boot_id, size_t max_lines) {
  auto api = JournalApi::Load();
  if (!api) return api.error();
  const JournalApi& sd = *api;
  std::unique_ptr<void, int (*)(void*)> unload(sd.handle, dlclose);
  sd_journal* j = nullptr;
  int r = sd.open_directory(&j, dir.c_str(), 0);
  if (r < 0) return Error{fmt::format("sd_journal_open_directory({}): {}", dir, strerror(-r))};
  std::unique_ptr<sd_journal, decltype(sd.close)> closer(j, sd.close);
  sd.add_match(j, "_TRANSPORT=kernel", 0);
  // Backwards from the newest kernel message: skip this boot's, keep the boot before it.
  std::string current = current_boot_id;
  current.erase(std::remove(current.begin(), current.end(), '-'), current.end());
  JournalBoot out;
  sd.seek_tail(j);
  while (sd.previous(j) > 0) {
    sd_id128_t boot;
    uint64_t usec = 0;
    if (sd.get_monotonic_usec(j, &usec, &boot) < 0) continue;
    char id[SD_ID128_STRING_MAX];
    sd.id128_to_string(boot, id);
    if (current == id) continue;
    if (out.boot_id.empty()) out.boot_id = id;
    if (out.boot_id != id) break;  // the boot before the previous one
    const void* data = nullptr;
    size_t len = 0;
    if (sd.get_data(j, "MESSAGE", &data, &len) >= 0 && len > 8) {
      out.lines.emplace_back(static_cast<const char*>(data) + 8, len - 8);  // "MESSAGE="
    }
    if (out.lines.size() >= max_lines) break;
  }
  std::reverse(out.lines.begin(), out.lines.end());
  return out;
}

std::optional<PreviousBootCrash> ReadJournalCrash(const std::string& dir,
                                                  const std::string& current_boot_id,
                                                  std::string* error) {
  auto boot = ReadJournalPreviousBoot(dir, current_boot_id);
  if (!boot) {
    if (error) *error = boot.error().message;
    return std::nullopt;
  }
  auto c = FindCrashInLines(boot->lines);
  if (c) {
    c->source = "journal " + dir;
    c->boot_id = boot->boot_id;
  }
  return c;
}

void ReportPreviousBoot(const PreviousBootConfig& config, const std::string& state_dir,
                        const std::string& boot_id, const DomainSink& sink) {
  if (!config.enabled) return;
  // Once per boot: the boot whose previous boot was looked at is remembered.
  const std::string mark = state_dir + "/previous-boot.json";
  if (auto text = ReadWholeFile(mark)) {
    const auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_object() && j.value("boot_id", "") == boot_id) return;
  }
  std::optional<PreviousBootCrash> crash;
  if (!config.pstore.empty()) crash = ReadPstoreCrash(config.pstore);
  std::string journal_error;
  if (!crash && !config.journal.empty() && std::filesystem::is_directory(config.journal)) {
    crash = ReadJournalCrash(config.journal, boot_id, &journal_error);
  }
  if (!journal_error.empty()) sink.log("warn", "previous boot: " + journal_error, {});
  if (crash) {
    Fault f = Observed(reason::kKernelCrashPreviousBoot, Condition::kKernelReady,
                       FaultKind::kKernel, crash->kind,
                       fmt::format("the previous boot{} ended in {} ({}): {}",
                                   crash->boot_id.empty() ? "" : " " + crash->boot_id, crash->kind,
                                   crash->source, fmt::join(crash->lines, " | ")),
                       crash->source.substr(0, crash->source.find(' ')), Severity::kWarn);
    sink.fault(std::move(f));
  }
  const nlohmann::json j = {{"boot_id", boot_id},
                            {"crash", crash ? crash->kind : std::string()},
                            {"source", crash ? crash->source : std::string()}};
  if (auto s = WriteFileAtomic(mark, j.dump() + "\n"); !s) {
    sink.log("warn", "previous boot: cannot remember that this boot was checked",
             {{"error", s.error().message}});
  }
}

}  // namespace gpuheal
