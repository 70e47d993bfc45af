#pragma once
// A client of the container runtime's CRI RuntimeService (Version, Status) over its unix socket,
// through gRPC. Every call has a deadline: a runtime stopped with SIGSTOP still accepts the
// connection (the kernel queues it) and never answers.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpuheal {

struct CriCondition {
  std::string type;  // RuntimeReady, NetworkReady
  bool status = false;
  std::string reason, message;
};

struct CriStatus {
  enum class Outcome { kOk, kUnreachable, kDeadline, kError };
  Outcome outcome = Outcome::kOk;
  std::string error;  // the gRPC status code and message when not kOk
  std::vector<CriCondition> conditions;
  std::chrono::microseconds took{0};
};

struct CriVersion {
  std::string runtime_name, runtime_version, runtime_api_version;
};

class CriClient {
 public:
  // endpoint: "unix:///run/containerd/containerd.sock". Connects lazily.
  explicit CriClient(const std::string& endpoint);
  ~CriClient();
  CriStatus Status(std::chrono::milliseconds deadline);
  Result<CriVersion> Version(std::chrono::milliseconds deadline);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuheal
