#pragma once
// GoogleTest environment: a fresh local control plane (scripts/control-plane.sh) per test
// binary, stopped at the end even when tests fail; optionally with kube-controller-manager and
// kube-scheduler, and extra kube-apiserver flags.

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace gpuheal::testing {

class ControlPlaneEnv : public ::testing::Environment {
 public:
  explicit ControlPlaneEnv(bool with_controllers, std::vector<std::string> apiserver_args = {})
      : with_controllers_(with_controllers), apiserver_args_(std::move(apiserver_args)) {}
  void SetUp() override {
    char tmpl[] = "/tmp/gpuheal-it-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::string cmd = std::string("bash ") + GPUHEAL_SOURCE_DIR + "/scripts/control-plane.sh up --dir " + dir_ +
                      (with_controllers_ ? " --with-controllers" : "");
    for (const auto& a : apiserver_args_) cmd += " '--apiserver-arg=" + a + "'";
    FILE* p = popen(cmd.c_str(), "r");
    std::array<char, 4096> buf;
    std::string out;
    while (fgets(buf.data(), buf.size(), p)) out += buf.data();
    const int rc = pclose(p);
    const size_t at = out.rfind("KUBECONFIG=");
    ASSERT_TRUE(rc == 0 && at != std::string::npos) << "control plane did not come up:\n" << out;
    kubeconfig_ = out.substr(at + 11);
    while (!kubeconfig_.empty() && kubeconfig_.back() == '\n') kubeconfig_.pop_back();
    std::ifstream(dir_ + "/etcd.url") >> etcd_url_;
  }
  void TearDown() override {
    if (dir_.empty()) return;
    const std::string cmd = std::string("bash ") + GPUHEAL_SOURCE_DIR + "/scripts/control-plane.sh down --dir " + dir_;
    [[maybe_unused]] int rc = std::system(cmd.c_str());
  }
  static const std::string& kubeconfig() { return kubeconfig_; }
  static const std::string& dir() { return dir_; }
  static const std::string& etcd_url() { return etcd_url_; }  // http://127.0.0.1:PORT

 private:
  bool with_controllers_;
  std::vector<std::string> apiserver_args_;
  static inline std::string dir_;
  static inline std::string kubeconfig_;
  static inline std::string etcd_url_;
};

}  // namespace gpuheal::testing
