#pragma once
// A client of the container runtime's CRI RuntimeService (package runtime.v1: Version, Status)
// over its unix socket. gRPC is HTTP/2 with a 5-byte frame around each protobuf message and the
// status in trailers; nghttp2 (the HTTP/2 library libcurl itself uses) frames one stream with
// prior knowledge over the unix socket, and the three messages read here are decoded from
// protobuf's wire format by ParseCriStatus/ParseCriVersion (fuzzed). This keeps gRPC's and
// protobuf's libraries, their threads and their ~8 MB resident out of every agent, and libcurl
// with its TLS stack out of a standalone agent (docs/performance.md, agent footprint). Every call
// has a deadline: a runtime stopped with SIGSTOP still accepts the connection (the kernel queues
// it) and never answers.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
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
// One gRPC response body: the 5-byte frame (compression flag 0, big-endian length) and its
// message.
Result<std::string_view> UnframeGrpc(std::string_view body);

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
  struct Call {
    CriStatus::Outcome outcome = CriStatus::Outcome::kOk;
    std::string error;
    std::string message;  // the response message, unframed
  };
  Call Invoke(const std::string& method, std::string_view request,
              std::chrono::milliseconds deadline);
  std::string socket_path_;
  const std::atomic<bool>* cancel_ = nullptr;
};

}  // namespace gpuheal
