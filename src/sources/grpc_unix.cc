#include "sources/grpc_unix.h"

#include <fmt/format.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace gpuheal {

bool ProtoReader::Varint(uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (d_.empty()) return false;
    const uint8_t b = static_cast<uint8_t>(d_[0]);
    d_.remove_prefix(1);
    *v |= uint64_t{b & 0x7fu} << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

bool ProtoReader::Skip(size_t n) {
  if (d_.size() < n) return false;
  d_.remove_prefix(n);
  return true;
}

bool ProtoReader::Next(uint32_t* field, uint32_t* type, std::string_view* bytes, uint64_t* value) {
  uint64_t key;
  if (!Varint(&key)) return false;
  if ((key >> 3) > 0x1fffffff) return false;  // field numbers have 29 bits
  *field = static_cast<uint32_t>(key >> 3);
  *type = static_cast<uint32_t>(key & 7);
  if (*field == 0) return false;
  switch (*type) {
    case 0:
      return Varint(value);
    case 1:
      return Skip(8);
    case 5:
      return Skip(4);
    case 2: {
      uint64_t len;
      if (!Varint(&len) || len > d_.size()) return false;
      *bytes = d_.substr(0, len);
      d_.remove_prefix(len);
      return true;
    }
    default:
      return false;  // groups (3, 4) are not in proto3 messages; 6, 7 do not exist
  }
}

namespace {

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// One unary gRPC call on one HTTP/2 stream, as nghttp2 reports it.
struct Exchange {
  std::string body;
  int http_status = 0;
  std::string grpc_status, grpc_message;
  bool closed = false;      // the stream ended
  uint32_t reset_code = 0;  // its RST_STREAM/GOAWAY error code, 0 when it ended cleanly
  bool too_large = false;
  size_t max_body = 0;
  std::string_view request;  // the framed request still to send
};

int OnHeader(nghttp2_session*, const nghttp2_frame*, const uint8_t* name, size_t namelen,
             const uint8_t* value, size_t valuelen, uint8_t, void* user) {
  auto* x = static_cast<Exchange*>(user);
  const std::string_view n(reinterpret_cast<const char*>(name), namelen);
  const std::string_view v(reinterpret_cast<const char*>(value), std::min<size_t>(valuelen, 1024));
  // Headers and trailers both come here: grpc-status and grpc-message are trailers (or headers
  // of a response without a body).
  if (n == ":status") x->http_status = std::atoi(std::string(v).c_str());
  if (n == "grpc-status") x->grpc_status = std::string(v);
  if (n == "grpc-message") x->grpc_message = std::string(v);
  return 0;
}

int OnData(nghttp2_session*, uint8_t, int32_t, const uint8_t* data, size_t len, void* user) {
  auto* x = static_cast<Exchange*>(user);
  if (x->body.size() + len > x->max_body) {
    x->too_large = true;
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  x->body.append(reinterpret_cast<const char*>(data), len);
  return 0;
}

int OnClose(nghttp2_session*, int32_t, uint32_t error_code, void* user) {
  auto* x = static_cast<Exchange*>(user);
  x->closed = true;
  x->reset_code = error_code;
  return 0;
}

ssize_t ReadRequest(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                    nghttp2_data_source*, void* user) {
  auto* x = static_cast<Exchange*>(user);
  const size_t n = std::min(length, x->request.size());
  std::memcpy(buf, x->request.data(), n);
  x->request.remove_prefix(n);
  if (x->request.empty()) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return static_cast<ssize_t>(n);
}

nghttp2_nv Header(std::string_view name, std::string_view value) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), NGHTTP2_NV_FLAG_NONE};
}

struct SessionDeleter {
  void operator()(nghttp2_session* s) const { nghttp2_session_del(s); }
};

}  // namespace

void ProtoPutBytes(std::string& out, uint32_t field, std::string_view bytes) {
  PutVarint(out, (uint64_t{field} << 3) | 2);
  PutVarint(out, bytes.size());
  out.append(bytes);
}

void ProtoPutVarint(std::string& out, uint32_t field, uint64_t value) {
  PutVarint(out, uint64_t{field} << 3);
  PutVarint(out, value);
}

std::string FrameGrpc(std::string_view message) {
  std::string frame(5, '\0');
  const uint32_t len = static_cast<uint32_t>(message.size());
  frame[1] = static_cast<char>(len >> 24);
  frame[2] = static_cast<char>(len >> 16);
  frame[3] = static_cast<char>(len >> 8);
  frame[4] = static_cast<char>(len);
  frame.append(message);
  return frame;
}

Result<std::string_view> UnframeGrpc(std::string_view body, std::string_view label) {
  if (body.size() < 5) return Error{fmt::format("{}: the response has no gRPC message", label)};
  if (body[0] != 0) {
    return Error{fmt::format("{}: the response message is compressed (never asked for)", label)};
  }
  const uint32_t len = (uint32_t{static_cast<uint8_t>(body[1])} << 24) |
                       (uint32_t{static_cast<uint8_t>(body[2])} << 16) |
                       (uint32_t{static_cast<uint8_t>(body[3])} << 8) |
                       uint32_t{static_cast<uint8_t>(body[4])};
  if (body.size() - 5 < len)
    return Error{fmt::format("{}: the response message is cut short", label)};
  return body.substr(5, len);
}

// The socket is non-blocking and every wait is bounded by the call's deadline and, in steps of
// kCancelStep, by the cancel flag.
GrpcCall GrpcUnaryCall(const GrpcTarget& target, const std::string& path, std::string_view request,
                       std::chrono::milliseconds deadline, const std::atomic<bool>* cancel) {
  using Clock = std::chrono::steady_clock;
  constexpr std::chrono::milliseconds kCancelStep{100};
  const auto until = Clock::now() + deadline;
  const std::string& sock = target.socket_path;
  const std::string& label = target.label;
  GrpcCall call;
  auto fail = [&](GrpcCall::Outcome outcome, std::string error) {
    call.outcome = outcome;
    call.error = std::move(error);
    return call;
  };
  sockaddr_un addr{};
  if (sock.size() >= sizeof(addr.sun_path)) {
    return fail(GrpcCall::Outcome::kError,
                fmt::format("{}: socket path too long ({})", label, sock));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    return fail(GrpcCall::Outcome::kError,
                fmt::format("{}: socket: {}", label, std::strerror(errno)));
  }
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return fail(GrpcCall::Outcome::kUnreachable,
                fmt::format("cannot connect ({}): {}", sock, std::strerror(errno)));
  }

  const std::string frame = FrameGrpc(request);
  Exchange x;
  x.request = frame;
  x.max_body = target.max_response;

  nghttp2_session_callbacks* cbs = nullptr;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_header_callback(cbs, OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, OnData);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, OnClose);
  nghttp2_session* raw = nullptr;
  const int made = nghttp2_session_client_new(&raw, cbs, &x);
  nghttp2_session_callbacks_del(cbs);
  if (made != 0) {
    return fail(GrpcCall::Outcome::kError, fmt::format("{}: cannot make an HTTP/2 session", label));
  }
  std::unique_ptr<nghttp2_session, SessionDeleter> session(raw);
  nghttp2_submit_settings(session.get(), NGHTTP2_FLAG_NONE, nullptr, 0);
  const std::array<nghttp2_nv, 7> headers{Header(":method", "POST"),
                                          Header(":scheme", "http"),
                                          Header(":authority", "localhost"),
                                          Header(":path", path),
                                          Header("content-type", "application/grpc"),
                                          Header("te", "trailers"),
                                          Header("user-agent", "gpuheal/" GPUHEAL_VERSION)};
  nghttp2_data_provider body{};
  body.read_callback = ReadRequest;
  if (nghttp2_submit_request(session.get(), nullptr, headers.data(), headers.size(), &body,
                             nullptr) < 0) {
    return fail(GrpcCall::Outcome::kError,
                fmt::format("{}: cannot submit the HTTP/2 request", label));
  }

  std::array<uint8_t, 16384> buf{};
  std::string outq;  // bytes nghttp2 produced that the socket has not taken yet
  while (!x.closed) {
    for (;;) {
      const uint8_t* out = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session.get(), &out);
      if (n < 0)
        return fail(GrpcCall::Outcome::kError, fmt::format("{}: HTTP/2 send failed", label));
      if (n == 0) break;
      outq.append(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    }
    if (!outq.empty()) {
      const ssize_t n = send(fd, outq.data(), outq.size(), MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        return fail(GrpcCall::Outcome::kUnreachable,
                    fmt::format("send ({}): {}", sock, std::strerror(errno)));
      }
      if (n > 0) outq.erase(0, static_cast<size_t>(n));
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    if (left.count() <= 0) {
      return fail(GrpcCall::Outcome::kDeadline,
                  fmt::format("no answer within {}ms", deadline.count()));
    }
    if (cancel && cancel->load())
      return fail(GrpcCall::Outcome::kError, fmt::format("{}: cancelled", label));
    pollfd p{fd, static_cast<short>(POLLIN | (outq.empty() ? 0 : POLLOUT)), 0};
    const int r = poll(&p, 1, static_cast<int>(std::min(left, kCancelStep).count()));
    if (r < 0 && errno != EINTR) {
      return fail(GrpcCall::Outcome::kError, fmt::format("poll: {}", std::strerror(errno)));
    }
    if (r <= 0 || (p.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n == 0) {
      return fail(GrpcCall::Outcome::kUnreachable,
                  fmt::format("{} closed the connection ({})", target.peer, sock));
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return fail(GrpcCall::Outcome::kUnreachable,
                  fmt::format("recv ({}): {}", sock, std::strerror(errno)));
    }
    if (nghttp2_session_mem_recv(session.get(), buf.data(), static_cast<size_t>(n)) < 0) {
      if (x.too_large) {
        return fail(GrpcCall::Outcome::kError,
                    fmt::format("{}: answer larger than {} bytes", label, target.max_response));
      }
      return fail(GrpcCall::Outcome::kUnreachable,
                  fmt::format("HTTP/2 protocol error from {} ({})", target.peer, sock));
    }
  }
  if (x.reset_code != 0) {
    return fail(
        GrpcCall::Outcome::kUnreachable,
        fmt::format("{} reset the stream ({}, HTTP/2 error {})", target.peer, sock, x.reset_code));
  }
  if (x.http_status != 200 || x.grpc_status != "0") {
    return fail(GrpcCall::Outcome::kError,
                fmt::format("HTTP {}, grpc-status {} {}", x.http_status,
                            x.grpc_status.empty() ? "(none)" : x.grpc_status, x.grpc_message));
  }
  auto m = UnframeGrpc(x.body, label);
  if (!m) return fail(GrpcCall::Outcome::kError, m.error().message);
  call.message = std::string(*m);
  return call;
}

}  // namespace gpuheal
