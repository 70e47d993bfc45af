#include "controller/policy.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "bmc/redfish.h"
#include "core/file.h"
#include "core/keys.h"
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
  GPUHEAL_TRY(top,
              Section::Open(e, root, "",
                            {"toleration", "checkpoint", "eviction", "skip", "pools", "breaker",
                             "attempts", "probation", "provider", "paused", "critical", "records",
                             "ladder", "diagnostics", "failure_domains", "predictive"},
                            "the policy must be a mapping of keys to values"));
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
  if (root["checkpoint"]) {
    GPUHEAL_TRY(
        c, Section::Open(e, root["checkpoint"], "checkpoint", {"window", "catastrophic_window"}));
    GPUHEAL_CHECK(c.Duration("window", p.checkpoint_window, true));
    GPUHEAL_CHECK(c.Duration("catastrophic_window", p.catastrophic_checkpoint_window, true));
  }
  if (root["eviction"]) {
    GPUHEAL_TRY(v, Section::Open(e, root["eviction"], "eviction",
                                 {"grace_period_seconds", "drain_timeout", "after_drain_timeout",
                                  "gpu_pods_only", "parallel", "concurrency"}));
    GPUHEAL_CHECK(v.Int("grace_period_seconds", p.eviction_grace_seconds, 0, 86400));
    GPUHEAL_CHECK(v.Duration("drain_timeout", p.drain_timeout));
    std::string after;
    GPUHEAL_CHECK(v.String("after_drain_timeout", after));
    if (v["after_drain_timeout"]) {
      if (after != "wait" && after != "force-delete") {
        return e.At(v["after_drain_timeout"],
                    "\"eviction.after_drain_timeout\" must be wait or force-delete");
      }
      p.force_delete_after_drain_timeout = after == "force-delete";
    }
    GPUHEAL_CHECK(v.Bool("gpu_pods_only", p.gpu_pods_only));
    GPUHEAL_CHECK(v.Int("parallel", p.eviction_parallel, 1, 64));
    GPUHEAL_CHECK(v.Int("concurrency", p.eviction_concurrency, 1, 256));
  }
  if (root["skip"]) {
    GPUHEAL_TRY(s, Section::Open(e, root["skip"], "skip", {"namespaces", "pod_labels"}));
    GPUHEAL_CHECK(s.Strings("namespaces", p.skip_namespaces, false, "a list of namespaces"));
    if (const YAML::Node l = s["pod_labels"]) {
      if (!l.IsMap()) return e.At(l, "\"skip.pod_labels\" must map label keys to values");
      for (auto it = l.begin(); it != l.end(); ++it) {
        GPUHEAL_TRY(v, AsString(e, it->second, "skip.pod_labels." + it->first.as<std::string>()));
        p.skip_pod_labels[it->first.as<std::string>()] = v;
      }
    }
  }
  if (root["pools"]) {
    GPUHEAL_TRY(pl, Section::Open(e, root["pools"], "pools",
                                  {"label", "max_unavailable_percent", "standby"}));
    GPUHEAL_CHECK(pl.String("label", p.pool_label));
    if (p.pool_label.empty()) return e.At(pl["label"], "\"pools.label\" must not be empty");
    GPUHEAL_CHECK(pl.Int("max_unavailable_percent", p.max_unavailable_percent, 1, 100));
    if (const YAML::Node sb = pl["standby"]) {
      // A number for every pool, or {default: N, POOL: N, ...}.
      if (sb.IsScalar()) {
        GPUHEAL_TRY(v, AsInt(e, sb, "pools.standby", 0, 1000));
        p.standby_default = v;
      } else if (sb.IsMap()) {
        for (auto it = sb.begin(); it != sb.end(); ++it) {
          const std::string pool = it->first.as<std::string>();
          GPUHEAL_TRY(v, AsInt(e, it->second, "pools.standby." + pool, 0, 1000));
          if (pool == "default")
            p.standby_default = v;
          else
            p.standby_sizes[pool] = v;
        }
      } else {
        return e.At(sb,
                    "\"pools.standby\" must be a number of standby nodes per pool, or a mapping "
                    "of pool names (and \"default\") to numbers");
      }
    }
  }
  if (root["breaker"]) {
    GPUHEAL_TRY(b,
                Section::Open(e, root["breaker"], "breaker", {"share_percent", "window", "quiet"}));
    if (b["share_percent"]) {
      int share = 0;
      GPUHEAL_CHECK(b.Int("share_percent", share, 1, 100));
      p.breaker_share = share / 100.0;
    }
    GPUHEAL_CHECK(b.Duration("window", p.breaker_window));
    GPUHEAL_CHECK(b.Duration("quiet", p.breaker_quiet));
  }
  if (root["attempts"]) {
    GPUHEAL_TRY(a, Section::Open(e, root["attempts"], "attempts", {"max", "window"}));
    GPUHEAL_CHECK(a.Int("max", p.max_repairs, 1, 1000));
    GPUHEAL_CHECK(a.Duration("window", p.repairs_window));
  }
  GPUHEAL_CHECK(top.Duration("probation", p.probation));
  GPUHEAL_CHECK(top.Bool("paused", p.paused));
  if (root["critical"]) {
    GPUHEAL_TRY(c, Section::Open(e, root["critical"], "critical", {"action", "request_timeout"}));
    if (c["action"]) {
      std::string a;
      GPUHEAL_CHECK(c.String("action", a));
      if (a != "gpu-reset" && a != "node") {
        return e.At(
            c["action"],
            "\"critical.action\" must be gpu-reset (the agent drains and resets the GPU) or node "
            "(quarantine and repair the whole node)");
      }
      p.critical_node_level = a == "node";
    }
    GPUHEAL_CHECK(c.Duration("request_timeout", p.critical_request_timeout));
  }
  if (root["diagnostics"]) {
    GPUHEAL_TRY(d, Section::Open(e, root["diagnostics"], "diagnostics",
                                 {"upload_url_template", "timeout"}));
    GPUHEAL_CHECK(d.String("upload_url_template", p.diagnostics_url_template));
    const std::string& t = p.diagnostics_url_template;
    if (!t.empty() && t.rfind("http://", 0) != 0 && t.rfind("https://", 0) != 0) {
      return e.At(root["diagnostics"]["upload_url_template"],
                  "\"diagnostics.upload_url_template\" must be an http:// or https:// URL; "
                  "{node}, {repair} and {time} are replaced (e.g. "
                  "https://bundles.example.com/{node}/{repair}.tar.gz)");
    }
    GPUHEAL_CHECK(d.Duration("timeout", p.diagnostics_timeout, false, std::chrono::seconds(1)));
  }
  if (root["failure_domains"]) {
    GPUHEAL_TRY(f, Section::Open(e, root["failure_domains"], "failure_domains",
                                 {"labels", "nodes", "window"}));
    auto& fd = p.failure_domains;
    GPUHEAL_CHECK(f.Strings("labels", fd.labels, false, "a list of node label keys"));
    for (const auto& l : fd.labels) {
      if (l.empty() || l.find_first_of(" =,") != std::string::npos) {
        return e.At(f["labels"],
                    fmt::format("\"failure_domains.labels\": \"{}\" is not a node label key "
                                "(e.g. topology.kubernetes.io/zone or example.com/rack)",
                                l));
      }
    }
    GPUHEAL_CHECK(f.Int("nodes", fd.nodes, 2, 100000));
    GPUHEAL_CHECK(f.Duration("window", fd.window));
  }
  if (root["predictive"]) {
    GPUHEAL_TRY(pr, Section::Open(e, root["predictive"], "predictive", {"action"}));
    if (pr["action"]) {
      std::string a;
      GPUHEAL_CHECK(pr.String("action", a));
      if (a == "none")
        p.predictive = Policy::Predictive::kNone;
      else if (a == "cordon-at-boundary")
        p.predictive = Policy::Predictive::kCordonAtBoundary;
      else if (a == "drain-at-boundary")
        p.predictive = Policy::Predictive::kDrainAtBoundary;
      else
        return e.At(pr["action"],
                    "\"predictive.action\" must be none, cordon-at-boundary or drain-at-boundary");
    }
  }
  if (root["records"]) {
    GPUHEAL_TRY(rc, Section::Open(e, root["records"], "records", {"keep"}));
    GPUHEAL_CHECK(rc.Duration("keep", p.records_keep));
  }
  if (p.records_keep < p.repairs_window) {
    const YAML::Node at = root["records"] && root["records"]["keep"] ? root["records"]["keep"]
                          : root["attempts"]                         ? root["attempts"]
                                                                     : root;
    return e.At(at,
                "\"records.keep\" must be at least \"attempts.window\": the attempt cap "
                "counts the records of that window");
  }
  // The ladder first: which providers it names decides which provider sections are allowed.
  if (const YAML::Node l = root["ladder"]) {
    if (!l.IsMap()) {
      return e.At(l,
                  "\"ladder\" must map severities (catastrophic, fatal, critical) to lists of "
                  "providers, tried in order");
    }
    for (auto it = l.begin(); it != l.end(); ++it) {
      const std::string sev = it->first.as<std::string>();
      if (sev != "catastrophic" && sev != "fatal" && sev != "critical") {
        return e.At(it->first,
                    fmt::format("unknown severity \"{}\" in ladder (catastrophic, fatal, "
                                "critical: the node-level ones)",
                                sev));
      }
      if (!it->second.IsSequence() || it->second.size() == 0) {
        return e.At(it->second, fmt::format("\"ladder.{}\" must be a non-empty list of providers "
                                            "(delete-node, exec, redfish, none)",
                                            sev));
      }
      std::vector<Provider> rungs;
      for (size_t i = 0; i < it->second.size(); ++i) {
        YAML::Node n = it->second[i];
        // A provider, or {provider: attempts}: the rung tried that many times before the next.
        int attempts = 1;
        if (n.IsMap()) {
          if (n.size() != 1) {
            return e.At(n, fmt::format("a rung of ladder.{} is a provider or {{PROVIDER: "
                                       "ATTEMPTS}}, one key",
                                       sev));
          }
          GPUHEAL_TRY(a, AsInt(e, n.begin()->second,
                               fmt::format("ladder.{}.{}", sev, n.begin()->first.as<std::string>()),
                               1, 10));
          attempts = a;
          n = n.begin()->first;
        }
        const std::string name = n.IsScalar() ? n.as<std::string>() : "";
        std::optional<Provider> pv;
        if (name == "delete-node") pv = Provider::kDeleteNode;
        if (name == "exec") pv = Provider::kExec;
        if (name == "redfish") pv = Provider::kRedfish;
        if (name == "none") pv = Provider::kNone;
        if (name == "standby") {
          return e.At(n,
                      "standby is not a rung: it adds capacity at quarantine; name it in "
                      "\"provider.name\"");
        }
        if (!pv) {
          return e.At(n, fmt::format("unknown provider \"{}\" in ladder.{} (delete-node, exec, "
                                     "redfish, none)",
                                     name, sev));
        }
        if (attempts > 1 && (*pv == Provider::kDeleteNode || *pv == Provider::kNone)) {
          return e.At(n, fmt::format("{} is tried once: it ends the ladder", name));
        }
        if (std::find(rungs.begin(), rungs.end(), *pv) != rungs.end())
          return e.At(n, fmt::format("provider {} appears twice in ladder.{}", name, sev));
        if (!rungs.empty() &&
            (rungs.back() == Provider::kNone || rungs.back() == Provider::kDeleteNode)) {
          return e.At(
              n, fmt::format("nothing can follow {} in ladder.{}: {}", ToString(rungs.back()), sev,
                             rungs.back() == Provider::kNone ? "none waits for an operator"
                                                             : "delete-node replaces the node"));
        }
        rungs.insert(rungs.end(), static_cast<size_t>(attempts), *pv);
      }
      p.ladder[sev] = std::move(rungs);
    }
  }
  auto uses = [&p](Provider x) {
    if (p.provider == x) return true;
    for (const auto& [sev, rungs] : p.ladder) {
      if (std::find(rungs.begin(), rungs.end(), x) != rungs.end()) return true;
    }
    return false;
  };
  if (root["provider"]) {
    GPUHEAL_TRY(pr, Section::Open(e, root["provider"], "provider",
                                  {"name", "command", "timeout", "redfish", "replacement_timeout"},
                                  "\"provider\" must be a mapping with a \"name\""));
    if (!pr["name"]) {
      return e.At(pr.node(),
                  "\"provider.name\" is required: none, delete-node, exec, standby or redfish");
    }
    std::string name;
    GPUHEAL_CHECK(pr.String("name", name));
    if (name == "none")
      p.provider = Provider::kNone;
    else if (name == "delete-node")
      p.provider = Provider::kDeleteNode;
    else if (name == "exec")
      p.provider = Provider::kExec;
    else if (name == "standby")
      p.provider = Provider::kStandby;
    else if (name == "redfish")
      p.provider = Provider::kRedfish;
    else
      return e.At(pr["name"],
                  "\"provider.name\" must be one of none, delete-node, exec, standby, redfish");
    GPUHEAL_CHECK(pr.Strings("command", p.exec_command, true,
                             "a non-empty list (argv, run without a shell)"));
    GPUHEAL_CHECK(pr.Duration("timeout", p.exec_timeout));
    if (!uses(Provider::kExec) && !p.exec_command.empty()) {
      return e.At(pr["command"], "\"provider.command\" is only for provider exec");
    }
    if (pr["replacement_timeout"] && !uses(Provider::kDeleteNode)) {
      return e.At(pr["replacement_timeout"],
                  "\"provider.replacement_timeout\" is only for provider delete-node");
    }
    GPUHEAL_CHECK(pr.Duration("replacement_timeout", p.replacement_timeout, true));
    if (pr["redfish"] && !uses(Provider::kRedfish))
      return e.At(pr["redfish"], "\"provider.redfish\" is only for provider redfish");
    if (pr["redfish"]) {
      auto& r = p.redfish;
      GPUHEAL_TRY(rf, Section::Open(e, pr["redfish"], "provider.redfish",
                                    {"credentials_secret", "endpoints_configmap", "ca_file",
                                     "insecure_skip_verify", "reset_types", "request_timeout",
                                     "attempts", "recovery_timeout", "auth", "endpoint_sources",
                                     "allowed_endpoints", "allow_insecure_http"}));
      if (rf["auth"]) {
        std::string auth;
        GPUHEAL_CHECK(rf.String("auth", auth));
        if (auth != "basic" && auth != "session") {
          return e.At(rf["auth"],
                      "\"provider.redfish.auth\" must be basic (HTTP basic on each request) or "
                      "session (a Redfish session: X-Auth-Token)");
        }
        r.session_auth = auth == "session";
      }
      GPUHEAL_CHECK(rf.String("credentials_secret", r.credentials_secret));
      GPUHEAL_CHECK(rf.String("endpoints_configmap", r.endpoints_configmap));
      for (const char* key : {"credentials_secret", "endpoints_configmap"}) {
        const std::string& v = std::string_view(key) == "credentials_secret"
                                   ? r.credentials_secret
                                   : r.endpoints_configmap;
        const auto slash = v.find('/');
        if (rf[key] && (slash == std::string::npos || slash == 0 || slash + 1 == v.size() ||
                        v.find('/', slash + 1) != std::string::npos)) {
          return e.At(rf[key], fmt::format("\"provider.redfish.{}\" must be NAMESPACE/NAME", key));
        }
      }
      if (rf["endpoint_sources"]) {
        std::vector<std::string> sources;
        GPUHEAL_CHECK(rf.Strings("endpoint_sources", sources, true,
                                 "a non-empty list of configmap and node-annotation"));
        r.endpoint_sources.clear();
        for (size_t i = 0; i < sources.size(); ++i) {
          const auto s = ParseEndpointSource(sources[i]);
          if (!s) {
            return e.At(rf["endpoint_sources"][i],
                        fmt::format("unknown endpoint source \"{}\": configmap (the "
                                    "administrator's endpoints_configmap) or node-annotation (the "
                                    "Node's {} annotation)",
                                    sources[i], keys::kBmcEndpoint));
          }
          if (std::find(r.endpoint_sources.begin(), r.endpoint_sources.end(), *s) !=
              r.endpoint_sources.end()) {
            return e.At(rf["endpoint_sources"][i],
                        fmt::format("endpoint source \"{}\" is named twice", sources[i]));
          }
          r.endpoint_sources.push_back(*s);
        }
      }
      GPUHEAL_CHECK(rf.Strings("allowed_endpoints", r.allowed_endpoints, false,
                               "a list of CIDRs and host-name suffixes"));
      {
        auto rules = bmc::ParseEndpointRules(r.allowed_endpoints);
        if (!rules) return e.At(rf["allowed_endpoints"], rules.error().message);
        r.allowed_endpoint_rules = std::move(*rules);
      }
      GPUHEAL_CHECK(rf.Bool("allow_insecure_http", r.allow_insecure_http));
      const bool from_node =
          std::find(r.endpoint_sources.begin(), r.endpoint_sources.end(),
                    Policy::Redfish::EndpointSource::kNodeAnnotation) != r.endpoint_sources.end();
      if (from_node && r.allowed_endpoints.empty()) {
        return e.At(rf["endpoint_sources"],
                    fmt::format("endpoint source node-annotation needs "
                                "\"provider.redfish.allowed_endpoints\": a node's kubelet can "
                                "write its own {} annotation, and without an allow-list it could "
                                "have the BMC credentials sent to any host",
                                keys::kBmcEndpoint));
      }
      GPUHEAL_CHECK(rf.String("ca_file", r.ca_file));
      GPUHEAL_CHECK(rf.Bool("insecure_skip_verify", r.insecure_skip_verify));
      GPUHEAL_CHECK(
          rf.Strings("reset_types", r.reset_types, true,
                     "a non-empty list of Redfish ResetType values, most preferred first"));
      if (rf["reset_types"]) {
        for (size_t i = 0; i < r.reset_types.size(); ++i) {
          if (!bmc::IsResetType(r.reset_types[i])) {
            std::string known;
            for (auto t : bmc::kResetTypes) known += (known.empty() ? "" : ", ") + std::string(t);
            return e.At(rf["reset_types"][i],
                        fmt::format("unknown Redfish ResetType \"{}\" (known: {})",
                                    r.reset_types[i], known));
          }
        }
      }
      GPUHEAL_CHECK(rf.Duration("request_timeout", r.request_timeout));
      GPUHEAL_CHECK(rf.Int("attempts", r.attempts, 1, 10));
      GPUHEAL_CHECK(rf.Duration("recovery_timeout", r.recovery_timeout));
    }
  }
  if (uses(Provider::kRedfish) && p.redfish.endpoints_configmap.empty() &&
      std::find(p.redfish.endpoint_sources.begin(), p.redfish.endpoint_sources.end(),
                Policy::Redfish::EndpointSource::kConfigMap) != p.redfish.endpoint_sources.end()) {
    return e.At(root["provider"] ? root["provider"] : root,
                "provider redfish needs \"provider.redfish.endpoints_configmap\" (NAMESPACE/NAME: "
                "the administrator's map of node name -> BMC endpoint, the only source of "
                "endpoints unless provider.redfish.endpoint_sources says otherwise)");
  }
  if (uses(Provider::kExec) && p.exec_command.empty()) {
    return e.At(root["provider"] ? root["provider"] : root,
                "provider exec needs \"provider.command\" (argv; NODE_NAME and REASON are in its "
                "environment)");
  }
  return p;
}

}  // namespace

size_t Policy::PoolAllowance(size_t size) const {
  return std::max<size_t>(1, static_cast<size_t>(std::ceil(static_cast<double>(size) *
                                                           max_unavailable_percent / 100.0)));
}

std::optional<Policy::Redfish::EndpointSource> ParseEndpointSource(std::string_view name) {
  using S = Policy::Redfish::EndpointSource;
  if (name == "configmap") return S::kConfigMap;
  if (name == "node-annotation") return S::kNodeAnnotation;
  return std::nullopt;
}

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
    case Provider::kRedfish:
      return "redfish";
  }
  return "none";
}

std::vector<Provider> Policy::LadderFor(const std::string& severity) const {
  auto it = ladder.find(severity);
  return it == ladder.end() ? std::vector<Provider>{provider} : it->second;
}

std::optional<int> Policy::StandbySizeFor(const std::string& pool) const {
  auto it = standby_sizes.find(pool);
  if (it != standby_sizes.end()) return it->second;
  return standby_default;
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

std::string Policy::DiagnosticsUrl(const std::string& node, const std::string& repair,
                                   const std::string& time) const {
  std::string out = diagnostics_url_template;
  for (const auto& [key, value] : {std::pair<std::string, const std::string&>{"{node}", node},
                                   {"{repair}", repair},
                                   {"{time}", time}}) {
    size_t at = 0;
    while ((at = out.find(key, at)) != std::string::npos) {
      out.replace(at, key.size(), value);
      at += value.size();
    }
  }
  return out;
}

}  // namespace gpuheal::controller
