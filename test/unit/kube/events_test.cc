#include "kube/events.h"

#include <gtest/gtest.h>

#include "core/time.h"
#include "kube/leader_election.h"

namespace gpuheal::kube {
namespace {

TEST(KubeTime, RfcAndMicroTime) {
  const auto t =
      std::chrono::system_clock::time_point(std::chrono::microseconds(1796017320123456LL));
  EXPECT_EQ(RfcTime(t), "2026-11-30T05:42:00Z");
  EXPECT_EQ(MicroTime(t), "2026-11-30T05:42:00.123456Z");
  EXPECT_EQ(MicroTime(std::chrono::system_clock::time_point(std::chrono::seconds(1796017320))),
            "2026-11-30T05:42:00.000000Z");
}

TEST(KubeTime, ParseRoundTripsAndRejectsWhatNoServerWrites) {
  const auto t = std::chrono::system_clock::time_point(std::chrono::seconds(1796017320));
  EXPECT_EQ(ParseTime(RfcTime(t)), t);
  EXPECT_EQ(ParseTime(MicroTime(t + std::chrono::microseconds(7))),
            t + std::chrono::microseconds(7));
  // Years the 64-bit nanosecond clock cannot hold (found by fuzz_gpu_faults: it overflowed).
  for (const char* bad : {"8009-11-30T10:00:00Z", "1900-01-01T00:00:00Z", "2026-13-01T00:00:00Z",
                          "2026-11-30T25:00:00Z", "2026-11-30T10:00:00",
                          "2026-11-30T10:00:00+01:00", "yesterday", ""}) {
    EXPECT_FALSE(ParseTime(bad)) << bad;
  }
}

TEST(LeaderElection, ValidationNamesTheProblem) {
  LeaderElectionConfig c;
  c.lease_name = "gpuheal-controller";
  c.identity = "a";
  EXPECT_TRUE(ValidateLeaderElection(c).ok());
  c.renew_deadline = c.lease_duration;
  auto r = ValidateLeaderElection(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("lease duration (15000 ms) > renew deadline (15000 ms)"),
            std::string::npos)
      << r.error().message;
  c = LeaderElectionConfig{};
  c.lease_name = "x";
  EXPECT_NE(ValidateLeaderElection(c).error().message.find("identity"), std::string::npos);
}

}  // namespace
}  // namespace gpuheal::kube
