#pragma once
// The one shape of a library the program could not use (core/dl_symbol.h), matched by the tests
// of every library it opens at run time: "cannot load FILE (the loader's reason): REMEDY" and
// "FILE has no SYMBOL[, SYMBOL...]: REMEDY".

#include <gtest/gtest.h>

#include <regex>
#include <string>

namespace gpuheal::testing {

inline ::testing::AssertionResult IsLoadError(const std::string& message, const std::string& file) {
  std::smatch m;
  static const std::regex shape(R"(^cannot load (\S+) \((.+)\): (.+)$)");
  if (!std::regex_match(message, m, shape))
    return ::testing::AssertionFailure() << "not \"cannot load FILE (why): REMEDY\": " << message;
  if (m[1] != file)
    return ::testing::AssertionFailure() << "names " << m[1] << ", not " << file << ": " << message;
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult IsMissingSymbol(const std::string& message,
                                                  const std::string& file,
                                                  const std::string& symbol) {
  std::smatch m;
  static const std::regex shape(R"(^(\S+) has no ([A-Za-z0-9_]+(, [A-Za-z0-9_]+)*): (.+)$)");
  if (!std::regex_match(message, m, shape))
    return ::testing::AssertionFailure()
           << "not \"FILE has no SYMBOL[, ...]: REMEDY\": " << message;
  const std::string listed = ", " + m[2].str() + ",";
  if (m[1] != file || listed.find(", " + symbol + ",") == std::string::npos)
    return ::testing::AssertionFailure() << "names " << m[1] << " and " << m[2] << ", not " << file
                                         << " and " << symbol << ": " << message;
  return ::testing::AssertionSuccess();
}

}  // namespace gpuheal::testing
