// Data-driven: test/fixtures/cases.jsonl holds every driver and kernel line variant, each citing
// where its format comes from, with the faults `gpuheal classify` must report for it.

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/fault_json.h"
#include "parse/classifier.h"

namespace gpuheal {
namespace {

struct Case {
  std::string name;
  nlohmann::json j;
};

std::vector<Case> LoadCases() {
  std::vector<Case> out;
  std::ifstream in(std::string(GPUHEAL_SOURCE_DIR) + "/test/fixtures/cases.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    out.push_back({j.at("name").get<std::string>(), j});
  }
  return out;
}

class FixtureTest : public ::testing::TestWithParam<Case> {};

TEST_P(FixtureTest, ClassifiesAsExpected) {
  const nlohmann::json& c = GetParam().j;
  ASSERT_TRUE(c.contains("source") && !c["source"].get<std::string>().empty())
      << "every fixture cites where its format comes from";
  auto classifier = Classifier::Create({});
  ASSERT_TRUE(classifier.ok());
  std::vector<Fault> faults;
  size_t n = 0;
  for (const auto& line : c.at("lines"))
    (*classifier)->ClassifyLine(line.get<std::string>(), ++n, faults);
  const auto& expect = c.at("expect");
  ASSERT_EQ(faults.size(), expect.size()) << c.dump(2);
  for (size_t i = 0; i < faults.size(); ++i) {
    const nlohmann::json got = nlohmann::json::parse(ToJsonLine(ToJson(faults[i])));
    for (const auto& [key, value] : expect[i].items()) {
      ASSERT_TRUE(got.contains(key)) << "fault " << i << " lacks " << key << ": " << got.dump();
      EXPECT_EQ(got[key], value) << "fault " << i << " field " << key << ": " << got.dump();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, FixtureTest, ::testing::ValuesIn(LoadCases()),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           std::string n = param_info.param.name;
                           for (char& ch : n) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

TEST(Fixtures, CorpusIsNotEmpty) { EXPECT_GE(LoadCases().size(), 40u); }

}  // namespace
}  // namespace gpuheal
