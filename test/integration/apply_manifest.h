#pragma once
// Applies a multi-document YAML manifest file to the API server (create only), as `kubectl
// create -f` would: each document converted to JSON and POSTed to its kind's collection.

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "kube/client.h"

namespace gpuheal::testing {

inline nlohmann::json YamlToJson(const YAML::Node& n) {
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

// Collection path for an object of the manifests gpuheal ships.
inline std::string CollectionPath(const nlohmann::json& obj) {
  static const std::map<std::string, std::string> kinds = {
      {"Namespace", "/api/v1/namespaces"},
      {"ServiceAccount", "/api/v1/namespaces/{ns}/serviceaccounts"},
      {"ConfigMap", "/api/v1/namespaces/{ns}/configmaps"},
      {"ClusterRole", "/apis/rbac.authorization.k8s.io/v1/clusterroles"},
      {"ClusterRoleBinding", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"},
      {"DaemonSet", "/apis/apps/v1/namespaces/{ns}/daemonsets"},
      {"Deployment", "/apis/apps/v1/namespaces/{ns}/deployments"},
      {"Role", "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"},
      {"RoleBinding", "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"},
      {"CustomResourceDefinition", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"},
      {"ValidatingAdmissionPolicy", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"},
      {"ValidatingAdmissionPolicyBinding", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"},
  };
  std::string path = kinds.at(obj.at("kind").get<std::string>());
  const size_t at = path.find("{ns}");
  if (at != std::string::npos) path.replace(at, 4, obj["metadata"].value("namespace", "default"));
  return path;
}

// Creates every object in `file`; returns the objects (as JSON) for the caller to inspect.
inline std::vector<nlohmann::json> ApplyManifest(kube::Client& c, const std::string& file) {
  std::vector<nlohmann::json> out;
  for (const YAML::Node& doc : YAML::LoadAllFromFile(file)) {
    if (!doc || doc.IsNull()) continue;
    nlohmann::json obj = YamlToJson(doc);
    auto r = c.Create(CollectionPath(obj), obj);
    EXPECT_TRUE(r.ok() && r->status == 201)
        << file << ": " << obj["kind"] << " " << obj["metadata"]["name"] << ": " << (r ? r->Describe() : r.error().message);
    out.push_back(obj);
  }
  return out;
}

}  // namespace gpuheal::testing
