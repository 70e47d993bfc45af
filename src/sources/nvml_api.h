#pragma once
// The part of NVIDIA's NVML C API that gpuheal uses, declared here with the layouts and values of
// the public nvml.h so that nothing NVIDIA ships is needed to build. The agent never links these
// symbols: it dlopen()s libnvidia-ml.so.1 at run time and looks each one up
// (sources/nvml_library.h). The NVML test double (test/nvml_double) defines them against these same
// declarations, so the compiler checks that both sides agree on every signature.

#include <cstdint>

extern "C" {

typedef int nvmlReturn_t;
enum : nvmlReturn_t {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_UNKNOWN = 999,
};

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;

typedef int nvmlEnableState_t;            // NVML_FEATURE_DISABLED 0, NVML_FEATURE_ENABLED 1
typedef int nvmlMemoryErrorType_t;        // NVML_MEMORY_ERROR_TYPE_CORRECTED 0, _UNCORRECTED 1
typedef int nvmlEccCounterType_t;         // NVML_VOLATILE_ECC 0, NVML_AGGREGATE_ECC 1
typedef int nvmlTemperatureSensors_t;     // NVML_TEMPERATURE_GPU 0
typedef int nvmlTemperatureThresholds_t;  // NVML_TEMPERATURE_THRESHOLD_SLOWDOWN 1
typedef int nvmlNvLinkErrorCounter_t;  // DL_REPLAY 0, DL_RECOVERY 1, DL_CRC_FLIT 2, DL_CRC_DATA 3
typedef int nvmlValueType_t;

// nvmlPciInfo_t (v3): busIdLegacy[16], domain, bus, device, pciDeviceId, pciSubSystemId, busId[32].
typedef struct nvmlPciInfo_st {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // Xid for XidCriticalError; 999 = unknown
  unsigned int gpuInstanceId;    // MIG; 0xFFFFFFFF when not applicable
  unsigned int computeInstanceId;
} nvmlEventData_t;

typedef union nvmlValue_st {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  nvmlValueType_t valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

// nvmlProcessInfo_t as nvmlDeviceGetComputeRunningProcesses_v3 fills it.
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char* nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length);

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set);
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long* eventTypes);
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set);
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms);
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set);

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType,
                                         unsigned long long* eccCounts);
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corrRows,
                                       unsigned int* uncRows, unsigned int* isPending,
                                       unsigned int* failureOccurred);
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                    nvmlEnableState_t* isPending);
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t* isActive);
nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link,
                                             nvmlNvLinkErrorCounter_t counter,
                                             unsigned long long* counterValue);
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long* reasons);
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long* reasons);
nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int* currLinkGen);
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int* currLinkWidth);
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int* maxLinkGen);
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int* maxLinkWidth);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int* temp);
nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device,
                                               nvmlTemperatureThresholds_t thresholdType,
                                               unsigned int* temp);
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                      nvmlFieldValue_t* values);
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t* mode);

nvmlReturn_t nvmlDeviceModifyDrainState(nvmlPciInfo_t* pciInfo, nvmlEnableState_t newState);
nvmlReturn_t nvmlDeviceQueryDrainState(nvmlPciInfo_t* pciInfo, nvmlEnableState_t* currentState);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                     nvmlProcessInfo_t* infos);

}  // extern "C"

namespace gpuheal::nvml {

// nvmlEventType bits.
inline constexpr unsigned long long kEventSingleBitEccError = 0x1;
inline constexpr unsigned long long kEventDoubleBitEccError = 0x2;
inline constexpr unsigned long long kEventXidCriticalError = 0x8;
inline constexpr unsigned long long kEventSingleBitEccErrorStorm = 0x200;
inline constexpr unsigned long long kEventGpuUnavailableError = 0x4000;
inline constexpr unsigned long long kEventGpuRecoveryAction = 0x8000;
// What the agent registers for (each only where nvmlDeviceGetSupportedEventTypes offers it).
inline constexpr unsigned long long kWantedEvents =
    kEventSingleBitEccError | kEventDoubleBitEccError | kEventXidCriticalError |
    kEventSingleBitEccErrorStorm | kEventGpuUnavailableError | kEventGpuRecoveryAction;

// nvmlClocksEventReasons bits that mean the hardware slowed the GPU down.
inline constexpr unsigned long long kClocksEventHwSlowdown = 0x8;
inline constexpr unsigned long long kClocksEventSwThermalSlowdown = 0x20;
inline constexpr unsigned long long kClocksEventHwThermalSlowdown = 0x40;
inline constexpr unsigned long long kClocksEventHwPowerBrakeSlowdown = 0x80;

inline constexpr unsigned int kFieldGpuRecoveryAction = 230;  // NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
inline constexpr unsigned int kNvLinkMaxLinks = 18;           // NVML_NVLINK_MAX_LINKS
inline constexpr unsigned int kNoInstance = 0xFFFFFFFFu;      // gpuInstanceId when not MIG

static_assert(sizeof(nvmlPciInfo_t) == 68);
static_assert(sizeof(nvmlEventData_t) == 32);
static_assert(sizeof(nvmlFieldValue_t) == 40);
static_assert(sizeof(nvmlProcessInfo_t) == 24);

}  // namespace gpuheal::nvml
