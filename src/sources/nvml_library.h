#pragma once
// libnvidia-ml loaded at run time. Nothing NVIDIA ships is needed to build or to run without a
// GPU: when the library is missing, Load() says so and the agent carries on with the kernel log.
// Functions the installed driver lacks (older drivers) stay null and their checks are skipped.

#include <memory>
#include <string>

#include "core/result.h"
#include "sources/nvml_api.h"

namespace gpuheal {

class NvmlLibrary {
 public:
  // dlopen()s `path` ("libnvidia-ml.so.1" searches the loader path), resolves the functions and
  // calls nvmlInit_v2. The error says what failed and what it means for the agent.
  static Result<std::unique_ptr<NvmlLibrary>> Load(const std::string& path);
  ~NvmlLibrary();  // nvmlShutdown and dlclose
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // "NVML_ERROR_GPU_IS_LOST (GPU is lost)": the code's name and the library's own words.
  std::string Describe(nvmlReturn_t r) const;
  const std::string& path() const { return path_; }
  const std::string& driver_version() const { return driver_version_; }

#define GPUHEAL_NVML_FN(name) decltype(&::name) name = nullptr
  struct Functions {
    // Required: without them the backend does not start.
    GPUHEAL_NVML_FN(nvmlInit_v2);
    GPUHEAL_NVML_FN(nvmlShutdown);
    GPUHEAL_NVML_FN(nvmlDeviceGetCount_v2);
    GPUHEAL_NVML_FN(nvmlDeviceGetHandleByIndex_v2);
    GPUHEAL_NVML_FN(nvmlDeviceGetPciInfo_v3);
    // Optional.
    GPUHEAL_NVML_FN(nvmlErrorString);
    GPUHEAL_NVML_FN(nvmlSystemGetDriverVersion);
    GPUHEAL_NVML_FN(nvmlDeviceGetUUID);
    GPUHEAL_NVML_FN(nvmlDeviceGetName);
    GPUHEAL_NVML_FN(nvmlEventSetCreate);
    GPUHEAL_NVML_FN(nvmlDeviceGetSupportedEventTypes);
    GPUHEAL_NVML_FN(nvmlDeviceRegisterEvents);
    GPUHEAL_NVML_FN(nvmlEventSetWait_v2);
    GPUHEAL_NVML_FN(nvmlEventSetFree);
    GPUHEAL_NVML_FN(nvmlDeviceGetTotalEccErrors);
    GPUHEAL_NVML_FN(nvmlDeviceGetRemappedRows);
    GPUHEAL_NVML_FN(nvmlDeviceGetRetiredPagesPendingStatus);
    GPUHEAL_NVML_FN(nvmlDeviceGetNvLinkState);
    GPUHEAL_NVML_FN(nvmlDeviceGetNvLinkErrorCounter);
    GPUHEAL_NVML_FN(nvmlDeviceGetCurrentClocksEventReasons);
    GPUHEAL_NVML_FN(nvmlDeviceGetCurrentClocksThrottleReasons);
    GPUHEAL_NVML_FN(nvmlDeviceGetCurrPcieLinkGeneration);
    GPUHEAL_NVML_FN(nvmlDeviceGetCurrPcieLinkWidth);
    GPUHEAL_NVML_FN(nvmlDeviceGetMaxPcieLinkGeneration);
    GPUHEAL_NVML_FN(nvmlDeviceGetMaxPcieLinkWidth);
    GPUHEAL_NVML_FN(nvmlDeviceGetTemperature);
    GPUHEAL_NVML_FN(nvmlDeviceGetTemperatureThreshold);
    GPUHEAL_NVML_FN(nvmlDeviceGetFieldValues);
    GPUHEAL_NVML_FN(nvmlDeviceGetPersistenceMode);
    GPUHEAL_NVML_FN(nvmlDeviceModifyDrainState);
    GPUHEAL_NVML_FN(nvmlDeviceQueryDrainState);
    GPUHEAL_NVML_FN(nvmlDeviceGetComputeRunningProcesses_v3);
  };
#undef GPUHEAL_NVML_FN
  Functions fn;

 private:
  NvmlLibrary() = default;
  void* handle_ = nullptr;
  bool initialised_ = false;
  std::string path_;
  std::string driver_version_;
};

// The symbolic name of an NVML return code ("NVML_ERROR_NOT_SUPPORTED").
std::string_view NvmlReturnName(nvmlReturn_t r);

}  // namespace gpuheal
