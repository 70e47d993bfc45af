#include "sources/cri_client.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "cri_runtime.grpc.pb.h"

namespace gpuheal {

struct CriClient::Impl {
  std::string endpoint;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<runtime::v1::RuntimeService::Stub> stub;
};

namespace {

// Fail fast on a socket that is gone instead of waiting for the deadline, and reconnect at once
// when the runtime comes back (gRPC's reconnect backoff would otherwise keep a restarted runtime
// "unreachable" for up to two minutes).
std::shared_ptr<grpc::Channel> NewChannel(const std::string& endpoint) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
}

std::string Describe(const grpc::Status& s) {
  return fmt::format("gRPC {}: {}", static_cast<int>(s.error_code()), s.error_message());
}

}  // namespace

CriClient::CriClient(const std::string& endpoint) : impl_(std::make_unique<Impl>()) {
  impl_->endpoint = endpoint;
  impl_->channel = NewChannel(endpoint);
  impl_->stub = runtime::v1::RuntimeService::NewStub(impl_->channel);
}

CriClient::~CriClient() = default;

CriStatus CriClient::Status(std::chrono::milliseconds deadline) {
  CriStatus out;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  runtime::v1::StatusRequest req;
  runtime::v1::StatusResponse resp;
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status s = impl_->stub->Status(&ctx, req, &resp);
  out.took = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  if (!s.ok()) {
    out.error = Describe(s);
    switch (s.error_code()) {
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        out.outcome = CriStatus::Outcome::kDeadline;
        break;
      case grpc::StatusCode::UNAVAILABLE:
        out.outcome = CriStatus::Outcome::kUnreachable;
        break;
      default:
        out.outcome = CriStatus::Outcome::kError;
    }
    return out;
  }
  for (const auto& c : resp.status().conditions()) {
    out.conditions.push_back({c.type(), c.status(), c.reason(), c.message()});
  }
  return out;
}

Result<CriVersion> CriClient::Version(std::chrono::milliseconds deadline) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  runtime::v1::VersionRequest req;
  req.set_version("v1");
  runtime::v1::VersionResponse resp;
  const grpc::Status s = impl_->stub->Version(&ctx, req, &resp);
  if (!s.ok()) return Error{Describe(s)};
  return CriVersion{resp.runtime_name(), resp.runtime_version(), resp.runtime_api_version()};
}

}  // namespace gpuheal
