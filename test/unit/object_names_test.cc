// Names and label values derived from node names of any valid length (core/object_names.h).

#include "core/object_names.h"

#include <gtest/gtest.h>

#include <regex>

namespace gpuheal {
namespace {

const std::regex kLabelValue("([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?");
const std::regex kSubdomain("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");

TEST(ObjectNames, ShortNamesAreKeptAndLongOnesCutAndHashed) {
  EXPECT_EQ(NodeLabelValue("gpu-node-17"), "gpu-node-17");
  EXPECT_EQ(NameWithSuffix("gpu-node-17", "1764670000000"), "gpu-node-17-1764670000000");
  const std::string exact63(63, 'a');
  EXPECT_EQ(NodeLabelValue(exact63), exact63);
  // Cut just after a '.' or '-': the kept part never ends in one.
  for (std::string node : {std::string(45, 'a') + "." + std::string(60, 'b'),
                           std::string(46, 'a') + "-" + std::string(60, 'b'),
                           std::string(58, 'x') + "." + std::string(58, 'y') + "." +
                               std::string(58, 'z') + "." + std::string(63, 'w')}) {
    const std::string v = NodeLabelValue(node);
    EXPECT_LE(v.size(), 63u) << v;
    EXPECT_TRUE(std::regex_match(v, kLabelValue)) << v;
    EXPECT_EQ(v, NodeLabelValue(node)) << "stable";
    const std::string name = NameWithSuffix(node, "1764670000000");
    EXPECT_LE(name.size(), 253u) << name;
    EXPECT_TRUE(std::regex_match(name, kSubdomain)) << name;
    EXPECT_TRUE(name.ends_with("-1764670000000")) << name;
  }
  // Two nodes alike in their first 46 characters keep distinct values.
  const std::string common(50, 'n');
  EXPECT_NE(NodeLabelValue(common + std::string(20, 'a')),
            NodeLabelValue(common + std::string(20, 'b')));
}

}  // namespace
}  // namespace gpuheal
