#include "controller/bmc_target.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "core/keys.h"

namespace gpuheal::controller {
namespace {

using json = nlohmann::json;
using Source = Policy::Redfish::EndpointSource;

std::pair<std::string, std::string> Split(const std::string& ns_name) {
  const auto slash = ns_name.find('/');
  return {ns_name.substr(0, slash), ns_name.substr(slash + 1)};
}

bool ValidSecretRef(std::string_view s) {
  const auto slash = s.find('/');
  if (slash == std::string_view::npos) return !s.empty();
  return slash > 0 && slash + 1 < s.size() && s.find('/', slash + 1) == std::string_view::npos;
}

}  // namespace

Result<BmcEntry> ParseBmcEntry(std::string_view value, const std::string& ns,
                               const std::string& where) {
  const std::string shape =
      "an endpoint (https://HOST[:PORT][/redfish/v1/Systems/ID]) or a mapping {endpoint: URL, "
      "credentials_secret: NAME or NAMESPACE/NAME}";
  BmcEntry out;
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(value));
  } catch (const YAML::Exception& ex) {
    return Error{fmt::format("{}: not {} ({})", where, shape, ex.msg)};
  }
  if (doc.IsScalar()) {
    out.endpoint = doc.as<std::string>();
  } else if (doc.IsMap()) {
    for (const auto& kv : doc) {
      const std::string key = kv.first.IsScalar() ? kv.first.as<std::string>() : "";
      if ((key != "endpoint" && key != "credentials_secret") || !kv.second.IsScalar())
        return Error{
            fmt::format("{}: unknown or non-text key \"{}\"; expected {}", where, key, shape)};
      (key == "endpoint" ? out.endpoint : out.credentials_secret) = kv.second.as<std::string>();
    }
  }
  if (out.endpoint.empty()) return Error{fmt::format("{}: no endpoint; expected {}", where, shape)};
  if (!out.credentials_secret.empty()) {
    if (!ValidSecretRef(out.credentials_secret))
      return Error{fmt::format("{}: credentials_secret \"{}\" must be NAME or NAMESPACE/NAME",
                               where, out.credentials_secret)};
    if (out.credentials_secret.find('/') == std::string::npos)
      out.credentials_secret = ns + "/" + out.credentials_secret;
  }
  return out;
}

std::string BmcTarget::Describe() const {
  return fmt::format("BMC {} from {}, credentials from Secret {}", url, source, secret);
}

Result<BmcTarget> ResolveBmcEndpoint(kube::Api& api, const Policy::Redfish& p,
                                     const kube::Node& node, const bmc::Resolver& resolve) {
  BmcTarget out;
  out.secret = p.credentials_secret;
  const std::string& name = node.meta.name;
  for (const Source s : p.endpoint_sources) {
    if (!out.url.empty()) break;
    if (s == Source::kNodeAnnotation) {
      if (auto it = node.meta.annotations.find(std::string(keys::kBmcEndpoint));
          it != node.meta.annotations.end() && !it->second.empty()) {
        out.url = it->second;
        out.source = fmt::format("annotation {}", keys::kBmcEndpoint);
      }
      continue;
    }
    if (p.endpoints_configmap.empty()) continue;
    const auto [ns, cm_name] = Split(p.endpoints_configmap);
    auto res = api.Get(fmt::format("/api/v1/namespaces/{}/configmaps/{}", ns, cm_name));
    if (!res)
      return Error{fmt::format("ConfigMap {}: {}", p.endpoints_configmap, res.error().message)};
    // A missing map is a map without this node (said below); any other failure is its own.
    if (!res->ok() && res->status != 404)
      return Error{fmt::format("ConfigMap {}: {}", p.endpoints_configmap, res->Describe())};
    const json cm = json::parse(res->body, nullptr, false);
    if (cm.is_object() && cm.contains("data") && cm["data"].is_object() &&
        cm["data"].contains(name) && cm["data"][name].is_string()) {
      GPUHEAL_TRY(entry,
                  ParseBmcEntry(cm["data"][name].get<std::string>(), ns,
                                fmt::format("ConfigMap {} entry {}", p.endpoints_configmap, name)));
      out.url = entry.endpoint;
      out.source = fmt::format("ConfigMap {}", p.endpoints_configmap);
      if (!entry.credentials_secret.empty()) out.secret = entry.credentials_secret;
    }
  }
  if (out.url.empty()) {
    std::string where;
    for (const Source s : p.endpoint_sources) {
      if (!where.empty()) where += " or ";
      where += s == Source::kConfigMap
                   ? (p.endpoints_configmap.empty()
                          ? std::string("an endpoints ConfigMap (provider.redfish."
                                        "endpoints_configmap is not set)")
                          : fmt::format("ConfigMap {}", p.endpoints_configmap))
                   : fmt::format("the Node's {} annotation", keys::kBmcEndpoint);
    }
    return Error{fmt::format("the node has no BMC endpoint: add its entry to {}", where)};
  }
  auto endpoint = bmc::ParseEndpoint(out.url);
  if (!endpoint) return Error{endpoint.error().message + " (from " + out.source + ")"};
  out.endpoint = *endpoint;
  auto check =
      bmc::CheckEndpoint(out.endpoint, p.allowed_endpoint_rules, p.allow_insecure_http, resolve);
  if (!check) return Error{check.error().message + " (from " + out.source + ")"};
  out.check = std::move(*check);
  return out;
}

Status ReadBmcCredentials(kube::Api& api, BmcTarget& t) {
  const auto [ns, secret_name] = Split(t.secret);
  auto res = api.Get(fmt::format("/api/v1/namespaces/{}/secrets/{}", ns, secret_name));
  if (!res) return Error{fmt::format("Secret {}: {}", t.secret, res.error().message)};
  if (!res->ok()) return Error{fmt::format("Secret {}: {}", t.secret, res->Describe())};
  auto credentials = bmc::CredentialsFromSecret(res->body, t.secret);
  if (!credentials) return credentials.error();
  t.credentials = std::move(*credentials);
  return Status::Ok();
}

Result<BmcTarget> ResolveBmcTarget(kube::Api& api, const Policy::Redfish& p, const kube::Node& node,
                                   const bmc::Resolver& resolve) {
  GPUHEAL_TRY(t, ResolveBmcEndpoint(api, p, node, resolve));
  // The Secret is read only for an endpoint that passed: a refused one learns nothing of it.
  GPUHEAL_CHECK(ReadBmcCredentials(api, t));
  return t;
}

}  // namespace gpuheal::controller
