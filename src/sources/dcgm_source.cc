#include "sources/dcgm_source.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/clock.h"
#include "core/dl_symbol.h"

namespace gpuheal {

#define GPUHEAL_DCGM_FN(name) decltype(&::name) name = nullptr
struct DcgmSource::Fns {
  GPUHEAL_DCGM_FN(dcgmInit);
  GPUHEAL_DCGM_FN(dcgmShutdown);
  GPUHEAL_DCGM_FN(dcgmStartEmbedded);
  GPUHEAL_DCGM_FN(dcgmStopEmbedded);
  GPUHEAL_DCGM_FN(dcgmConnect);
  GPUHEAL_DCGM_FN(dcgmDisconnect);
  GPUHEAL_DCGM_FN(dcgmGetAllSupportedDevices);
  GPUHEAL_DCGM_FN(dcgmGroupCreate);
  GPUHEAL_DCGM_FN(dcgmGroupAddDevice);
  GPUHEAL_DCGM_FN(dcgmGroupDestroy);
  GPUHEAL_DCGM_FN(dcgmPolicySet);
  GPUHEAL_DCGM_FN(dcgmPolicyRegister_v2);
  GPUHEAL_DCGM_FN(dcgmPolicyUnregister);
  GPUHEAL_DCGM_FN(dcgmHealthSet);
  GPUHEAL_DCGM_FN(dcgmHealthCheck);
  GPUHEAL_DCGM_FN(errorString);
};
#undef GPUHEAL_DCGM_FN

std::string DcgmSource::Describe(dcgmReturn_t r) const {
  const char* words = fn_ && fn_->errorString ? fn_->errorString(r) : nullptr;
  return words ? fmt::format("DCGM error {} ({})", r, words) : fmt::format("DCGM error {}", r);
}

Result<std::unique_ptr<DcgmSource>> DcgmSource::Open(
    const DcgmOptions& options, std::function<void(DcgmViolation)> on_violation) {
  std::unique_ptr<DcgmSource> s(new DcgmSource());
  s->options_ = options;
  s->on_violation_ = std::move(on_violation);
  std::vector<std::string> candidates = {options.library};
  if (options.library == "libdcgm.so.4") candidates.push_back("libdcgm.so.3");
  auto opened = OpenLibrary(candidates, RTLD_NOW | RTLD_LOCAL,
                            "the agent reads DCGM's health watches through it; install "
                            "datacenter-gpu-manager or set nvidia.dcgm.library");
  if (!opened) return opened.error();
  s->handle_ = opened->handle;
  s->library_ = opened->file;
  s->fn_ = std::make_unique<Fns>();
  Fns& f = *s->fn_;
  std::string missing;
  auto sym = [&](auto& slot, const char* name) {
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(s->handle_, name));
    if (!slot) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
#define GPUHEAL_SYM(name) sym(f.name, #name)
  GPUHEAL_SYM(dcgmInit);
  GPUHEAL_SYM(dcgmShutdown);
  GPUHEAL_SYM(dcgmStartEmbedded);
  GPUHEAL_SYM(dcgmStopEmbedded);
  GPUHEAL_SYM(dcgmConnect);
  GPUHEAL_SYM(dcgmDisconnect);
  GPUHEAL_SYM(dcgmGetAllSupportedDevices);
  GPUHEAL_SYM(dcgmGroupCreate);
  GPUHEAL_SYM(dcgmGroupAddDevice);
  GPUHEAL_SYM(dcgmGroupDestroy);
  GPUHEAL_SYM(dcgmPolicySet);
  GPUHEAL_SYM(dcgmPolicyRegister_v2);
  GPUHEAL_SYM(dcgmPolicyUnregister);
  GPUHEAL_SYM(dcgmHealthSet);
  GPUHEAL_SYM(dcgmHealthCheck);
#undef GPUHEAL_SYM
  f.errorString = reinterpret_cast<decltype(f.errorString)>(dlsym(s->handle_, "errorString"));
  if (!missing.empty()) {
    return Error{fmt::format("{} has no {}: DCGM 3.0 or newer is needed", s->library_, missing)};
  }
  if (dcgmReturn_t r = f.dcgmInit(); r != DCGM_ST_OK)
    return Error{"dcgmInit failed: " + s->Describe(r)};
  s->initialised_ = true;
  if (Status c = s->Connect(); !c) return c.error();
  return s;
}

Status DcgmSource::Connect() {
  Fns& f = *fn_;
  dcgmReturn_t r = options_.address.empty() ? f.dcgmStartEmbedded(dcgm::kOperationModeAuto, &dcgm_)
                                            : f.dcgmConnect(options_.address.c_str(), &dcgm_);
  if (r != DCGM_ST_OK) {
    return Error{
        options_.address.empty()
            ? "cannot start an embedded DCGM host engine: " + Describe(r)
            : fmt::format(
                  "cannot connect to the DCGM host engine at {}: {} (is nv-hostengine running?)",
                  options_.address, Describe(r))};
  }
  connected_ = true;
  unsigned ids[32] = {};
  int count = 0;
  if ((r = f.dcgmGetAllSupportedDevices(dcgm_, ids, &count)) != DCGM_ST_OK) {
    return Error{"dcgmGetAllSupportedDevices failed: " + Describe(r)};
  }
  gpu_ids_.assign(ids, ids + std::clamp(count, 0, 32));
  // One group per GPU, so that a violation names its GPU (the callback's response does not).
  for (unsigned gpu : gpu_ids_) {
    dcgmGpuGrp_t g = 0;
    if ((r = f.dcgmGroupCreate(dcgm_, dcgm::kGroupEmpty, fmt::format("gpuheal-gpu{}", gpu).c_str(),
                               &g)) != DCGM_ST_OK ||
        (r = f.dcgmGroupAddDevice(dcgm_, g, gpu)) != DCGM_ST_OK) {
      return Error{fmt::format("DCGM group for GPU {}: {}", gpu, Describe(r))};
    }
    groups_.push_back(g);
    dcgmPolicy_t p{};
    p.version = dcgm::Version<dcgmPolicy_t>(1);
    p.condition = dcgm::kAllConditions;
    auto boolean = [&](int idx) {
      p.parms[idx].tag = 0;
      p.parms[idx].val.boolean = 1;
    };
    auto number = [&](int idx, unsigned long long v) {
      p.parms[idx].tag = 1;
      p.parms[idx].val.llval = v;
    };
    boolean(0);                             // DBE
    boolean(1);                             // PCI
    number(2, options_.max_retired_pages);  // max pages retired
    number(3, options_.thermal_limit);      // thermal
    number(4, options_.power_limit);        // power
    boolean(5);                             // NVLink
    boolean(6);                             // Xid
    if ((r = f.dcgmPolicySet(dcgm_, g, &p, 0)) != DCGM_ST_OK) {
      return Error{fmt::format("dcgmPolicySet for GPU {}: {}", gpu, Describe(r))};
    }
    contexts_.push_back(std::make_unique<Ctx>(Ctx{this, gpu}));
    if ((r = f.dcgmPolicyRegister_v2(dcgm_, g, dcgm::kAllConditions, &DcgmSource::OnPolicy,
                                     reinterpret_cast<uint64_t>(contexts_.back().get()))) !=
        DCGM_ST_OK) {
      return Error{fmt::format("dcgmPolicyRegister_v2 for GPU {}: {}", gpu, Describe(r))};
    }
  }
  if ((r = f.dcgmHealthSet(dcgm_, dcgm::kGroupAllGpus, dcgm::kHealthSystems)) != DCGM_ST_OK) {
    return Error{"dcgmHealthSet failed: " + Describe(r)};
  }
  return Status::Ok();
}

void DcgmSource::Disconnect() {
  if (!connected_) return;
  Fns& f = *fn_;
  for (dcgmGpuGrp_t g : groups_) {
    f.dcgmPolicyUnregister(dcgm_, g, dcgm::kAllConditions);
    f.dcgmGroupDestroy(dcgm_, g);
  }
  groups_.clear();
  if (options_.address.empty())
    f.dcgmStopEmbedded(dcgm_);
  else
    f.dcgmDisconnect(dcgm_);
  connected_ = false;
  // contexts_ stay: a callback already queued by DCGM may still reach one.
}

DcgmSource::~DcgmSource() {
  if (fn_) {
    Disconnect();
    if (initialised_) fn_->dcgmShutdown();
  }
  if (handle_) dlclose(handle_);
}

int DcgmSource::OnPolicy(dcgmPolicyCallbackResponse_t* r, uint64_t user) {
  const Ctx* ctx = reinterpret_cast<const Ctx*>(user);
  if (!r || !ctx) return 0;
  DcgmViolation v;
  v.gpu_id = ctx->gpu;
  v.condition = r->condition;
  v.received_usec = MonotonicUsec();
  switch (r->condition) {
    case dcgm::kCondDbe:
      v.value = r->val.dbe.numerrors;
      break;
    case dcgm::kCondPci:
      v.value = r->val.pci.counter;
      break;
    case dcgm::kCondMaxPagesRetired:
      v.value = r->val.mpr.sbepages + r->val.mpr.dbepages;
      break;
    case dcgm::kCondThermal:
      v.value = r->val.thermal.thermalViolation;
      break;
    case dcgm::kCondPower:
      v.value = r->val.power.powerViolation;
      break;
    case dcgm::kCondNvlink:
      v.value = r->val.nvlink.counter;
      break;
    case dcgm::kCondXid:
      v.value = r->val.xid.errnum;
      break;
    default:
      return 0;
  }
  ctx->self->on_violation_(v);
  return 0;
}

Result<std::vector<DcgmIncident>> DcgmSource::HealthCheck() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!connected_) return Error{"not connected to the DCGM host engine"};
  auto resp = std::make_unique<dcgmHealthResponse_t>();
  std::memset(resp.get(), 0, sizeof *resp);
  resp->version = dcgm::Version<dcgmHealthResponse_t>(4);
  if (dcgmReturn_t r = fn_->dcgmHealthCheck(dcgm_, dcgm::kGroupAllGpus, resp.get());
      r != DCGM_ST_OK) {
    return Error{"dcgmHealthCheck failed: " + Describe(r)};
  }
  std::vector<DcgmIncident> out;
  const unsigned n = std::min<unsigned>(resp->incidentCount, GPUHEAL_DCGM_HEALTH_MAX_INCIDENTS);
  for (unsigned i = 0; i < n; ++i) {
    const dcgmIncidentInfo_t& in = resp->incidents[i];
    if (in.health == dcgm::kHealthPass) continue;
    DcgmIncident d;
    d.gpu_id = in.entityInfo.entityId;
    d.system = in.system;
    d.health = in.health;
    d.message.assign(in.error.msg, strnlen(in.error.msg, sizeof in.error.msg));
    out.push_back(std::move(d));
  }
  return out;
}

Status DcgmSource::Reconnect() {
  std::lock_guard<std::mutex> lock(mu_);
  Disconnect();
  return Connect();
}

}  // namespace gpuheal
