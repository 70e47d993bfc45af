#include "controller/policy.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <set>

#include "core/file.h"
#include "core/yaml_fields.h"

namespace gpuheal::controller {
namespace {

std::set<std::string> Domains() {
  std::set<std::string> out;
  for (Condition c : kAllConditions) out.insert(std::string(ToString(c)));
  return out;
}

Result<Policy> Parse(const YAML::Node& root, const ConfigError& e) {
  Policy p;
  if (root.IsNull()) return p;
  if (!root.IsMap()) return e.At(root, "the policy must be a mapping of keys to values");
  if (auto k = CheckKeys(e, root,
                         {"toleration", "checkpoint", "eviction", "skip", "pools", "breaker",
                          "attempts", "probation", "provider", "paused", "critical"},
                         "")) {
    return *k;
  }
  if (const YAML::Node t = root["toleration"]) {
    if (!t.IsMap())
      return e.At(t, "\"toleration\" must map condition types (or \"default\") to durations");
    for (auto it = t.begin(); it != t.end(); ++it) {
      const std::string k = it->first.as<std::string>();
      if (k != "default" && !IsDomain(k)) {
        return e.At(it->first,
                    fmt::format("unknown condition \"{}\" in toleration (known: default, {})", k,
                                Join(Domains())));
      }
      GPUHEAL_TRY(d, AsDuration(e, it->second, "toleration." + k));
      if (k == "default")
        p.default_toleration = d;
      else
        p.toleration[k] = d;
    }
  }
  if (const YAML::Node c = root["checkpoint"]) {
    if (!c.IsMap()) return e.At(c, "\"checkpoint\" must be a mapping");
    if (auto k = CheckKeys(e, c, {"window", "catastrophic_window"}, "checkpoint")) return *k;
    if (c["window"]) {
      GPUHEAL_TRY(d, AsDuration(e, c["window"], "checkpoint.window", true));
      p.checkpoint_window = d;
    }
    if (c["catastrophic_window"]) {
      GPUHEAL_TRY(d,
                  AsDuration(e, c["catastrophic_window"], "checkpoint.catastrophic_window", true));
      p.catastrophic_checkpoint_window = d;
    }
  }
  if (const YAML::Node v = root["eviction"]) {
    if (!v.IsMap()) return e.At(v, "\"eviction\" must be a mapping");
    if (auto k = CheckKeys(
            e, v, {"grace_period_seconds", "drain_timeout", "after_drain_timeout", "gpu_pods_only"},
            "eviction")) {
      return *k;
    }
    if (v["grace_period_seconds"]) {
      GPUHEAL_TRY(g,
                  AsInt(e, v["grace_period_seconds"], "eviction.grace_period_seconds", 0, 86400));
      p.eviction_grace_seconds = g;
    }
    if (v["drain_timeout"]) {
      GPUHEAL_TRY(d, AsDuration(e, v["drain_timeout"], "eviction.drain_timeout"));
      p.drain_timeout = d;
    }
    if (v["after_drain_timeout"]) {
      GPUHEAL_TRY(s, AsString(e, v["after_drain_timeout"], "eviction.after_drain_timeout"));
      if (s != "wait" && s != "force-delete") {
        return e.At(v["after_drain_timeout"],
                    "\"eviction.after_drain_timeout\" must be wait or force-delete");
      }
      p.force_delete_after_drain_timeout = s == "force-delete";
    }
    if (v["gpu_pods_only"]) {
      GPUHEAL_TRY(b, AsBool(e, v["gpu_pods_only"], "eviction.gpu_pods_only"));
      p.gpu_pods_only = b;
    }
  }
  if (const YAML::Node s = root["skip"]) {
    if (!s.IsMap()) return e.At(s, "\"skip\" must be a mapping");
    if (auto k = CheckKeys(e, s, {"namespaces", "pod_labels"}, "skip")) return *k;
    if (const YAML::Node ns = s["namespaces"]) {
      if (!ns.IsSequence()) return e.At(ns, "\"skip.namespaces\" must be a list of namespaces");
      p.skip_namespaces.clear();
      for (const YAML::Node& n : ns) {
        GPUHEAL_TRY(v, AsString(e, n, "skip.namespaces[]"));
        p.skip_namespaces.push_back(v);
      }
    }
    if (const YAML::Node l = s["pod_labels"]) {
      if (!l.IsMap()) return e.At(l, "\"skip.pod_labels\" must map label keys to values");
      for (auto it = l.begin(); it != l.end(); ++it) {
        GPUHEAL_TRY(v, AsString(e, it->second, "skip.pod_labels." + it->first.as<std::string>()));
        p.skip_pod_labels[it->first.as<std::string>()] = v;
      }
    }
  }
  if (const YAML::Node pl = root["pools"]) {
    if (!pl.IsMap()) return e.At(pl, "\"pools\" must be a mapping");
    if (auto k = CheckKeys(e, pl, {"label", "max_unavailable_percent"}, "pools")) return *k;
    if (pl["label"]) {
      GPUHEAL_TRY(v, AsString(e, pl["label"], "pools.label"));
      if (v.empty()) return e.At(pl["label"], "\"pools.label\" must not be empty");
      p.pool_label = v;
    }
    if (pl["max_unavailable_percent"]) {
      GPUHEAL_TRY(v,
                  AsInt(e, pl["max_unavailable_percent"], "pools.max_unavailable_percent", 1, 100));
      p.max_unavailable_percent = v;
    }
  }
  if (const YAML::Node b = root["breaker"]) {
    if (!b.IsMap()) return e.At(b, "\"breaker\" must be a mapping");
    if (auto k = CheckKeys(e, b, {"share_percent", "window", "quiet"}, "breaker")) return *k;
    if (b["share_percent"]) {
      GPUHEAL_TRY(v, AsInt(e, b["share_percent"], "breaker.share_percent", 1, 100));
      p.breaker_share = v / 100.0;
    }
    if (b["window"]) {
      GPUHEAL_TRY(d, AsDuration(e, b["window"], "breaker.window"));
      p.breaker_window = d;
    }
    if (b["quiet"]) {
      GPUHEAL_TRY(d, AsDuration(e, b["quiet"], "breaker.quiet"));
      p.breaker_quiet = d;
    }
  }
  if (const YAML::Node a = root["attempts"]) {
    if (!a.IsMap()) return e.At(a, "\"attempts\" must be a mapping");
    if (auto k = CheckKeys(e, a, {"max", "window"}, "attempts")) return *k;
    if (a["max"]) {
      GPUHEAL_TRY(v, AsInt(e, a["max"], "attempts.max", 1, 1000));
      p.max_repairs = v;
    }
    if (a["window"]) {
      GPUHEAL_TRY(d, AsDuration(e, a["window"], "attempts.window"));
      p.repairs_window = d;
    }
  }
  if (root["probation"]) {
    GPUHEAL_TRY(d, AsDuration(e, root["probation"], "probation"));
    p.probation = d;
  }
  if (root["paused"]) {
    GPUHEAL_TRY(b, AsBool(e, root["paused"], "paused"));
    p.paused = b;
  }
  if (const YAML::Node c = root["critical"]) {
    if (!c.IsMap()) return e.At(c, "\"critical\" must be a mapping");
    if (auto k = CheckKeys(e, c, {"action", "request_timeout"}, "critical")) return *k;
    if (c["action"]) {
      GPUHEAL_TRY(a, AsString(e, c["action"], "critical.action"));
      if (a != "gpu-reset" && a != "node") {
        return e.At(
            c["action"],
            "\"critical.action\" must be gpu-reset (the agent drains and resets the GPU) or node "
            "(quarantine and repair the whole node)");
      }
      p.critical_node_level = a == "node";
    }
    if (c["request_timeout"]) {
      GPUHEAL_TRY(d, AsDuration(e, c["request_timeout"], "critical.request_timeout"));
      p.critical_request_timeout = d;
    }
  }
  if (const YAML::Node pr = root["provider"]) {
    if (!pr.IsMap()) return e.At(pr, "\"provider\" must be a mapping with a \"name\"");
    if (auto k = CheckKeys(e, pr, {"name", "command", "timeout"}, "provider")) return *k;
    if (!pr["name"])
      return e.At(pr, "\"provider.name\" is required: none, delete-node, exec or standby");
    GPUHEAL_TRY(name, AsString(e, pr["name"], "provider.name"));
    if (name == "none")
      p.provider = Provider::kNone;
    else if (name == "delete-node")
      p.provider = Provider::kDeleteNode;
    else if (name == "exec")
      p.provider = Provider::kExec;
    else if (name == "standby")
      p.provider = Provider::kStandby;
    else
      return e.At(pr["name"], "\"provider.name\" must be one of none, delete-node, exec, standby");
    if (const YAML::Node c = pr["command"]) {
      if (!c.IsSequence() || c.size() == 0) {
        return e.At(c, "\"provider.command\" must be a non-empty list (argv, run without a shell)");
      }
      for (const YAML::Node& a : c) {
        GPUHEAL_TRY(v, AsString(e, a, "provider.command[]"));
        p.exec_command.push_back(v);
      }
    }
    if (pr["timeout"]) {
      GPUHEAL_TRY(d, AsDuration(e, pr["timeout"], "provider.timeout"));
      p.exec_timeout = d;
    }
    if (p.provider == Provider::kExec && p.exec_command.empty()) {
      return e.At(pr,
                  "provider exec needs \"provider.command\" (argv; NODE_NAME and REASON are in its "
                  "environment)");
    }
    if (p.provider != Provider::kExec && !p.exec_command.empty()) {
      return e.At(pr["command"], "\"provider.command\" is only for provider exec");
    }
  }
  return p;
}

}  // namespace

std::string_view ToString(Provider p) {
  switch (p) {
    case Provider::kNone:
      return "none";
    case Provider::kDeleteNode:
      return "delete-node";
    case Provider::kExec:
      return "exec";
    case Provider::kStandby:
      return "standby";
  }
  return "none";
}

std::chrono::milliseconds Policy::TolerationFor(const std::string& condition) const {
  auto it = toleration.find(condition);
  return it == toleration.end() ? default_toleration : it->second;
}

Result<Policy> ParsePolicy(std::string_view yaml, const std::string& source) {
  ConfigError e(source);
  auto root = LoadYaml(yaml, source);
  if (!root) return root.error();
  try {
    return Parse(*root, e);
  } catch (const YAML::Exception& x) {
    return Error{fmt::format("{}:{}:{}: {}", source, x.mark.line + 1, x.mark.column + 1, x.msg)};
  }
}

Result<Policy> LoadPolicy(const std::string& path) {
  auto text = ReadWholeFile(path);
  if (!text) return Error{fmt::format("{}: cannot read the policy file", path)};
  return ParsePolicy(*text, path);
}

}  // namespace gpuheal::controller
