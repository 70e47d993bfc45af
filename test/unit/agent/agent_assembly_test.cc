// The agent assembled from injected ports: a kernel log fed by the test, the fake Kubernetes API,
// a temporary state directory; no /dev/kmsg, no API server, no NVML. A driver record goes in, the
// NodeCondition comes out; a forged one does not.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "agent/standalone_agent.h"
#include "fakes/fake_api.h"
#include "fakes/fake_kernel_log.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class AgentAssemblyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuheal-assembly-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
    auto owned_api = std::make_unique<testing::FakeApi>();
    api = owned_api.get();
    api->Put(kube::NodePath("n1"), {{"status", {{"conditions", json::array()}}}});
    auto owned_log = std::make_unique<testing::FakeKernelLog>();
    log = owned_log.get();
    AgentConfig cfg;
    cfg.state_dir = dir;
    cfg.listen = "";
    cfg.own_signals = false;
    cfg.nvidia.nvml = NvidiaConfig::Use::kOff;
    AgentPorts ports;
    ports.api = std::move(owned_api);
    ports.reporter.node_name = "n1";
    ports.kernel_log = std::move(owned_log);
    out = open("/dev/null", O_WRONLY | O_CLOEXEC);
    auto a = StandaloneAgent::Create(std::move(cfg), out, std::move(ports));
    ASSERT_TRUE(a) << a.error().message;
    agent = std::move(*a);
    loop = std::thread([this] { agent->Run(); });
  }
  void TearDown() override {
    if (agent) agent->Stop();
    if (loop.joinable()) loop.join();
    agent.reset();
    close(out);
    std::filesystem::remove_all(dir);
  }

  // The node's AcceleratedHardwareReady once it is False, waiting at most `limit`.
  json WaitForFalse(std::chrono::milliseconds limit = 10s) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      const json node = *api->Object(kube::NodePath("n1"));
      const json conditions = node.at("status").value("conditions", json::array());
      for (const auto& c : conditions)
        if (c.value("type", "") == "AcceleratedHardwareReady" && c.value("status", "") == "False")
          return c;
      std::this_thread::sleep_for(2ms);
    }
    return json();
  }

  std::string dir;
  int out = -1;
  testing::FakeApi* api = nullptr;
  testing::FakeKernelLog* log = nullptr;
  std::unique_ptr<StandaloneAgent> agent;
  std::thread loop;
};

TEST_F(AgentAssemblyTest, ADriverRecordBecomesANodeCondition) {
  log->Push(
      "3,4100,55633652,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen "
      "off the bus.");
  const json c = WaitForFalse();
  ASSERT_FALSE(c.is_null()) << "no condition written";
  EXPECT_EQ(c.value("reason", ""), "NvidiaXID79Error");
  EXPECT_NE(c.value("message", "").find("0000:3b:00"), std::string::npos) << c.dump();
}

TEST_F(AgentAssemblyTest, AForgedRecordFromUserSpaceIsNotTrusted) {
  // Facility 1 (user): what `echo ... > /dev/kmsg` writes. Then a real one on another GPU.
  log->Push(
      "11,4100,55633652,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen "
      "off the bus.");
  log->Push(
      "3,4101,55633700,-;NVRM: Xid (PCI:0000:5e:00): 79, pid=1234, name=python3, GPU has fallen "
      "off the bus.");
  const json c = WaitForFalse();
  ASSERT_FALSE(c.is_null());
  EXPECT_NE(c.value("message", "").find("0000:5e:00"), std::string::npos) << c.dump();
  EXPECT_EQ(c.value("message", "").find("0000:3b:00"), std::string::npos)
      << "the forged record was acted on: " << c.dump();
}

}  // namespace
}  // namespace gpuheal
