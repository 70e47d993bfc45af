#include "kube/api.h"

#include <fmt/format.h>

namespace gpuheal::kube {

std::string Response::Describe() const {
  const ApiStatus s = api_status();
  if (!s.message.empty()) return fmt::format("{} {}: {}", status, s.reason, s.message);
  return fmt::format("HTTP {}: {}", status, body.substr(0, 200));
}

Result<Response> Api::Create(const std::string& collection_path, const nlohmann::json& obj) {
  return Request("POST", collection_path, obj.dump());
}

Result<Response> Api::Patch(const std::string& path, PatchType type, const nlohmann::json& patch) {
  const char* ct = type == PatchType::kJson    ? "application/json-patch+json"
                   : type == PatchType::kMerge ? "application/merge-patch+json"
                                               : "application/strategic-merge-patch+json";
  return Request("PATCH", path, patch.dump(), ct);
}

Result<Response> Api::Delete(const std::string& path, const std::string& uid,
                             const std::string& resource_version,
                             std::optional<int64_t> grace_period_seconds) {
  nlohmann::json opts = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (!uid.empty()) opts["preconditions"]["uid"] = uid;
  if (!resource_version.empty()) opts["preconditions"]["resourceVersion"] = resource_version;
  if (grace_period_seconds) opts["gracePeriodSeconds"] = *grace_period_seconds;
  return Request("DELETE", path, opts.dump());
}

Result<Response> Api::Evict(const std::string& ns, const std::string& pod) {
  nlohmann::json ev = {{"apiVersion", "policy/v1"},
                       {"kind", "Eviction"},
                       {"metadata", {{"name", pod}, {"namespace", ns}}}};
  return Request("POST", PodPath(ns, pod) + "/eviction", ev.dump());
}

Result<Response> Api::Update(const std::string& path,
                             const std::function<bool(nlohmann::json&)>& mutate, int attempts) {
  for (int i = 0; i < attempts; ++i) {
    auto cur = Get(path);
    if (!cur) return cur.error();
    if (!cur->ok()) return *cur;
    nlohmann::json obj = nlohmann::json::parse(cur->body, nullptr, false);
    if (obj.is_discarded()) return Error{"update " + path + ": the server sent invalid JSON"};
    if (!mutate(obj)) return *cur;                // nothing to change
    auto put = Request("PUT", path, obj.dump());  // carries metadata.resourceVersion
    if (!put) return put.error();
    if (put->status != 409) return *put;
  }
  return Error{fmt::format("update {}: still conflicting after {} attempts", path, attempts)};
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string NodePath(const std::string& name) {
  return name.empty() ? "/api/v1/nodes" : "/api/v1/nodes/" + name;
}
std::string PodPath(const std::string& ns, const std::string& name) {
  const std::string base = ns.empty() ? "/api/v1/pods" : "/api/v1/namespaces/" + ns + "/pods";
  return name.empty() ? base : base + "/" + name;
}
std::string LeasePath(const std::string& ns, const std::string& name) {
  const std::string base = "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases";
  return name.empty() ? base : base + "/" + name;
}
std::string PdbPath(const std::string& ns, const std::string& name) {
  const std::string base = ns.empty()
                               ? "/apis/policy/v1/poddisruptionbudgets"
                               : "/apis/policy/v1/namespaces/" + ns + "/poddisruptionbudgets";
  return name.empty() ? base : base + "/" + name;
}

}  // namespace gpuheal::kube
