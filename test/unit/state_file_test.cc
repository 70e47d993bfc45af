#include "agent/state_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

namespace gpuheal {
namespace {

// Removed, with what the test wrote there, when the test process exits.
std::string TempDir() {
  struct Dirs {
    std::vector<std::string> paths;
    ~Dirs() {
      std::error_code ec;
      for (const auto& p : paths) std::filesystem::remove_all(p, ec);
    }
  };
  static Dirs dirs;
  char tmpl[] = "/tmp/gpuheal-state-XXXXXX";
  dirs.paths.push_back(mkdtemp(tmpl));
  return dirs.paths.back();
}

TEST(StateFile, SavesAndReloadsTheCursor) {
  const std::string dir = TempDir() + "/nested";
  {
    auto s = StateFile::Open(dir, nullptr);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_FALSE((*s)->cursor().valid);
    ASSERT_TRUE((*s)->Save({"boot-a", 42, true}).ok());
    ASSERT_TRUE((*s)->Save({"boot-a", 43, true}).ok());
  }
  auto s = StateFile::Open(dir, nullptr);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE((*s)->cursor().valid);
  EXPECT_EQ((*s)->cursor().boot_id, "boot-a");
  EXPECT_EQ((*s)->cursor().last_seq, 43u);
  std::filesystem::remove_all(dir);
}

TEST(StateFile, CorruptStateIsAWarningNotACrash) {
  const std::string dir = TempDir();
  std::ofstream(dir + "/agent-state.json") << "{\"boot_id\": 12, garbage";
  std::string warning;
  auto s = StateFile::Open(dir, &warning);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE((*s)->cursor().valid);
  EXPECT_NE(warning.find("ignoring unreadable state"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// A directory that takes no writes does not stop the agent: the file opens unwritable, says why,
// and every Save fails with that reason (the agent says so and keeps detecting).
TEST(StateFile, UnusableDirectoryOpensUnwritable) {
  auto s = StateFile::Open("/proc/gpuheal-cannot-exist", nullptr);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE((*s)->writable());
  EXPECT_NE((*s)->open_error().find("/proc/gpuheal-cannot-exist"), std::string::npos)
      << (*s)->open_error();
  EXPECT_FALSE((*s)->cursor().valid);
  auto saved = (*s)->Save(Cursor{"boot", 7, true});
  ASSERT_FALSE(saved.ok());
  EXPECT_NE(saved.error().message.find("/proc/gpuheal-cannot-exist"), std::string::npos);
}

}  // namespace
}  // namespace gpuheal
