// The reader against the real /dev/kmsg, including an overrun (EPIPE) forced by filling the
// kernel's ring buffer while the reader is not reading.

#include "sources/kmsg_reader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "agent_process.h"
#include "parse/line_format.h"

namespace gpuheal {
namespace {

void Write(int fd, const std::string& msg) {
  const std::string rec = "<7>" + msg + "\n";
  ASSERT_EQ(write(fd, rec.data(), rec.size()), static_cast<ssize_t>(rec.size()));
}

// Drains the reader to the end of the buffer.
void DrainToEnd(KmsgReader& r) {
  std::string_view rec;
  for (;;) {
    auto s = r.Next(rec);
    if (s == KmsgReader::Status::kAgain) return;
    ASSERT_NE(s, KmsgReader::Status::kError);
  }
}

TEST(KmsgReader, ReadsUserRecordsWithFacilityOne) {
  if (!testing::CanWriteKmsg()) GTEST_SKIP() << "needs root";
  auto r = KmsgReader::Open("/dev/kmsg");
  ASSERT_TRUE(r.ok()) << r.error().message;
  DrainToEnd(**r);
  const int fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
  const std::string marker = fmt::format("gpuheal-reader-test-{}", getpid());
  Write(fd, marker);
  close(fd);
  std::string_view rec;
  ASSERT_EQ((*r)->Next(rec), KmsgReader::Status::kRecord);
  auto p = ParseLine(rec.substr(0, rec.find('\n')));
  EXPECT_EQ(p.format, LineFormat::kKmsg);
  EXPECT_EQ(p.facility, 1);
  EXPECT_EQ(p.level, 7);
  EXPECT_EQ(p.message, marker);
  EXPECT_EQ((*r)->Next(rec), KmsgReader::Status::kAgain);
}

TEST(KmsgReader, OverrunIsReportedAndReadingContinues) {
  if (!testing::CanWriteKmsg()) GTEST_SKIP() << "needs root";
  testing::DevKmsgMode on("on");  // lift the per-open ratelimit for this flood
  ASSERT_TRUE(on.ok()) << "cannot set kernel.printk_devkmsg";
  auto r = KmsgReader::Open("/dev/kmsg");
  ASSERT_TRUE(r.ok());
  DrainToEnd(**r);
  std::string_view rec;
  const int fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
  // Far more than the ring buffer holds (128 KiB here, at most a few MiB on big machines).
  const std::string pad(200, 'x');
  for (int i = 0; i < 40000; ++i) Write(fd, fmt::format("gpuheal-overrun {} {}", i, pad));
  close(fd);
  bool overrun = false;
  uint64_t first_seq = 0;
  for (int i = 0; i < 5 && !overrun; ++i) {
    auto s = (*r)->Next(rec);
    if (s == KmsgReader::Status::kOverrun) overrun = true;
  }
  EXPECT_TRUE(overrun) << "the reader should have been overtaken";
  ASSERT_EQ((*r)->Next(rec), KmsgReader::Status::kRecord);
  first_seq = *ParseLine(rec.substr(0, rec.find('\n'))).seq;
  ASSERT_EQ((*r)->Next(rec), KmsgReader::Status::kRecord);
  EXPECT_EQ(*ParseLine(rec.substr(0, rec.find('\n'))).seq, first_seq + 1);
}

TEST(KmsgReader, FifoCarriesOneRecordPerLine) {
  char tmpl[] = "/tmp/gpuheal-fifo-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string path = dir + "/kmsg";
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  auto r = KmsgReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const int w = open(path.c_str(), O_WRONLY | O_NONBLOCK);
  const std::string data = "6,1,10,-;first\n SUBSYSTEM=pci\n6,2,20,-;second\n6,3,30,-;par";
  ASSERT_EQ(write(w, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  std::string_view rec;
  ASSERT_EQ((*r)->Next(rec), KmsgReader::Status::kRecord);
  EXPECT_EQ(rec, "6,1,10,-;first");
  ASSERT_EQ((*r)->Next(rec), KmsgReader::Status::kRecord);
  EXPECT_EQ(rec, " SUBSYSTEM=pci");
  ASSERT_EQ((*r)->Next(rec), KmsgReader::Status::kRecord);
  EXPECT_EQ(rec, "6,2,20,-;second");
  EXPECT_EQ((*r)->Next(rec), KmsgReader::Status::kAgain);  // partial line waits for its end
  ASSERT_EQ(write(w, "tial\n", 5), 5);
  ASSERT_EQ((*r)->Next(rec), KmsgReader::Status::kRecord);
  EXPECT_EQ(rec, "6,3,30,-;partial");
  close(w);
  // The reader holds the FIFO open for writing too: no EOF when the writer goes.
  EXPECT_EQ((*r)->Next(rec), KmsgReader::Status::kAgain);
  unlink(path.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace gpuheal
