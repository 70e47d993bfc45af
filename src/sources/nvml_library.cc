#include "sources/nvml_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include "core/dl_symbol.h"

namespace gpuheal {

std::string_view NvmlReturnName(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS:
      return "NVML_SUCCESS";
    case NVML_ERROR_UNINITIALIZED:
      return "NVML_ERROR_UNINITIALIZED";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "NVML_ERROR_INVALID_ARGUMENT";
    case NVML_ERROR_NOT_SUPPORTED:
      return "NVML_ERROR_NOT_SUPPORTED";
    case NVML_ERROR_NO_PERMISSION:
      return "NVML_ERROR_NO_PERMISSION";
    case NVML_ERROR_NOT_FOUND:
      return "NVML_ERROR_NOT_FOUND";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "NVML_ERROR_INSUFFICIENT_SIZE";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "NVML_ERROR_DRIVER_NOT_LOADED";
    case NVML_ERROR_TIMEOUT:
      return "NVML_ERROR_TIMEOUT";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "NVML_ERROR_FUNCTION_NOT_FOUND";
    case NVML_ERROR_GPU_IS_LOST:
      return "NVML_ERROR_GPU_IS_LOST";
    case NVML_ERROR_RESET_REQUIRED:
      return "NVML_ERROR_RESET_REQUIRED";
    case NVML_ERROR_IN_USE:
      return "NVML_ERROR_IN_USE";
    default:
      return "NVML_ERROR_UNKNOWN";
  }
}

std::string NvmlLibrary::Describe(nvmlReturn_t r) const {
  const char* words = fn.nvmlErrorString ? fn.nvmlErrorString(r) : nullptr;
  if (!words) return fmt::format("{} ({})", NvmlReturnName(r), r);
  return fmt::format("{} ({})", NvmlReturnName(r), words);
}

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Load(const std::string& path) {
  std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary());
  lib->path_ = path;
  auto opened = OpenLibrary(path, RTLD_NOW | RTLD_LOCAL,
                            "the agent reads the GPUs through NVML: no NVIDIA driver on this "
                            "host, or its libraries are not mounted into the container; set "
                            "nvidia.nvml_library or --nvml-library to the library's path");
  if (!opened) return opened.error();
  lib->handle_ = *opened;
  auto& f = lib->fn;
  std::string missing;
  auto sym = [&](auto& slot, const char* name, bool required) {
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(lib->handle_, name));
    if (!slot && required) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
#define GPUHEAL_SYM(name, required) sym(f.name, #name, required)
  GPUHEAL_SYM(nvmlInit_v2, true);
  GPUHEAL_SYM(nvmlShutdown, true);
  GPUHEAL_SYM(nvmlDeviceGetCount_v2, true);
  GPUHEAL_SYM(nvmlDeviceGetHandleByIndex_v2, true);
  GPUHEAL_SYM(nvmlDeviceGetPciInfo_v3, true);
  GPUHEAL_SYM(nvmlErrorString, false);
  GPUHEAL_SYM(nvmlSystemGetDriverVersion, false);
  GPUHEAL_SYM(nvmlDeviceGetUUID, false);
  GPUHEAL_SYM(nvmlDeviceGetName, false);
  GPUHEAL_SYM(nvmlEventSetCreate, false);
  GPUHEAL_SYM(nvmlDeviceGetSupportedEventTypes, false);
  GPUHEAL_SYM(nvmlDeviceRegisterEvents, false);
  GPUHEAL_SYM(nvmlEventSetWait_v2, false);
  GPUHEAL_SYM(nvmlEventSetFree, false);
  GPUHEAL_SYM(nvmlDeviceGetTotalEccErrors, false);
  GPUHEAL_SYM(nvmlDeviceGetRemappedRows, false);
  GPUHEAL_SYM(nvmlDeviceGetRetiredPagesPendingStatus, false);
  GPUHEAL_SYM(nvmlDeviceGetNvLinkState, false);
  GPUHEAL_SYM(nvmlDeviceGetNvLinkErrorCounter, false);
  GPUHEAL_SYM(nvmlDeviceGetCurrentClocksEventReasons, false);
  GPUHEAL_SYM(nvmlDeviceGetCurrentClocksThrottleReasons, false);
  GPUHEAL_SYM(nvmlDeviceGetCurrPcieLinkGeneration, false);
  GPUHEAL_SYM(nvmlDeviceGetCurrPcieLinkWidth, false);
  GPUHEAL_SYM(nvmlDeviceGetMaxPcieLinkGeneration, false);
  GPUHEAL_SYM(nvmlDeviceGetMaxPcieLinkWidth, false);
  GPUHEAL_SYM(nvmlDeviceGetTemperature, false);
  GPUHEAL_SYM(nvmlDeviceGetTemperatureThreshold, false);
  GPUHEAL_SYM(nvmlDeviceGetFieldValues, false);
  GPUHEAL_SYM(nvmlDeviceGetPersistenceMode, false);
  GPUHEAL_SYM(nvmlDeviceModifyDrainState, false);
  GPUHEAL_SYM(nvmlDeviceQueryDrainState, false);
  GPUHEAL_SYM(nvmlDeviceGetComputeRunningProcesses_v3, false);
#undef GPUHEAL_SYM
  if (!missing.empty()) {
    return Error{fmt::format(
        "{} has no {}: NVML from driver R450 or newer is needed (an older driver, or not NVML)",
        path, missing)};
  }
  if (nvmlReturn_t r = f.nvmlInit_v2(); r != NVML_SUCCESS) {
    return Error{
        fmt::format("nvmlInit_v2 failed: {}{}", lib->Describe(r),
                    r == NVML_ERROR_DRIVER_NOT_LOADED ? " (the nvidia kernel module is not loaded)"
                    : r == NVML_ERROR_NO_PERMISSION   ? " (the agent may not open /dev/nvidia*)"
                                                      : "")};
  }
  lib->initialised_ = true;
  if (f.nvmlSystemGetDriverVersion) {
    char v[96] = {};
    if (f.nvmlSystemGetDriverVersion(v, sizeof v) == NVML_SUCCESS) lib->driver_version_ = v;
  }
  return lib;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialised_ && fn.nvmlShutdown) fn.nvmlShutdown();
  if (handle_) dlclose(handle_);
}

}  // namespace gpuheal
