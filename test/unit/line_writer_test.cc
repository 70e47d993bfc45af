#include "agent/line_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>

namespace gpuheal {
namespace {

TEST(LineWriter, AReaderThatStoppedCostsBoundedMemoryThenLinesAreDropped) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  std::atomic<int> dropped{0};
  const std::string line(1000, 'x');
  {
    LineWriter w(p[1], 10'000, [&] { ++dropped; });
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 1000; ++i) w.Write(line + "\n");  // 1 MB into a 64 kB pipe nobody reads
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500))
        << "Write never blocks";
    EXPECT_GT(dropped.load(), 900);
  }  // destruction waits about a second for the reader, then gives up
  close(p[0]);
  close(p[1]);
}

TEST(LineWriter, ASlowReaderGetsEveryLineInOrder) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  std::atomic<int> dropped{0};
  std::string got;
  {
    LineWriter w(p[1], 1 << 20, [&] { ++dropped; });
    for (int i = 0; i < 2000; ++i)
      w.Write(std::to_string(i) + std::string(100, '.') + "\n");  // > a pipe's worth
    char buf[4096];
    while (got.size() < 2000 * 101 + 6890) {  // exact size: digits + dots + newlines
      const ssize_t n = read(p[0], buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
      if (std::count(got.begin(), got.end(), '\n') == 2000) break;
    }
  }
  close(p[1]);
  EXPECT_EQ(dropped.load(), 0);
  EXPECT_EQ(std::count(got.begin(), got.end(), '\n'), 2000);
  EXPECT_EQ(got.rfind("1999", std::string::npos) != std::string::npos, true);
  EXPECT_EQ(got.substr(0, 2), "0.");
  close(p[0]);
}

}  // namespace
}  // namespace gpuheal
