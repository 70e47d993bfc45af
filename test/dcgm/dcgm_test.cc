// The DCGM backend against the DCGM test double (real ABI, JSON scenario): in-process, and the
// unchanged agent binary with DCGM enabled next to the NVML double.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "agent/diag_collectors.h"
#include "agent_process.h"
#include "library_error.h"
#include "nvml_scenario.h"
#include "sources/dcgm_source.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::AgentProcess;

// The DCGM scenario file (the NVML one comes from testing::Scenario).
class DcgmScenario {
 public:
  DcgmScenario() {
    char tmpl[] = "/tmp/gpuheal-dcgm-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/dcgm.json";
    setenv("GPUHEAL_DCGM_SCENARIO", path_.c_str(), 1);
  }
  ~DcgmScenario() { std::filesystem::remove_all(dir_); }
  void Write(const json& j) {
    std::ofstream(path_ + ".tmp") << j.dump();
    std::rename((path_ + ".tmp").c_str(), path_.c_str());
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_, path_;
};

TEST(DcgmSource, PolicyViolationsArriveWithTheirGpuAndValue) {
  DcgmScenario sc;
  sc.Write({{"gpus", {0, 1}}});
  std::mutex mu;
  std::condition_variable cv;
  std::vector<DcgmViolation> got;
  DcgmOptions o;
  o.library = DCGM_DOUBLE;
  auto s = DcgmSource::Open(o, [&](DcgmViolation v) {
    std::lock_guard<std::mutex> lock(mu);
    got.push_back(v);
    cv.notify_all();
  });
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ((*s)->gpu_ids(), (std::vector<unsigned>{0, 1}));
  sc.Write({{"gpus", {0, 1}},
            {"violations",
             {{{"id", "a"}, {"gpu", 1}, {"condition", "XID"}, {"value", 79}},
              {{"id", "b"}, {"gpu", 0}, {"condition", "DBE"}, {"value", 2}},
              {{"id", "c"}, {"gpu", 0}, {"condition", "MAX_PAGES_RETIRED"}, {"value", 61}},
              {{"id", "d"}, {"gpu", 0}, {"condition", "THERMAL"}, {"value", 95}}}}});
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return got.size() >= 4; }));
  EXPECT_EQ(got[0].gpu_id, 1u);
  EXPECT_EQ(got[0].condition, dcgm::kCondXid);
  EXPECT_EQ(got[0].value, 79u);
  EXPECT_EQ(got[1].condition, dcgm::kCondDbe);
  EXPECT_EQ(got[1].value, 2u);
  EXPECT_EQ(got[2].value, 61u);
  EXPECT_EQ(got[3].value, 95u);
}

TEST(DcgmSource, HealthIncidentsLostHostEngineAndReconnect) {
  DcgmScenario sc;
  sc.Write({{"gpus", {0}},
            {"incidents", {{{"gpu", 0}, {"system", 16}, {"health", 20}, {"msg", "DBE in HBM"}}}}});
  DcgmOptions o;
  o.library = DCGM_DOUBLE;
  o.address = "127.0.0.1:5555";
  auto s = DcgmSource::Open(o, [](DcgmViolation) {});
  ASSERT_TRUE(s) << s.error().message;
  auto inc = (*s)->HealthCheck();
  ASSERT_TRUE(inc) << inc.error().message;
  ASSERT_EQ(inc->size(), 1u);
  EXPECT_EQ((*inc)[0].system, 16);
  EXPECT_EQ((*inc)[0].health, dcgm::kHealthFail);
  EXPECT_EQ((*inc)[0].message, "DBE in HBM");
  sc.Write({{"gpus", {0}}, {"health_error", -21}, {"connect_error", -21}});
  auto lost = (*s)->HealthCheck();
  ASSERT_FALSE(lost);
  EXPECT_NE(lost.error().message.find("not valid any longer"), std::string::npos)
      << lost.error().message;
  Status again = (*s)->Reconnect();
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find("is nv-hostengine running?"), std::string::npos)
      << again.error().message;
  sc.Write({{"gpus", {0}}});
  ASSERT_TRUE((*s)->Reconnect());
  EXPECT_TRUE((*s)->HealthCheck());
}

// A diagnostic bundle's GPU collectors (docs/diagnostics.md): DCGM's health watches and the NVML
// readings of every GPU, through the doubles' real ABIs.
TEST(DcgmSource, DiagnosticCollectorsReadDcgmHealthAndEveryGpusNvmlReadings) {
  DcgmScenario dsc;
  dsc.Write({{"gpus", {0, 1}},
             {"incidents", {{{"gpu", 1}, {"system", 16}, {"health", 20}, {"msg", "DBE in HBM"}}}}});
  testing::Scenario nsc;
  json devices = json::array();
  std::vector<std::string> bus_ids;
  for (int i = 0; i < 8; ++i) {
    const auto g = testing::UniqueGpu();
    bus_ids.push_back(g.bus_id);
    devices.push_back(testing::HealthyDevice(g));
  }
  nsc.Write({{"devices", devices}});
  CollectContext ctx;
  ctx.nvidia.nvml = NvidiaConfig::Use::kOn;
  ctx.nvidia.nvml_library = NVML_DOUBLE;
  ctx.nvidia.dcgm = true;
  ctx.nvidia.dcgm_library = DCGM_DOUBLE;
  auto rs = RunCollectors(ctx, {"nvml", "dcgm"});
  ASSERT_EQ(rs.size(), 2u);
  ASSERT_EQ(rs[0].files.size(), 1u) << rs[0].error;
  const std::string& nvml = rs[0].files[0].data;
  EXPECT_NE(nvml.find("GPUs: 8"), std::string::npos) << nvml;
  for (const auto& b : bus_ids) EXPECT_NE(nvml.find(b), std::string::npos) << b;
  EXPECT_NE(nvml.find("remapped rows: uncorrectable 0, pending 0, failure 0"), std::string::npos);
  ASSERT_EQ(rs[1].files.size(), 1u) << rs[1].error;
  const auto health = json::parse(rs[1].files[0].data);
  EXPECT_EQ(health["gpu_ids"], json::array({0, 1}));
  ASSERT_EQ(health["incidents"].size(), 1u) << health.dump();
  EXPECT_EQ(health["incidents"][0]["gpu_id"], 1);
  EXPECT_EQ(health["incidents"][0]["message"], "DBE in HBM");
}

TEST(DcgmSource, MissingOrWrongLibraryIsAClearError) {
  DcgmScenario sc;
  sc.Write({{"gpus", {0}}});
  DcgmOptions o;
  o.library = "/nonexistent/libdcgm.so.4";
  auto s = DcgmSource::Open(o, [](DcgmViolation) {});
  ASSERT_FALSE(s);
  // Both sonames are tried only for the default; a path given is tried alone.
  EXPECT_TRUE(testing::IsLoadError(s.error().message, "/nonexistent/libdcgm.so.4"));
  EXPECT_NE(s.error().message.find("datacenter-gpu-manager"), std::string::npos);
  o.library = "libz.so.1";
  auto z = DcgmSource::Open(o, [](DcgmViolation) {});
  ASSERT_FALSE(z);
  EXPECT_TRUE(testing::IsMissingSymbol(z.error().message, "libz.so.1", "dcgmInit"));
  sc.Write({{"gpus", {0}}, {"init_error", -7}});
  o.library = DCGM_DOUBLE;
  auto i = DcgmSource::Open(o, [](DcgmViolation) {});
  ASSERT_FALSE(i);
  EXPECT_NE(i.error().message.find("dcgmInit failed"), std::string::npos);
}

class DcgmAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/dev/kmsg", R_OK) != 0) GTEST_SKIP() << "needs a readable /dev/kmsg";
    dir_ = dcgm_.dir();
    std::filesystem::create_directories(dir_ + "/state");
    std::filesystem::create_directories(dir_ + "/sysfs");
    gpu_ = testing::UniqueGpu();
    nvml_.Write({{"devices", {testing::HealthyDevice(gpu_)}}});
  }
  AgentProcess& Start(const std::string& library = DCGM_DOUBLE, bool with_nvml = true,
                      std::vector<std::string> env_prefix = {}) {
    std::ofstream(dir_ + "/config.yaml") << fmt::format(
        "kmsg_start: end\nnvidia:\n  nvml: {}\n  poll_period: 1h\n  sysfs_pci_devices: {}/sysfs\n  "
        "dcgm:\n    enabled: true\n"
        "    library: {}\n    health_period: 200ms\n",
        with_nvml ? "true" : "false", dir_, library);
    std::vector<std::string> args = env_prefix;
    for (const std::string& a :
         {std::string(GPUHEAL_BIN), std::string("agent"), std::string("--standalone"),
          std::string("--state-dir"), dir_ + "/state", std::string("--listen"),
          std::string("127.0.0.1:0"), std::string("--config"), dir_ + "/config.yaml"}) {
      args.push_back(a);
    }
    if (with_nvml) {
      args.push_back("--nvml-library");
      args.push_back(NVML_DOUBLE);
    }
    agent_ = std::make_unique<AgentProcess>(args);
    EXPECT_TRUE(
        agent_->WaitLog([](const json& j) { return j.value("msg", "") == "agent started"; }, 10s));
    return *agent_;
  }
  template <typename Pred>
  std::optional<json> Logged(Pred pred, std::chrono::milliseconds t) {
    for (const json& j : agent_->logs()) {
      if (pred(j)) return j;
    }
    return agent_->WaitLog(pred, t);
  }
  static auto Msg(const std::string& m) {
    return [m](const json& j) { return j.value("msg", "").find(m) != std::string::npos; };
  }

  DcgmScenario dcgm_;
  testing::Scenario nvml_;
  std::string dir_;
  testing::TestGpu gpu_;
  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(DcgmAgentTest, ViolationsAreFaultsOnTheNvmlNamedGpuAndMergeWithNvml) {
  dcgm_.Write({{"gpus", {0}}});
  auto& a = Start();
  ASSERT_TRUE(Logged(Msg("DCGM connected"), 5s));
  dcgm_.Write({{"gpus", {0}},
               {"violations",
                {{{"id", "p"}, {"gpu", 0}, {"condition", "MAX_PAGES_RETIRED"}, {"value", 64}}}}});
  auto pages = a.WaitEvent(
      [](const json& j) { return j.value("reason", "") == "NvidiaRetiredPagesLimit"; }, 5s);
  ASSERT_TRUE(pages);
  EXPECT_EQ((*pages)["pci"], gpu_.pci) << "DCGM's GPU 0 is NVML's index 0";
  EXPECT_EQ((*pages)["uuid"], gpu_.uuid);
  EXPECT_EQ((*pages)["source"], "dcgm");
  EXPECT_EQ((*pages)["severity"], "fatal");
  // The same Xid through NVML and DCGM: one fault.
  nvml_.Write({{"devices", {testing::HealthyDevice(gpu_)}},
               {"events", {{{"id", "x"}, {"type", "XidCriticalError"}, {"data", 95}}}}});
  auto x = a.WaitEvent(
      [&](const json& j) {
        return j.value("xid", json()) == 95 && j.value("pci", json()) == gpu_.pci;
      },
      5s);
  ASSERT_TRUE(x);
  dcgm_.Write({{"gpus", {0}},
               {"violations",
                {{{"id", "p"}, {"gpu", 0}, {"condition", "MAX_PAGES_RETIRED"}, {"value", 64}},
                 {{"id", "x"}, {"gpu", 0}, {"condition", "XID"}, {"value", 95}}}}});
  auto merged = a.WaitLog(Msg("fault also reported by another source"), 5s);
  ASSERT_TRUE(merged);
  EXPECT_EQ((*merged)["also"], "dcgm");
}

TEST_F(DcgmAgentTest, HealthIncidentsAreFaultsWhenTheyAppear) {
  dcgm_.Write({{"gpus", {0}}});
  auto& a = Start();
  ASSERT_TRUE(Logged(Msg("DCGM connected"), 5s));
  dcgm_.Write({{"gpus", {0}},
               {"incidents",
                {{{"gpu", 0}, {"system", 16}, {"health", 20}, {"msg", "Volatile DBE detected"}},
                 {{"gpu", 0}, {"system", 128}, {"health", 10}, {"msg", "Thermal violations"}}}}});
  auto fail = a.WaitEvent(
      [](const json& j) { return j.value("reason", "") == "NvidiaDCGMHealthFailure"; }, 5s);
  ASSERT_TRUE(fail);
  EXPECT_EQ((*fail)["severity"], "fatal");
  EXPECT_EQ((*fail)["message"], "DCGM health (memory): Volatile DBE detected");
  auto warn = a.WaitEvent(
      [](const json& j) { return j.value("reason", "") == "NvidiaDCGMHealthWarning"; }, 5s);
  ASSERT_TRUE(warn);
  EXPECT_EQ((*warn)["severity"], "warn");
  std::this_thread::sleep_for(800ms);  // four more checks with the same incidents
  a.WaitEvent([](const json&) { return false; }, 100ms);
  int n = 0;
  for (const json& j : a.events()) n += j.value("reason", "") == "NvidiaDCGMHealthFailure";
  EXPECT_EQ(n, 1) << "an incident is reported when it appears, not at every check";
}

TEST_F(DcgmAgentTest, ALostHostEngineIsAWarningNeverAFault) {
  dcgm_.Write({{"gpus", {0}}});
  auto& a = Start();
  ASSERT_TRUE(Logged(Msg("DCGM connected"), 5s));
  dcgm_.Write({{"gpus", {0}}, {"health_error", -21}, {"connect_error", -21}});
  auto lost = a.WaitLog(Msg("DCGM host engine not reachable"), 5s);
  ASSERT_TRUE(lost);
  EXPECT_EQ((*lost)["level"], "warn");
  std::this_thread::sleep_for(800ms);
  a.WaitLog([](const json&) { return false; }, 100ms);
  int said = 0;
  for (const json& j : a.logs())
    said += j.value("msg", "").find("not reachable") != std::string::npos;
  EXPECT_EQ(said, 1) << "said once while it lasts";
  for (const json& e : a.events()) ADD_FAILURE() << "no fault for a lost host engine: " << e.dump();
  const std::string listen = (*Logged(Msg("agent started"), 1s))["listen"];
  EXPECT_NE(testing::HttpGet(listen, "/metrics").find("gpuheal_dcgm_up 0"), std::string::npos);
  dcgm_.Write({{"gpus", {0}}});  // the host engine is back
  auto back = a.WaitLog(Msg("DCGM connected"), 5s);
  ASSERT_TRUE(back);
  EXPECT_EQ((*back)["reconnected"], true);
  EXPECT_NE(testing::HttpGet(listen, "/metrics").find("gpuheal_dcgm_up 1"), std::string::npos);
}

TEST_F(DcgmAgentTest, FallsBackToLibdcgm3AndNamesGpusWithoutNvml) {
  std::filesystem::create_symlink(DCGM_DOUBLE, dir_ + "/libdcgm.so.3");
  dcgm_.Write({{"gpus", {2}}});
  auto& a = Start("libdcgm.so.4", /*with_nvml=*/false, {"/usr/bin/env", "LD_LIBRARY_PATH=" + dir_});
  auto c = Logged(Msg("DCGM connected"), 5s);
  ASSERT_TRUE(c);
  EXPECT_EQ((*c)["library"], "libdcgm.so.3");
  dcgm_.Write({{"gpus", {2}},
               {"violations", {{{"id", "d"}, {"gpu", 2}, {"condition", "DBE"}, {"value", 1}}}}});
  auto e = a.WaitEvent(
      [](const json& j) { return j.value("reason", "") == "NvidiaDoubleBitError"; }, 5s);
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["device"], "dcgm-gpu2");
  EXPECT_TRUE((*e)["pci"].is_null());
}

TEST_F(DcgmAgentTest, WithoutTheLibraryTheAgentKeepsRunning) {
  auto& a = Start("/nonexistent/libdcgm.so.4");
  auto lost = Logged(Msg("DCGM host engine not reachable"), 5s);
  ASSERT_TRUE(lost);
  EXPECT_TRUE(
      testing::IsLoadError((*lost)["error"].get<std::string>(), "/nonexistent/libdcgm.so.4"));
  nvml_.Write({{"devices", {testing::HealthyDevice(gpu_)}},
               {"events", {{{"id", "x"}, {"type", "DoubleBitEccError"}}}}});
  EXPECT_TRUE(a.WaitEvent(
      [](const json& j) { return j.value("reason", "") == "NvidiaDoubleBitError"; }, 5s))
      << "NVML and the kernel log go on";
}

}  // namespace
}  // namespace gpuheal
