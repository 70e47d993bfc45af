#include "core/dl_symbol.h"

#include <gtest/gtest.h>

#include "nvml/library_error.h"

namespace gpuheal {
namespace {

TEST(OpenLibraryTest, AMissingLibraryIsTheOneShapeWithItsRemedy) {
  auto r = OpenLibrary("/nonexistent/libx.so.1", RTLD_NOW, "install x");
  ASSERT_FALSE(r);
  EXPECT_TRUE(testing::IsLoadError(r.error().message, "/nonexistent/libx.so.1"));
  EXPECT_TRUE(r.error().message.ends_with("): install x")) << r.error().message;
}

// A library known by two sonames: the first that opens, or one error naming the first with both
// reasons.
TEST(OpenLibraryTest, TheFirstOfSeveralNamesThatOpens) {
  auto z = OpenLibrary(std::vector<std::string>{"/nonexistent/libz.so.9", "libz.so.1"}, RTLD_NOW,
                       "install zlib");
  ASSERT_TRUE(z) << z.error().message;
  EXPECT_EQ(z->file, "libz.so.1");
  EXPECT_NE(z->handle, nullptr);
  auto none = OpenLibrary(std::vector<std::string>{"/nonexistent/a.so", "/nonexistent/b.so"},
                          RTLD_NOW, "install it");
  ASSERT_FALSE(none);
  EXPECT_TRUE(testing::IsLoadError(none.error().message, "/nonexistent/a.so"));
  EXPECT_NE(none.error().message.find("; /nonexistent/b.so: "), std::string::npos)
      << none.error().message;
}

TEST(OpenLibraryTest, AChainOfSymbolsStopsAtTheFirstMissing) {
  auto z = OpenLibrary("libz.so.1", RTLD_NOW, "install zlib");
  ASSERT_TRUE(z) << z.error().message;
  const char* (*version)() = nullptr;
  int (*absent)() = nullptr;
  int (*never)() = nullptr;
  std::string missing;
  const bool ok = ResolveSymbol(*z, "zlibVersion", version, missing) &&
                  ResolveSymbol(*z, "no_such_symbol", absent, missing) &&
                  ResolveSymbol(*z, "never_looked_up", never, missing);
  EXPECT_FALSE(ok);
  EXPECT_NE(version, nullptr);
  EXPECT_EQ(missing, "no_such_symbol");
  EXPECT_TRUE(testing::IsMissingSymbol("libz.so.1 has no " + missing + ": zlib 1.2 is needed",
                                       "libz.so.1", "no_such_symbol"));
}

}  // namespace
}  // namespace gpuheal
