#pragma once
// Unary gRPC calls over a local unix socket (the container runtime's CRI, the kubelet's
// PodResources and device-plugin registration) without gRPC's and protobuf's libraries: gRPC is
// HTTP/2 with a 5-byte frame around each protobuf message and the status in trailers; nghttp2
// (the HTTP/2 library libcurl itself uses) frames one stream with prior knowledge over the
// socket, and the few messages read are decoded from protobuf's wire format by ProtoReader. This
// keeps gRPC's and protobuf's libraries, their threads and their ~8 MB resident out of every
// agent (docs/performance.md, agent footprint). Every call has a deadline: a peer stopped with
// SIGSTOP still accepts the connection (the kernel queues it) and never answers.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpuheal {

// protobuf wire format: a key (field number << 3 | wire type) as a varint, then the value.
// Unknown fields are skipped by the caller, as protobuf does; malformed input makes Next false.
class ProtoReader {
 public:
  explicit ProtoReader(std::string_view d) : d_(d) {}
  bool done() const { return d_.empty(); }
  // The next field: its number, wire type and (length-delimited) bytes or (varint) value.
  bool Next(uint32_t* field, uint32_t* type, std::string_view* bytes, uint64_t* value);

 private:
  bool Varint(uint64_t* v);
  bool Skip(size_t n);
  std::string_view d_;
};

// protobuf encoding of the fields the requests need.
void ProtoPutBytes(std::string& out, uint32_t field, std::string_view bytes);
void ProtoPutVarint(std::string& out, uint32_t field, uint64_t value);

// One gRPC message body: the 5-byte frame (compression flag 0, big-endian length) and its message.
std::string FrameGrpc(std::string_view message);
// `label` names the API in the error ("CRI", "PodResources").
Result<std::string_view> UnframeGrpc(std::string_view body, std::string_view label = "gRPC");

struct GrpcCall {
  enum class Outcome { kOk, kUnreachable, kDeadline, kError };
  Outcome outcome = Outcome::kOk;
  std::string error;    // what failed when not kOk
  std::string message;  // the response message, unframed
};

struct GrpcTarget {
  std::string socket_path;  // "/run/containerd/containerd.sock"
  std::string label;        // names the API in errors: "CRI"
  std::string peer;         // names the peer in errors: "the runtime"
  size_t max_response = 4u << 20;
};

// One unary call on a fresh connection (a local socket: microseconds; a peer restarted between
// two calls never meets a connection of its previous life). `path` is "/package.Service/Method".
// A call in flight ends (as an error) soon after `*cancel` turns true.
GrpcCall GrpcUnaryCall(const GrpcTarget& target, const std::string& path, std::string_view request,
                       std::chrono::milliseconds deadline,
                       const std::atomic<bool>* cancel = nullptr);

}  // namespace gpuheal
