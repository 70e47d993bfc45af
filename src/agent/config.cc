#include "agent/config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "core/file.h"
#include "core/listen_address.h"
#include "core/yaml_fields.h"
#include "slurm/client.h"

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

Status ParseNvidia(const ConfigError& err, const YAML::Node& node, NvidiaConfig& out) {
  GPUHEAL_TRY(n, Section::Open(err, node, "nvidia",
                               {"nvml", "nvml_library", "poll_period", "expected_gpus",
                                "sysfs_pci_devices", "temperature_limit", "nvlink_errors_per_poll",
                                "corrected_ecc_per_poll", "reset", "dcgm"}));
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
  GPUHEAL_CHECK(n.String("nvml_library", out.nvml_library));
  GPUHEAL_CHECK(n.Duration("poll_period", out.poll_period, false, std::chrono::milliseconds(100)));
  GPUHEAL_CHECK(n.Int("expected_gpus", out.expected_gpus, 0, 1024));
  GPUHEAL_CHECK(n.String("sysfs_pci_devices", out.sysfs_pci_devices));
  GPUHEAL_CHECK(n.Int("temperature_limit", out.temperature_limit, 0, 200));
  GPUHEAL_CHECK(n.Int("nvlink_errors_per_poll", out.nvlink_errors_per_poll, 1, 1000000000));
  GPUHEAL_CHECK(n.Int("corrected_ecc_per_poll", out.corrected_ecc_per_poll, 1, 1000000000));
  if (n["reset"]) {
    GPUHEAL_TRY(r, Section::Open(err, n["reset"], "nvidia.reset",
                                 {"on_critical", "drain_timeout", "command", "timeout"}));
    GPUHEAL_CHECK(r.Bool("on_critical", out.reset_on_critical));
    GPUHEAL_CHECK(r.Duration("drain_timeout", out.drain_timeout));
    GPUHEAL_CHECK(r.Duration("timeout", out.reset_timeout));
    GPUHEAL_CHECK(r.Strings("command", out.reset_command, true,
                            "a non-empty list (argv, run without a shell; {bus_id} is replaced by "
                            "the GPU's bus id)"));
    if (out.reset_command[0].empty())
      return err.At(r["command"], "\"nvidia.reset.command\" names no program");
  }
  if (n["dcgm"]) {
    GPUHEAL_TRY(d, Section::Open(err, n["dcgm"], "nvidia.dcgm",
                                 {"enabled", "library", "address", "health_period"}));
    GPUHEAL_CHECK(d.Bool("enabled", out.dcgm));
    GPUHEAL_CHECK(d.String("library", out.dcgm_library));
    GPUHEAL_CHECK(d.String("address", out.dcgm_address));
    GPUHEAL_CHECK(d.Duration("health_period", out.dcgm_health_period));
  }
  return Status::Ok();
}

Result<AgentConfig> Parse(const YAML::Node& root, const ConfigError& err) {
  AgentConfig cfg;
  if (root.IsNull()) return cfg;  // an empty file means all defaults
  GPUHEAL_TRY(top, Section::Open(err, root, "", {"kmsg",
                                                 "kmsg_start",
                                                 "kmsg_bpf",
                                                 "state_dir",
                                                 "accept_injected",
                                                 "listen",
                                                 "xids",
                                                 "escalation",
                                                 "npd_rules",
                                                 "monitors",
                                                 "self_check_period",
                                                 "recovery",
                                                 "kubernetes",
                                                 "nvidia",
                                                 "network",
                                                 "storage",
                                                 "runtime",
                                                 "previous_boot",
                                                 "kernel",
                                                 "backend",
                                                 "slurm",
                                                 "diagnostics",
                                                 "predictive",
                                                 "pod_resources"},
                                 "the config must be a mapping of keys to values"));
  if (const YAML::Node v = root["backend"]) {
    const std::string b = v.IsScalar() ? v.as<std::string>() : "";
    if (b == "kubernetes")
      cfg.backend = AgentConfig::Backend::kKubernetes;
    else if (b == "standalone")
      cfg.backend = AgentConfig::Backend::kStandalone;
    else if (b == "slurm")
      cfg.backend = AgentConfig::Backend::kSlurm;
    else
      return err.At(v, "\"backend\" must be kubernetes, standalone or slurm");
  }
  if (root["slurm"]) {
    GPUHEAL_TRY(sl, Section::Open(err, root["slurm"], "slurm",
                                  {"conf", "library", "node_name", "checkpoint_signal",
                                   "checkpoint_window", "requeue", "resume", "recheck_period"}));
    GPUHEAL_CHECK(sl.String("conf", cfg.slurm.conf));
    GPUHEAL_CHECK(sl.String("library", cfg.slurm.library));
    GPUHEAL_CHECK(sl.String("node_name", cfg.slurm.node_name));
    if (const YAML::Node v = root["slurm"]["checkpoint_signal"]) {
      const std::string name = v.IsScalar() ? v.as<std::string>() : "";
      const int sig = name == "none" ? 0 : slurm::ParseSignal(name);
      if (sig < 0)
        return err.At(v,
                      "\"slurm.checkpoint_signal\" must be a signal name (USR1, SIGUSR2, TERM, "
                      "...), a number from 1 to 64, or none");
      cfg.slurm.checkpoint_signal = sig;
    }
    GPUHEAL_CHECK(sl.Duration("checkpoint_window", cfg.slurm.checkpoint_window, true));
    GPUHEAL_CHECK(sl.Bool("requeue", cfg.slurm.requeue));
    GPUHEAL_CHECK(sl.Bool("resume", cfg.slurm.resume));
    GPUHEAL_CHECK(
        sl.Duration("recheck_period", cfg.slurm.recheck_period, false, std::chrono::seconds(1)));
  }
  GPUHEAL_CHECK(top.String("kmsg", cfg.kmsg_path));
  if (root["kmsg_start"]) {
    std::string v;
    GPUHEAL_CHECK(top.String("kmsg_start", v));
    if (v != "beginning" && v != "end")
      return err.At(root["kmsg_start"], "\"kmsg_start\" must be beginning or end");
    cfg.kmsg_from_end = v == "end";
  }
  if (const YAML::Node v = root["kmsg_bpf"]) {
    const auto b = ParseKmsgBpf(v.IsScalar() ? v.as<std::string>() : "");
    if (!b) return err.At(v, "\"kmsg_bpf\" must be auto, true or false");
    cfg.kmsg_bpf = *b;
  }
  GPUHEAL_CHECK(top.String("state_dir", cfg.state_dir));
  GPUHEAL_CHECK(top.Bool("accept_injected", cfg.accept_injected));
  if (root["listen"]) {
    GPUHEAL_CHECK(top.String("listen", cfg.listen));
    if (!cfg.listen.empty()) {
      if (auto a = ParseListenAddress(cfg.listen); !a) {
        return err.At(root["listen"], fmt::format("\"listen\": {}", a.error().message));
      }
    }
    cfg.listen_origin = err.At(root["listen"], "").message;  // "file:line:col: "
  }
  GPUHEAL_CHECK(top.Duration("self_check_period", cfg.self_check_period));
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
      GPUHEAL_CHECK(Section::Open(
          err, e, where, {"severity", "action"},
          fmt::format("\"{}\" must be a mapping with severity and/or action", where)));
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
  if (root["escalation"]) {
    GPUHEAL_TRY(e, Section::Open(err, root["escalation"], "escalation",
                                 {"enabled", "count", "window", "severity", "distinct_workloads",
                                  "hardware_signal"}));
    GPUHEAL_CHECK(e.Bool("enabled", cfg.escalation.enabled));
    GPUHEAL_CHECK(e.Int("count", cfg.escalation.count, 2, 1000000));
    std::chrono::milliseconds window = cfg.escalation.window;
    GPUHEAL_CHECK(e.Duration("window", window, false, std::chrono::seconds(1)));
    cfg.escalation.window = std::chrono::duration_cast<std::chrono::seconds>(window);
    if (e["severity"]) {
      GPUHEAL_TRY(v, AsSeverity(err, e["severity"], "escalation.severity"));
      cfg.escalation.severity = v;
    }
    GPUHEAL_CHECK(e.Int("distinct_workloads", cfg.escalation.distinct_workloads, 2, 1000));
    GPUHEAL_CHECK(e.Bool("hardware_signal", cfg.escalation.hardware_signal));
  }
  GPUHEAL_CHECK(
      top.Strings("npd_rules", cfg.npd_rule_files, false, "a list of NPD config file paths"));
  if (root["monitors"]) {
    GPUHEAL_TRY(m, Section::Open(err, root["monitors"], "monitors",
                                 {"nvidia", "kernel", "storage", "network", "runtime"},
                                 "\"monitors\" must map monitor names to true/false"));
    GPUHEAL_CHECK(m.Bool("nvidia", cfg.monitors.nvidia));
    GPUHEAL_CHECK(m.Bool("kernel", cfg.monitors.kernel));
    GPUHEAL_CHECK(m.Bool("storage", cfg.monitors.storage));
    GPUHEAL_CHECK(m.Bool("network", cfg.monitors.network));
    GPUHEAL_CHECK(m.Bool("runtime", cfg.monitors.runtime));
  }
  if (root["nvidia"]) GPUHEAL_CHECK(ParseNvidia(err, root["nvidia"], cfg.nvidia));
  if (root["network"]) {
    GPUHEAL_TRY(n, Section::Open(err, root["network"], "network",
                                 {"interfaces", "required", "flap_count", "flap_window",
                                  "infiniband_sysfs", "infiniband_period"}));
    GPUHEAL_CHECK(n.Strings("interfaces", cfg.network.interfaces, false,
                            "a list of interface name patterns (fnmatch: ib*, mlx5_*)"));
    GPUHEAL_CHECK(n.Strings("required", cfg.network.required, false,
                            "a list of interface names that must exist"));
    GPUHEAL_CHECK(n.Int("flap_count", cfg.network.flap_count, 2, 1000));
    GPUHEAL_CHECK(
        n.Duration("flap_window", cfg.network.flap_window, false, std::chrono::seconds(1)));
    GPUHEAL_CHECK(n.String("infiniband_sysfs", cfg.network.infiniband_sysfs));
    GPUHEAL_CHECK(n.Duration("infiniband_period", cfg.network.infiniband_period, false,
                             std::chrono::milliseconds(100)));
  }
  if (root["storage"]) {
    GPUHEAL_TRY(s, Section::Open(err, root["storage"], "storage",
                                 {"paths", "stat_timeout", "period", "mountinfo"}));
    GPUHEAL_CHECK(s.Strings("paths", cfg.storage.paths, false, "a list of absolute paths"));
    for (size_t i = 0; i < cfg.storage.paths.size(); ++i) {
      if (cfg.storage.paths[i].empty() || cfg.storage.paths[i][0] != '/') {
        return err.At(
            root["storage"]["paths"][i],
            fmt::format("\"storage.paths\": \"{}\" is not an absolute path", cfg.storage.paths[i]));
      }
    }
    GPUHEAL_CHECK(
        s.Duration("stat_timeout", cfg.storage.stat_timeout, false, std::chrono::milliseconds(10)));
    GPUHEAL_CHECK(s.Duration("period", cfg.storage.period, false, std::chrono::milliseconds(100)));
    GPUHEAL_CHECK(s.String("mountinfo", cfg.storage.mountinfo));
  }
  if (root["runtime"]) {
    GPUHEAL_TRY(r, Section::Open(err, root["runtime"], "runtime",
                                 {"endpoint", "timeout", "period", "network_ready"}));
    GPUHEAL_CHECK(r.String("endpoint", cfg.runtime.endpoint));
    if (cfg.runtime.endpoint.rfind("unix://", 0) != 0 || cfg.runtime.endpoint.size() <= 7) {
      return err.At(root["runtime"]["endpoint"],
                    "\"runtime.endpoint\" must be unix:///path/to/cri.sock (the runtime's CRI "
                    "socket, e.g. unix:///run/containerd/containerd.sock)");
    }
    GPUHEAL_CHECK(r.Duration("timeout", cfg.runtime.timeout, false, std::chrono::milliseconds(10)));
    GPUHEAL_CHECK(r.Duration("period", cfg.runtime.period, false, std::chrono::milliseconds(100)));
    GPUHEAL_CHECK(r.Bool("network_ready", cfg.runtime.network_ready));
  }
  if (root["pod_resources"]) {
    GPUHEAL_TRY(p, Section::Open(err, root["pod_resources"], "pod_resources",
                                 {"socket", "resources", "timeout", "refresh"}));
    GPUHEAL_CHECK(p.String("socket", cfg.pod_resources.socket));
    if (!cfg.pod_resources.socket.empty() && cfg.pod_resources.socket[0] != '/') {
      return err.At(root["pod_resources"]["socket"],
                    "\"pod_resources.socket\" must be an absolute path (the kubelet's "
                    "/var/lib/kubelet/pod-resources/kubelet.sock) or \"\" to never ask");
    }
    GPUHEAL_CHECK(p.Strings("resources", cfg.pod_resources.resources, true,
                            "a list of GPU resource name patterns (fnmatch: nvidia.com/*)"));
    GPUHEAL_CHECK(
        p.Duration("timeout", cfg.pod_resources.timeout, false, std::chrono::milliseconds(10)));
    GPUHEAL_CHECK(
        p.Duration("refresh", cfg.pod_resources.refresh, false, std::chrono::milliseconds(100)));
  }
  if (root["previous_boot"]) {
    GPUHEAL_TRY(p, Section::Open(err, root["previous_boot"], "previous_boot",
                                 {"enabled", "pstore", "journal"}));
    GPUHEAL_CHECK(p.Bool("enabled", cfg.previous_boot.enabled));
    GPUHEAL_CHECK(p.String("pstore", cfg.previous_boot.pstore));
    GPUHEAL_CHECK(p.String("journal", cfg.previous_boot.journal));
  }
  if (root["predictive"]) {
    GPUHEAL_TRY(pr, Section::Open(err, root["predictive"], "predictive",
                                  {"enabled", "window", "thresholds"}));
    GPUHEAL_CHECK(pr.Bool("enabled", cfg.predictive.enabled));
    std::chrono::milliseconds window = cfg.predictive.window;
    GPUHEAL_CHECK(pr.Duration("window", window, false, std::chrono::seconds(1)));
    cfg.predictive.window = std::chrono::duration_cast<std::chrono::seconds>(window);
    if (const YAML::Node t = pr["thresholds"]) {
      std::string known;
      for (auto s : PrecursorSignals()) known += (known.empty() ? "" : ", ") + std::string(s);
      if (!t.IsMap()) {
        return err.At(t, "\"predictive.thresholds\" must map signals (" + known +
                             ") to incident counts (0: not counted)");
      }
      for (auto it = t.begin(); it != t.end(); ++it) {
        const std::string k = it->first.as<std::string>();
        if (std::find(PrecursorSignals().begin(), PrecursorSignals().end(), k) ==
            PrecursorSignals().end()) {
          return err.At(it->first, fmt::format("unknown signal \"{}\" in predictive.thresholds "
                                               "(known: {})",
                                               k, known));
        }
        GPUHEAL_TRY(n, AsInt(err, it->second, "predictive.thresholds." + k, 0, 1000000));
        if (n == 0)
          cfg.predictive.thresholds.erase(k);
        else
          cfg.predictive.thresholds[k] = n;
      }
    }
  }
  if (root["diagnostics"]) {
    GPUHEAL_TRY(
        d, Section::Open(err, root["diagnostics"], "diagnostics",
                         {"enabled", "dir", "retention", "max_size_mb", "collector_timeout",
                          "upload_timeout", "upload_attempts", "nvidia_smi", "kubelet_healthz"}));
    GPUHEAL_CHECK(d.Bool("enabled", cfg.diagnostics.enabled));
    GPUHEAL_CHECK(d.String("dir", cfg.diagnostics.dir));
    GPUHEAL_CHECK(
        d.Duration("retention", cfg.diagnostics.retention, false, std::chrono::seconds(1)));
    int mb = static_cast<int>(cfg.diagnostics.max_bytes / (1024 * 1024));
    GPUHEAL_CHECK(d.Int("max_size_mb", mb, 1, 4096));
    cfg.diagnostics.max_bytes = static_cast<int64_t>(mb) * 1024 * 1024;
    GPUHEAL_CHECK(d.Duration("collector_timeout", cfg.diagnostics.collector_timeout, false,
                             std::chrono::milliseconds(100)));
    GPUHEAL_CHECK(d.Duration("upload_timeout", cfg.diagnostics.upload_timeout, false,
                             std::chrono::seconds(1)));
    GPUHEAL_CHECK(d.Int("upload_attempts", cfg.diagnostics.upload_attempts, 1, 10));
    GPUHEAL_CHECK(d.String("nvidia_smi", cfg.diagnostics.nvidia_smi));
    GPUHEAL_CHECK(d.String("kubelet_healthz", cfg.diagnostics.kubelet_healthz));
  }
  if (root["kernel"]) {
    GPUHEAL_TRY(
        k, Section::Open(err, root["kernel"], "kernel", {"oom_storm_count", "oom_storm_window"}));
    GPUHEAL_CHECK(k.Int("oom_storm_count", cfg.kernel.oom_storm_count, 2, 100000));
    GPUHEAL_CHECK(k.Duration("oom_storm_window", cfg.kernel.oom_storm_window, false,
                             std::chrono::seconds(1)));
  }
  if (root["recovery"]) {
    GPUHEAL_TRY(r, Section::Open(err, root["recovery"], "recovery", {"quiet_period"}));
    GPUHEAL_CHECK(r.Duration("quiet_period", cfg.quiet_period, false, std::chrono::seconds(1)));
  }
  if (root["kubernetes"]) {
    GPUHEAL_TRY(k, Section::Open(err, root["kubernetes"], "kubernetes", {"heartbeat_period"}));
    GPUHEAL_CHECK(
        k.Duration("heartbeat_period", cfg.heartbeat_period, false, std::chrono::seconds(1)));
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
  auto cfg = ParseAgentConfig(*text, path);
  if (cfg) cfg->config_file = path;
  return cfg;
}

std::optional<AgentConfig::Bpf> ParseKmsgBpf(std::string_view v) {
  if (v == "auto") return AgentConfig::Bpf::kAuto;
  if (v == "true" || v == "on") return AgentConfig::Bpf::kOn;
  if (v == "false" || v == "off") return AgentConfig::Bpf::kOff;
  return std::nullopt;
}

}  // namespace gpuheal
