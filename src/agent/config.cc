#include "agent/config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <set>
#include <tuple>

#include "core/file.h"
#include "core/listen_address.h"
#include "core/yaml_fields.h"

namespace gpuheal {
namespace {

Result<Severity> AsSeverity(const ConfigError& err, const YAML::Node& n, std::string_view key) {
  if (n.IsScalar()) {
    if (auto s = ParseSeverity(n.as<std::string>())) return *s;
  }
  return err.At(
      n, fmt::format("\"{}\" must be one of info, warn, critical, fatal, catastrophic", key));
}

Result<Action> AsAction(const ConfigError& err, const YAML::Node& n, std::string_view key) {
  if (n.IsScalar()) {
    if (auto a = ParseAction(n.as<std::string>())) return *a;
  }
  return err.At(
      n, fmt::format("\"{}\" must be one of log, event, reset-gpu, quarantine, isolate", key));
}

Status ParseNvidia(const ConfigError& err, const YAML::Node& n, NvidiaConfig& out) {
  if (!n.IsMap()) return err.At(n, "\"nvidia\" must be a mapping");
  if (auto e = CheckKeys(err, n,
                         {"nvml", "nvml_library", "poll_period", "expected_gpus",
                          "sysfs_pci_devices", "temperature_limit", "nvlink_errors_per_poll",
                          "corrected_ecc_per_poll", "reset", "dcgm"},
                         "nvidia")) {
    return *e;
  }
  if (const YAML::Node v = n["nvml"]) {
    const std::string s = v.IsScalar() ? v.as<std::string>() : "";
    if (s == "auto")
      out.nvml = NvidiaConfig::Use::kAuto;
    else if (s == "true" || s == "on")
      out.nvml = NvidiaConfig::Use::kOn;
    else if (s == "false" || s == "off")
      out.nvml = NvidiaConfig::Use::kOff;
    else
      return err.At(v, "\"nvidia.nvml\" must be auto, true or false");
  }
  if (n["nvml_library"]) {
    GPUHEAL_TRY(v, AsString(err, n["nvml_library"], "nvidia.nvml_library"));
    out.nvml_library = v;
  }
  if (n["poll_period"]) {
    GPUHEAL_TRY(v, AsDuration(err, n["poll_period"], "nvidia.poll_period"));
    if (v.count() < 100)
      return err.At(n["poll_period"], "\"nvidia.poll_period\" must be at least 100ms");
    out.poll_period = v;
  }
  if (n["expected_gpus"]) {
    GPUHEAL_TRY(v, AsInt(err, n["expected_gpus"], "nvidia.expected_gpus", 0, 1024));
    out.expected_gpus = v;
  }
  if (n["sysfs_pci_devices"]) {
    GPUHEAL_TRY(v, AsString(err, n["sysfs_pci_devices"], "nvidia.sysfs_pci_devices"));
    out.sysfs_pci_devices = v;
  }
  if (n["temperature_limit"]) {
    GPUHEAL_TRY(v, AsInt(err, n["temperature_limit"], "nvidia.temperature_limit", 0, 200));
    out.temperature_limit = static_cast<unsigned>(v);
  }
  if (n["nvlink_errors_per_poll"]) {
    GPUHEAL_TRY(
        v, AsInt(err, n["nvlink_errors_per_poll"], "nvidia.nvlink_errors_per_poll", 1, 1000000000));
    out.nvlink_errors_per_poll = static_cast<unsigned long long>(v);
  }
  if (n["corrected_ecc_per_poll"]) {
    GPUHEAL_TRY(
        v, AsInt(err, n["corrected_ecc_per_poll"], "nvidia.corrected_ecc_per_poll", 1, 1000000000));
    out.corrected_ecc_per_poll = static_cast<unsigned long long>(v);
  }
  if (const YAML::Node r = n["reset"]) {
    if (!r.IsMap()) return err.At(r, "\"nvidia.reset\" must be a mapping");
    if (auto e = CheckKeys(err, r, {"on_critical", "drain_timeout", "command", "timeout"},
                           "nvidia.reset"))
      return *e;
    if (r["on_critical"]) {
      GPUHEAL_TRY(v, AsBool(err, r["on_critical"], "nvidia.reset.on_critical"));
      out.reset_on_critical = v;
    }
    if (r["drain_timeout"]) {
      GPUHEAL_TRY(v, AsDuration(err, r["drain_timeout"], "nvidia.reset.drain_timeout"));
      out.drain_timeout = v;
    }
    if (r["timeout"]) {
      GPUHEAL_TRY(v, AsDuration(err, r["timeout"], "nvidia.reset.timeout"));
      out.reset_timeout = v;
    }
    if (const YAML::Node c = r["command"]) {
      if (!c.IsSequence() || c.size() == 0) {
        return err.At(
            c,
            "\"nvidia.reset.command\" must be a non-empty list (argv, run without a shell; "
            "{bus_id} is replaced by the GPU's bus id)");
      }
      out.reset_command.clear();
      for (const YAML::Node& a : c) {
        GPUHEAL_TRY(v, AsString(err, a, "nvidia.reset.command[]"));
        out.reset_command.push_back(v);
      }
      if (out.reset_command[0].empty())
        return err.At(c, "\"nvidia.reset.command\" names no program");
    }
  }
  if (const YAML::Node d = n["dcgm"]) {
    if (!d.IsMap()) return err.At(d, "\"nvidia.dcgm\" must be a mapping");
    if (auto e =
            CheckKeys(err, d, {"enabled", "library", "address", "health_period"}, "nvidia.dcgm"))
      return *e;
    if (d["enabled"]) {
      GPUHEAL_TRY(v, AsBool(err, d["enabled"], "nvidia.dcgm.enabled"));
      out.dcgm = v;
    }
    if (d["library"]) {
      GPUHEAL_TRY(v, AsString(err, d["library"], "nvidia.dcgm.library"));
      out.dcgm_library = v;
    }
    if (d["address"]) {
      GPUHEAL_TRY(v, AsString(err, d["address"], "nvidia.dcgm.address"));
      out.dcgm_address = v;
    }
    if (d["health_period"]) {
      GPUHEAL_TRY(v, AsDuration(err, d["health_period"], "nvidia.dcgm.health_period"));
      out.dcgm_health_period = v;
    }
  }
  return Status::Ok();
}

Result<AgentConfig> Parse(const YAML::Node& root, const ConfigError& err) {
  AgentConfig cfg;
  if (root.IsNull()) return cfg;  // an empty file means all defaults
  if (!root.IsMap()) return err.At(root, "the config must be a mapping of keys to values");
  if (auto e = CheckKeys(
          err, root,
          {"kmsg", "kmsg_start", "state_dir", "accept_injected", "listen", "xids", "escalation",
           "npd_rules", "monitors", "self_check_period", "recovery", "kubernetes", "nvidia"},
          "")) {
    return *e;
  }
  if (root["kmsg"]) {
    GPUHEAL_TRY(v, AsString(err, root["kmsg"], "kmsg"));
    cfg.kmsg_path = v;
  }
  if (root["kmsg_start"]) {
    GPUHEAL_TRY(v, AsString(err, root["kmsg_start"], "kmsg_start"));
    if (v != "beginning" && v != "end")
      return err.At(root["kmsg_start"], "\"kmsg_start\" must be beginning or end");
    cfg.kmsg_from_end = v == "end";
  }
  if (root["state_dir"]) {
    GPUHEAL_TRY(v, AsString(err, root["state_dir"], "state_dir"));
    cfg.state_dir = v;
  }
  if (root["accept_injected"]) {
    GPUHEAL_TRY(v, AsBool(err, root["accept_injected"], "accept_injected"));
    cfg.accept_injected = v;
  }
  if (root["listen"]) {
    GPUHEAL_TRY(v, AsString(err, root["listen"], "listen"));
    if (!v.empty()) {
      if (auto a = ParseListenAddress(v); !a) {
        return err.At(root["listen"], fmt::format("\"listen\": {}", a.error().message));
      }
    }
    cfg.listen = v;
    cfg.listen_origin = err.At(root["listen"], "").message;  // "file:line:col: "
  }
  if (root["self_check_period"]) {
    GPUHEAL_TRY(v, AsDuration(err, root["self_check_period"], "self_check_period"));
    cfg.self_check_period = v;
  }
  if (const YAML::Node x = root["xids"]) {
    if (!x.IsMap()) return err.At(x, "\"xids\" must map Xid numbers to {severity, action}");
    for (auto it = x.begin(); it != x.end(); ++it) {
      GPUHEAL_TRY(xid, AsInt(err, it->first, "xids key", 1, 1000));
      const YAML::Node e = it->second;  // a copy: it-> yields a temporary proxy
      const std::string where = fmt::format("xids.{}", xid);
      if (cfg.xid_overrides.contains(xid)) {
        return err.At(it->first, fmt::format("Xid {} appears twice in \"xids\" (as {}); keep one",
                                             xid, it->first.as<std::string>()));
      }
      if (!e.IsMap())
        return err.At(e,
                      fmt::format("\"{}\" must be a mapping with severity and/or action", where));
      if (auto ce = CheckKeys(err, e, {"severity", "action"}, where)) return *ce;
      XidOverride o;
      if (e["severity"]) {
        GPUHEAL_TRY(s, AsSeverity(err, e["severity"], where + ".severity"));
        o.severity = s;
      }
      if (e["action"]) {
        GPUHEAL_TRY(a, AsAction(err, e["action"], where + ".action"));
        o.action = a;
      }
      if (!o.severity && !o.action) {
        return err.At(e, fmt::format("\"{}\" sets neither severity nor action", where));
      }
      cfg.xid_overrides[xid] = o;
    }
  }
  if (const YAML::Node e = root["escalation"]) {
    if (!e.IsMap()) return err.At(e, "\"escalation\" must be a mapping");
    if (auto ce = CheckKeys(
            err, e,
            {"enabled", "count", "window", "severity", "distinct_workloads", "hardware_signal"},
            "escalation")) {
      return *ce;
    }
    if (e["enabled"]) {
      GPUHEAL_TRY(v, AsBool(err, e["enabled"], "escalation.enabled"));
      cfg.escalation.enabled = v;
    }
    if (e["count"]) {
      GPUHEAL_TRY(v, AsInt(err, e["count"], "escalation.count", 2, 1000000));
      cfg.escalation.count = v;
    }
    if (e["window"]) {
      GPUHEAL_TRY(v, AsDuration(err, e["window"], "escalation.window"));
      cfg.escalation.window = std::chrono::duration_cast<std::chrono::seconds>(v);
      if (cfg.escalation.window.count() < 1) {
        return err.At(e["window"], "\"escalation.window\" must be at least 1s");
      }
    }
    if (e["severity"]) {
      GPUHEAL_TRY(v, AsSeverity(err, e["severity"], "escalation.severity"));
      cfg.escalation.severity = v;
    }
    if (e["distinct_workloads"]) {
      GPUHEAL_TRY(v, AsInt(err, e["distinct_workloads"], "escalation.distinct_workloads", 2, 1000));
      cfg.escalation.distinct_workloads = v;
    }
    if (e["hardware_signal"]) {
      GPUHEAL_TRY(v, AsBool(err, e["hardware_signal"], "escalation.hardware_signal"));
      cfg.escalation.hardware_signal = v;
    }
  }
  if (const YAML::Node n = root["npd_rules"]) {
    if (!n.IsSequence()) return err.At(n, "\"npd_rules\" must be a list of NPD config file paths");
    for (const YAML::Node& p : n) {
      GPUHEAL_TRY(v, AsString(err, p, "npd_rules[]"));
      cfg.npd_rule_files.push_back(v);
    }
  }
  if (const YAML::Node m = root["monitors"]) {
    if (!m.IsMap()) return err.At(m, "\"monitors\" must map monitor names to true/false");
    if (auto ce =
            CheckKeys(err, m, {"nvidia", "kernel", "storage", "network", "runtime"}, "monitors")) {
      return *ce;
    }
    auto set = [&](const char* name, bool& field) -> Status {
      if (!m[name]) return Status::Ok();
      auto v = AsBool(err, m[name], fmt::format("monitors.{}", name));
      if (!v) return v.error();
      field = *v;
      return Status::Ok();
    };
    for (auto [name, field] : {std::pair<const char*, bool*>{"nvidia", &cfg.monitors.nvidia},
                               {"kernel", &cfg.monitors.kernel},
                               {"storage", &cfg.monitors.storage},
                               {"network", &cfg.monitors.network},
                               {"runtime", &cfg.monitors.runtime}}) {
      if (auto s = set(name, *field); !s) return s.error();
    }
  }
  if (const YAML::Node n = root["nvidia"]) {
    if (auto s = ParseNvidia(err, n, cfg.nvidia); !s) return s.error();
  }
  // One-key sections holding a duration.
  for (auto [section, key, field] :
       {std::tuple<const char*, const char*, std::chrono::milliseconds*>{"recovery", "quiet_period",
                                                                         &cfg.quiet_period},
        {"kubernetes", "heartbeat_period", &cfg.heartbeat_period}}) {
    const YAML::Node n = root[section];
    if (!n) continue;
    if (!n.IsMap()) return err.At(n, fmt::format("\"{}\" must be a mapping", section));
    if (auto ce = CheckKeys(err, n, {key}, section)) return *ce;
    if (!n[key]) continue;
    GPUHEAL_TRY(v, AsDuration(err, n[key], fmt::format("{}.{}", section, key)));
    if (v.count() < 1000)
      return err.At(n[key], fmt::format("\"{}.{}\" must be at least 1s", section, key));
    *field = v;
  }
  return cfg;
}

}  // namespace

Result<AgentConfig> ParseAgentConfig(std::string_view yaml, const std::string& source) {
  ConfigError err(source);
  auto root = LoadYaml(yaml, source);
  if (!root) return root.error();
  try {
    return Parse(*root, err);
  } catch (const YAML::Exception& e) {
    // Keys that are not scalars and the like surface as yaml-cpp conversion errors.
    return Error{fmt::format("{}:{}:{}: {}", source, e.mark.line + 1, e.mark.column + 1, e.msg)};
  }
}

Result<AgentConfig> LoadAgentConfig(const std::string& path) {
  auto text = ReadWholeFile(path);
  if (!text) return Error{fmt::format("{}: cannot open config file", path)};
  return ParseAgentConfig(*text, path);
}

}  // namespace gpuheal
