#include "agent/gpu_health.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace gpuheal {
namespace {

class GpuHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = Classifier::Create({});
    ASSERT_TRUE(c);
    classifier_ = std::move(*c);
    healthy_.pci = "0000:3b:00";
    healthy_.uuid = "GPU-1";
    healthy_.ecc_volatile_uncorrected = 0;
    healthy_.ecc_volatile_corrected = 0;
    healthy_.remap_uncorrectable = 0;
    healthy_.remap_pending = 0;
    healthy_.remap_failure = 0;
    healthy_.retired_pages_pending = false;
    healthy_.nvlinks_up = {0, 1, 2, 3};
    healthy_.nvlink_errors = 0;
    healthy_.clock_event_reasons = 0x1;  // idle: not a slowdown
    healthy_.pcie_gen = healthy_.pcie_gen_max = 5;
    healthy_.pcie_width = healthy_.pcie_width_max = 16;
    healthy_.temperature = 40;
    healthy_.temperature_slowdown = 87;
    healthy_.recovery_action = 0;
    healthy_.persistence_mode = true;
  }
  std::vector<std::string> Reasons(const GpuSnapshot* prev, const GpuSnapshot& cur) {
    std::vector<std::string> r;
    for (const Fault& f : EvaluateGpu(prev, cur, limits_, *classifier_)) r.push_back(f.reason);
    return r;
  }
  std::unique_ptr<Classifier> classifier_;
  GpuHealthLimits limits_;
  GpuSnapshot healthy_;
};

TEST_F(GpuHealthTest, HealthyGpuHasNoFaultsFirstPollOrLater) {
  EXPECT_TRUE(Reasons(nullptr, healthy_).empty());
  EXPECT_TRUE(Reasons(&healthy_, healthy_).empty());
}

TEST_F(GpuHealthTest, EachStateIsAFaultWhenItAppearsNotWhileItLasts) {
  struct Case {
    const char* reason;
    Severity severity;
    std::function<void(GpuSnapshot&)> make;
  };
  const std::vector<Case> cases = {
      {"NvidiaDoubleBitError", Severity::kFatal,
       [](GpuSnapshot& s) { s.ecc_volatile_uncorrected = 1; }},
      {"NvidiaRowRemapFailure", Severity::kFatal, [](GpuSnapshot& s) { s.remap_failure = 1; }},
      {"NvidiaRowRemapPending", Severity::kCritical, [](GpuSnapshot& s) { s.remap_pending = 1; }},
      {"NvidiaRetiredPagesPending", Severity::kCritical,
       [](GpuSnapshot& s) { s.retired_pages_pending = true; }},
      {"NvidiaNVLinkError", Severity::kFatal,
       [](GpuSnapshot& s) {
         s.nvlinks_up = {0, 1, 3};
         s.nvlinks_down = {2};
       }},
      {"NvidiaClockSlowdown", Severity::kWarn,
       [](GpuSnapshot& s) { s.clock_event_reasons = 0x80; }},
      {"NvidiaPCIeLinkDegraded", Severity::kWarn, [](GpuSnapshot& s) { s.pcie_width = 8; }},
      {"NvidiaTemperatureHigh", Severity::kWarn, [](GpuSnapshot& s) { s.temperature = 87; }},
      {"NvidiaXID154Warning", Severity::kCritical, [](GpuSnapshot& s) { s.recovery_action = 1; }},
      {"NvidiaXID154Error", Severity::kFatal, [](GpuSnapshot& s) { s.recovery_action = 2; }},
      {"NvidiaPersistenceModeDisabled", Severity::kInfo,
       [](GpuSnapshot& s) { s.persistence_mode = false; }},
      {"NvidiaGPULost", Severity::kCatastrophic, [](GpuSnapshot& s) { s.lost = true; }},
  };
  for (const Case& c : cases) {
    GpuSnapshot bad = healthy_;
    c.make(bad);
    auto faults = EvaluateGpu(&healthy_, bad, limits_, *classifier_);
    ASSERT_EQ(faults.size(), 1u) << c.reason;
    EXPECT_EQ(faults[0].reason, c.reason);
    EXPECT_EQ(faults[0].severity, c.severity) << c.reason;
    EXPECT_EQ(faults[0].pci, "0000:3b:00");
    EXPECT_EQ(faults[0].uuid, "GPU-1");
    EXPECT_EQ(faults[0].source, "nvml");
    EXPECT_EQ(faults[0].condition, "AcceleratedHardwareReady");
    EXPECT_TRUE(EvaluateGpu(&bad, bad, limits_, *classifier_).empty())
        << c.reason << " repeated while it lasts";
  }
}

TEST_F(GpuHealthTest, FirstPollReportsWhatIsAlreadyWrong) {
  GpuSnapshot bad = healthy_;
  bad.ecc_volatile_uncorrected = 3;  // volatile: counted since this boot or reset
  bad.remap_pending = 1;
  bad.nvlinks_up = {0, 1, 2};
  bad.nvlinks_down = {3};
  auto r = Reasons(nullptr, bad);
  EXPECT_EQ(r, (std::vector<std::string>{"NvidiaDoubleBitError", "NvidiaRowRemapPending",
                                         "NvidiaNVLinkError"}));
  // A GPU with no NVLink in use (all links down from the start) is not a fault.
  GpuSnapshot pcie = healthy_;
  pcie.nvlinks_up.clear();
  pcie.nvlinks_down = {0, 1, 2, 3};
  EXPECT_TRUE(Reasons(nullptr, pcie).empty());
}

TEST_F(GpuHealthTest, CountersAreFaultsWhenTheyRiseByTheThreshold) {
  GpuSnapshot next = healthy_;
  next.ecc_volatile_corrected = 99;
  next.nvlink_errors = 99;
  EXPECT_TRUE(Reasons(&healthy_, next).empty()) << "below the per-poll thresholds";
  GpuSnapshot more = next;
  more.ecc_volatile_corrected = 199;
  more.nvlink_errors = 199;
  EXPECT_EQ(Reasons(&next, more),
            (std::vector<std::string>{"NvidiaSingleBitErrorStorm", "NvidiaNVLinkErrorRate"}));
  GpuSnapshot dbe = healthy_;
  dbe.ecc_volatile_uncorrected = 1;
  GpuSnapshot dbe2 = dbe;
  dbe2.ecc_volatile_uncorrected = 2;
  EXPECT_EQ(Reasons(&dbe, dbe2), (std::vector<std::string>{"NvidiaDoubleBitError"}))
      << "another uncorrected error";
}

TEST_F(GpuHealthTest, PcieGenerationAloneIsInfoAndTemperatureLimitIsConfigurable) {
  GpuSnapshot slow = healthy_;
  slow.pcie_gen = 1;
  auto f = EvaluateGpu(&healthy_, slow, limits_, *classifier_);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kInfo) << "lower generation is power saving at idle";
  limits_.temperature_limit = 70;
  GpuSnapshot warm = healthy_;
  warm.temperature = 75;
  EXPECT_EQ(Reasons(&healthy_, warm), (std::vector<std::string>{"NvidiaTemperatureHigh"}));
}

TEST_F(GpuHealthTest, LostGpuReportsOnlyThat) {
  GpuSnapshot lost;
  lost.pci = "0000:3b:00";
  lost.lost = true;
  auto f = EvaluateGpu(&healthy_, lost, limits_, *classifier_);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].xid, 79) << "treated as Xid 79: keyed with the kernel's report of it";
  EXPECT_EQ(f[0].kind, FaultKind::kXid);
  EXPECT_TRUE(EvaluateGpu(&lost, lost, limits_, *classifier_).empty());
}

TEST_F(GpuHealthTest, EventsMapToFaults) {
  NvmlEvent e;
  e.pci = "0000:3b:00";
  e.uuid = "GPU-1";
  e.type = nvml::kEventXidCriticalError;
  e.data = 79;
  auto f = FaultFromEvent(e, *classifier_);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->reason, "NvidiaXID79Error");
  EXPECT_EQ(f->severity, Severity::kCatastrophic);
  e.data = 13;
  e.gpu_instance = 2;
  e.compute_instance = 0;
  f = FaultFromEvent(e, *classifier_);
  EXPECT_EQ(f->reason, "NvidiaXID13Warning");
  EXPECT_EQ(f->gpu_instance, 2);
  EXPECT_EQ(f->compute_instance, 0);
  e.type = nvml::kEventDoubleBitEccError;
  EXPECT_EQ(FaultFromEvent(e, *classifier_)->reason, "NvidiaDoubleBitError");
  e.type = nvml::kEventGpuUnavailableError;
  EXPECT_EQ(FaultFromEvent(e, *classifier_)->reason, "NvidiaGPULost");
  e.type = nvml::kEventGpuRecoveryAction;
  e.data = 4;
  f = FaultFromEvent(e, *classifier_);
  EXPECT_EQ(f->xid, 154);
  EXPECT_EQ(f->recovery_action, 4);
  EXPECT_EQ(f->severity, Severity::kCritical);
  EXPECT_EQ(f->action, Action::kResetGpu);
  e.type = nvml::kEventSingleBitEccErrorStorm;
  EXPECT_EQ(FaultFromEvent(e, *classifier_)->reason, "NvidiaSingleBitErrorStorm");
  e.type = nvml::kEventSingleBitEccError;
  EXPECT_FALSE(FaultFromEvent(e, *classifier_)) << "one corrected error is not a fault";
}

TEST_F(GpuHealthTest, ConfigOverridesApplyToDriverApiXids) {
  ClassifierOptions o;
  o.xid_overrides[13] = XidOverride{Severity::kFatal, std::nullopt};
  auto c = Classifier::Create(std::move(o));
  ASSERT_TRUE(c);
  NvmlEvent e;
  e.type = nvml::kEventXidCriticalError;
  e.data = 13;
  EXPECT_EQ(FaultFromEvent(e, **c)->reason, "NvidiaXID13Error");
}

TEST(DeviceCount, MismatchAgainstPciBusOrConfig) {
  EXPECT_FALSE(DeviceCountFault(8, 8, std::nullopt));
  EXPECT_FALSE(DeviceCountFault(8, 8, 8));
  EXPECT_FALSE(DeviceCountFault(0, 0, std::nullopt)) << "a node without GPUs";
  auto f = DeviceCountFault(7, 8, 8);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->reason, "NvidiaDeviceCountMismatch");
  EXPECT_EQ(f->severity, Severity::kFatal);
  EXPECT_EQ(f->message, "NVML sees 7 GPUs, the PCI bus holds 8, 8 expected");
  EXPECT_TRUE(DeviceCountFault(7, 7, 8)) << "a GPU gone from the bus altogether";
  EXPECT_TRUE(DeviceCountFault(7, 8, std::nullopt));
}

}  // namespace
}  // namespace gpuheal

namespace gpuheal {
namespace {

TEST(DcgmFaults, ViolationsMapToReasonsOnTheNvmlGpu) {
  auto c = Classifier::Create({});
  ASSERT_TRUE(c);
  auto fault = [&](int cond, unsigned long long value, const std::string& pci = "0000:3b:00") {
    DcgmViolation v;
    v.gpu_id = 3;
    v.condition = cond;
    v.value = value;
    return FaultFromDcgm(v, pci, pci.empty() ? "" : "GPU-1", **c);
  };
  Fault x = fault(dcgm::kCondXid, 79);
  EXPECT_EQ(x.reason, "NvidiaXID79Error");
  EXPECT_EQ(x.kind, FaultKind::kXid);
  EXPECT_EQ(x.source, "dcgm");
  EXPECT_EQ(x.pci, "0000:3b:00");
  EXPECT_EQ(fault(dcgm::kCondDbe, 1).reason, "NvidiaDoubleBitError");
  EXPECT_EQ(fault(dcgm::kCondDbe, 1).xid, 48);
  EXPECT_EQ(fault(dcgm::kCondMaxPagesRetired, 61).reason, "NvidiaRetiredPagesLimit");
  EXPECT_EQ(fault(dcgm::kCondMaxPagesRetired, 61).severity, Severity::kFatal);
  EXPECT_EQ(fault(dcgm::kCondThermal, 95).reason, "NvidiaTemperatureHigh");
  EXPECT_EQ(fault(dcgm::kCondPower, 900).reason, "NvidiaPowerHigh");
  EXPECT_EQ(fault(dcgm::kCondPci, 12).reason, "NvidiaPCIeLinkDegraded");
  EXPECT_EQ(fault(dcgm::kCondNvlink, 5).reason, "NvidiaNVLinkErrorRate");
  Fault orphan = fault(dcgm::kCondXid, 13, "");
  EXPECT_EQ(orphan.device, "dcgm-gpu3") << "without NVML the DCGM id names the GPU";
}

TEST(DcgmFaults, IncidentsAreKeyedByGpuAndSystem) {
  DcgmIncident i;
  i.gpu_id = 0;
  i.system = 0x10;
  i.health = dcgm::kHealthFail;
  i.message = "DBE";
  Fault f = FaultFromIncident(i, "0000:3b:00", "GPU-1");
  EXPECT_EQ(f.reason, "NvidiaDCGMHealthFailure");
  EXPECT_EQ(f.severity, Severity::kFatal);
  EXPECT_EQ(f.device, "memory");
  EXPECT_EQ(f.message, "DCGM health (memory): DBE");
  i.health = dcgm::kHealthWarn;
  i.system = 0x2;
  Fault w = FaultFromIncident(i, "", "");
  EXPECT_EQ(w.reason, "NvidiaDCGMHealthWarning");
  EXPECT_EQ(w.severity, Severity::kWarn);
  EXPECT_EQ(w.device, "dcgm-gpu0/NVLink");
}

}  // namespace
}  // namespace gpuheal
