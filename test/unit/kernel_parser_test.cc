#include "parse/kernel_parser.h"

#include <gtest/gtest.h>

#include "parse/keyword_scan.h"

namespace gpuheal {
namespace {

TEST(KeywordScanner, FindsEveryKeywordAnywhere) {
  KeywordScanner scanner(KernelKeywords());
  const auto& kw = KernelKeywords();
  for (size_t i = 0; i < kw.size(); ++i) {
    const std::string text = "prefix " + std::string(kw[i]) + " suffix";
    EXPECT_TRUE(scanner.Scan(text) & (uint64_t{1} << i)) << kw[i];
    EXPECT_TRUE(scanner.Scan(kw[i]) & (uint64_t{1} << i)) << kw[i];  // at both ends
  }
  EXPECT_EQ(scanner.Scan("usb 1-1: new high-speed USB device"), 0u);
  EXPECT_EQ(scanner.Scan(""), 0u);
  EXPECT_EQ(scanner.Scan("NVR"), 0u);
}

TEST(KernelParser, NothingWithoutKeywords) { EXPECT_FALSE(ParseKernel("anything", 0).has_value()); }

TEST(KernelParser, HungTaskNeedsTheTaskPhrase) {
  KeywordScanner scanner(KernelKeywords());
  const std::string m = "something blocked for more than 5 seconds";
  EXPECT_FALSE(ParseKernel(m, scanner.Scan(m)).has_value());
}

}  // namespace
}  // namespace gpuheal
