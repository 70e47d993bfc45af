// Label selectors as the API serves them (kube/selector.h), as a MachineHealthCheck's.

#include "kube/selector.h"

#include <gtest/gtest.h>

namespace gpuheal::kube {
namespace {

using nlohmann::json;

TEST(Selector, MatchLabelsAndEveryOperator) {
  const std::map<std::string, std::string> labels = {{"pool", "gpu"}, {"zone", "a"}};
  const auto match = [&](const json& sel) {
    auto r = SelectorMatches(sel, labels);
    EXPECT_TRUE(r) << sel.dump();
    return r && *r;
  };
  EXPECT_TRUE(match(json::object()));
  EXPECT_TRUE(match(nullptr));
  EXPECT_TRUE(match({{"matchLabels", {{"pool", "gpu"}}}}));
  EXPECT_FALSE(match({{"matchLabels", {{"pool", "cpu"}}}}));
  EXPECT_FALSE(match({{"matchLabels", {{"rack", "1"}}}}));
  const auto expr = [](const char* key, const char* op, json values = json::array()) {
    return json{{"matchExpressions", {{{"key", key}, {"operator", op}, {"values", values}}}}};
  };
  EXPECT_TRUE(match(expr("pool", "In", {"cpu", "gpu"})));
  EXPECT_FALSE(match(expr("pool", "In", {"cpu"})));
  EXPECT_FALSE(match(expr("rack", "In", {"1"})));
  EXPECT_TRUE(match(expr("pool", "NotIn", {"cpu"})));
  EXPECT_FALSE(match(expr("pool", "NotIn", {"gpu"})));
  EXPECT_TRUE(match(expr("rack", "NotIn", {"1"})));
  EXPECT_TRUE(match(expr("zone", "Exists")));
  EXPECT_FALSE(match(expr("rack", "Exists")));
  EXPECT_TRUE(match(expr("rack", "DoesNotExist")));
  EXPECT_FALSE(match(expr("zone", "DoesNotExist")));
  // Both parts must hold.
  json both = expr("zone", "Exists");
  both["matchLabels"] = {{"pool", "cpu"}};
  EXPECT_FALSE(match(both));
}

TEST(Selector, MalformedSelectorsAreErrors) {
  for (const json& bad :
       {json::array(), json{{"matchLabels", json::array()}}, json{{"matchExpressions", 1}},
        json{{"matchExpressions", {{{"key", "a"}}}}},
        json{{"matchExpressions", {{{"key", "a"}, {"operator", "Gt"}}}}}}) {
    EXPECT_FALSE(SelectorMatches(bad, {})) << bad.dump();
  }
}

}  // namespace
}  // namespace gpuheal::kube
