#pragma once
// Helpers for tests that drive the NVML test double (test/nvml_double): a scenario file in a
// temporary directory, replaced atomically as the double expects.

#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

namespace gpuheal::testing {

class Scenario {
 public:
  Scenario() {
    char tmpl[] = "/tmp/gpuheal-nvml-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/scenario.json";
    setenv("GPUHEAL_NVML_SCENARIO", path_.c_str(), 1);
  }
  ~Scenario() { std::filesystem::remove_all(dir_); }

  void Write(const nlohmann::json& j) {
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << j.dump(2);
    std::rename(tmp.c_str(), path_.c_str());
  }
  nlohmann::json Read() const {
    std::ifstream in(path_);
    return nlohmann::json::parse(in);
  }
  const std::string& path() const { return path_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_, path_;
};

// A bus id no real or other test GPU has: domain 0x1000-0xffff. NVML's form and the agent's.
struct TestGpu {
  std::string bus_id;  // "00001A2B:3C:00.0"
  std::string pci;     // "1a2b:3c:00"
  std::string uuid;
};

inline TestGpu UniqueGpu() {
  std::random_device rd;
  const unsigned dom = 0x1000 + rd() % 0xe000, bus = rd() % 256;
  return {fmt::format("0000{:04X}:{:02X}:00.0", dom, bus),
          fmt::format("{:04x}:{:02x}:00", dom, bus),
          fmt::format("GPU-{:08x}-1111-2222-3333-444455556666", rd())};
}

inline nlohmann::json HealthyDevice(const TestGpu& g) {
  return {{"bus_id", g.bus_id},
          {"uuid", g.uuid},
          {"name", "NVIDIA H100 80GB HBM3"},
          {"ecc", {{"volatile_uncorrected", 0}, {"volatile_corrected", 0}}},
          {"remapped_rows", {{"corrected", 0}, {"uncorrected", 0}, {"pending", 0}, {"failure", 0}}},
          {"retired_pages_pending", false},
          {"nvlink", {{"links", 18}, {"down", nlohmann::json::array()}, {"errors", 0}}},
          {"clock_event_reasons", 0},
          {"pcie", {{"gen", 5}, {"max_gen", 5}, {"width", 16}, {"max_width", 16}}},
          {"temperature", 40},
          {"temperature_slowdown", 87},
          {"recovery_action", 0},
          {"persistence_mode", false},
          {"processes", nlohmann::json::array()}};
}

}  // namespace gpuheal::testing
