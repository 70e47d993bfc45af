// Tier 2: what the agent saw survives kill -9, a bad cursor and a state directory that takes no
// writes. Each test injects records naming PCI bus ids no other test uses.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "agent/boot_id.h"
#include "agent_process.h"
#include "drill/inject.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using testing::AgentProcess;
using testing::HttpGet;

class KmsgDurabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::CanWriteKmsg()) GTEST_SKIP() << "needs root and a writable /dev/kmsg";
    char tmpl[] = "/tmp/gpuheal-durability-XXXXXX";
    dir_ = mkdtemp(tmpl);
    state_dir_ = dir_ + "/state";
    std::filesystem::create_directories(state_dir_);
    std::random_device rd;
    domain_ = 0x1000 + rd() % 0xd000;  // never a real PCI domain here
    std::ofstream(dir_ + "/agent.yaml") << "kmsg_start: end\n";
  }
  void TearDown() override {
    if (mounted_) umount2(state_dir_.c_str(), MNT_DETACH);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<AgentProcess> Start() {
    auto a = std::make_unique<AgentProcess>(std::vector<std::string>{
        GPUHEAL_BIN, "agent", "--standalone", "--state-dir", state_dir_, "--listen", "127.0.0.1:0",
        "--accept-injected", "--config", dir_ + "/agent.yaml"});
    auto started =
        a->WaitLog([](const auto& j) { return j.value("msg", "") == "agent started"; }, 10s);
    EXPECT_TRUE(started.has_value()) << "agent did not start";
    if (started) listen_ = started->value("listen", "");
    return a;
  }
  std::string Pci(int i) const { return fmt::format("{:04x}:{:02x}:00", domain_, i); }
  void Inject(int xid, int i) {
    ASSERT_TRUE(
        WriteKmsg("/dev/kmsg", InjectMessages(InjectSpec{xid, Pci(i), "4242", "job"})).ok());
  }
  auto Gpu(int i) {
    return
        [pci = Pci(i)](const nlohmann::json& j) { return j.value("pci", nlohmann::json()) == pci; };
  }
  uint64_t SavedSeq() const {
    std::ifstream in(state_dir_ + "/agent-state.json");
    auto j = nlohmann::json::parse(in, nullptr, false);
    return j.is_object() ? j.value("last_seq", uint64_t{0}) : 0;
  }
  void Mount(const std::string& options) {
    ASSERT_EQ(mount("none", state_dir_.c_str(), "tmpfs", 0, options.c_str()), 0)
        << std::strerror(errno);
    mounted_ = true;
  }

  std::string dir_, state_dir_, listen_;
  int domain_ = 0;
  bool mounted_ = false;
};

// Once the agent has saved its cursor past a record, a restart never reports it again; a record
// written while it was down is reported by the next start.
TEST_F(KmsgDurabilityTest, RestartAfterTheCursorNeitherRepeatsNorLoses) {
  {
    auto agent = Start();
    Inject(31, 1);
    auto e = agent->WaitEvent(Gpu(1), 5s);
    ASSERT_TRUE(e);
    const uint64_t seq = (*e)["kmsg_seq"].get<uint64_t>();
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (SavedSeq() < seq && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(5ms);
    ASSERT_GE(SavedSeq(), seq) << "the cursor follows the written line";
    agent->Kill(SIGKILL);
  }
  Inject(31, 2);  // while down
  auto agent = Start();
  Inject(31, 3);
  ASSERT_TRUE(agent->WaitEvent(Gpu(3), 5s));
  int first = 0, down = 0;
  for (const auto& e : agent->events()) {
    first += Gpu(1)(e);
    down += Gpu(2)(e);
  }
  EXPECT_EQ(first, 0) << "a restart re-reported a record behind the saved cursor";
  EXPECT_EQ(down, 1) << "a fault logged while the agent was down was lost";
}

// kill -9 at random moments during a stream of faults: every record is reported by some
// incarnation of the agent (at least once; a record whose line was out but whose cursor was not
// saved yet is reported again). The cursor used to be saved before the fault: 44 of 80 lost.
TEST_F(KmsgDurabilityTest, KillNineDuringAStreamOfFaultsLosesNothing) {
  testing::DevKmsgMode on("on");
  ASSERT_TRUE(on.ok());
  constexpr int kFaults = 240;
  std::map<std::string, int> reported;
  {
    // A first start with kmsg_start: end skips the buffer: have one cursor saved before the stream.
    auto agent = Start();
    Inject(13, kFaults);
    auto e = agent->WaitEvent(Gpu(kFaults), 5s);
    ASSERT_TRUE(e);
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (SavedSeq() < (*e)["kmsg_seq"].get<uint64_t>() &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
    agent->Kill(SIGKILL);
  }
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < kFaults; ++i) {
      // Catastrophic (Xid 79: two lines) and fatal (Xid 48) faults, each on a GPU of its own.
      (void)WriteKmsg("/dev/kmsg", InjectMessages(InjectSpec{i % 2 ? 48 : 79, Pci(i), "", ""}));
      std::this_thread::sleep_for(std::chrono::microseconds(10000 + (i * 7919) % 7000));
    }
    done = true;
  });
  std::mt19937 rng(42);
  int kills = 0;
  auto account = [&](AgentProcess& a) {
    for (const auto& e : a.events()) {
      if (e.value("kind", "") == "xid" && e["pci"].is_string())
        ++reported[e["pci"].get<std::string>()];
    }
  };
  while (!done) {
    auto agent = Start();
    // Run for 5-60 ms, reading its output meanwhile, then kill -9.
    agent->WaitEvent([](const nlohmann::json&) { return false; },
                     std::chrono::milliseconds(5 + rng() % 55));
    agent->Kill(SIGKILL);
    agent->WaitEvent([](const nlohmann::json&) { return false; }, 1s);  // what it wrote, to EOF
    account(*agent);
    ++kills;
  }
  writer.join();
  auto last = Start();
  last->WaitEvent(Gpu(kFaults - 1), 10s);
  last->WaitEvent([](const nlohmann::json&) { return false; }, 300ms);  // anything still coming
  account(*last);
  int lost = 0, twice = 0;
  for (int i = 0; i < kFaults; ++i) {
    const int n = reported[Pci(i)];
    lost += n == 0;
    twice += n > 1;
  }
  std::cout << fmt::format(
      "[ account  ] {} faults, {} kills: {} lost, {} reported more than once\n", kFaults, kills,
      lost, twice);
  EXPECT_GE(kills, 5) << "the stream must outlast several incarnations";
  EXPECT_EQ(lost, 0);
}

// A saved cursor of this boot ahead of the kernel would skip every record: it is discarded, said,
// and the buffer is read from its start.
TEST_F(KmsgDurabilityTest, ACursorAheadOfTheKernelIsDiscardedAndSaid) {
  for (const std::string last_seq : {"999999999999", "-5"}) {
    SCOPED_TRACE(last_seq);
    std::filesystem::remove_all(state_dir_);
    std::filesystem::create_directories(state_dir_);
    std::ofstream(state_dir_ + "/agent-state.json")
        << fmt::format("{{\"boot_id\":\"{}\",\"last_seq\":{}}}\n", ReadBootId(), last_seq);
    const int gpu = last_seq == "-5" ? 6 : 5;
    Inject(48, gpu);  // before the start: found in the buffer
    auto agent = Start();
    EXPECT_TRUE(agent->WaitEvent(Gpu(gpu), 5s)) << "the record before the start was skipped";
    auto said = [](const nlohmann::json& j) {
      const std::string m = j.value("msg", "");
      return m.find("cursor is ahead") != std::string::npos ||
             m.find("unreadable state") != std::string::npos;
    };
    const bool before = std::any_of(agent->logs().begin(), agent->logs().end(), said);
    EXPECT_TRUE(before || agent->WaitLog(said, 2s)) << "nothing said about the cursor";
  }
}

// A read-only state directory: the agent starts (it exited 2), detects and reports, says so once,
// and /healthz and a metric show it.
TEST_F(KmsgDurabilityTest, AReadOnlyStateDirectoryDoesNotStopDetection) {
  Mount("ro,size=64k");
  auto agent = Start();
  ASSERT_TRUE(agent->Running());
  Inject(48, 7);
  auto e = agent->WaitEvent(Gpu(7), 5s);
  ASSERT_TRUE(e) << "detection stopped";
  EXPECT_EQ((*e)["severity"], "fatal");
  const std::string health = HttpGet(listen_, "/healthz");
  EXPECT_NE(health.find("state directory not writable"), std::string::npos) << health;
  const std::string metrics = HttpGet(listen_, "/metrics");
  EXPECT_NE(metrics.find("gpuheal_state_writable 0"), std::string::npos) << metrics;
  int said = 0;
  agent->WaitLog([](const nlohmann::json&) { return false; }, 200ms);
  for (const auto& l : agent->logs())
    said += l.value("msg", "").starts_with("cannot write the state directory");
  EXPECT_EQ(said, 1) << "said once";
}

// A full state directory: the fault is reported, but the cursor does not pass it while its save
// fails, so a restart after space is freed reports it again instead of losing it.
TEST_F(KmsgDurabilityTest, AFullStateDirectoryHoldsTheCursorBeforeTheUnsavedFault) {
  Mount("size=64k");
  {
    auto agent = Start();
    Inject(31, 8);  // a warning: the cursor moves past it (nothing to save)
    auto warn = agent->WaitEvent(Gpu(8), 5s);
    ASSERT_TRUE(warn);
    const uint64_t warn_seq = (*warn)["kmsg_seq"].get<uint64_t>();
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (SavedSeq() < warn_seq && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(5ms);
    ASSERT_GE(SavedSeq(), warn_seq);
    {
      std::ofstream fill(state_dir_ + "/fill");
      const std::string block(4096, 'x');
      while (fill.write(block.data(), block.size())) {
      }
    }
    Inject(48, 9);
    auto e = agent->WaitEvent(Gpu(9), 5s);
    ASSERT_TRUE(e) << "detection stopped";
    const uint64_t seq = (*e)["kmsg_seq"].get<uint64_t>();
    ASSERT_TRUE(agent->WaitLog(
        [](const auto& j) {
          return j.value("msg", "").starts_with("cannot write the state directory");
        },
        2s));
    EXPECT_LT(SavedSeq(), seq) << "the cursor passed a fault that was not saved";
    EXPECT_NE(HttpGet(listen_, "/healthz").find("state directory not writable"), std::string::npos);
    agent->Kill(SIGKILL);
  }
  std::filesystem::remove(state_dir_ + "/fill");
  auto agent = Start();
  auto again = agent->WaitEvent(Gpu(9), 5s);
  EXPECT_TRUE(again) << "the fault whose save failed was lost across the restart";
  EXPECT_NE(HttpGet(listen_, "/healthz").find("ok"), std::string::npos);
}

}  // namespace
}  // namespace gpuheal
