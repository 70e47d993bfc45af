#pragma once
// The NVIDIA driver's own channel: NVML events (one event set, a waiting thread) and health polls
// (ECC, remapped rows, retired pages, NVLink, clock events, PCIe link, temperature, the recovery
// action field, persistence mode), plus the GPU-level actions the agent performs (drain state,
// running compute processes). Raw readings only: turning them into faults is agent/gpu_health.
// Thread-safe as NVML is: the event thread and the caller of Poll() may run at once.

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/result.h"
#include "sources/nvml_library.h"

namespace gpuheal {

struct NvmlGpu {
  unsigned index = 0;
  nvmlDevice_t handle = nullptr;
  nvmlPciInfo_t pci_info{};
  std::string pci;     // "dddd:bb:dd", as the kernel-log side keys GPUs
  std::string bus_id;  // NVML's full form, "00000000:3B:00.0"
  std::string uuid, name;
  unsigned long long supported_events = 0;
  unsigned long long registered_events = 0;
};

struct NvmlEvent {
  std::string pci, uuid;
  unsigned long long type = 0;
  unsigned long long data = 0;
  std::optional<int> gpu_instance, compute_instance;
  int64_t received_usec = 0;  // CLOCK_MONOTONIC when nvmlEventSetWait_v2 returned it
};

// One GPU's readings in one poll. Unset: not supported, not permitted, or not read.
struct GpuSnapshot {
  std::string pci, uuid;
  bool lost = false;  // a call answered NVML_ERROR_GPU_IS_LOST
  std::optional<unsigned long long> ecc_volatile_uncorrected, ecc_volatile_corrected;
  std::optional<unsigned> remap_uncorrectable, remap_pending, remap_failure;
  std::optional<bool> retired_pages_pending;
  std::vector<unsigned> nvlinks_up, nvlinks_down;
  std::optional<unsigned long long> nvlink_errors;  // replay + recovery + CRC, all links
  std::optional<unsigned long long> clock_event_reasons;
  std::optional<unsigned> pcie_gen, pcie_gen_max, pcie_width, pcie_width_max;
  std::optional<unsigned> temperature, temperature_slowdown;
  std::optional<unsigned> recovery_action;
  std::optional<bool> persistence_mode;
  std::optional<bool> drained;
};

struct NvmlPoll {
  std::vector<GpuSnapshot> gpus;
  std::optional<unsigned> device_count;  // nvmlDeviceGetCount_v2 now
  std::vector<std::string> notices;      // things to say once (unsupported, no permission)
  int64_t cpu_usec = 0;                  // thread CPU time the poll took
};

class NvmlSource {
 public:
  // Loads the library and enumerates the GPUs. Per-GPU failures become notices, not errors.
  static Result<std::unique_ptr<NvmlSource>> Open(const std::string& library);
  ~NvmlSource();

  // Registers for the wanted events each GPU supports and starts the waiting thread, which
  // calls `on_event` for each event. Returns notices (e.g. "events not supported").
  std::vector<std::string> StartEvents(
      std::function<void(NvmlEvent)> on_event,
      std::chrono::milliseconds wait = std::chrono::milliseconds(500));
  void StopEvents();

  NvmlPoll Poll();
  // One GPU's readings now (after a reset, to verify it).
  GpuSnapshot PollOne(const std::string& pci);

  // GPU actions (as `nvidia-smi drain` does them). `pci` is "dddd:bb:dd".
  Result<bool> QueryDrain(const std::string& pci);
  Status SetDrain(const std::string& pci, bool drain);
  Result<std::vector<unsigned>> ComputeProcesses(const std::string& pci);

  const std::vector<NvmlGpu>& gpus() const { return gpus_; }
  const NvmlGpu* Find(const std::string& pci) const;
  NvmlLibrary& library() { return *lib_; }

 private:
  explicit NvmlSource(std::unique_ptr<NvmlLibrary> lib) : lib_(std::move(lib)) {}
  // Says `what` once per GPU and call, for results other than success.
  void NoteOnce(const NvmlGpu& g, const char* call, nvmlReturn_t r,
                std::vector<std::string>* notices);
  bool Skip(const NvmlGpu& g, const char* call) const;
  GpuSnapshot PollGpu(const NvmlGpu& g, std::vector<std::string>* notices);
  void EventLoop(std::function<void(NvmlEvent)> on_event, std::chrono::milliseconds wait);

  std::unique_ptr<NvmlLibrary> lib_;
  std::vector<NvmlGpu> gpus_;
  nvmlEventSet_t set_ = nullptr;
  std::thread events_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::set<std::string> skipped_;  // "pci/call" that answered not supported / no permission
};

// What `gpuheal nvml-check` prints for one poll (and a diagnostic bundle keeps): per GPU its
// identity, supported events, ECC, remapped rows, NVLinks, clocks, PCIe, temperature, recovery
// action, persistence and drain state (read, never changed); then the poll's notices.
std::string FormatNvmlReport(const NvmlSource& source, const NvmlPoll& poll);

// NVIDIA GPUs on the PCI bus (vendor 0x10de, display class 0x03xx), whatever the driver says.
size_t CountPciGpus(const std::string& sysfs_pci_devices = "/sys/bus/pci/devices");

}  // namespace gpuheal
