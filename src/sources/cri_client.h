#pragma once
// A client of the container runtime's CRI RuntimeService (package runtime.v1: Version, Status)
// over its unix socket, through sources/grpc_unix.h (no gRPC library; libcurl with its TLS stack
// stays out of a standalone agent). The messages read here are decoded from protobuf's wire
// format by ParseCriStatus/ParseCriVersion (fuzzed). Every call has a deadline: a runtime stopped
// with SIGSTOP still accepts the connection (the kernel queues it) and never answers.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "sources/grpc_unix.h"

namespace gpuheal {

struct CriCondition {
  std::string type;  // RuntimeReady, NetworkReady
  bool status = false;
  std::string reason, message;
};

struct CriStatus {
  using Outcome = GrpcCall::Outcome;
  Outcome outcome = Outcome::kOk;
  std::string error;  // what failed when not kOk
  std::vector<CriCondition> conditions;
  std::chrono::microseconds took{0};
};

struct CriVersion {
  std::string runtime_name, runtime_version, runtime_api_version;
};

// The protobuf messages (without the gRPC frame): StatusResponse's conditions
// (status.conditions[]: type=1, status=2, reason=3, message=4) and VersionResponse's fields
// (runtime_name=2, runtime_version=3, runtime_api_version=4). Unknown fields are skipped, as
// protobuf does; malformed input is an error.
Result<std::vector<CriCondition>> ParseCriStatus(std::string_view message);
Result<CriVersion> ParseCriVersion(std::string_view message);

class CriClient {
 public:
  // endpoint: "unix:///run/containerd/containerd.sock".
  explicit CriClient(const std::string& endpoint);
  ~CriClient() = default;
  // A call in flight ends (as an error) soon after `*cancel` turns true: stopping the agent does
  // not wait for a frozen runtime's deadline.
  void SetCancel(const std::atomic<bool>* cancel) { cancel_ = cancel; }
  CriStatus Status(std::chrono::milliseconds deadline);
  Result<CriVersion> Version(std::chrono::milliseconds deadline);

 private:
  GrpcCall Invoke(const std::string& method, std::string_view request,
                  std::chrono::milliseconds deadline);
  GrpcTarget target_;
  const std::atomic<bool>* cancel_ = nullptr;
};

}  // namespace gpuheal
