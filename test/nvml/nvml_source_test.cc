// The NVML backend (sources/nvml_source) in-process against the NVML test double: the library is
// dlopen()ed exactly as libnvidia-ml.so.1 would be, through the same ABI declarations.

#include "sources/nvml_source.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "library_error.h"
#include "nvml_scenario.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using testing::HealthyDevice;
using testing::Scenario;
using testing::UniqueGpu;

TEST(NvmlSource, EnumeratesDevicesThroughTheRealAbi) {
  Scenario sc;
  auto a = UniqueGpu(), b = UniqueGpu();
  auto db = HealthyDevice(b);
  db["supported_events"] = {"XidCriticalError", "PState"};
  sc.Write({{"driver_version", "570.86.15"}, {"devices", {HealthyDevice(a), db}}});
  auto src = NvmlSource::Open(NVML_DOUBLE);
  ASSERT_TRUE(src) << src.error().message;
  EXPECT_EQ((*src)->library().driver_version(), "570.86.15");
  ASSERT_EQ((*src)->gpus().size(), 2u);
  const NvmlGpu& g = (*src)->gpus()[0];
  EXPECT_EQ(g.pci, a.pci);
  EXPECT_EQ(g.bus_id, a.bus_id);
  EXPECT_EQ(g.uuid, a.uuid);
  EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g.supported_events & nvml::kWantedEvents, nvml::kWantedEvents);
  EXPECT_EQ((*src)->gpus()[1].supported_events, 0x8u | 0x4u);
  EXPECT_EQ((*src)->Find(b.pci), &(*src)->gpus()[1]);
}

TEST(NvmlSource, MissingLibraryNotNvmlAndDriverNotLoadedAreClearErrors) {
  Scenario sc;
  sc.Write({{"devices", nlohmann::json::array()}});
  auto missing = NvmlSource::Open("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(missing);
  EXPECT_TRUE(testing::IsLoadError(missing.error().message, "/nonexistent/libnvidia-ml.so.1"));
  EXPECT_NE(missing.error().message.find("--nvml-library"), std::string::npos)
      << missing.error().message;

  auto not_nvml = NvmlSource::Open("libz.so.1");
  ASSERT_FALSE(not_nvml);
  EXPECT_TRUE(testing::IsMissingSymbol(not_nvml.error().message, "libz.so.1", "nvmlInit_v2"));

  sc.Write({{"init_error", "DRIVER_NOT_LOADED"}, {"devices", nlohmann::json::array()}});
  auto no_driver = NvmlSource::Open(NVML_DOUBLE);
  ASSERT_FALSE(no_driver);
  EXPECT_NE(no_driver.error().message.find("NVML_ERROR_DRIVER_NOT_LOADED"), std::string::npos);
  EXPECT_NE(no_driver.error().message.find("kernel module is not loaded"), std::string::npos);
}

TEST(NvmlSource, PollReadsEveryHealthField) {
  Scenario sc;
  auto a = UniqueGpu();
  auto d = HealthyDevice(a);
  d["ecc"] = {{"volatile_uncorrected", 2}, {"volatile_corrected", 7}};
  d["remapped_rows"] = {{"corrected", 1}, {"uncorrected", 3}, {"pending", 1}, {"failure", 0}};
  d["retired_pages_pending"] = true;
  d["nvlink"] = {{"links", 4}, {"down", {2}}, {"errors", 55}};
  d["clock_event_reasons"] = 0x48;
  d["pcie"] = {{"gen", 3}, {"max_gen", 5}, {"width", 8}, {"max_width", 16}};
  d["temperature"] = 91;
  d["temperature_slowdown"] = 87;
  d["recovery_action"] = 4;
  d["persistence_mode"] = true;
  sc.Write({{"devices", {d}}});
  auto src = NvmlSource::Open(NVML_DOUBLE);
  ASSERT_TRUE(src) << src.error().message;
  NvmlPoll p = (*src)->Poll();
  ASSERT_EQ(p.gpus.size(), 1u);
  EXPECT_EQ(p.device_count, 1u);
  const GpuSnapshot& s = p.gpus[0];
  EXPECT_FALSE(s.lost);
  EXPECT_EQ(s.ecc_volatile_uncorrected, 2u);
  EXPECT_EQ(s.ecc_volatile_corrected, 7u);
  EXPECT_EQ(s.remap_uncorrectable, 3u);
  EXPECT_EQ(s.remap_pending, 1u);
  EXPECT_EQ(s.remap_failure, 0u);
  EXPECT_EQ(s.retired_pages_pending, true);
  EXPECT_EQ(s.nvlinks_up, (std::vector<unsigned>{0, 1, 3}));
  EXPECT_EQ(s.nvlinks_down, (std::vector<unsigned>{2}));
  EXPECT_EQ(s.nvlink_errors, 55u);
  EXPECT_EQ(s.clock_event_reasons, 0x48u);
  EXPECT_EQ(s.pcie_gen, 3u);
  EXPECT_EQ(s.pcie_gen_max, 5u);
  EXPECT_EQ(s.pcie_width, 8u);
  EXPECT_EQ(s.pcie_width_max, 16u);
  EXPECT_EQ(s.temperature, 91u);
  EXPECT_EQ(s.temperature_slowdown, 87u);
  EXPECT_EQ(s.recovery_action, 4u);
  EXPECT_EQ(s.persistence_mode, true);
  EXPECT_EQ(s.drained, false);
  EXPECT_TRUE(p.notices.empty());
}

TEST(NvmlSource, UnsupportedChecksAreSaidOnceThenSkipped) {
  Scenario sc;
  auto a = UniqueGpu();
  auto d = HealthyDevice(a);
  d["errors"] = {{"nvmlDeviceGetRemappedRows", "NOT_SUPPORTED"},
                 {"nvmlDeviceGetPersistenceMode", "NO_PERMISSION"}};
  d["nvlink"] = {{"links", 0}};
  sc.Write({{"devices", {d}}});
  auto src = NvmlSource::Open(NVML_DOUBLE);
  ASSERT_TRUE(src);
  NvmlPoll first = (*src)->Poll();
  ASSERT_EQ(first.notices.size(), 3u);
  EXPECT_NE(first.notices[0].find("nvmlDeviceGetRemappedRows answered NVML_ERROR_NOT_SUPPORTED"),
            std::string::npos)
      << first.notices[0];
  EXPECT_FALSE(first.gpus[0].remap_pending.has_value());
  EXPECT_FALSE(first.gpus[0].persistence_mode.has_value());
  EXPECT_TRUE(first.gpus[0].ecc_volatile_uncorrected.has_value()) << "the other checks go on";
  NvmlPoll second = (*src)->Poll();
  EXPECT_TRUE(second.notices.empty());
}

TEST(NvmlSource, LostGpuIsMarkedLost) {
  Scenario sc;
  auto a = UniqueGpu();
  sc.Write({{"devices", {HealthyDevice(a)}}});
  auto src = NvmlSource::Open(NVML_DOUBLE);
  ASSERT_TRUE(src);
  EXPECT_FALSE((*src)->Poll().gpus[0].lost);
  auto d = HealthyDevice(a);
  d["lost"] = true;
  sc.Write({{"devices", {d}}});
  EXPECT_TRUE((*src)->Poll().gpus[0].lost);
}

TEST(NvmlSource, EventsArriveWithDeviceAndMigInstance) {
  Scenario sc;
  auto a = UniqueGpu(), b = UniqueGpu();
  auto db = HealthyDevice(b);
  db["supported_events"] = {"DoubleBitEccError"};
  sc.Write({{"devices", {HealthyDevice(a), db}}});
  auto src = NvmlSource::Open(NVML_DOUBLE);
  ASSERT_TRUE(src);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<NvmlEvent> got;
  auto notices = (*src)->StartEvents(
      [&](NvmlEvent e) {
        std::lock_guard<std::mutex> lock(mu);
        got.push_back(std::move(e));
        cv.notify_all();
      },
      200ms);
  EXPECT_TRUE(notices.empty());
  EXPECT_EQ((*src)->gpus()[1].registered_events, 0x2u) << "only what the GPU supports";
  sc.Write(
      {{"devices", {HealthyDevice(a), db}},
       {"events",
        {{{"id", "x1"},
          {"device", 0},
          {"type", "XidCriticalError"},
          {"data", 94},
          {"gpu_instance", 3},
          {"compute_instance", 1}},
         {{"id", "x2"}, {"device", 1}, {"type", "XidCriticalError"}, {"data", 13}},  // not
                                                                                     // registered
         {{"id", "x3"}, {"device", 1}, {"type", "DoubleBitEccError"}}}}});
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return got.size() >= 2; }));
  EXPECT_EQ(got[0].pci, a.pci);
  EXPECT_EQ(got[0].uuid, a.uuid);
  EXPECT_EQ(got[0].type, nvml::kEventXidCriticalError);
  EXPECT_EQ(got[0].data, 94u);
  EXPECT_EQ(got[0].gpu_instance, 3);
  EXPECT_EQ(got[0].compute_instance, 1);
  EXPECT_EQ(got[1].pci, b.pci);
  EXPECT_EQ(got[1].type, nvml::kEventDoubleBitEccError);
  EXPECT_FALSE(got[1].gpu_instance.has_value());
  EXPECT_GT(got[1].received_usec, 0);
  lock.unlock();
  (*src)->StopEvents();
  EXPECT_EQ(got.size(), 2u) << "an event type the GPU was not registered for is never delivered";
}

TEST(NvmlSource, DrainStateAndProcesses) {
  Scenario sc;
  auto a = UniqueGpu(), b = UniqueGpu();
  auto da = HealthyDevice(a);
  da["processes"] = {101, 202};
  auto dbb = HealthyDevice(b);
  dbb["persistence_mode"] = true;
  sc.Write({{"devices", {da, dbb}}});
  auto src = NvmlSource::Open(NVML_DOUBLE);
  ASSERT_TRUE(src);
  EXPECT_EQ((*src)->QueryDrain(a.pci).value(), false);
  ASSERT_TRUE((*src)->SetDrain(a.pci, true));
  EXPECT_EQ((*src)->QueryDrain(a.pci).value(), true);
  EXPECT_EQ((*src)->ComputeProcesses(a.pci).value(), (std::vector<unsigned>{101, 202}));
  ASSERT_TRUE((*src)->SetDrain(a.pci, false));
  EXPECT_EQ((*src)->QueryDrain(a.pci).value(), false);
  Status refused = (*src)->SetDrain(b.pci, true);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("NVML_ERROR_IN_USE"), std::string::npos)
      << refused.error().message;
  EXPECT_FALSE((*src)->SetDrain("ffff:ff:00", true));
}

TEST(NvmlSource, CountsNvidiaGpusOnThePciBus) {
  char tmpl[] = "/tmp/gpuheal-sysfs-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  auto dev = [&](const std::string& name, const std::string& vendor, const std::string& cls) {
    std::filesystem::create_directories(dir + "/" + name);
    std::ofstream(dir + "/" + name + "/vendor") << vendor << "\n";
    std::ofstream(dir + "/" + name + "/class") << cls << "\n";
  };
  dev("0000:3b:00.0", "0x10de", "0x030200");  // H100
  dev("0000:5e:00.0", "0x10de", "0x030000");  // display-class GPU
  dev("0000:07:00.0", "0x10de", "0x068000");  // NVSwitch: a bridge, not a GPU
  dev("0000:00:1f.0", "0x8086", "0x030000");  // another vendor's GPU
  EXPECT_EQ(CountPciGpus(dir), 2u);
  EXPECT_EQ(CountPciGpus(dir + "/missing"), 0u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpuheal
