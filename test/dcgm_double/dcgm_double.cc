// DCGM test double: a shared library exporting the DCGM functions gpuheal uses, with the public
// headers' ABI (src/sources/dcgm_api.h, which the compiler checks these definitions against),
// driven by the JSON scenario named by $GPUHEAL_DCGM_SCENARIO and re-read when replaced:
//
// {"gpus": [0, 1], "init_error": -7, "connect_error": -21, "health_error": -21,
//  "violations": [{"id": "v1", "gpu": 0, "condition": "XID", "value": 79}],
//  "incidents": [{"gpu": 0, "system": 16, "health": 20, "msg": "..."}]}
//
// Like DCGM, it calls policy callbacks from a thread of its own; each violation id once, for a
// GPU whose group registered for that condition. Versioned structs are checked as DCGM checks them.

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "../doubles/scenario_file.h"
#include "sources/dcgm_api.h"

namespace {

using nlohmann::json;

std::mutex g_mu;
json g_scenario = json::object();
gpuheal::testing::ScenarioFile g_file;
bool g_init = false;
bool g_connected = false;
struct Group {
  std::set<unsigned> gpus;
  int registered = 0;
  fpRecvUpdates cb = nullptr;
  uint64_t user = 0;
  bool policy_set = false;
};
std::map<dcgmGpuGrp_t, Group> g_groups;
dcgmGpuGrp_t g_next_group = 1;
std::set<std::string> g_delivered;
std::thread g_thread;
std::atomic<bool> g_stop{false};

void MaybeReload() { g_file.MaybeReload(g_scenario); }

int Condition(const json& c) {
  if (c.is_number()) return c.get<int>();
  static const std::map<std::string, int> m = {
      {"DBE", 0x1},     {"PCI", 0x2}, {"MAX_PAGES_RETIRED", 0x4}, {"THERMAL", 0x8}, {"POWER", 0x10},
      {"NVLINK", 0x20}, {"XID", 0x40}};
  auto it = m.find(c.get<std::string>());
  return it == m.end() ? 0 : it->second;
}

// The host engine's callback thread.
void Deliver() {
  while (!g_stop) {
    g_file.Wait(50);
    std::vector<std::pair<Group, dcgmPolicyCallbackResponse_t>> calls;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      MaybeReload();
      for (const json& v : g_scenario.value("violations", json::array())) {
        const std::string id = v.value("id", "");
        if (id.empty() || g_delivered.count(id)) continue;
        const unsigned gpu = v.value("gpu", 0u);
        const int cond = Condition(v.value("condition", json("XID")));
        const unsigned value = v.value("value", 0u);
        for (const auto& [gid, g] : g_groups) {
          if (!g.cb || !(g.registered & cond) || !g.gpus.count(gpu)) continue;
          g_delivered.insert(id);
          dcgmPolicyCallbackResponse_t r{};
          r.version = gpuheal::dcgm::Version<dcgmPolicyCallbackResponse_t>(1);
          r.condition = cond;
          const long long ts = 1'700'000'000'000'000LL;
          switch (cond) {
            case 0x1:
              r.val.dbe = {ts, 2, value};
              break;
            case 0x2:
              r.val.pci = {ts, value};
              break;
            case 0x4:
              r.val.mpr = {ts, value, 0};
              break;
            case 0x8:
              r.val.thermal = {ts, value};
              break;
            case 0x10:
              r.val.power = {ts, value};
              break;
            case 0x20:
              r.val.nvlink = {ts, 0, value};
              break;
            default:
              r.val.xid = {ts, value};
              break;
          }
          calls.emplace_back(g, r);
        }
      }
    }
    for (auto& [g, r] : calls) g.cb(&r, g.user);  // outside the lock, as DCGM does
  }
}

dcgmReturn_t Scripted(const char* key) {
  auto it = g_scenario.find(key);
  return it == g_scenario.end() ? DCGM_ST_OK : it->get<int>();
}

dcgmReturn_t StartSession(dcgmHandle_t* h) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_init) return -10;  // DCGM_ST_UNINITIALIZED
  MaybeReload();
  if (dcgmReturn_t r = Scripted("connect_error"); r != DCGM_ST_OK) return r;
  g_connected = true;
  *h = 0x5eed;
  if (!g_thread.joinable()) {
    g_stop = false;
    g_thread = std::thread(Deliver);
  }
  return DCGM_ST_OK;
}

dcgmReturn_t EndSession() {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_connected = false;
    g_groups.clear();
  }
  g_stop = true;
  if (g_thread.joinable()) g_thread.join();
  return DCGM_ST_OK;
}

}  // namespace

extern "C" {

dcgmReturn_t dcgmInit(void) {
  std::lock_guard<std::mutex> lock(g_mu);
  const char* p = getenv("GPUHEAL_DCGM_SCENARIO");
  if (!p || !*p) return DCGM_ST_INIT_ERROR;
  if (g_file.Open(p, g_scenario)) g_delivered.clear();
  if (dcgmReturn_t r = Scripted("init_error"); r != DCGM_ST_OK) return r;
  g_init = true;
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmShutdown(void) {
  EndSession();
  std::lock_guard<std::mutex> lock(g_mu);
  g_init = false;
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmStartEmbedded(dcgmOperationMode_t mode, dcgmHandle_t* h) {
  if (mode != 1 && mode != 2) return DCGM_ST_BADPARAM;
  return StartSession(h);
}
dcgmReturn_t dcgmStopEmbedded(dcgmHandle_t) { return EndSession(); }
dcgmReturn_t dcgmConnect(const char* address, dcgmHandle_t* h) {
  if (!address || !*address) return DCGM_ST_BADPARAM;
  return StartSession(h);
}
dcgmReturn_t dcgmDisconnect(dcgmHandle_t) { return EndSession(); }

dcgmReturn_t dcgmGetAllSupportedDevices(dcgmHandle_t, unsigned int ids[32], int* count) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_connected) return DCGM_ST_CONNECTION_NOT_VALID;
  *count = 0;
  for (const json& g : g_scenario.value("gpus", json::array())) {
    if (*count < 32) ids[(*count)++] = g.get<unsigned>();
  }
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmGroupCreate(dcgmHandle_t, dcgmGroupType_t type, const char* name,
                             dcgmGpuGrp_t* id) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_connected) return DCGM_ST_CONNECTION_NOT_VALID;
  if (type != 1 || !name) return DCGM_ST_BADPARAM;
  *id = g_next_group++;
  g_groups[*id] = Group{};
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmGroupAddDevice(dcgmHandle_t, dcgmGpuGrp_t id, unsigned int gpu) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_groups.find(id);
  if (it == g_groups.end()) return DCGM_ST_BADPARAM;
  it->second.gpus.insert(gpu);
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmGroupDestroy(dcgmHandle_t, dcgmGpuGrp_t id) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_groups.erase(id);
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmPolicySet(dcgmHandle_t, dcgmGpuGrp_t id, dcgmPolicy_t* p, dcgmStatus_t) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (p->version != gpuheal::dcgm::Version<dcgmPolicy_t>(1)) return -12;  // DCGM_ST_VER_MISMATCH
  auto it = g_groups.find(id);
  if (it == g_groups.end()) return DCGM_ST_BADPARAM;
  // Threshold conditions need a number, the others a boolean.
  for (int i = 0; i < 7; ++i) {
    if (!(p->condition & (1 << i))) continue;
    const bool number = i == 2 || i == 3 || i == 4;
    if (p->parms[i].tag != (number ? 1 : 0)) return DCGM_ST_BADPARAM;
  }
  it->second.policy_set = true;
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmPolicyRegister_v2(dcgmHandle_t, dcgmGpuGrp_t id, dcgmPolicyCondition_t cond,
                                   fpRecvUpdates cb, uint64_t user) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_groups.find(id);
  if (it == g_groups.end() || !cb) return DCGM_ST_BADPARAM;
  if (!it->second.policy_set) return -5;  // DCGM_ST_NOT_CONFIGURED
  it->second.registered |= cond;
  it->second.cb = cb;
  it->second.user = user;
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmPolicyUnregister(dcgmHandle_t, dcgmGpuGrp_t id, dcgmPolicyCondition_t cond) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_groups.find(id);
  if (it != g_groups.end()) it->second.registered &= ~cond;
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmHealthSet(dcgmHandle_t, dcgmGpuGrp_t, dcgmHealthSystems_t systems) {
  return systems == 0 ? DCGM_ST_BADPARAM : DCGM_ST_OK;
}

dcgmReturn_t dcgmHealthCheck(dcgmHandle_t, dcgmGpuGrp_t, dcgmHealthResponse_t* r) {
  std::lock_guard<std::mutex> lock(g_mu);
  MaybeReload();
  if (dcgmReturn_t e = Scripted("health_error"); e != DCGM_ST_OK) return e;
  if (r->version != gpuheal::dcgm::Version<dcgmHealthResponse_t>(4)) return -12;
  r->overallHealth = 0;
  r->incidentCount = 0;
  for (const json& i : g_scenario.value("incidents", json::array())) {
    if (r->incidentCount >= GPUHEAL_DCGM_HEALTH_MAX_INCIDENTS) break;
    dcgmIncidentInfo_t& in = r->incidents[r->incidentCount++];
    in.system = i.value("system", 0x10);
    in.health = i.value("health", 20);
    in.entityInfo = {1, i.value("gpu", 0u)};
    const std::string msg = i.value("msg", "");
    std::snprintf(in.error.msg, sizeof in.error.msg, "%s", msg.c_str());
    r->overallHealth = std::max(r->overallHealth, in.health);
  }
  return DCGM_ST_OK;
}

const char* errorString(dcgmReturn_t r) {
  switch (r) {
    case DCGM_ST_OK:
      return "Success";
    case DCGM_ST_CONNECTION_NOT_VALID:
      return "The connection to the host engine is not valid any longer";
    case DCGM_ST_INIT_ERROR:
      return "DCGM initialization error";
    default:
      return "Unknown error";
  }
}

}  // extern "C"
