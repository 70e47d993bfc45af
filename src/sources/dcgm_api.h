#pragma once
// The part of NVIDIA DCGM's C API (dcgm_agent.h / dcgm_structs.h, DCGM 3.x and 4.x) that gpuheal
// uses, with the public headers' layouts. As with NVML, the agent never links these: it
// dlopen()s libdcgm.so.4 (or .3) at run time; the DCGM test double defines them against these
// declarations.

#include <cstdint>

extern "C" {

typedef int dcgmReturn_t;
enum : dcgmReturn_t {
  DCGM_ST_OK = 0,
  DCGM_ST_BADPARAM = -1,
  DCGM_ST_GENERIC_ERROR = -3,
  DCGM_ST_NOT_SUPPORTED = -6,
  DCGM_ST_INIT_ERROR = -7,
  DCGM_ST_NO_PERMISSION = -17,
  DCGM_ST_GPU_IS_LOST = -18,
  DCGM_ST_CONNECTION_NOT_VALID = -21,
};

typedef uintptr_t dcgmHandle_t;
typedef uintptr_t dcgmGpuGrp_t;
typedef uintptr_t dcgmStatus_t;
typedef int dcgmOperationMode_t;    // DCGM_OPERATION_MODE_AUTO 1
typedef int dcgmGroupType_t;        // DCGM_GROUP_EMPTY 1
typedef int dcgmPolicyCondition_t;  // bits below
typedef int dcgmHealthSystems_t;    // bits below

typedef struct dcgmPolicyConditionParams_st {
  int tag;  // BOOL 0, LLONG 1
  union {
    unsigned int boolean;
    unsigned long long llval;
  } val;
} dcgmPolicyConditionParams_t;

#define GPUHEAL_DCGM_POLICY_COND_MAX 7
typedef struct {
  unsigned int version;
  dcgmPolicyCondition_t condition;
  int mode;
  int isolation;
  int action;
  int validation;
  int response;
  dcgmPolicyConditionParams_t parms[GPUHEAL_DCGM_POLICY_COND_MAX];
} dcgmPolicy_t;

typedef struct {
  long long timestamp;
  int location;
  unsigned int numerrors;
} dcgmPolicyConditionDbe_t;
typedef struct {
  long long timestamp;
  unsigned int counter;
} dcgmPolicyConditionPci_t;
typedef struct {
  long long timestamp;
  unsigned int sbepages;
  unsigned int dbepages;
} dcgmPolicyConditionMpr_t;
typedef struct {
  long long timestamp;
  unsigned int thermalViolation;
} dcgmPolicyConditionThermal_t;
typedef struct {
  long long timestamp;
  unsigned int powerViolation;
} dcgmPolicyConditionPower_t;
typedef struct {
  long long timestamp;
  unsigned short fieldId;
  unsigned int counter;
} dcgmPolicyConditionNvlink_t;
typedef struct {
  long long timestamp;
  unsigned int errnum;
} dcgmPolicyConditionXID_t;

typedef struct {
  unsigned int version;
  dcgmPolicyCondition_t condition;
  union {
    dcgmPolicyConditionDbe_t dbe;
    dcgmPolicyConditionPci_t pci;
    dcgmPolicyConditionMpr_t mpr;
    dcgmPolicyConditionThermal_t thermal;
    dcgmPolicyConditionPower_t power;
    dcgmPolicyConditionNvlink_t nvlink;
    dcgmPolicyConditionXID_t xid;
  } val;
} dcgmPolicyCallbackResponse_t;

typedef int (*fpRecvUpdates)(dcgmPolicyCallbackResponse_t* response, uint64_t userData);

typedef struct {
  char msg[1024];
  unsigned int code;
} dcgmDiagErrorDetail_t;

typedef struct {
  int entityGroupId;  // DCGM_FE_GPU 1
  unsigned int entityId;
} dcgmGroupEntityPair_t;

typedef struct {
  dcgmHealthSystems_t system;
  int health;  // DCGM_HEALTH_RESULT_PASS 0, WARN 10, FAIL 20
  dcgmDiagErrorDetail_t error;
  dcgmGroupEntityPair_t entityInfo;
} dcgmIncidentInfo_t;

#define GPUHEAL_DCGM_HEALTH_MAX_INCIDENTS 64
typedef struct {
  unsigned int version;
  int overallHealth;
  unsigned int incidentCount;
  dcgmIncidentInfo_t incidents[GPUHEAL_DCGM_HEALTH_MAX_INCIDENTS];
} dcgmHealthResponse_t;  // dcgmHealthResponse_v4

dcgmReturn_t dcgmInit(void);
dcgmReturn_t dcgmShutdown(void);
dcgmReturn_t dcgmStartEmbedded(dcgmOperationMode_t opMode, dcgmHandle_t* pDcgmHandle);
dcgmReturn_t dcgmStopEmbedded(dcgmHandle_t pDcgmHandle);
dcgmReturn_t dcgmConnect(const char* ipAddress, dcgmHandle_t* pDcgmHandle);
dcgmReturn_t dcgmDisconnect(dcgmHandle_t pDcgmHandle);
dcgmReturn_t dcgmGetAllSupportedDevices(dcgmHandle_t pDcgmHandle, unsigned int gpuIdList[32],
                                        int* count);
dcgmReturn_t dcgmGroupCreate(dcgmHandle_t pDcgmHandle, dcgmGroupType_t type, const char* groupName,
                             dcgmGpuGrp_t* pDcgmGrpId);
dcgmReturn_t dcgmGroupAddDevice(dcgmHandle_t pDcgmHandle, dcgmGpuGrp_t groupId, unsigned int gpuId);
dcgmReturn_t dcgmGroupDestroy(dcgmHandle_t pDcgmHandle, dcgmGpuGrp_t groupId);
dcgmReturn_t dcgmPolicySet(dcgmHandle_t pDcgmHandle, dcgmGpuGrp_t groupId, dcgmPolicy_t* policy,
                           dcgmStatus_t statusHandle);
dcgmReturn_t dcgmPolicyRegister_v2(dcgmHandle_t pDcgmHandle, dcgmGpuGrp_t groupId,
                                   dcgmPolicyCondition_t condition, fpRecvUpdates callback,
                                   uint64_t userData);
dcgmReturn_t dcgmPolicyUnregister(dcgmHandle_t pDcgmHandle, dcgmGpuGrp_t groupId,
                                  dcgmPolicyCondition_t condition);
dcgmReturn_t dcgmHealthSet(dcgmHandle_t pDcgmHandle, dcgmGpuGrp_t groupId,
                           dcgmHealthSystems_t systems);
dcgmReturn_t dcgmHealthCheck(dcgmHandle_t pDcgmHandle, dcgmGpuGrp_t groupId,
                             dcgmHealthResponse_t* results);
const char* errorString(dcgmReturn_t result);

}  // extern "C"

namespace gpuheal::dcgm {

inline constexpr int kOperationModeAuto = 1;
inline constexpr int kGroupEmpty = 1;
inline constexpr dcgmGpuGrp_t kGroupAllGpus = 0x7fffffff;

inline constexpr int kCondDbe = 0x1, kCondPci = 0x2, kCondMaxPagesRetired = 0x4, kCondThermal = 0x8,
                     kCondPower = 0x10, kCondNvlink = 0x20, kCondXid = 0x40;
inline constexpr int kAllConditions = 0x7f;

inline constexpr int kHealthPass = 0, kHealthWarn = 10, kHealthFail = 20;
// PCIE | NVLINK | PMU | MCU | MEM | SM | INFOROM | THERMAL | POWER | DRIVER
inline constexpr int kHealthSystems = 0x3ff;

// MAKE_DCGM_VERSION(type, ver): the struct's size and its version in the top byte.
template <typename T>
constexpr unsigned int Version(unsigned int ver) {
  return static_cast<unsigned int>(sizeof(T) | (static_cast<unsigned long>(ver) << 24U));
}

static_assert(sizeof(dcgmPolicyConditionParams_t) == 16);
static_assert(sizeof(dcgmPolicy_t) == 144);
static_assert(sizeof(dcgmPolicyCallbackResponse_t) == 24);
static_assert(sizeof(dcgmIncidentInfo_t) == 1044);
static_assert(sizeof(dcgmHealthResponse_t) == 66828);

}  // namespace gpuheal::dcgm
