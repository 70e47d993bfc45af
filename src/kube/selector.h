#pragma once
// Kubernetes label selectors (metav1.LabelSelector: matchLabels and matchExpressions with In,
// NotIn, Exists, DoesNotExist), matched against an object's labels.

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/result.h"

namespace gpuheal::kube {

// Whether `labels` satisfy `selector` (JSON as the API serves it). An empty selector matches
// everything, as in the API; an unknown operator is an error.
Result<bool> SelectorMatches(const nlohmann::json& selector,
                             const std::map<std::string, std::string>& labels);

}  // namespace gpuheal::kube
