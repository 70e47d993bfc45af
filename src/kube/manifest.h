#pragma once
// Manifests as `kubectl create -f` reads them: multi-document YAML, each document converted to
// JSON and created in its kind's collection. For the kinds gpuheal ships (deploy/) and the drill's
// workloads; used by `gpuheal drill` to install deploy/ and by the tests.

#include <yaml-cpp/yaml.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "kube/api.h"

namespace gpuheal::kube {

// YAML to JSON with YAML 1.2 core scalars: quoted scalars stay strings; true/false and integers
// are typed, the rest are strings.
nlohmann::json YamlToJson(const YAML::Node& n);

// The collection an object of a known kind is created in; an error names an unknown kind.
Result<std::string> CollectionPath(const nlohmann::json& obj);

// Every document of a manifest file, as JSON. Errors name the file and the YAML position.
Result<std::vector<nlohmann::json>> ReadManifest(const std::string& file);

// Creates each object `want` accepts (all when empty); an object that already exists (409) is
// left as it is. Errors name the object and the API server's answer.
Status CreateObjects(Api& c, const std::vector<nlohmann::json>& objects,
                     const std::function<bool(const nlohmann::json&)>& want = {});

}  // namespace gpuheal::kube
