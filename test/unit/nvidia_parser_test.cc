#include "parse/nvidia_parser.h"

#include <gtest/gtest.h>

#include "core/pci.h"

namespace gpuheal {
namespace {

TEST(Pci, Normalises) {
  EXPECT_EQ(NormalisePci("0000:3B:00"), "0000:3b:00");
  EXPECT_EQ(NormalisePci("PCI:0000:3b:00.0"), "0000:3b:00");
  EXPECT_EQ(NormalisePci("3b:00.0"), "0000:3b:00");
  EXPECT_EQ(NormalisePci("00000008:06:00"), "0008:06:00");
  EXPECT_FALSE(NormalisePci("0000:3b").has_value());
  EXPECT_FALSE(NormalisePci("zz:00.0").has_value());
  EXPECT_FALSE(NormalisePci("0000:3b:00 trailing").has_value());
}

TEST(NvidiaParser, XidFields) {
  NvidiaSignal s;
  ASSERT_TRUE(ParseNvidia("NVRM: Xid (PCI:0000:3b:00): 13, pid=42, name=a, b, c", s));
  EXPECT_EQ(s.kind, NvidiaMessage::kXid);
  EXPECT_EQ(s.number, 13);
  EXPECT_EQ(s.pid, 42);
  EXPECT_EQ(s.process, "a");
  EXPECT_EQ(s.text, "b, c");
}

TEST(NvidiaParser, UnknownPidAndName) {
  NvidiaSignal s;
  ASSERT_TRUE(ParseNvidia("NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, x", s));
  EXPECT_FALSE(s.pid.has_value());
  EXPECT_TRUE(s.process.empty());
  EXPECT_EQ(s.text, "x");
}

TEST(NvidiaParser, RejectsMalformed) {
  NvidiaSignal s;
  EXPECT_FALSE(ParseNvidia("NVRM: Xid (PCI:0000:3b:00): x", s));
  EXPECT_FALSE(ParseNvidia("NVRM: Xid (PCI:zz): 13, a", s));
  EXPECT_FALSE(ParseNvidia("NVRM: Xid (PCI:0000:3b:00) 13", s));
  EXPECT_FALSE(ParseNvidia("NVRM: Xid (PCI:0000:3b:00): -3, a", s));
  EXPECT_FALSE(ParseNvidia("NVRM: loading NVIDIA UNIX x86_64 Kernel Module", s));
  EXPECT_EQ(s.kind, NvidiaMessage::kNone);
  EXPECT_FALSE(ParseNvidia("SXid (PCI:0000:c5:00.0) 1", s));
}

TEST(NvidiaParser, Announcement) {
  NvidiaSignal s;
  ASSERT_TRUE(ParseNvidia("NVRM: GPU at PCI:0000:3b:00: GPU-abc-123", s));
  EXPECT_EQ(s.kind, NvidiaMessage::kGpuAnnounce);
  EXPECT_EQ(s.uuid, "GPU-abc-123");
}

TEST(NvidiaParser, MultiRecordPieces) {
  NvidiaSignal s;
  ASSERT_TRUE(ParseNvidia("NVRM: The NVIDIA GPU 0000:b3:00.0", s));
  EXPECT_EQ(s.kind, NvidiaMessage::kFallenStart);
  ASSERT_TRUE(ParseNvidia("NVRM: (PCI ID: 10de:26b5) installed in this system has", s));
  EXPECT_EQ(s.kind, NvidiaMessage::kFallenMiddle);
  ASSERT_TRUE(ParseNvidia("NVRM: fallen off the bus and is not responding to commands.", s));
  EXPECT_EQ(s.kind, NvidiaMessage::kFallenEnd);
}

}  // namespace
}  // namespace gpuheal
