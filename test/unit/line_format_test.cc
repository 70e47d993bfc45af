#include "parse/line_format.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpuheal {
namespace {

TEST(LineFormat, KmsgRecord) {
  auto p = ParseLine("6,1234,5678901,-;hello world");
  EXPECT_EQ(p.format, LineFormat::kKmsg);
  EXPECT_EQ(p.message, "hello world");
  EXPECT_EQ(p.facility, 0);
  EXPECT_EQ(p.level, 6);
  EXPECT_EQ(p.seq, 1234u);
  EXPECT_EQ(p.usec, 5678901u);
  EXPECT_TRUE(p.kernel_origin);
}

TEST(LineFormat, KmsgRecordWithExtraFieldsAndUserFacility) {
  auto p = ParseLine("12,7,100,c,caller=T42;injected");
  EXPECT_EQ(p.format, LineFormat::kKmsg);
  EXPECT_EQ(p.facility, 1);
  EXPECT_FALSE(p.kernel_origin);
  EXPECT_EQ(p.message, "injected");
}

// A user-space write of "<1024>..." to /dev/kmsg is stored with facility (1024 >> 3) & 0xff = 128,
// so the record comes back with PRI 1024-2047. It is still a kmsg record, and not the kernel's.
TEST(LineFormat, KmsgRecordWithFacilityAbove127IsNotTheKernel) {
  for (const char* rec : {"1024,9,100,-;NVRM: Xid (PCI:0000:a5:00): 79, x", "2047,9,100,-;m"}) {
    auto p = ParseLine(rec);
    EXPECT_EQ(p.format, LineFormat::kKmsg) << rec;
    EXPECT_FALSE(p.kernel_origin) << rec;
    EXPECT_EQ(p.seq, 9u) << rec;
  }
  EXPECT_EQ(ParseLine("1024,9,100,-;m").facility, 128);
  EXPECT_EQ(ParseLine("2048,9,100,-;m").format, LineFormat::kBare);  // no such facility
  auto r = ParseLine("<1028>[  12.5] m");                            // dmesg -r of such a record
  EXPECT_EQ(r.format, LineFormat::kDmesg);
  EXPECT_FALSE(r.kernel_origin);
}

// The layouts of journalctl and dmesg that carry no host or a different clock. A real Xid 79 was
// lost to `journalctl -k --no-hostname` (read as ident "NVRM", not the kernel).
TEST(LineFormat, JournalctlAndDmesgLayouts) {
  const std::string m =
      "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the "
      "bus.";
  const std::vector<std::string> kernel_lines = {
      "May 18 19:02:39 kernel: " + m,               // journalctl -k --no-hostname
      "May 18 19:02:39.123456 node7 kernel: " + m,  // -o short-precise
      "[ 1843.308145] node7 kernel: " + m,          // -o short-monotonic
      "[ 1843.308145] kernel: " + m,                // -o short-monotonic --no-hostname
      "2026-05-18T19:02:39,123456+00:00 " + m,      // dmesg --time-format iso
      "2026-05-18T19:02:39+0000 kernel: " + m,      // -o short-iso --no-hostname
      m,                                            // -o cat
      "               " + m,                        // an indented continuation line
  };
  for (const std::string& l : kernel_lines) {
    auto p = ParseLine(l);
    EXPECT_EQ(p.message, m) << l;
    EXPECT_TRUE(p.kernel_origin) << l;
  }
  for (const std::string& l :
       {"May 18 19:02:39 app[77]: " + m, "[ 1843.308145] node7 app[77]: " + m,
        "2026-05-18T19:02:39+0000 app[77]: " + m}) {
    auto p = ParseLine(l);
    EXPECT_EQ(p.message, m) << l;
    EXPECT_FALSE(p.kernel_origin) << l;
  }
  // A dmesg message that happens to contain "word: " stays the kernel's whole message.
  EXPECT_EQ(ParseLine("[   12.1] usb 1-1: new high-speed USB device").message,
            "usb 1-1: new high-speed USB device");
}

TEST(LineFormat, KmsgContinuation) {
  EXPECT_EQ(ParseLine(" SUBSYSTEM=pci").format, LineFormat::kKmsgContinuation);
  EXPECT_EQ(ParseLine(" DEVICE=+pci:0000:3b:00.0").format, LineFormat::kKmsgContinuation);
  // Indented text is a message, not a continuation.
  EXPECT_EQ(ParseLine("    NVRM: x=y").format, LineFormat::kBare);
}

TEST(LineFormat, Dmesg) {
  auto p = ParseLine("[ 1234.567890] NVRM: hi");
  EXPECT_EQ(p.format, LineFormat::kDmesg);
  EXPECT_EQ(p.message, "NVRM: hi");
  EXPECT_FALSE(p.facility.has_value());
  EXPECT_EQ(ParseLine("[Mon Nov 30 04:28:50 2026] msg").message, "msg");
  EXPECT_EQ(ParseLine("[  345.678901][ T4242] msg").message, "msg");
}

TEST(LineFormat, DmesgFacilityAndRaw) {
  auto x = ParseLine("kern  :err   : [  12.345] boom");
  EXPECT_EQ(x.message, "boom");
  EXPECT_EQ(x.facility, 0);
  auto u = ParseLine("user  :warn  : [  12.345] boom");
  EXPECT_FALSE(u.kernel_origin);
  auto r = ParseLine("<12>[  12.345] boom");
  EXPECT_EQ(r.facility, 1);
  EXPECT_EQ(r.message, "boom");
}

TEST(LineFormat, Syslog) {
  auto p = ParseLine("Nov 30 04:28:50 node-1 kernel: NVRM: x");
  EXPECT_EQ(p.format, LineFormat::kSyslog);
  EXPECT_EQ(p.message, "NVRM: x");
  EXPECT_TRUE(p.kernel_origin);
  EXPECT_EQ(ParseLine("Nov  3 04:28:50 node-1 kernel: [ 12.5] m").message, "m");
  EXPECT_EQ(ParseLine("Okt 3 04:28:50.123456 host kernel: m").message, "m");
  auto app = ParseLine("Nov 30 04:28:50 node-1 sshd[42]: m");
  EXPECT_FALSE(app.kernel_origin);
  EXPECT_EQ(ParseLine("2026-11-30T04:28:50.123+0000 host kernel: m").message, "m");
}

// A journal line that kept only its syslog tag (no time, no host): the kernel's message after
// the tag. Other text that merely starts with a word and a colon stays a bare line.
TEST(LineFormat, OnlyTheSyslogTagKept) {
  auto p = ParseLine("kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
  EXPECT_EQ(p.format, LineFormat::kSyslog);
  EXPECT_EQ(p.message, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
  EXPECT_TRUE(p.kernel_origin);
  EXPECT_EQ(ParseLine("kernel: [ 12.5] NVRM: m").message, "NVRM: m");
  EXPECT_EQ(ParseLine("kernelx: NVRM: m").format, LineFormat::kBare);
  EXPECT_EQ(ParseLine("NVRM: Xid (PCI:0000:3b:00): 79, x").message,
            "NVRM: Xid (PCI:0000:3b:00): 79, x");
}

TEST(LineFormat, BareAndDegenerate) {
  for (std::string_view s : {"", "x", "[", "[]", "1,2;", ",,,;", "<>", "<99999>x", "Nov", "123"}) {
    auto p = ParseLine(s);
    EXPECT_LE(p.message.size(), s.size());
  }
  EXPECT_EQ(ParseLine("plain text").format, LineFormat::kBare);
  EXPECT_EQ(ParseLine("12345 not kmsg").format, LineFormat::kBare);
  EXPECT_EQ(ParseLine("msg\r").message, "msg");
}

}  // namespace
}  // namespace gpuheal
