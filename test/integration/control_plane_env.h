#pragma once
// GoogleTest environment: a fresh local control plane (scripts/control-plane.sh) per test
// binary, stopped at the end even when tests fail. GPUHEAL_CP_CONTROLLERS=1 adds
// kube-controller-manager and kube-scheduler.

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace gpuheal::testing {

class ControlPlaneEnv : public ::testing::Environment {
 public:
  explicit ControlPlaneEnv(bool with_controllers) : with_controllers_(with_controllers) {}
  void SetUp() override {
    char tmpl[] = "/tmp/gpuheal-it-XXXXXX";
    dir_ = mkdtemp(tmpl);
    const std::string cmd = std::string("bash ") + GPUHEAL_SOURCE_DIR + "/scripts/control-plane.sh up --dir " +
                            dir_ + (with_controllers_ ? " --with-controllers" : "");
    FILE* p = popen(cmd.c_str(), "r");
    std::array<char, 4096> buf;
    std::string out;
    while (fgets(buf.data(), buf.size(), p)) out += buf.data();
    const int rc = pclose(p);
    const size_t at = out.rfind("KUBECONFIG=");
    ASSERT_TRUE(rc == 0 && at != std::string::npos) << "control plane did not come up:\n" << out;
    kubeconfig_ = out.substr(at + 11);
    while (!kubeconfig_.empty() && kubeconfig_.back() == '\n') kubeconfig_.pop_back();
  }
  void TearDown() override {
    if (dir_.empty()) return;
    const std::string cmd = std::string("bash ") + GPUHEAL_SOURCE_DIR + "/scripts/control-plane.sh down --dir " + dir_;
    [[maybe_unused]] int rc = std::system(cmd.c_str());
  }
  static const std::string& kubeconfig() { return kubeconfig_; }
  const std::string& dir() const { return dir_; }

 private:
  bool with_controllers_;
  std::string dir_;
  static inline std::string kubeconfig_;
};

}  // namespace gpuheal::testing
