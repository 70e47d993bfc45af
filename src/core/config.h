#pragma once
// The agent's YAML config. Every key is validated: unknown keys and bad values are errors that
// name file:line:column and say what is accepted. docs/config.md documents each key.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/classifier.h"
#include "core/result.h"
#include "core/severity.h"

namespace gpuheal {

// The same Xid (or reason) on the same GPU (or device) `count` times within `window` raises the
// fault to `severity`. Faults already at or above it are unaffected; info never escalates.
struct EscalationPolicy {
  bool enabled = true;
  int count = 5;
  std::chrono::seconds window = std::chrono::hours(24);
  Severity severity = Severity::kFatal;
};

// Monitors that can be switched off, each owning one condition domain's sources.
struct MonitorSwitches {
  bool nvidia = true;   // AcceleratedHardwareReady: Xid, SXid, fallen off the bus
  bool kernel = true;   // KernelReady
  bool storage = true;  // StorageReady
  bool network = true;  // NetworkingReady
  bool runtime = true;  // ContainerRuntimeReady (no kernel-log source yet)
};

struct AgentConfig {
  std::string kmsg_path = "/dev/kmsg";
  std::string state_dir = "/var/lib/gpuheal";
  bool accept_injected = false;
  std::string listen = "127.0.0.1:9464";  // /metrics and /healthz; empty disables
  std::map<int, XidOverride> xid_overrides;
  EscalationPolicy escalation;
  std::vector<std::string> npd_rule_files;
  MonitorSwitches monitors;
  std::chrono::milliseconds self_check_period = std::chrono::seconds(60);
  // A transient fault (docs/recovery.md) clears after this long without a repeat.
  std::chrono::milliseconds quiet_period = std::chrono::minutes(10);
  // Kubernetes mode: lastHeartbeatTime of the agent's conditions is refreshed this often.
  std::chrono::milliseconds heartbeat_period = std::chrono::minutes(5);
};

Result<AgentConfig> LoadAgentConfig(const std::string& path);
Result<AgentConfig> ParseAgentConfig(std::string_view yaml, const std::string& source);

// "500ms", "30s", "10m", "24h", "7d" -> duration. nullopt when malformed.
std::optional<std::chrono::milliseconds> ParseDuration(std::string_view s);

}  // namespace gpuheal
