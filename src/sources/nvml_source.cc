#include "sources/nvml_source.h"

#include <fmt/format.h>
#include <time.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "core/clock.h"
#include "core/pci.h"

namespace gpuheal {
namespace {

int64_t ThreadCpuUsec() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

bool Quiet(nvmlReturn_t r) {
  // Results that mean "this GPU or driver does not offer it": said once, then skipped.
  return r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_NO_PERMISSION ||
         r == NVML_ERROR_FUNCTION_NOT_FOUND;
}

std::string EventNames(unsigned long long mask) {
  std::string out;
  const std::pair<unsigned long long, const char*> names[] = {{0x1, "SingleBitEccError"},
                                                              {0x2, "DoubleBitEccError"},
                                                              {0x4, "PState"},
                                                              {0x8, "XidCriticalError"},
                                                              {0x10, "Clock"},
                                                              {0x80, "PowerSourceChange"},
                                                              {0x100, "MigConfigChange"},
                                                              {0x200, "SingleBitEccErrorStorm"},
                                                              {0x400, "DramRetirementEvent"},
                                                              {0x800, "DramRetirementFailure"},
                                                              {0x1000, "NonFatalPoison"},
                                                              {0x2000, "FatalPoison"},
                                                              {0x4000, "GpuUnavailableError"},
                                                              {0x8000, "GpuRecoveryAction"}};
  for (auto [bit, name] : names) {
    if (mask & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  }
  return out.empty() ? "none" : out;
}

template <typename T>
std::string Opt(const std::optional<T>& v) {
  return v ? fmt::format("{}", *v) : std::string("n/a");
}

}  // namespace

Result<std::unique_ptr<NvmlSource>> NvmlSource::Open(const std::string& library) {
  auto lib = NvmlLibrary::Load(library);
  if (!lib) return lib.error();
  std::unique_ptr<NvmlSource> s(new NvmlSource(std::move(*lib)));
  auto& f = s->lib_->fn;
  unsigned count = 0;
  if (nvmlReturn_t r = f.nvmlDeviceGetCount_v2(&count); r != NVML_SUCCESS) {
    return Error{fmt::format("nvmlDeviceGetCount_v2 failed: {}", s->lib_->Describe(r))};
  }
  for (unsigned i = 0; i < count; ++i) {
    NvmlGpu g;
    g.index = i;
    if (f.nvmlDeviceGetHandleByIndex_v2(i, &g.handle) != NVML_SUCCESS)
      continue;  // seen as a count mismatch
    if (f.nvmlDeviceGetPciInfo_v3(g.handle, &g.pci_info) != NVML_SUCCESS) continue;
    g.bus_id.assign(g.pci_info.busId, strnlen(g.pci_info.busId, sizeof g.pci_info.busId));
    g.pci = NormalisePci(g.bus_id).value_or(g.bus_id);
    char buf[96] = {};
    if (f.nvmlDeviceGetUUID && f.nvmlDeviceGetUUID(g.handle, buf, sizeof buf) == NVML_SUCCESS)
      g.uuid = buf;
    buf[0] = 0;
    if (f.nvmlDeviceGetName && f.nvmlDeviceGetName(g.handle, buf, sizeof buf) == NVML_SUCCESS)
      g.name = buf;
    if (f.nvmlDeviceGetSupportedEventTypes)
      f.nvmlDeviceGetSupportedEventTypes(g.handle, &g.supported_events);
    s->gpus_.push_back(std::move(g));
  }
  return s;
}

NvmlSource::~NvmlSource() { StopEvents(); }

const NvmlGpu* NvmlSource::Find(const std::string& pci) const {
  for (const NvmlGpu& g : gpus_) {
    if (g.pci == pci) return &g;
  }
  return nullptr;
}

std::vector<std::string> NvmlSource::StartEvents(std::function<void(NvmlEvent)> on_event,
                                                 std::chrono::milliseconds wait) {
  std::vector<std::string> notices;
  auto& f = lib_->fn;
  if (!f.nvmlEventSetCreate || !f.nvmlDeviceRegisterEvents || !f.nvmlEventSetWait_v2 ||
      !f.nvmlEventSetFree) {
    notices.push_back(
        "this NVML has no event API (nvmlEventSetWait_v2): driver events off, polls only");
    return notices;
  }
  if (nvmlReturn_t r = f.nvmlEventSetCreate(&set_); r != NVML_SUCCESS) {
    notices.push_back(fmt::format("nvmlEventSetCreate failed: {}: driver events off, polls only",
                                  lib_->Describe(r)));
    set_ = nullptr;
    return notices;
  }
  size_t registered = 0;
  for (NvmlGpu& g : gpus_) {
    const unsigned long long mask = g.supported_events & nvml::kWantedEvents;
    if (mask == 0) {
      notices.push_back(
          fmt::format("GPU {}: supports none of the driver events gpuheal uses", g.pci));
      continue;
    }
    if (nvmlReturn_t r = f.nvmlDeviceRegisterEvents(g.handle, mask, set_); r != NVML_SUCCESS) {
      notices.push_back(
          fmt::format("GPU {}: nvmlDeviceRegisterEvents failed: {}", g.pci, lib_->Describe(r)));
      continue;
    }
    g.registered_events = mask;
    ++registered;
  }
  if (registered == 0) return notices;
  stop_ = false;
  events_ = std::thread([this, cb = std::move(on_event), wait] { EventLoop(cb, wait); });
  return notices;
}

void NvmlSource::StopEvents() {
  stop_ = true;
  if (events_.joinable()) events_.join();
  if (set_ && lib_->fn.nvmlEventSetFree) lib_->fn.nvmlEventSetFree(set_);
  set_ = nullptr;
}

void NvmlSource::EventLoop(std::function<void(NvmlEvent)> on_event,
                           std::chrono::milliseconds wait) {
  auto& f = lib_->fn;
  int consecutive_errors = 0;
  while (!stop_) {
    nvmlEventData_t d{};
    const nvmlReturn_t r = f.nvmlEventSetWait_v2(set_, &d, static_cast<unsigned>(wait.count()));
    if (r == NVML_ERROR_TIMEOUT) {
      consecutive_errors = 0;
      continue;
    }
    if (r != NVML_SUCCESS) {
      // A lost GPU can make the wait fail; the polls find which one. Do not spin.
      if (++consecutive_errors > 3) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    consecutive_errors = 0;
    NvmlEvent e;
    e.received_usec = MonotonicUsec();
    e.type = d.eventType;
    e.data = d.eventData;
    for (const NvmlGpu& g : gpus_) {
      if (g.handle == d.device) {
        e.pci = g.pci;
        e.uuid = g.uuid;
        break;
      }
    }
    if (d.gpuInstanceId != nvml::kNoInstance) e.gpu_instance = static_cast<int>(d.gpuInstanceId);
    if (d.computeInstanceId != nvml::kNoInstance)
      e.compute_instance = static_cast<int>(d.computeInstanceId);
    on_event(std::move(e));
  }
}

bool NvmlSource::Skip(const NvmlGpu& g, const char* call) const {
  return skipped_.count(g.pci + "/" + call) > 0;
}

void NvmlSource::NoteOnce(const NvmlGpu& g, const char* call, nvmlReturn_t r,
                          std::vector<std::string>* notices) {
  if (!Quiet(r)) return;
  if (!skipped_.insert(g.pci + "/" + call).second) return;
  if (notices) {
    notices->push_back(fmt::format("GPU {}: {} answered {}: that check is off for this GPU", g.pci,
                                   call, lib_->Describe(r)));
  }
}

GpuSnapshot NvmlSource::PollGpu(const NvmlGpu& g, std::vector<std::string>* notices) {
  auto& f = lib_->fn;
  GpuSnapshot s;
  s.pci = g.pci;
  s.uuid = g.uuid;
  // Each reading: skipped once the GPU said it does not offer it; GPU_IS_LOST marks the GPU lost.
  auto call = [&](const char* name, auto fnptr, auto&&... args) -> bool {
    if (!fnptr || Skip(g, name)) return false;
    const nvmlReturn_t r = fnptr(std::forward<decltype(args)>(args)...);
    if (r == NVML_SUCCESS) return true;
    if (r == NVML_ERROR_GPU_IS_LOST) s.lost = true;
    NoteOnce(g, name, r, notices);
    return false;
  };
  unsigned long long ull = 0;
  if (call("nvmlDeviceGetTotalEccErrors(uncorrected,volatile)", f.nvmlDeviceGetTotalEccErrors,
           g.handle, 1, 0, &ull)) {
    s.ecc_volatile_uncorrected = ull;
  }
  if (s.lost) return s;  // the rest would only say the same thing, slowly
  if (call("nvmlDeviceGetTotalEccErrors(corrected,volatile)", f.nvmlDeviceGetTotalEccErrors,
           g.handle, 0, 0, &ull)) {
    s.ecc_volatile_corrected = ull;
  }
  unsigned corr = 0, unc = 0, pending = 0, failure = 0;
  if (call("nvmlDeviceGetRemappedRows", f.nvmlDeviceGetRemappedRows, g.handle, &corr, &unc,
           &pending, &failure)) {
    s.remap_uncorrectable = unc;
    s.remap_pending = pending;
    s.remap_failure = failure;
  }
  nvmlEnableState_t st = 0;
  if (call("nvmlDeviceGetRetiredPagesPendingStatus", f.nvmlDeviceGetRetiredPagesPendingStatus,
           g.handle, &st)) {
    s.retired_pages_pending = st != 0;
  }
  if (f.nvmlDeviceGetNvLinkState && !Skip(g, "nvmlDeviceGetNvLinkState")) {
    unsigned long long errors = 0;
    bool any_counter = false;
    for (unsigned link = 0; link < nvml::kNvLinkMaxLinks; ++link) {
      nvmlEnableState_t active = 0;
      const nvmlReturn_t r = f.nvmlDeviceGetNvLinkState(g.handle, link, &active);
      if (r == NVML_ERROR_GPU_IS_LOST) s.lost = true;
      if (r != NVML_SUCCESS)
        continue;  // links this GPU does not have answer NOT_SUPPORTED / INVALID_ARGUMENT
      (active ? s.nvlinks_up : s.nvlinks_down).push_back(link);
      if (!f.nvmlDeviceGetNvLinkErrorCounter) continue;
      for (nvmlNvLinkErrorCounter_t c : {0, 1, 2, 3}) {
        unsigned long long v = 0;
        if (f.nvmlDeviceGetNvLinkErrorCounter(g.handle, link, c, &v) == NVML_SUCCESS) {
          errors += v;
          any_counter = true;
        }
      }
    }
    if (s.nvlinks_up.empty() && s.nvlinks_down.empty()) {
      NoteOnce(g, "nvmlDeviceGetNvLinkState", NVML_ERROR_NOT_SUPPORTED, notices);
    }
    if (any_counter) s.nvlink_errors = errors;
  }
  if (f.nvmlDeviceGetCurrentClocksEventReasons) {
    if (call("nvmlDeviceGetCurrentClocksEventReasons", f.nvmlDeviceGetCurrentClocksEventReasons,
             g.handle, &ull)) {
      s.clock_event_reasons = ull;
    }
  } else if (call("nvmlDeviceGetCurrentClocksThrottleReasons",
                  f.nvmlDeviceGetCurrentClocksThrottleReasons, g.handle, &ull)) {
    s.clock_event_reasons = ull;
  }
  unsigned v = 0;
  if (call("nvmlDeviceGetCurrPcieLinkGeneration", f.nvmlDeviceGetCurrPcieLinkGeneration, g.handle,
           &v))
    s.pcie_gen = v;
  if (call("nvmlDeviceGetMaxPcieLinkGeneration", f.nvmlDeviceGetMaxPcieLinkGeneration, g.handle,
           &v))
    s.pcie_gen_max = v;
  if (call("nvmlDeviceGetCurrPcieLinkWidth", f.nvmlDeviceGetCurrPcieLinkWidth, g.handle, &v))
    s.pcie_width = v;
  if (call("nvmlDeviceGetMaxPcieLinkWidth", f.nvmlDeviceGetMaxPcieLinkWidth, g.handle, &v))
    s.pcie_width_max = v;
  if (call("nvmlDeviceGetTemperature", f.nvmlDeviceGetTemperature, g.handle, 0, &v))
    s.temperature = v;
  if (call("nvmlDeviceGetTemperatureThreshold(slowdown)", f.nvmlDeviceGetTemperatureThreshold,
           g.handle, 1, &v)) {
    s.temperature_slowdown = v;
  }
  if (f.nvmlDeviceGetFieldValues && !Skip(g, "nvmlDeviceGetFieldValues(recovery action)")) {
    nvmlFieldValue_t fv{};
    fv.fieldId = nvml::kFieldGpuRecoveryAction;
    const nvmlReturn_t r = f.nvmlDeviceGetFieldValues(g.handle, 1, &fv);
    const nvmlReturn_t fr = r == NVML_SUCCESS ? fv.nvmlReturn : r;
    if (fr == NVML_SUCCESS) {
      s.recovery_action = fv.value.uiVal;
    } else {
      if (fr == NVML_ERROR_GPU_IS_LOST) s.lost = true;
      NoteOnce(g, "nvmlDeviceGetFieldValues(recovery action)", fr, notices);
    }
  }
  if (call("nvmlDeviceGetPersistenceMode", f.nvmlDeviceGetPersistenceMode, g.handle, &st))
    s.persistence_mode = st != 0;
  if (f.nvmlDeviceQueryDrainState && !Skip(g, "nvmlDeviceQueryDrainState")) {
    nvmlPciInfo_t pi = g.pci_info;
    const nvmlReturn_t r = f.nvmlDeviceQueryDrainState(&pi, &st);
    if (r == NVML_SUCCESS)
      s.drained = st != 0;
    else
      NoteOnce(g, "nvmlDeviceQueryDrainState", r, notices);
  }
  return s;
}

NvmlPoll NvmlSource::Poll() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t cpu0 = ThreadCpuUsec();
  NvmlPoll p;
  unsigned count = 0;
  if (lib_->fn.nvmlDeviceGetCount_v2(&count) == NVML_SUCCESS) p.device_count = count;
  for (const NvmlGpu& g : gpus_) p.gpus.push_back(PollGpu(g, &p.notices));
  p.cpu_usec = ThreadCpuUsec() - cpu0;
  return p;
}

GpuSnapshot NvmlSource::PollOne(const std::string& pci) {
  std::lock_guard<std::mutex> lock(mu_);
  const NvmlGpu* g = Find(pci);
  if (!g) {
    GpuSnapshot s;
    s.pci = pci;
    s.lost = true;
    return s;
  }
  return PollGpu(*g, nullptr);
}

Result<bool> NvmlSource::QueryDrain(const std::string& pci) {
  const NvmlGpu* g = Find(pci);
  if (!g) return Error{fmt::format("no GPU {} in NVML's device list", pci)};
  if (!lib_->fn.nvmlDeviceQueryDrainState)
    return Error{"this NVML has no nvmlDeviceQueryDrainState"};
  nvmlPciInfo_t pi = g->pci_info;
  nvmlEnableState_t st = 0;
  if (nvmlReturn_t r = lib_->fn.nvmlDeviceQueryDrainState(&pi, &st); r != NVML_SUCCESS) {
    return Error{fmt::format("nvmlDeviceQueryDrainState({}): {}", g->bus_id, lib_->Describe(r))};
  }
  return st != 0;
}

Status NvmlSource::SetDrain(const std::string& pci, bool drain) {
  const NvmlGpu* g = Find(pci);
  if (!g) return Error{fmt::format("no GPU {} in NVML's device list", pci)};
  if (!lib_->fn.nvmlDeviceModifyDrainState)
    return Error{"this NVML has no nvmlDeviceModifyDrainState"};
  nvmlPciInfo_t pi = g->pci_info;
  if (nvmlReturn_t r = lib_->fn.nvmlDeviceModifyDrainState(&pi, drain ? 1 : 0); r != NVML_SUCCESS) {
    return Error{fmt::format(
        "nvmlDeviceModifyDrainState({}, {}): {}{}", g->bus_id, drain ? "enable" : "disable",
        lib_->Describe(r),
        r == NVML_ERROR_NO_PERMISSION ? " (needs root; persistence mode must be off)" : "")};
  }
  return Status::Ok();
}

Result<std::vector<unsigned>> NvmlSource::ComputeProcesses(const std::string& pci) {
  const NvmlGpu* g = Find(pci);
  if (!g) return Error{fmt::format("no GPU {} in NVML's device list", pci)};
  auto fn = lib_->fn.nvmlDeviceGetComputeRunningProcesses_v3;
  if (!fn) return Error{"this NVML has no nvmlDeviceGetComputeRunningProcesses_v3"};
  std::vector<nvmlProcessInfo_t> infos(64);
  for (int attempt = 0; attempt < 4; ++attempt) {
    unsigned n = static_cast<unsigned>(infos.size());
    const nvmlReturn_t r = fn(g->handle, &n, infos.data());
    if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
      infos.resize(std::max<size_t>(n + 16, infos.size() * 2));
      continue;
    }
    if (r != NVML_SUCCESS) {
      return Error{fmt::format("nvmlDeviceGetComputeRunningProcesses_v3({}): {}", g->bus_id,
                               lib_->Describe(r))};
    }
    std::vector<unsigned> pids;
    for (unsigned i = 0; i < n && i < infos.size(); ++i) pids.push_back(infos[i].pid);
    return pids;
  }
  return Error{"nvmlDeviceGetComputeRunningProcesses_v3: the process list kept growing"};
}

size_t CountPciGpus(const std::string& sysfs_pci_devices) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(sysfs_pci_devices, ec)) {
    auto read = [&](const char* file) {
      std::ifstream in(entry.path() / file);
      std::string s;
      in >> s;
      return s;
    };
    if (read("vendor") != "0x10de") continue;
    const std::string cls = read("class");  // "0x030200": display controller, 3D
    if (cls.rfind("0x03", 0) == 0) ++n;
  }
  return n;
}

std::string FormatNvmlReport(const NvmlSource& source, const NvmlPoll& poll) {
  std::string out;
  for (size_t i = 0; i < source.gpus().size(); ++i) {
    const NvmlGpu& g = source.gpus()[i];
    const GpuSnapshot& p = poll.gpus[i];
    out += fmt::format("\nGPU {}: {} {} {}\n", g.index, g.bus_id, g.uuid, g.name);
    out += fmt::format("  supported events: {}\n", EventNames(g.supported_events));
    out += fmt::format("  lost: {}\n", p.lost);
    out += fmt::format("  ECC volatile: uncorrected {}, corrected {}\n",
                       Opt(p.ecc_volatile_uncorrected), Opt(p.ecc_volatile_corrected));
    out += fmt::format("  remapped rows: uncorrectable {}, pending {}, failure {}\n",
                       Opt(p.remap_uncorrectable), Opt(p.remap_pending), Opt(p.remap_failure));
    out += fmt::format("  retired pages pending: {}\n", Opt(p.retired_pages_pending));
    out += fmt::format("  NVLinks up: {}, down: {}, error counters: {}\n", p.nvlinks_up.size(),
                       p.nvlinks_down.size(), Opt(p.nvlink_errors));
    out +=
        fmt::format("  clock event reasons: {}\n",
                    p.clock_event_reasons ? fmt::format("{:#x}", *p.clock_event_reasons) : "n/a");
    out += fmt::format("  PCIe: gen {}/{} width x{}/x{}\n", Opt(p.pcie_gen), Opt(p.pcie_gen_max),
                       Opt(p.pcie_width), Opt(p.pcie_width_max));
    out += fmt::format("  temperature: {} C (slowdown {} C)\n", Opt(p.temperature),
                       Opt(p.temperature_slowdown));
    out += fmt::format("  recovery action: {}\n", Opt(p.recovery_action));
    out += fmt::format("  persistence mode: {}\n", Opt(p.persistence_mode));
    out += fmt::format("  drain state: {}\n",
                       p.drained ? (*p.drained ? "drained" : "not drained") : "n/a");
  }
  for (const std::string& n : poll.notices) out += "note: " + n + "\n";
  return out;
}

}  // namespace gpuheal
