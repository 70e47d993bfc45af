// The drill's user-side measurements (drill/workloads.h) and the test workloads they read
// (tools/workload, run here as the real program): a service's errors and latency through a
// failover, a training run's lost work from the trainers' slot logs.

#include "drill/workloads.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/child.h"
#include "integration/bmc_emulator.h"  // FreeLoopbackPort

namespace gpuheal::drill {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

bool Eventually(const std::function<bool()>& f, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (f()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return f();
}

std::string TempDir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "/" + name + "-" + std::to_string(getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(ServiceFiguresTest, ErrorsLatencyAndBaselineAreSplitAtTheKernelLineAndTheReplacement) {
  const int64_t t0 = 10'000'000, restored = t0 + 500'000;
  std::vector<LoadSample> s;
  for (int i = 0; i < 100; ++i) s.push_back({t0 - 2'000'000 + i * 10'000, 1.0 + i % 3, 200});
  // Through the failover: two failures (the last answered 61 ms after the kernel line), a slow
  // one, then the replacement serves.
  s.push_back({t0 + 10'000, 0.5, 500});
  s.push_back({t0 + 60'000, 1.0, 0});
  s.push_back({t0 + 100'000, 9.0, 200});
  for (int i = 0; i < 50; ++i) s.push_back({restored + 1000 + i * 5000, 1.0, 200});
  const ServiceFigures f = SummariseService(s, t0, restored);
  EXPECT_EQ(f.baseline_requests, 100);
  EXPECT_EQ(f.requests, 53);
  EXPECT_EQ(f.errors, 2);
  EXPECT_EQ(f.errors_after_restored, 0);
  EXPECT_DOUBLE_EQ(f.error_window_ms, 61.0);
  EXPECT_EQ(f.first_error_us, t0 + 10'500);
  EXPECT_DOUBLE_EQ(f.baseline_p99_ms, 3.0);
  EXPECT_DOUBLE_EQ(f.p99_ms, 9.0) << "only the failover's requests: up to the replacement";
  // A failure after the replacement ran is counted as such.
  s.push_back({restored + 400'000, 2.0, 503});
  EXPECT_EQ(SummariseService(s, t0, restored).errors_after_restored, 1);
}

TEST(ServiceFiguresTest, NoFailureNoWindow) {
  const ServiceFigures f = SummariseService({{100, 1.0, 200}, {200, 2.0, 200}}, 150, 0);
  EXPECT_EQ(f.errors, 0);
  EXPECT_EQ(f.error_window_ms, 0);
  EXPECT_EQ(f.requests, 1);
}

// Slot logs as the trainers write them: the faulty node's trainer reached step 42 with 30 ms of
// step 43 done, wrote step 42 on request, and its replacement resumed at 42; the periodic one
// reached 40 (+70 ms) and its replacement resumed from its last periodic checkpoint, step 10.
TEST(TrainingFiguresTest, WorkLostIsWhatTheReplacementDidNotResume) {
  const std::string dir = TempDir("training-figures");
  auto write = [&](const std::string& app, int slot, const std::vector<json>& ev) {
    std::filesystem::create_directories(dir + "/" + app);
    std::ofstream out(fmt::format("{}/{}/slot-{}.jsonl", dir, app, slot));
    for (const auto& e : ev) out << e.dump() << "\n";
  };
  write("trainer", 0,
        {{{"event", "start"}, {"pid", 7}, {"pod", "other"}, {"step", 0}, {"t_ms", 1}}});
  write("trainer", 1,
        {{{"event", "start"}, {"pid", 10}, {"pod", "trainer-a"}, {"step", 0}, {"t_ms", 1}},
         {{"event", "gpu_lost"}, {"pid", 10}, {"step", 42}, {"partial_ms", 30}, {"t_ms", 5}},
         {{"event", "checkpoint"},
          {"pid", 10},
          {"why", "requested"},
          {"step", 42},
          {"took_ms", 51},
          {"t_ms", 6}},
         {{"event", "exit"}, {"pid", 10}, {"step", 42}, {"t_ms", 7}},
         {{"event", "start"},
          {"pid", 11},
          {"pod", "trainer-b"},
          {"step", 42},
          {"resumed", true},
          {"t_ms", 9}}});
  write("trainer-periodic", 0,
        {{{"event", "start"}, {"pid", 20}, {"pod", "trainer-periodic-a"}, {"step", 0}},
         {{"event", "checkpoint"}, {"pid", 20}, {"why", "periodic"}, {"step", 10}},
         {{"event", "gpu_lost"}, {"pid", 20}, {"step", 40}, {"partial_ms", 70}},
         {{"event", "start"}, {"pid", 21}, {"step", 10}, {"resumed", true}}});
  const TrainingFigures f = SummariseTraining(
      dir, {{"trainer", "trainer-a"}, {"trainer-periodic", "trainer-periodic-a"}});
  EXPECT_EQ(f.steps_done, 42);
  EXPECT_DOUBLE_EQ(f.work_lost_s, 0.03);
  EXPECT_DOUBLE_EQ(f.checkpoint_ms, 51);
  EXPECT_TRUE(f.resumed);
  EXPECT_EQ(f.checkpoint_us, 6000);
  EXPECT_EQ(f.resumed_us, 9000);
  EXPECT_DOUBLE_EQ(f.periodic_only_work_lost_s, (30 * kTrainStepMs + 70) / 1000.0);
  // A trainer nobody replaced is not measured, and the figures say why.
  const TrainingFigures g = SummariseTraining(dir, {{"trainer", "nobody"}});
  EXPECT_LT(g.work_lost_s, 0);
  EXPECT_NE(g.detail.find("nobody: no slot log names it"), std::string::npos) << g.detail;
}

// Three ranks on faulty GPUs (correlated): the job's loss is its worst rank's. A container
// restarted on a GPU still lost ("gpu": false) is no resumption: a rank with nothing else after
// it is stalled, and leaves the job's figure unmeasured.
TEST(TrainingFiguresTest, TheJobLosesItsWorstRanksWorkAndAStalledRankIsCounted) {
  const std::string dir = TempDir("training-ranks");
  auto write = [&](int slot, const std::vector<json>& ev) {
    std::filesystem::create_directories(dir + "/trainer");
    std::ofstream out(fmt::format("{}/trainer/slot-{}.jsonl", dir, slot));
    for (const auto& e : ev) out << e.dump() << "\n";
  };
  // Rank 0: reached 20, resumed at 20 (requested). Rank 1: reached 25 (+40 ms), restarted in
  // its pod from its periodic checkpoint at 5.
  write(0, {{{"event", "start"}, {"pid", 1}, {"pod", "a"}, {"step", 0}},
            {{"event", "gpu_lost"}, {"pid", 1}, {"step", 20}, {"partial_ms", 10}},
            {{"event", "checkpoint"}, {"pid", 1}, {"why", "requested"}, {"step", 20}},
            {{"event", "start"}, {"pid", 2}, {"step", 20}, {"resumed", true}, {"t_ms", 3}}});
  write(1, {{{"event", "start"}, {"pid", 5}, {"pod", "b"}, {"step", 0}},
            {{"event", "gpu_lost"}, {"pid", 5}, {"step", 25}, {"partial_ms", 40}},
            {{"event", "exit"}, {"pid", 5}, {"step", 25}},
            {{"event", "start"}, {"pid", 6}, {"step", 5}, {"resumed", true}, {"t_ms", 8}}});
  const TrainingFigures f = SummariseTraining(dir, {{"trainer", "a"}, {"trainer", "b"}});
  EXPECT_EQ(f.ranks, 2);
  EXPECT_EQ(f.stalled_ranks, 0);
  EXPECT_DOUBLE_EQ(f.work_lost_s, (20 * kTrainStepMs + 40) / 1000.0) << "rank 1's, the worst";
  EXPECT_EQ(f.steps_done, 25);
  EXPECT_FALSE(f.resumed) << "rank 1 did not resume from a requested checkpoint";
  EXPECT_EQ(f.resumed_us, 8000);

  // Rank 2: its node's repair held; its container restarted on the lost GPU, twice.
  write(2, {{{"event", "start"}, {"pid", 9}, {"pod", "c"}, {"step", 0}},
            {{"event", "gpu_lost"}, {"pid", 9}, {"step", 30}, {"partial_ms", 0}},
            {{"event", "exit"}, {"pid", 9}, {"step", 30}},
            {{"event", "start"}, {"pid", 10}, {"step", 30}, {"resumed", true}, {"gpu", false}},
            {{"event", "exit"}, {"pid", 10}, {"step", 30}},
            {{"event", "start"}, {"pid", 11}, {"step", 30}, {"resumed", true}, {"gpu", false}}});
  const TrainingFigures g =
      SummariseTraining(dir, {{"trainer", "a"}, {"trainer", "b"}, {"trainer", "c"}});
  EXPECT_EQ(g.ranks, 3);
  EXPECT_EQ(g.stalled_ranks, 1);
  EXPECT_LT(g.work_lost_s, 0) << "the job's loss is not known while a rank stalls";
  EXPECT_NE(g.detail.find("c: step 30 reached, no process took its slot"), std::string::npos)
      << g.detail;
}

// The JSON contract of docs/drill.md.
TEST(TrainingFiguresTest, JsonNamesTheContractsFields) {
  TrainingFigures a;
  a.steps_done = 10;
  a.work_lost_s = 0.05;
  a.checkpoint_ms = 52;
  a.resumed = true;
  a.periodic_only_work_lost_s = 4;
  TrainingFigures b = a;
  b.work_lost_s = 0.08;
  b.periodic_only_work_lost_s = 6;
  const auto j = TrainingJson({a, b});
  EXPECT_EQ(j["steps_done"], 20);
  EXPECT_DOUBLE_EQ(j["work_lost_s"].get<double>(), 0.08) << "the worst run";
  EXPECT_DOUBLE_EQ(j["periodic_only_work_lost_s"].get<double>(), 5) << "the mean";
  EXPECT_EQ(j["resumed"], true);
  EXPECT_EQ(j["runs"].size(), 2u);
  ServiceFigures s;
  s.requests = 10;
  s.errors = 1;
  s.error_window_ms = 61.04;
  const auto k = ServiceJson({s});
  for (const char* field :
       {"requests", "errors", "error_window_ms", "p50_ms", "p99_ms", "baseline_p99_ms"})
    EXPECT_TRUE(k.contains(field)) << field;
  EXPECT_DOUBLE_EQ(k["error_window_ms"].get<double>(), 61.0);
}

// The real `gpuheal-workload serve`: 200 while its GPU works, 500 once it is lost (SIGUSR1),
// exits 0 on SIGTERM.
TEST(WorkloadToolTest, ServeFailsOnceItsGpuIsLostAndStopsOnSigterm) {
  const std::string dir = TempDir("serve");
  const std::string ep = fmt::format("127.0.0.1:{}", gpuheal::testing::FreeLoopbackPort());
  auto c = Child::Spawn({GPUHEAL_WORKLOAD_BIN, "serve", "--listen", ep, "--cost", "1ms"},
                        dir + "/out", dir + "/err");
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_TRUE(Eventually([&] { return HttpGetStatus(ep) == 200; }, 5s)) << Slurp(dir + "/err");
  (*c)->Signal(SIGUSR1);
  EXPECT_TRUE(Eventually([&] { return HttpGetStatus(ep) == 500; }, 2s));
  (*c)->Signal(SIGTERM);
  EXPECT_EQ((*c)->Wait(5s), 0);
  EXPECT_EQ(HttpGetStatus(ep), 0) << "nothing answers once it has stopped";
  EXPECT_NE(Slurp(dir + "/out").find("\"event\":\"gpu_lost\""), std::string::npos);
}

// The real `gpuheal-workload train`: a requested checkpoint is written and answered, the GPU's
// loss stops the steps, and a second process waits for the slot and resumes from it.
TEST(WorkloadToolTest, TrainCheckpointsOnRequestAndItsSuccessorResumes) {
  const std::string dir = TempDir("train");
  const std::string podinfo = dir + "/annotations", answer = dir + "/answer";
  auto train = [&](const std::string& name) {
    return Child::Spawn(
        {GPUHEAL_WORKLOAD_BIN, "train", "--dir", dir + "/ckpt", "--slots", "1", "--step", "20ms",
         "--every", "1m", "--checkpoint-cost", "10ms", "--podinfo", podinfo, "--answer", answer},
        dir + "/" + name + ".out", dir + "/" + name + ".err", {{"POD_NAME", name}});
  };
  auto first = train("first");
  ASSERT_TRUE(first) << first.error().message;
  std::this_thread::sleep_for(300ms);
  (*first)->Signal(SIGUSR1);  // the GPU is lost: no step completes from now on
  std::this_thread::sleep_for(100ms);
  std::ofstream(podinfo) << "gpuheal.io/checkpoint-requested=\"2026-12-06T23:00:00Z\"\n"
                         << "other=\"x\"\n";
  ASSERT_TRUE(Eventually([&] { return !Slurp(answer).empty(); }, 5s)) << Slurp(dir + "/first.err");
  EXPECT_EQ(Slurp(answer), "2026-12-06T23:00:00Z\n");
  // The successor waits while the first holds the job's only slot.
  auto second = train("second");
  ASSERT_TRUE(second);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(Slurp(dir + "/second.out").find("\"start\""), std::string::npos)
      << "started while its predecessor held the slot";
  (*first)->Signal(SIGTERM);
  EXPECT_EQ((*first)->Wait(5s), 0);
  ASSERT_TRUE(Eventually(
      [&] { return Slurp(dir + "/second.out").find("\"start\"") != std::string::npos; }, 5s));
  (*second)->Signal(SIGTERM);
  (*second)->Wait(5s);
  // What the slot log says: the requested checkpoint holds the step the GPU was lost at, and
  // the successor resumed from exactly that step.
  int64_t lost = -1, saved = -2, resumed = -3;
  std::ifstream log(dir + "/ckpt/slot-0.jsonl");
  for (std::string line; std::getline(log, line);) {
    const json e = json::parse(line);
    if (e["event"] == "gpu_lost") lost = e["step"];
    if (e["event"] == "checkpoint" && e["why"] == "requested") saved = e["step"];
    if (e["event"] == "start" && e["pod"] == "second") {
      resumed = e["step"];
      EXPECT_TRUE(e["resumed"].get<bool>());
    }
  }
  EXPECT_GT(lost, 5) << "about 15 steps of 20 ms in 300 ms";
  EXPECT_EQ(saved, lost);
  EXPECT_EQ(resumed, saved);
}

TEST(WorkloadToolTest, BadFlagsAreUsageErrors) {
  const std::string dir = TempDir("workload-usage");
  auto c = Child::Spawn({GPUHEAL_WORKLOAD_BIN, "train", "--dir", dir, "--step", "fast"},
                        dir + "/out", dir + "/err");
  ASSERT_TRUE(c);
  EXPECT_EQ((*c)->Wait(5s), 2);
  EXPECT_NE(Slurp(dir + "/err").find("--step fast: not a duration"), std::string::npos)
      << Slurp(dir + "/err");
}

}  // namespace
}  // namespace gpuheal::drill
