#include "agent/config.h"

#include <gtest/gtest.h>

namespace gpuheal {
namespace {

TEST(Config, EmptyMeansDefaults) {
  auto c = ParseAgentConfig("", "a.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->kmsg_path, "/dev/kmsg");
  EXPECT_EQ(c->escalation.count, 5);
  EXPECT_EQ(c->escalation.window, std::chrono::hours(24));
  EXPECT_EQ(c->escalation.severity, Severity::kFatal);
}

TEST(Config, FullConfig) {
  auto c = ParseAgentConfig(R"(
kmsg: /tmp/k
state_dir: /tmp/s
accept_injected: true
listen: "127.0.0.1:0"
self_check_period: 30s
xids:
  13: {severity: fatal}
  "79": {action: quarantine, severity: catastrophic}
escalation:
  count: 3
  window: 10m
  severity: critical
npd_rules: [a.json, b.json]
monitors:
  network: false
recovery:
  quiet_period: 30m
kubernetes:
  heartbeat_period: 1m
)",
                            "a.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->kmsg_path, "/tmp/k");
  EXPECT_TRUE(c->accept_injected);
  EXPECT_EQ(c->self_check_period, std::chrono::seconds(30));
  EXPECT_EQ(c->xid_overrides.at(13).severity, Severity::kFatal);
  EXPECT_FALSE(c->xid_overrides.at(13).action.has_value());
  EXPECT_EQ(c->xid_overrides.at(79).action, Action::kQuarantine);
  EXPECT_EQ(c->escalation.count, 3);
  EXPECT_EQ(c->escalation.window, std::chrono::minutes(10));
  EXPECT_EQ(c->escalation.severity, Severity::kCritical);
  EXPECT_EQ(c->npd_rule_files.size(), 2u);
  EXPECT_FALSE(c->monitors.network);
  EXPECT_TRUE(c->monitors.nvidia);
  EXPECT_EQ(c->quiet_period, std::chrono::minutes(30));
  EXPECT_EQ(c->heartbeat_period, std::chrono::minutes(1));
}

struct BadCase {
  const char* yaml;
  const char* expect;  // substring of the error, which always starts with file:line:col
};

class ConfigErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ConfigErrors, NameFileLineAndFix) {
  auto c = ParseAgentConfig(GetParam().yaml, "agent.yaml");
  ASSERT_FALSE(c.ok()) << GetParam().yaml;
  EXPECT_NE(c.error().message.find(GetParam().expect), std::string::npos) << c.error().message;
  EXPECT_EQ(c.error().message.rfind("agent.yaml", 0), 0u) << c.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConfigErrors,
    ::testing::Values(
        BadCase{"kmsg: /dev/kmsg\nescalaton: {}\n", "agent.yaml:2:1: unknown key \"escalaton\""},
        BadCase{"xids:\n  13: {severity: deadly}\n",
                "agent.yaml:2:18: \"xids.13.severity\" must be one of"},
        BadCase{"xids:\n  13: {action: reboot}\n", "must be one of log, event, reset-gpu"},
        BadCase{"xids:\n  abc: {severity: warn}\n",
                "agent.yaml:2:3: \"xids key\" must be an integer"},
        BadCase{"xids:\n  13: {}\n", "sets neither severity nor action"},
        BadCase{"xids:\n  13: {severity: warn, colour: red}\n",
                "unknown key \"colour\" in xids.13"},
        BadCase{"escalation:\n  count: 1\n", "\"escalation.count\" must be an integer from 2"},
        BadCase{"escalation:\n  window: forever\n", "positive duration"},
        BadCase{"accept_injected: maybe\n", "must be true or false"},
        BadCase{"monitors:\n  gpu: true\n", "unknown key \"gpu\" in monitors"},
        BadCase{"npd_rules: a.json\n", "must be a list"},
        BadCase{"- a\n- b\n", "must be a mapping"}, BadCase{"kmsg: [unclosed\n", "not valid YAML"},
        BadCase{"self_check_period: 0s\n", "positive duration"},
        BadCase{"recovery:\n  quiet: 5m\n", "unknown key \"quiet\" in recovery"},
        BadCase{"recovery:\n  quiet_period: 500ms\n",
                "agent.yaml:2:17: \"recovery.quiet_period\" must be at least 1s"},
        BadCase{"kubernetes: 5m\n", "\"kubernetes\" must be a mapping"},
        BadCase{"nvidia:\n  nvml: maybe\n",
                "agent.yaml:2:9: \"nvidia.nvml\" must be auto, true or false"},
        BadCase{"nvidia:\n  poll: 5s\n", "unknown key \"poll\" in nvidia"},
        BadCase{"nvidia:\n  poll_period: 10ms\n", "\"nvidia.poll_period\" must be at least 100ms"},
        BadCase{"nvidia:\n  expected_gpus: -1\n",
                "\"nvidia.expected_gpus\" must be an integer from 0"},
        BadCase{"nvidia:\n  reset:\n    command: nvidia-smi --gpu-reset\n",
                "must be a non-empty list (argv, run without a shell"},
        BadCase{"nvidia:\n  reset:\n    command: []\n", "must be a non-empty list"},
        BadCase{"nvidia:\n  reset:\n    on_crit: true\n",
                "unknown key \"on_crit\" in nvidia.reset"},
        BadCase{"nvidia:\n  dcgm:\n    enabled: yes please\n",
                "\"nvidia.dcgm.enabled\" must be true or false"},
        // yaml-cpp keeps the first of two equal keys and drops the second without a word.
        BadCase{"kmsg: /a\nkmsg: /b\n",
                "agent.yaml:2:1: key \"kmsg\" appears twice in the same mapping"},
        BadCase{"nvidia:\n  reset:\n    on_critical: true\n    on_critical: false\n",
                "agent.yaml:4:5: key \"on_critical\" appears twice"},
        BadCase{"xids: {13: {severity: warn, severity: fatal}}\n",
                "agent.yaml:1:29: key \"severity\" appears twice"},
        BadCase{"xids:\n  13: {severity: warn}\n  \"013\": {severity: fatal}\n",
                "agent.yaml:3:3: Xid 13 appears twice in \"xids\" (as 013)"},
        // A listen address used to fail only when the server started, without file or line.
        BadCase{"kmsg: /dev/kmsg\nlisten: localhost\n",
                "agent.yaml:2:9: \"listen\": listen address \"localhost\" must be host:port"},
        BadCase{
            "listen: \"127.0.0.1:99999\"\n",
            "agent.yaml:1:9: \"listen\": listen address \"127.0.0.1:99999\": port must be 0-65535"},
        BadCase{"listen: \":9464\"\n",
                "agent.yaml:1:9: \"listen\": listen address \":9464\" must be host:port"}),
    [](const ::testing::TestParamInfo<BadCase>& param_info) {
      return "Case" + std::to_string(param_info.index);
    });

TEST(Config, NvidiaSection) {
  auto c = ParseAgentConfig(R"(
nvidia:
  nvml: true
  nvml_library: /opt/nvidia/libnvidia-ml.so.1
  poll_period: 30s
  expected_gpus: 8
  sysfs_pci_devices: /host/sys/bus/pci/devices
  temperature_limit: 85
  nvlink_errors_per_poll: 10
  corrected_ecc_per_poll: 50
  reset:
    on_critical: true
    drain_timeout: 2m
    timeout: 90s
    command: [/usr/bin/nvidia-smi, --gpu-reset, -i, "{bus_id}"]
  dcgm:
    enabled: true
    library: libdcgm.so.3
    address: 127.0.0.1:5555
    health_period: 2m
)",
                            "a.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  const NvidiaConfig& n = c->nvidia;
  EXPECT_EQ(n.nvml, NvidiaConfig::Use::kOn);
  EXPECT_EQ(n.nvml_library, "/opt/nvidia/libnvidia-ml.so.1");
  EXPECT_EQ(n.poll_period, std::chrono::seconds(30));
  EXPECT_EQ(n.expected_gpus, 8);
  EXPECT_EQ(n.sysfs_pci_devices, "/host/sys/bus/pci/devices");
  EXPECT_EQ(n.temperature_limit, 85u);
  EXPECT_EQ(n.nvlink_errors_per_poll, 10u);
  EXPECT_EQ(n.corrected_ecc_per_poll, 50u);
  EXPECT_TRUE(n.reset_on_critical);
  EXPECT_EQ(n.drain_timeout, std::chrono::minutes(2));
  EXPECT_EQ(n.reset_timeout, std::chrono::seconds(90));
  EXPECT_EQ(n.reset_command,
            (std::vector<std::string>{"/usr/bin/nvidia-smi", "--gpu-reset", "-i", "{bus_id}"}));
  EXPECT_TRUE(n.dcgm);
  EXPECT_EQ(n.dcgm_library, "libdcgm.so.3");
  EXPECT_EQ(n.dcgm_address, "127.0.0.1:5555");
  EXPECT_EQ(n.dcgm_health_period, std::chrono::minutes(2));

  auto d = ParseAgentConfig("", "a.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->nvidia.nvml, NvidiaConfig::Use::kAuto) << "NVML when present, by default";
  EXPECT_FALSE(d->nvidia.reset_on_critical) << "resetting GPUs is opt-in";
  EXPECT_FALSE(d->nvidia.expected_gpus.has_value());
  EXPECT_FALSE(d->nvidia.dcgm);
}

TEST(Config, Durations) {
  EXPECT_EQ(ParseDuration("500ms"), std::chrono::milliseconds(500));
  EXPECT_EQ(ParseDuration("7d"), std::chrono::hours(168));
  EXPECT_FALSE(ParseDuration("5").has_value());
  EXPECT_FALSE(ParseDuration("-5s").has_value());
  EXPECT_FALSE(ParseDuration("5 s").has_value());
  EXPECT_FALSE(ParseDuration("99999999999999999999h").has_value());
}

TEST(Config, MissingFile) {
  auto c = LoadAgentConfig("/nonexistent/gpuheal.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace gpuheal

namespace gpuheal {
namespace {

TEST(Config, ShippedDefaultConfigLoadsAndMatchesTheDefaults) {
  auto c = LoadAgentConfig(std::string(GPUHEAL_SOURCE_DIR) + "/deploy/config/agent.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  const AgentConfig d;
  EXPECT_EQ(c->kmsg_path, d.kmsg_path);
  EXPECT_EQ(c->kmsg_bpf, d.kmsg_bpf);
  EXPECT_EQ(c->state_dir, d.state_dir);
  EXPECT_EQ(c->listen, d.listen);
  EXPECT_EQ(c->escalation.count, d.escalation.count);
  EXPECT_EQ(c->escalation.window, d.escalation.window);
  EXPECT_EQ(c->self_check_period, d.self_check_period);
  const NvidiaConfig& n = c->nvidia;
  EXPECT_EQ(n.nvml, d.nvidia.nvml);
  EXPECT_EQ(n.nvml_library, d.nvidia.nvml_library);
  EXPECT_EQ(n.poll_period, d.nvidia.poll_period);
  EXPECT_EQ(n.sysfs_pci_devices, d.nvidia.sysfs_pci_devices);
  EXPECT_EQ(n.reset_on_critical, d.nvidia.reset_on_critical);
  EXPECT_EQ(n.drain_timeout, d.nvidia.drain_timeout);
  EXPECT_EQ(n.reset_timeout, d.nvidia.reset_timeout);
  EXPECT_EQ(n.reset_command, d.nvidia.reset_command);
  EXPECT_EQ(n.dcgm, d.nvidia.dcgm);
  EXPECT_EQ(n.dcgm_library, d.nvidia.dcgm_library);
  EXPECT_EQ(n.dcgm_health_period, d.nvidia.dcgm_health_period);
}

}  // namespace
}  // namespace gpuheal

namespace gpuheal {
namespace {

// Every field error says where (file:line:column), which key and what is accepted.
TEST(ConfigErrors, EachNamesItsPlaceKeyAndWhatIsAccepted) {
  const std::pair<const char*, const char*> cases[] = {
      {"nvidia: {poll_period: 50ms}", "c.yaml:1:23: \"nvidia.poll_period\" must be at least 100ms"},
      {"recovery: {quiet_period: 500ms}",
       "c.yaml:1:26: \"recovery.quiet_period\" must be at least 1s"},
      {"monitors: 3", "c.yaml:1:11: \"monitors\" must map monitor names to true/false"},
      {"monitors: {kernel: maybe}", "c.yaml:1:20: \"monitors.kernel\" must be true or false"},
      {"xids: {79: 3}", "c.yaml:1:12: \"xids.79\" must be a mapping with severity and/or action"},
      {"nvidia: {reset: {command: []}}",
       "c.yaml:1:27: \"nvidia.reset.command\" must be a non-empty list (argv, run without a "
       "shell; {bus_id} is replaced by the GPU's bus id)"},
      {"nvidia: {reset: 1}", "c.yaml:1:17: \"nvidia.reset\" must be a mapping"},
      {"nvidia: {dcgm: {library: [a]}}", "c.yaml:1:26: \"nvidia.dcgm.library\" must be a string"},
      {"escalation: {window: 10ms}", "c.yaml:1:22: \"escalation.window\" must be at least 1s"},
      {"escalation: {count: 1}",
       "c.yaml:1:21: \"escalation.count\" must be an integer from 2 to "
       "1000000"},
      {"npd_rules: x", "c.yaml:1:12: \"npd_rules\" must be a list of NPD config file paths"},
      {"kmsg_start: middle", "c.yaml:1:13: \"kmsg_start\" must be beginning or end"},
      {"kmsg_bpf: sometimes", "c.yaml:1:11: \"kmsg_bpf\" must be auto, true or false"},
      {"kmsg_bpf: [true]", "c.yaml:1:11: \"kmsg_bpf\" must be auto, true or false"},
      {"kubernetes: {heartbeat_period: 0s}",
       "c.yaml:1:32: \"kubernetes.heartbeat_period\" must be a positive duration such as 500ms, "
       "30s, 10m, 24h, 7d"},
      {"- a", "c.yaml:1:1: the config must be a mapping of keys to values"},
  };
  for (const auto& [yaml, want] : cases) {
    auto c = ParseAgentConfig(yaml, "c.yaml");
    ASSERT_FALSE(c) << yaml;
    EXPECT_EQ(c.error().message.substr(0, std::string(want).size()), want) << yaml;
  }
}

TEST(Config, KmsgBpf) {
  EXPECT_EQ(ParseAgentConfig("", "c.yaml")->kmsg_bpf, AgentConfig::Bpf::kAuto);
  const std::pair<const char*, AgentConfig::Bpf> cases[] = {
      {"kmsg_bpf: auto", AgentConfig::Bpf::kAuto}, {"kmsg_bpf: true", AgentConfig::Bpf::kOn},
      {"kmsg_bpf: on", AgentConfig::Bpf::kOn},     {"kmsg_bpf: false", AgentConfig::Bpf::kOff},
      {"kmsg_bpf: off", AgentConfig::Bpf::kOff},
  };
  for (const auto& [yaml, want] : cases) {
    auto c = ParseAgentConfig(yaml, "c.yaml");
    ASSERT_TRUE(c) << yaml << ": " << c.error().message;
    EXPECT_EQ(c->kmsg_bpf, want) << yaml;
  }
}

}  // namespace
}  // namespace gpuheal
