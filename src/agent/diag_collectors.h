#pragma once
// The collectors of a diagnostic bundle (docs/diagnostics.md). Each reads one part of the node's
// state into files and runs on a thread of its own with its own deadline, off the agent's event
// loop: a collector never delays a kernel record. A collector late past its deadline is left
// behind (its result says "deadline exceeded") and the bundle is built without it.
//
//   kernel         the whole kernel ring buffer, read from its first record (own /dev/kmsg fd)
//   previous-boot  pstore's records and the persistent journal's kernel messages of the last boot
//   nvml           per GPU the NVML readings, as `gpuheal nvml-check` prints them
//   dcgm           DCGM's health watches (when nvidia.dcgm.enabled)
//   nvidia-smi     `nvidia-smi -q` (when it is on PATH)
//   pcie           NVIDIA devices and the bridges above them from sysfs: ids, driver, link
//                  speed/width (current and max), AER error counters
//   system         /proc interrupts, meminfo, cmdline, modules, uptime, loadavg, version
//   agent          the agent's state (active faults, cursor, recent faults, config, version) and
//                  its environment's names (values redacted)
//   runtime        the container runtime's CRI Version and Status, the kubelet's /healthz
//
// Every file passes through the Redactor before it enters a bundle: tokens, passwords, signed
// URL signatures and known secret values are replaced by "<redacted>".

#include <re2/re2.h>

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/config.h"
#include "agent/diag_bundle.h"
#include "core/result.h"

namespace gpuheal {

struct CollectContext {
  std::string kmsg_path = "/dev/kmsg";
  std::string proc = "/proc";
  std::string os_release = "/etc/os-release";
  std::string sys_pci_devices = "/sys/bus/pci/devices";
  PreviousBootConfig previous_boot;
  std::string boot_id;
  NvidiaConfig nvidia;
  std::string nvidia_smi = "nvidia-smi";
  std::string cri_endpoint;                 // unix:///run/containerd/containerd.sock; "" none
  std::string kubelet_healthz;              // "" none
  nlohmann::json agent_state;               // the agent collector's state.json
  std::chrono::milliseconds timeout{5000};  // each collector's deadline
};

// The context for this host from an agent's config.
CollectContext ContextFor(const AgentConfig& config);

// Every collector's name, in bundle order.
const std::vector<std::string>& CollectorNames();

// The collectors a request selects: all, or `include`'s, minus `exclude`'s. An unknown name is
// an error that lists the known ones.
Result<std::vector<std::string>> SelectCollectors(const std::vector<std::string>& include,
                                                  const std::vector<std::string>& exclude);

// Runs `names` at once, each on its own thread, and returns their results in `names`' order by
// `timeout` (plus a little): a collector still running then is reported timed out.
std::vector<CollectorResult> RunCollectors(const CollectContext& ctx,
                                           const std::vector<std::string>& names);

// One collector, on the calling thread (tests).
CollectorResult RunCollector(const CollectContext& ctx, const std::string& name);

class Redactor {
 public:
  // `secrets`: literal values that must never appear (a bearer token, a signed URL's query);
  // shorter than 6 characters they are ignored. The environment's values whose names look secret
  // (TOKEN, SECRET, PASSWORD, KEY, CREDENTIAL, AUTH) are added.
  explicit Redactor(std::vector<std::string> secrets = {});
  std::string Apply(std::string text) const;
  void Apply(std::vector<CollectorResult>& results) const;

 private:
  std::vector<std::string> secrets_;
  std::vector<std::unique_ptr<RE2>> patterns_;  // group 1 is kept, the rest of the match redacted
};

// The environment as the agent collector records it: every name, values replaced by
// "<redacted>" except a few known to be harmless (PATH, HOSTNAME, NODE_NAME, ...).
std::string RedactedEnvironment();

}  // namespace gpuheal
