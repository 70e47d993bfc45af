#pragma once
// DCGM (optional): libdcgm loaded at run time, a host engine (embedded, or at an address), one
// group per GPU with a policy for DBE, PCI, max pages retired, thermal, power, NVLink and Xid and a
// callback registered on it (DCGM pushes violations; the callback runs on DCGM's thread), and the
// health watches checked on demand. A lost host engine is an error of the check, never a GPU fault.

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/result.h"
#include "sources/dcgm_api.h"

namespace gpuheal {

struct DcgmViolation {
  unsigned gpu_id = 0;           // DCGM's GPU id (the NVML index on the same node)
  int condition = 0;             // dcgm::kCond*
  unsigned long long value = 0;  // Xid, error count, temperature, watts, replay count, pages
  int64_t received_usec = 0;
};

struct DcgmIncident {
  unsigned gpu_id = 0;
  int system = 0;  // DCGM_HEALTH_WATCH_* bit
  int health = 0;  // dcgm::kHealthWarn / kHealthFail
  std::string message;
};

struct DcgmOptions {
  std::string library = "libdcgm.so.4";  // the default falls back to libdcgm.so.3
  std::string address;                   // "" = embedded host engine
  unsigned thermal_limit = 90;           // degrees C for the thermal policy
  unsigned power_limit = 800;            // watts for the power policy
  unsigned max_retired_pages = 60;       // pages for the max-pages-retired policy
};

class DcgmSource {
 public:
  static Result<std::unique_ptr<DcgmSource>> Open(const DcgmOptions& options,
                                                  std::function<void(DcgmViolation)> on_violation);
  ~DcgmSource();
  DcgmSource(const DcgmSource&) = delete;
  DcgmSource& operator=(const DcgmSource&) = delete;

  // Incidents of the health watches now; an error when the host engine cannot be reached.
  Result<std::vector<DcgmIncident>> HealthCheck();
  // Drops the connection and sets everything up again (after the host engine came back).
  Status Reconnect();

  const std::vector<unsigned>& gpu_ids() const { return gpu_ids_; }
  const std::string& library() const { return library_; }
  std::string Describe(dcgmReturn_t r) const;

 private:
  struct Fns;
  struct Ctx {
    DcgmSource* self;
    unsigned gpu;
  };
  DcgmSource() = default;
  Status Connect();
  void Disconnect();
  static int OnPolicy(dcgmPolicyCallbackResponse_t* r, uint64_t user);

  DcgmOptions options_;
  std::function<void(DcgmViolation)> on_violation_;
  void* handle_ = nullptr;
  std::unique_ptr<Fns> fn_;
  std::string library_;
  bool initialised_ = false;
  dcgmHandle_t dcgm_ = 0;
  bool connected_ = false;
  std::vector<unsigned> gpu_ids_;
  std::vector<dcgmGpuGrp_t> groups_;
  std::vector<std::unique_ptr<Ctx>> contexts_;
  std::mutex mu_;
};

}  // namespace gpuheal
