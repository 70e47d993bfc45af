// NVML test double: a shared library exporting the NVML functions gpuheal uses, with the real
// ABI (the declarations of src/sources/nvml_api.h, which the compiler checks these definitions
// against). It is driven by a JSON scenario file named by $GPUHEAL_NVML_SCENARIO, re-read whenever
// the file is replaced (inotify), so a test changes the "hardware" while the agent runs:
//
// {"driver_version": "570.86.15", "init_error": "DRIVER_NOT_LOADED", "count": 2,
//  "devices": [{"bus_id": "00000000:3B:00.0", "uuid": "GPU-...", "name": "NVIDIA H100 80GB HBM3",
//               "supported_events": 49675 | ["XidCriticalError", ...], "lost": false,
//               "ecc": {"volatile_uncorrected": 0, "volatile_corrected": 0},
//               "remapped_rows": {"corrected": 0, "uncorrected": 0, "pending": 0, "failure": 0},
//               "retired_pages_pending": false, "nvlink": {"links": 18, "down": [3], "errors": 0},
//               "clock_event_reasons": 0, "pcie": {"gen": 5, "max_gen": 5, "width": 16,
//               "max_width": 16}, "temperature": 40, "temperature_slowdown": 87, "recovery_action":
//               0, "persistence_mode": false, "processes": [1234], "errors":
//               {"nvmlDeviceGetRemappedRows": "NOT_SUPPORTED", ...}}],
//  "events": [{"id": "e1", "device": 0, "type": "XidCriticalError", "data": 79,
//              "gpu_instance": 1, "compute_instance": 0}]}
//
// Each event id is delivered once. Drain state lives in the library (set by
// nvmlDeviceModifyDrainState) and survives reloads, as it does in the driver.

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "../doubles/scenario_file.h"
#include "sources/nvml_api.h"

struct nvmlDevice_st {
  unsigned index;
};
struct nvmlEventSet_st {
  std::map<unsigned, unsigned long long> masks;  // device index -> registered events
};

namespace {

using nlohmann::json;

constexpr unsigned kMaxDevices = 64;
nvmlDevice_st g_devices[kMaxDevices];

std::mutex g_mu;
json g_scenario = json::object();
gpuheal::testing::ScenarioFile g_file;
int g_init_count = 0;
std::set<std::string> g_delivered;
std::map<std::string, bool> g_drained;  // bus id (upper case) -> drained

nvmlReturn_t Code(const std::string& name) {
  static const std::map<std::string, nvmlReturn_t> codes = {
      {"UNINITIALIZED", NVML_ERROR_UNINITIALIZED},
      {"INVALID_ARGUMENT", NVML_ERROR_INVALID_ARGUMENT},
      {"NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED},
      {"NO_PERMISSION", NVML_ERROR_NO_PERMISSION},
      {"NOT_FOUND", NVML_ERROR_NOT_FOUND},
      {"DRIVER_NOT_LOADED", NVML_ERROR_DRIVER_NOT_LOADED},
      {"TIMEOUT", NVML_ERROR_TIMEOUT},
      {"GPU_IS_LOST", NVML_ERROR_GPU_IS_LOST},
      {"RESET_REQUIRED", NVML_ERROR_RESET_REQUIRED},
      {"IN_USE", NVML_ERROR_IN_USE},
      {"FUNCTION_NOT_FOUND", NVML_ERROR_FUNCTION_NOT_FOUND}};
  auto it = codes.find(name);
  return it == codes.end() ? NVML_ERROR_UNKNOWN : it->second;
}

unsigned long long EventBit(const json& t) {
  if (t.is_number()) return t.get<unsigned long long>();
  static const std::map<std::string, unsigned long long> bits = {{"SingleBitEccError", 0x1},
                                                                 {"DoubleBitEccError", 0x2},
                                                                 {"PState", 0x4},
                                                                 {"XidCriticalError", 0x8},
                                                                 {"Clock", 0x10},
                                                                 {"SingleBitEccErrorStorm", 0x200},
                                                                 {"GpuUnavailableError", 0x4000},
                                                                 {"GpuRecoveryAction", 0x8000}};
  auto it = bits.find(t.get<std::string>());
  return it == bits.end() ? 0 : it->second;
}

// Re-reads the scenario when it was replaced since the last look. Caller holds g_mu.
void MaybeReload() { g_file.MaybeReload(g_scenario); }

const json& Devices() {
  static const json empty = json::array();
  auto it = g_scenario.find("devices");
  return it != g_scenario.end() && it->is_array() ? *it : empty;
}

const json* Dev(nvmlDevice_t d) {
  if (!d || d < g_devices || d >= g_devices + kMaxDevices) return nullptr;
  const json& devs = Devices();
  if (d->index >= devs.size()) return nullptr;
  return &devs[d->index];
}

// The scripted result of `fn` for device `j`: lost GPU, or an error from "errors".
nvmlReturn_t Scripted(const json& j, const char* fn) {
  if (j.value("lost", false)) return NVML_ERROR_GPU_IS_LOST;
  auto e = j.find("errors");
  if (e != j.end() && e->contains(fn)) return Code((*e)[fn].get<std::string>());
  return NVML_SUCCESS;
}

template <typename T>
T Get(const json& j, const char* obj, const char* key, T def) {
  auto o = j.find(obj);
  if (o == j.end() || !o->is_object()) return def;
  return o->value(key, def);
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  return s;
}

const json* DevByBus(const char* bus, unsigned* index) {
  const json& devs = Devices();
  for (unsigned i = 0; i < devs.size(); ++i) {
    if (Upper(devs[i].value("bus_id", "")) == Upper(bus)) {
      if (index) *index = i;
      return &devs[i];
    }
  }
  return nullptr;
}

#define DEVICE_OR_RETURN(fn)                                              \
  std::lock_guard<std::mutex> lock(g_mu);                                 \
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;                 \
  MaybeReload();                                                          \
  const json* dj = Dev(device);                                           \
  if (!dj) return NVML_ERROR_INVALID_ARGUMENT;                            \
  if (nvmlReturn_t r_ = Scripted(*dj, fn); r_ != NVML_SUCCESS) return r_; \
  const json& j = *dj

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2(void) {
  std::lock_guard<std::mutex> lock(g_mu);
  const char* p = getenv("GPUHEAL_NVML_SCENARIO");
  if (!p || !*p) return NVML_ERROR_LIBRARY_NOT_FOUND;
  // A new scenario forgets what an earlier one delivered and drained.
  if (g_file.Open(p, g_scenario)) {
    g_delivered.clear();
    g_drained.clear();
  }
  if (g_scenario.contains("init_error")) return Code(g_scenario["init_error"].get<std::string>());
  for (unsigned i = 0; i < kMaxDevices; ++i) g_devices[i].index = i;
  ++g_init_count;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --g_init_count;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  std::lock_guard<std::mutex> lock(g_mu);
  const std::string v = g_scenario.value("driver_version", "570.00.00-double");
  if (length < v.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(version, v.c_str(), v.size() + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  MaybeReload();
  *count = g_scenario.value("count", static_cast<unsigned>(Devices().size()));
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (index >= Devices().size() || index >= kMaxDevices) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &g_devices[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  DEVICE_OR_RETURN("nvmlDeviceGetPciInfo_v3");
  std::memset(pci, 0, sizeof *pci);
  const std::string bus = j.value("bus_id", "");
  std::snprintf(pci->busId, sizeof pci->busId, "%s", bus.c_str());
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s",
                bus.size() > 4 ? bus.c_str() + 4 : bus.c_str());
  std::sscanf(bus.c_str(), "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
  pci->pciDeviceId = 0x233010de;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  DEVICE_OR_RETURN("nvmlDeviceGetUUID");
  const std::string u = j.value("uuid", "");
  if (length < u.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(uuid, u.c_str(), u.size() + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  DEVICE_OR_RETURN("nvmlDeviceGetName");
  const std::string n = j.value("name", "NVIDIA H100 80GB HBM3");
  if (length < n.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(name, n.c_str(), n.size() + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  *set = new nvmlEventSet_st();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long* types) {
  DEVICE_OR_RETURN("nvmlDeviceGetSupportedEventTypes");
  auto s = j.find("supported_events");
  if (s == j.end()) {
    *types = 0x1 | 0x2 | 0x8 | 0x200 | 0x4000 | 0x8000;
  } else if (s->is_array()) {
    *types = 0;
    for (const json& t : *s) *types |= EventBit(t);
  } else {
    *types = s->get<unsigned long long>();
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                      nvmlEventSet_t set) {
  DEVICE_OR_RETURN("nvmlDeviceRegisterEvents");
  (void)j;
  set->masks[device->index] |= types;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                 unsigned int timeoutms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutms);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(g_mu);
      MaybeReload();
      auto evs = g_scenario.find("events");
      if (evs != g_scenario.end() && evs->is_array()) {
        for (const json& e : *evs) {
          const std::string id = e.value("id", "");
          if (id.empty() || g_delivered.count(id)) continue;
          const unsigned dev = e.value("device", 0u);
          const unsigned long long bit = EventBit(e.value("type", json("XidCriticalError")));
          auto m = set->masks.find(dev);
          if (m == set->masks.end() || !(m->second & bit) || dev >= kMaxDevices) continue;
          g_delivered.insert(id);
          data->device = &g_devices[dev];
          data->eventType = bit;
          data->eventData = e.value("data", 0ull);
          data->gpuInstanceId = e.value("gpu_instance", 0xFFFFFFFFu);
          data->computeInstanceId = e.value("compute_instance", 0xFFFFFFFFu);
          return NVML_SUCCESS;
        }
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return NVML_ERROR_TIMEOUT;
    g_file.Wait(static_cast<int>(left.count()));
  }
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  delete set;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t type,
                                         nvmlEccCounterType_t counter, unsigned long long* count) {
  DEVICE_OR_RETURN("nvmlDeviceGetTotalEccErrors");
  const char* key = type == 1 ? (counter == 0 ? "volatile_uncorrected" : "aggregate_uncorrected")
                              : (counter == 0 ? "volatile_corrected" : "aggregate_corrected");
  *count = Get<unsigned long long>(j, "ecc", key, 0);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corr, unsigned int* unc,
                                       unsigned int* pending, unsigned int* failure) {
  DEVICE_OR_RETURN("nvmlDeviceGetRemappedRows");
  *corr = Get<unsigned>(j, "remapped_rows", "corrected", 0);
  *unc = Get<unsigned>(j, "remapped_rows", "uncorrected", 0);
  *pending = Get<unsigned>(j, "remapped_rows", "pending", 0);
  *failure = Get<unsigned>(j, "remapped_rows", "failure", 0);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                    nvmlEnableState_t* pending) {
  DEVICE_OR_RETURN("nvmlDeviceGetRetiredPagesPendingStatus");
  *pending = j.value("retired_pages_pending", false) ? 1 : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t* active) {
  DEVICE_OR_RETURN("nvmlDeviceGetNvLinkState");
  const unsigned links = Get<unsigned>(j, "nvlink", "links", 0);
  if (link >= links) return NVML_ERROR_INVALID_ARGUMENT;
  *active = 1;
  auto nv = j.find("nvlink");
  if (nv != j.end() && nv->contains("down")) {
    for (const json& d : (*nv)["down"]) {
      if (d.get<unsigned>() == link) *active = 0;
    }
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link,
                                             nvmlNvLinkErrorCounter_t counter,
                                             unsigned long long* value) {
  DEVICE_OR_RETURN("nvmlDeviceGetNvLinkErrorCounter");
  if (link >= Get<unsigned>(j, "nvlink", "links", 0)) return NVML_ERROR_INVALID_ARGUMENT;
  // All of the scenario's errors are counted on link 0 as replays.
  *value = (link == 0 && counter == 0) ? Get<unsigned long long>(j, "nvlink", "errors", 0) : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long* reasons) {
  DEVICE_OR_RETURN("nvmlDeviceGetCurrentClocksEventReasons");
  *reasons = j.value("clock_event_reasons", 0ull);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long* reasons) {
  return nvmlDeviceGetCurrentClocksEventReasons(device, reasons);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int* v) {
  DEVICE_OR_RETURN("nvmlDeviceGetCurrPcieLinkGeneration");
  *v = Get<unsigned>(j, "pcie", "gen", 5);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int* v) {
  DEVICE_OR_RETURN("nvmlDeviceGetCurrPcieLinkWidth");
  *v = Get<unsigned>(j, "pcie", "width", 16);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int* v) {
  DEVICE_OR_RETURN("nvmlDeviceGetMaxPcieLinkGeneration");
  *v = Get<unsigned>(j, "pcie", "max_gen", 5);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int* v) {
  DEVICE_OR_RETURN("nvmlDeviceGetMaxPcieLinkWidth");
  *v = Get<unsigned>(j, "pcie", "max_width", 16);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor,
                                      unsigned int* temp) {
  DEVICE_OR_RETURN("nvmlDeviceGetTemperature");
  if (sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;
  *temp = j.value("temperature", 40u);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device,
                                               nvmlTemperatureThresholds_t type,
                                               unsigned int* temp) {
  DEVICE_OR_RETURN("nvmlDeviceGetTemperatureThreshold");
  if (type != 1) return NVML_ERROR_NOT_SUPPORTED;
  *temp = j.value("temperature_slowdown", 87u);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t* values) {
  DEVICE_OR_RETURN("nvmlDeviceGetFieldValues");
  for (int i = 0; i < count; ++i) {
    nvmlFieldValue_t& v = values[i];
    v.timestamp = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    v.latencyUsec = 0;
    if (v.fieldId == 230) {
      v.valueType = 1;
      v.nvmlReturn = NVML_SUCCESS;
      v.value.uiVal = j.value("recovery_action", 0u);
    } else {
      v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t* mode) {
  DEVICE_OR_RETURN("nvmlDeviceGetPersistenceMode");
  *mode = j.value("persistence_mode", false) ? 1 : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceModifyDrainState(nvmlPciInfo_t* pci, nvmlEnableState_t state) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  MaybeReload();
  const json* j = DevByBus(pci->busId, nullptr);
  if (!j) return NVML_ERROR_NOT_FOUND;
  if (nvmlReturn_t r = Scripted(*j, "nvmlDeviceModifyDrainState"); r != NVML_SUCCESS) return r;
  if (j->value("persistence_mode", false))
    return NVML_ERROR_IN_USE;  // the driver refuses: persistence on
  g_drained[Upper(pci->busId)] = state != 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceQueryDrainState(nvmlPciInfo_t* pci, nvmlEnableState_t* state) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  MaybeReload();
  const json* j = DevByBus(pci->busId, nullptr);
  if (!j) return NVML_ERROR_NOT_FOUND;
  if (nvmlReturn_t r = Scripted(*j, "nvmlDeviceQueryDrainState"); r != NVML_SUCCESS) return r;
  *state = g_drained[Upper(pci->busId)] ? 1 : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  DEVICE_OR_RETURN("nvmlDeviceGetComputeRunningProcesses_v3");
  const json procs = j.value("processes", json::array());
  if (*count < procs.size()) {
    *count = static_cast<unsigned>(procs.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  *count = static_cast<unsigned>(procs.size());
  for (size_t i = 0; i < procs.size(); ++i) {
    infos[i] = nvmlProcessInfo_t{procs[i].get<unsigned>(), 1ull << 30, 0xFFFFFFFFu, 0xFFFFFFFFu};
  }
  return NVML_SUCCESS;
}

}  // extern "C"
