#include "agent/monitor_queue.h"

#include <gtest/gtest.h>

namespace gpuheal {
namespace {

using namespace std::chrono_literals;

TEST(MonitorSchedule, FirstTickIsJitteredWithinTwentyPercent) {
  const auto t0 = MonitorSchedule::Clock::time_point{} + 1000h;
  std::set<int64_t> offsets;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    MonitorSchedule s(seed);
    s.Add(std::make_unique<FunctionMonitor>("m", 10s, [](ProcCache&) {}), t0);
    const auto off = s.deadline(0) - t0;
    EXPECT_GE(off, 0s);
    EXPECT_LE(off, 2s);
    offsets.insert(off.count());
  }
  EXPECT_GT(offsets.size(), 40u) << "offsets should differ between agents";
}

TEST(MonitorSchedule, RunsDueMonitorsSequentiallySharingOneCache) {
  const auto t0 = MonitorSchedule::Clock::time_point{} + 1000h;
  MonitorSchedule s(7);
  std::vector<std::string> order;
  size_t reads_seen = 0;
  ProcCache* cache_a = nullptr;
  s.Add(std::make_unique<FunctionMonitor>("a", 1s,
                                          [&](ProcCache& c) {
                                            order.push_back("a");
                                            c.Read("/proc/uptime");
                                            cache_a = &c;
                                          }),
        t0);
  s.Add(std::make_unique<FunctionMonitor>("b", 1s,
                                          [&](ProcCache& c) {
                                            order.push_back("b");
                                            c.Read("/proc/uptime");  // cached: read once per tick
                                            reads_seen = c.reads();
                                            EXPECT_EQ(&c, cache_a);
                                          }),
        t0);
  EXPECT_EQ(s.RunDue(t0 + 250ms), 2u);
  EXPECT_EQ(order.size(), 2u);
  EXPECT_EQ(reads_seen, 1u);
  EXPECT_EQ(s.RunDue(t0 + 300ms), 0u);  // not due again until a period later
  EXPECT_EQ(s.RunDue(t0 + 1300ms), 2u);
}

TEST(MonitorSchedule, FallingBehindSkipsInsteadOfBursting) {
  const auto t0 = MonitorSchedule::Clock::time_point{} + 1000h;
  MonitorSchedule s(3);
  int runs = 0;
  s.Add(std::make_unique<FunctionMonitor>("m", 1s, [&](ProcCache&) { ++runs; }), t0);
  EXPECT_EQ(s.RunDue(t0 + 1h), 1u);
  EXPECT_EQ(s.RunDue(t0 + 1h), 0u);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(s.next_deadline(), t0 + 1h + 1s);
}

TEST(ProcCache, UnreadableFileIsEmpty) {
  ProcCache c;
  EXPECT_EQ(c.Read("/nonexistent/file"), "");
}

}  // namespace
}  // namespace gpuheal
