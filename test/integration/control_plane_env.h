#pragma once
// GoogleTest environment: a fresh local control plane per test binary, stopped at the end even
// when tests fail; optionally with kube-controller-manager and kube-scheduler, and extra
// kube-apiserver flags.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "local_control_plane.h"

namespace gpuheal::testing {

class ControlPlaneEnv : public ::testing::Environment {
 public:
  // `extra`: more flags for `control-plane.sh up`, e.g. "--with-karpenter".
  explicit ControlPlaneEnv(bool with_controllers, std::vector<std::string> apiserver_args = {},
                           std::string extra = "")
      : with_controllers_(with_controllers),
        apiserver_args_(std::move(apiserver_args)),
        extra_(std::move(extra)) {}
  void SetUp() override {
    std::string log;
    cp_ = LocalControlPlane::Up(with_controllers_, apiserver_args_, &log, extra_);
    ASSERT_TRUE(cp_) << "control plane did not come up:\n" << log;
  }
  void TearDown() override { cp_.reset(); }
  static const std::string& kubeconfig() { return cp_->kubeconfig(); }
  static const std::string& dir() { return cp_->dir(); }
  static const std::string& etcd_url() { return cp_->etcd_url(); }

 private:
  bool with_controllers_;
  std::vector<std::string> apiserver_args_;
  std::string extra_;
  static inline std::unique_ptr<LocalControlPlane> cp_;
};

}  // namespace gpuheal::testing
