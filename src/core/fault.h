#pragma once
// A detected fault: what the classifier produces from one kernel record (or driver event).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/severity.h"

namespace gpuheal {

// kGpuHealth: a GPU state read through the driver API (remapped rows, NVLink, ...), not an Xid.
enum class FaultKind {
  kXid,
  kGpuFallenOffBus,
  kSxid,
  kKernel,
  kStorage,
  kNetwork,
  kRule,
  kGpuHealth,
  kRuntime  // the container runtime (CRI)
};
std::string_view ToString(FaultKind k);

struct Fault {
  FaultKind kind = FaultKind::kKernel;
  std::optional<int> xid;           // Xid number; 79 for the fallen-off-the-bus lines
  std::optional<int> sxid;          // NVSwitch SXid number
  std::string pci;                  // normalised "dddd:bb:dd"; empty when the record names no GPU
  std::string uuid;                 // "GPU-..." when the driver announced it for this bus id
  std::optional<int> gpu_instance;  // MIG GPU instance id
  std::optional<int> compute_instance;  // MIG compute instance id
  std::optional<int> pid;
  std::string process;
  std::optional<int> subcode;          // NVLink5 (Xid 144-150): bits 20-25 of the first register
  std::string unit;                    // NVLink5 unit mnemonic, e.g. NETIR_LINK_EVT
  std::optional<int> recovery_action;  // Xid 154: the action the driver now requires
  std::optional<unsigned> channel;     // the GPU channel an Xid names (not reported; links lines)
  std::optional<int> link;             // Xid 74, 144-150: the NVLink the registers belong to
  std::string decode;  // Xid 74, 144-150, SXid: NVIDIA's rows that decided the severity
  std::string device;  // non-GPU faults: block device, network interface, task
  Severity severity = Severity::kInfo;
  std::string condition;  // NodeCondition type (a rule may name its own)
  std::string reason;     // reason code (core/reasons.h)
  Action action = Action::kLog;
  bool trusted = true;  // false when the record came from user space (facility != 0)
  std::string message;  // the kernel message text

  // Set by the classifier when the driver's text names the Xid this line follows from
  // ("caused by previous Xid N"), and by the agent's node state by NVIDIA's sequences.
  std::optional<int> consequence_of;

  // Set by the agent's node state.
  std::optional<int> count;  // incidents of this fault (same Xid/reason, GPU/device) in the window
  std::string incident;      // the incident this line belongs to (a stable id)
  std::string repeat_of;     // set when the line repeats that incident: it adds no action
  bool escalated = false;    // severity raised by an escalation rule (docs/xid.md)
  struct Escalation {
    std::string rule;                   // distinct_workloads, hardware_signal, repeated_incidents
    std::vector<std::string> evidence;  // what the rule saw, one item per workload or signal
  };
  std::optional<Escalation> escalation;
  bool injected = false;  // a user-space record accepted with --accept-injected

  // A line that adds no action of its own: a repeat of an incident, or a consequence of another
  // fault. It is still reported.
  bool Follower() const { return !repeat_of.empty() || consequence_of.has_value(); }

  // Provenance.
  std::string source = "kmsg";  // kmsg, nvml, sysfs, dcgm
  size_t line = 0;              // 1-based input line where the fault's (first) record starts
  std::optional<uint64_t> kmsg_seq;
  std::optional<uint64_t> kmsg_usec;
};

}  // namespace gpuheal
