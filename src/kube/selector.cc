#include "kube/selector.h"

#include <fmt/format.h>

#include <algorithm>

namespace gpuheal::kube {

Result<bool> SelectorMatches(const nlohmann::json& selector,
                             const std::map<std::string, std::string>& labels) {
  if (selector.is_null()) return true;
  if (!selector.is_object()) return Error{"a label selector must be an object"};
  if (auto ml = selector.find("matchLabels"); ml != selector.end() && !ml->is_null()) {
    if (!ml->is_object()) return Error{"matchLabels must be an object"};
    for (const auto& [k, v] : ml->items()) {
      auto it = labels.find(k);
      if (!v.is_string() || it == labels.end() || it->second != v.get<std::string>()) return false;
    }
  }
  if (auto me = selector.find("matchExpressions"); me != selector.end() && !me->is_null()) {
    if (!me->is_array()) return Error{"matchExpressions must be a list"};
    for (const auto& e : *me) {
      if (!e.is_object() || !e.contains("key") || !e["key"].is_string() ||
          !e.contains("operator") || !e["operator"].is_string())
        return Error{"a matchExpression needs a key and an operator"};
      const std::string key = e["key"], op = e["operator"];
      std::vector<std::string> values;
      if (e.contains("values") && e["values"].is_array()) {
        for (const auto& v : e["values"]) {
          if (v.is_string()) values.push_back(v.get<std::string>());
        }
      }
      auto it = labels.find(key);
      const bool has = it != labels.end();
      const bool in = has && std::find(values.begin(), values.end(), it->second) != values.end();
      if (op == "In") {
        if (!in) return false;
      } else if (op == "NotIn") {
        if (in) return false;
      } else if (op == "Exists") {
        if (!has) return false;
      } else if (op == "DoesNotExist") {
        if (has) return false;
      } else {
        return Error{fmt::format("unknown selector operator \"{}\"", op.substr(0, 32))};
      }
    }
  }
  return true;
}

}  // namespace gpuheal::kube
