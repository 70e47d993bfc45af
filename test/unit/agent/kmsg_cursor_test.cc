// The kernel log's cursor (write-ahead: never past a record whose lines are queued or whose
// faults are unsaved) and the saver that makes the active faults durable on a thread of its own.

#include "agent/kmsg_cursor.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <vector>

#include "agent/background_saver.h"

namespace gpuheal {
namespace {

TEST(KmsgCursor, CountsLostRecordsAndSavesUpToTheLastRead) {
  KmsgCursor c;
  EXPECT_EQ(c.See(10).lost, 0u);
  EXPECT_EQ(c.See(11).lost, 0u);
  EXPECT_EQ(c.See(15).lost, 3u) << "12, 13 and 14 were overwritten before they were read";
  EXPECT_EQ(c.SafeToSave(std::nullopt), 15u);
  c.Saved(15);
  EXPECT_EQ(c.SafeToSave(std::nullopt), std::nullopt) << "nothing new";
  c.See(16);
  EXPECT_EQ(c.SafeToSave(16u), std::nullopt) << "record 16's line is still queued";
  EXPECT_EQ(c.SafeToSave(std::nullopt), 16u);
}

TEST(KmsgCursor, ARestartedAgentSkipsWhatItReportedAndResumesAfter) {
  KmsgCursor c;
  c.Resume(20);
  EXPECT_FALSE(c.See(19).fresh);
  EXPECT_FALSE(c.See(20).fresh);
  EXPECT_FALSE(c.AheadOfKernel());
  EXPECT_TRUE(c.See(21).fresh);
  EXPECT_EQ(c.SafeToSave(std::nullopt), 21u);
}

TEST(KmsgCursor, ACursorAheadOfTheKernelIsForgotten) {
  KmsgCursor c;
  c.Resume(500);  // a corrupt state file: the kernel's newest record is 30
  c.See(29);
  c.See(30);
  ASSERT_TRUE(c.AheadOfKernel());
  c.Forget();
  EXPECT_FALSE(c.AheadOfKernel());
  EXPECT_TRUE(c.See(1).fresh) << "read again from the start";
  EXPECT_EQ(c.See(2).lost, 0u);
  EXPECT_EQ(c.SafeToSave(std::nullopt), 2u);
}

// The faults of record 7 are unsaved: the cursor stays at 6 until their save is done; a change
// made while a save is in flight (record 9) holds it at 8 after that save.
TEST(KmsgCursor, TheCursorWaitsForTheFaultsOfARecordToBeSaved) {
  KmsgCursor c;
  for (uint64_t s = 1; s <= 6; ++s) c.See(s);
  c.See(7);
  c.BeginRecord(7);
  c.FaultsChanged(false);
  c.EndRecord();
  c.See(8);
  EXPECT_EQ(c.SafeToSave(std::nullopt), 6u);
  c.SnapshotTaken();  // the save of record 7's faults starts
  c.See(9);
  c.BeginRecord(9);
  c.FaultsChanged(true);
  c.EndRecord();
  EXPECT_EQ(c.SafeToSave(std::nullopt), 6u);
  c.SnapshotSaved(true);
  EXPECT_EQ(c.SafeToSave(std::nullopt), 8u) << "record 9's faults came after the snapshot";
  c.AllSaved();
  EXPECT_EQ(c.SafeToSave(std::nullopt), 9u);
}

TEST(KmsgCursor, AFailedSaveKeepsTheCursorBeforeTheUnsavedFaults) {
  KmsgCursor c;
  c.See(1);
  c.See(2);
  c.BeginRecord(2);
  c.FaultsChanged(false);
  c.EndRecord();
  c.SnapshotTaken();
  c.SnapshotSaved(false);
  c.See(3);
  EXPECT_EQ(c.SafeToSave(std::nullopt), 1u);
  EXPECT_EQ(c.ToJson()["last_seq"], 3);
}

class BackgroundSaverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuheal-saver-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  static std::string Read(const std::string& path) {
    std::ifstream f(path);
    return std::string((std::istreambuf_iterator<char>(f)), {});
  }
  std::string dir;
};

TEST_F(BackgroundSaverTest, SavesOnItsThreadAndTellsEachOutcome) {
  std::mutex mu;
  std::vector<bool> outcomes;
  std::promise<void> first;
  BackgroundSaver saver(dir + "/active.json", [&](const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    outcomes.push_back(static_cast<bool>(s));
    if (outcomes.size() == 1) first.set_value();
  });
  saver.Save("one\n");
  first.get_future().wait();
  saver.Save("two\n");
  saver.Stop();  // waits for the save asked for
  EXPECT_EQ(Read(dir + "/active.json"), "two\n");
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(outcomes, (std::vector<bool>{true, true}));
  saver.Save("after\n");
  EXPECT_EQ(Read(dir + "/active.json"), "two\n") << "nothing after Stop";
}

TEST_F(BackgroundSaverTest, AFailedSaveIsTold) {
  std::promise<std::string> told;
  BackgroundSaver saver(dir + "/missing/active.json",
                        [&](const Status& s) { told.set_value(s ? "" : s.error().message); });
  saver.Save("x");
  const std::string error = told.get_future().get();
  EXPECT_NE(error.find("missing"), std::string::npos) << error;
}

}  // namespace
}  // namespace gpuheal
