#include "sources/cri_client.h"

#include <fmt/format.h>

#include <cstdint>

namespace gpuheal {
namespace {

using Wire = ProtoReader;

Error Malformed(std::string_view what) {
  return Error{fmt::format("CRI: malformed {} (not the runtime.v1 protobuf message)", what)};
}

}  // namespace

Result<std::vector<CriCondition>> ParseCriStatus(std::string_view message) {
  std::vector<CriCondition> out;
  Wire resp(message);
  uint32_t f, t;
  std::string_view b;
  uint64_t v;
  while (!resp.done()) {
    if (!resp.Next(&f, &t, &b, &v)) return Malformed("StatusResponse");
    if (f != 1 || t != 2) continue;  // status (RuntimeStatus); info and the rest are skipped
    Wire status(b);
    while (!status.done()) {
      std::string_view cb;
      if (!status.Next(&f, &t, &cb, &v)) return Malformed("RuntimeStatus");
      if (f != 1 || t != 2) continue;  // conditions
      if (out.size() >= 64) return Malformed("RuntimeStatus (more than 64 conditions)");
      Wire cond(cb);
      CriCondition c;
      while (!cond.done()) {
        std::string_view s;
        uint64_t x = 0;
        if (!cond.Next(&f, &t, &s, &x)) return Malformed("RuntimeCondition");
        if (f == 1 && t == 2) c.type = std::string(s.substr(0, 256));
        if (f == 2 && t == 0) c.status = x != 0;
        if (f == 3 && t == 2) c.reason = std::string(s.substr(0, 256));
        if (f == 4 && t == 2) c.message = std::string(s.substr(0, 1024));
      }
      out.push_back(std::move(c));
    }
  }
  return out;
}

Result<CriVersion> ParseCriVersion(std::string_view message) {
  CriVersion out;
  Wire w(message);
  uint32_t f, t;
  std::string_view s;
  uint64_t v;
  while (!w.done()) {
    if (!w.Next(&f, &t, &s, &v)) return Malformed("VersionResponse");
    if (t != 2) continue;
    if (f == 2) out.runtime_name = std::string(s.substr(0, 128));
    if (f == 3) out.runtime_version = std::string(s.substr(0, 128));
    if (f == 4) out.runtime_api_version = std::string(s.substr(0, 128));
  }
  return out;
}

CriClient::CriClient(const std::string& endpoint) {
  target_.socket_path = endpoint.rfind("unix://", 0) == 0 ? endpoint.substr(7) : endpoint;
  target_.label = "CRI";
  target_.peer = "the runtime";
  target_.max_response = 4u << 20;  // a Status answer is bytes, not megabytes
}

GrpcCall CriClient::Invoke(const std::string& method, std::string_view request,
                           std::chrono::milliseconds deadline) {
  return GrpcUnaryCall(target_, "/runtime.v1.RuntimeService/" + method, request, deadline, cancel_);
}

CriStatus CriClient::Status(std::chrono::milliseconds deadline) {
  CriStatus out;
  const auto start = std::chrono::steady_clock::now();
  GrpcCall call = Invoke("Status", std::string_view(), deadline);  // StatusRequest{verbose: false}
  out.took = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  out.outcome = call.outcome;
  out.error = call.error;
  if (call.outcome != CriStatus::Outcome::kOk) return out;
  auto conditions = ParseCriStatus(call.message);
  if (!conditions) {
    out.outcome = CriStatus::Outcome::kError;
    out.error = conditions.error().message;
    return out;
  }
  out.conditions = std::move(*conditions);
  return out;
}

Result<CriVersion> CriClient::Version(std::chrono::milliseconds deadline) {
  // VersionRequest{version: "v1"}: field 1, length-delimited.
  const std::string req = std::string("\x0a\x02", 2) + "v1";
  GrpcCall call = Invoke("Version", req, deadline);
  if (call.outcome != CriStatus::Outcome::kOk) return Error{call.error};
  return ParseCriVersion(call.message);
}

}  // namespace gpuheal
