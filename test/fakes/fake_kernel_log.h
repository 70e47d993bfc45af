#pragma once
// A kernel log fed by the test: records pushed here are what the agent reads, with the
// readiness of an eventfd (the agent's epoll loop watches it as it watches /dev/kmsg).

#include <sys/eventfd.h>
#include <unistd.h>

#include <deque>
#include <mutex>
#include <string>

#include "sources/kernel_log.h"

namespace gpuheal::testing {

class FakeKernelLog final : public KernelLog {
 public:
  FakeKernelLog() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~FakeKernelLog() override { close(fd_); }

  // A record in /dev/kmsg's format: "PRI,SEQ,TS,FLAGS;MSG". Thread-safe.
  void Push(std::string record) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(record));
    const uint64_t one = 1;
    (void)!write(fd_, &one, sizeof one);
  }
  // The kernel overwrote records before they were read.
  void Overrun() {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(kOverrun);
    const uint64_t one = 1;
    (void)!write(fd_, &one, sizeof one);
  }

  int fd() const override { return fd_; }
  const std::string& path() const override { return path_; }
  Status Next(std::string_view& record) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.empty()) {
      uint64_t n;
      (void)!read(fd_, &n, sizeof n);
      return Status::kAgain;
    }
    current_ = std::move(queue_.front());
    queue_.pop_front();
    if (current_ == kOverrun) return Status::kOverrun;
    record = current_;
    return Status::kRecord;
  }
  void SeekEnd() override {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.clear();
  }
  void SeekStart() override {}
  int last_errno() const override { return 0; }

 private:
  static constexpr const char* kOverrun = "\x01overrun";
  int fd_;
  std::string path_ = "fake-kernel-log";
  std::mutex mu_;
  std::deque<std::string> queue_;
  std::string current_;
};

}  // namespace gpuheal::testing
