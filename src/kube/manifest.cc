#include "kube/manifest.h"

#include <fmt/format.h>

#include <map>

namespace gpuheal::kube {

nlohmann::json YamlToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json j = nlohmann::json::object();
      for (const auto& kv : n) j[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& v : n) j.push_back(YamlToJson(v));
      return j;
    }
    case YAML::NodeType::Scalar: {
      const std::string s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted: always a string
      if (s == "true" || s == "false") return s == "true";
      int64_t i;
      if (YAML::convert<int64_t>::decode(n, i) && std::to_string(i) == s) return i;
      return s;
    }
    default:
      return nullptr;
  }
}

Result<std::string> CollectionPath(const nlohmann::json& obj) {
  static const std::map<std::string, std::string> kinds = {
      {"Namespace", "/api/v1/namespaces"},
      {"ServiceAccount", "/api/v1/namespaces/{ns}/serviceaccounts"},
      {"ConfigMap", "/api/v1/namespaces/{ns}/configmaps"},
      {"Service", "/api/v1/namespaces/{ns}/services"},
      {"ClusterRole", "/apis/rbac.authorization.k8s.io/v1/clusterroles"},
      {"ClusterRoleBinding", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"},
      {"DaemonSet", "/apis/apps/v1/namespaces/{ns}/daemonsets"},
      {"Deployment", "/apis/apps/v1/namespaces/{ns}/deployments"},
      {"ResourceClaimTemplate", "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates"},
      {"PodDisruptionBudget", "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"},
      {"Role", "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"},
      {"RoleBinding", "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"},
      {"CustomResourceDefinition", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"},
      {"ValidatingAdmissionPolicy",
       "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"},
      {"ValidatingAdmissionPolicyBinding",
       "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"},
  };
  if (!obj.is_object() || !obj.contains("kind") || !obj["kind"].is_string())
    return Error{"an object without a kind"};
  auto it = kinds.find(obj["kind"].get<std::string>());
  if (it == kinds.end())
    return Error{fmt::format("kind {} is not one gpuheal creates", obj["kind"].get<std::string>())};
  std::string path = it->second;
  if (const size_t at = path.find("{ns}"); at != std::string::npos) {
    std::string ns = "default";
    if (obj.contains("metadata") && obj["metadata"].is_object())
      ns = obj["metadata"].value("namespace", "default");
    path.replace(at, 4, ns);
  }
  return path;
}

Result<std::vector<nlohmann::json>> ReadManifest(const std::string& file) {
  std::vector<nlohmann::json> out;
  try {
    for (const YAML::Node& doc : YAML::LoadAllFromFile(file)) {
      if (!doc || doc.IsNull()) continue;
      out.push_back(YamlToJson(doc));
    }
  } catch (const YAML::Exception& e) {
    return Error{fmt::format("{}:{}:{}: {}", file, e.mark.line + 1, e.mark.column + 1, e.msg)};
  }
  return out;
}

Status CreateObjects(Api& c, const std::vector<nlohmann::json>& objects,
                     const std::function<bool(const nlohmann::json&)>& want) {
  for (const auto& obj : objects) {
    if (want && !want(obj)) continue;
    auto path = CollectionPath(obj);
    if (!path) return path.error();
    const nlohmann::json meta = obj.value("metadata", nlohmann::json::object());
    const std::string what =
        obj.value("kind", "") + " " + (meta.is_object() ? meta.value("name", "") : "");
    auto r = c.Create(*path, obj);
    if (!r) return Error{fmt::format("creating {}: {}", what, r.error().message)};
    if (!r->ok() && r->status != 409)
      return Error{fmt::format("creating {}: {}", what, r->Describe())};
  }
  return Status::Ok();
}

}  // namespace gpuheal::kube
