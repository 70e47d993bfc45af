#include "sources/cri_client.h"

#include <fmt/format.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace gpuheal {
namespace {

// protobuf wire format: a key (field number << 3 | wire type) as a varint, then the value.
class Wire {
 public:
  explicit Wire(std::string_view d) : d_(d) {}
  bool done() const { return d_.empty(); }
  bool Varint(uint64_t* v) {
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
  // The next field: its number, wire type and (length-delimited) bytes or (varint) value.
  bool Next(uint32_t* field, uint32_t* type, std::string_view* bytes, uint64_t* value) {
    uint64_t key;
    if (!Varint(&key)) return false;
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

 private:
  bool Skip(size_t n) {
    if (d_.size() < n) return false;
    d_.remove_prefix(n);
    return true;
  }
  std::string_view d_;
};

Error Malformed(std::string_view what) {
  return Error{fmt::format("CRI: malformed {} (not the runtime.v1 protobuf message)", what)};
}

// One unary gRPC call on one HTTP/2 stream, as nghttp2 reports it.
struct Exchange {
  std::string body;
  int http_status = 0;
  std::string grpc_status, grpc_message;
  bool closed = false;      // the stream ended
  uint32_t reset_code = 0;  // its RST_STREAM/GOAWAY error code, 0 when it ended cleanly
  bool too_large = false;
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
  if (x->body.size() + len > (4u << 20)) {  // a Status answer is bytes, not megabytes
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

Result<std::string_view> UnframeGrpc(std::string_view body) {
  if (body.size() < 5) return Error{"CRI: the response has no gRPC message"};
  if (body[0] != 0) return Error{"CRI: the response message is compressed (never asked for)"};
  const uint32_t len = (uint32_t{static_cast<uint8_t>(body[1])} << 24) |
                       (uint32_t{static_cast<uint8_t>(body[2])} << 16) |
                       (uint32_t{static_cast<uint8_t>(body[3])} << 8) |
                       uint32_t{static_cast<uint8_t>(body[4])};
  if (body.size() - 5 < len) return Error{"CRI: the response message is cut short"};
  return body.substr(5, len);
}

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
  socket_path_ = endpoint.rfind("unix://", 0) == 0 ? endpoint.substr(7) : endpoint;
}

// A connection per call (a local socket: microseconds): a runtime restarted between two calls
// never meets a connection of its previous life. The socket is non-blocking and every wait is
// bounded by the call's deadline and, in steps of kCancelStep, by the cancel flag.
CriClient::Call CriClient::Invoke(const std::string& method, std::string_view request,
                                  std::chrono::milliseconds deadline) {
  using Clock = std::chrono::steady_clock;
  constexpr std::chrono::milliseconds kCancelStep{100};
  const auto until = Clock::now() + deadline;
  Call call;
  auto fail = [&](CriStatus::Outcome outcome, std::string error) {
    call.outcome = outcome;
    call.error = std::move(error);
    return call;
  };
  sockaddr_un addr{};
  if (socket_path_.size() >= sizeof(addr.sun_path)) {
    return fail(CriStatus::Outcome::kError,
                fmt::format("CRI: socket path too long ({})", socket_path_));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path_.c_str(), socket_path_.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return fail(CriStatus::Outcome::kError, fmt::format("CRI: socket: {}", std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return fail(CriStatus::Outcome::kUnreachable,
                fmt::format("cannot connect ({}): {}", socket_path_, std::strerror(errno)));
  }

  std::string frame(5, '\0');
  const uint32_t len = static_cast<uint32_t>(request.size());
  frame[1] = static_cast<char>(len >> 24);
  frame[2] = static_cast<char>(len >> 16);
  frame[3] = static_cast<char>(len >> 8);
  frame[4] = static_cast<char>(len);
  frame.append(request);
  Exchange x;
  x.request = frame;

  nghttp2_session_callbacks* cbs = nullptr;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_header_callback(cbs, OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, OnData);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, OnClose);
  nghttp2_session* raw = nullptr;
  const int made = nghttp2_session_client_new(&raw, cbs, &x);
  nghttp2_session_callbacks_del(cbs);
  if (made != 0) return fail(CriStatus::Outcome::kError, "CRI: cannot make an HTTP/2 session");
  std::unique_ptr<nghttp2_session, SessionDeleter> session(raw);
  nghttp2_submit_settings(session.get(), NGHTTP2_FLAG_NONE, nullptr, 0);
  const std::string path = "/runtime.v1.RuntimeService/" + method;
  const std::array<nghttp2_nv, 7> headers{Header(":method", "POST"),
                                          Header(":scheme", "http"),
                                          Header(":authority", "localhost"),
                                          Header(":path", path),
                                          Header("content-type", "application/grpc"),
                                          Header("te", "trailers"),
                                          Header("user-agent", "gpuheal-agent/" GPUHEAL_VERSION)};
  nghttp2_data_provider body{};
  body.read_callback = ReadRequest;
  if (nghttp2_submit_request(session.get(), nullptr, headers.data(), headers.size(), &body,
                             nullptr) < 0) {
    return fail(CriStatus::Outcome::kError, "CRI: cannot submit the HTTP/2 request");
  }

  std::array<uint8_t, 16384> buf{};
  std::string outq;  // bytes nghttp2 produced that the socket has not taken yet
  while (!x.closed) {
    for (;;) {
      const uint8_t* out = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session.get(), &out);
      if (n < 0) return fail(CriStatus::Outcome::kError, "CRI: HTTP/2 send failed");
      if (n == 0) break;
      outq.append(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    }
    if (!outq.empty()) {
      const ssize_t n = send(fd, outq.data(), outq.size(), MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        return fail(CriStatus::Outcome::kUnreachable,
                    fmt::format("send ({}): {}", socket_path_, std::strerror(errno)));
      }
      if (n > 0) outq.erase(0, static_cast<size_t>(n));
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    if (left.count() <= 0) {
      return fail(CriStatus::Outcome::kDeadline,
                  fmt::format("no answer within {}ms", deadline.count()));
    }
    if (cancel_ && cancel_->load()) return fail(CriStatus::Outcome::kError, "CRI: cancelled");
    pollfd p{fd, static_cast<short>(POLLIN | (outq.empty() ? 0 : POLLOUT)), 0};
    const int r = poll(&p, 1, static_cast<int>(std::min(left, kCancelStep).count()));
    if (r < 0 && errno != EINTR) {
      return fail(CriStatus::Outcome::kError, fmt::format("poll: {}", std::strerror(errno)));
    }
    if (r <= 0 || (p.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n == 0) {
      return fail(CriStatus::Outcome::kUnreachable,
                  fmt::format("the runtime closed the connection ({})", socket_path_));
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return fail(CriStatus::Outcome::kUnreachable,
                  fmt::format("recv ({}): {}", socket_path_, std::strerror(errno)));
    }
    if (nghttp2_session_mem_recv(session.get(), buf.data(), static_cast<size_t>(n)) < 0) {
      if (x.too_large) return fail(CriStatus::Outcome::kError, "CRI: answer larger than 4 MB");
      return fail(CriStatus::Outcome::kUnreachable,
                  fmt::format("HTTP/2 protocol error from the runtime ({})", socket_path_));
    }
  }
  if (x.reset_code != 0) {
    return fail(CriStatus::Outcome::kUnreachable,
                fmt::format("the runtime reset the stream ({}, HTTP/2 error {})", socket_path_,
                            x.reset_code));
  }
  if (x.http_status != 200 || x.grpc_status != "0") {
    return fail(CriStatus::Outcome::kError,
                fmt::format("HTTP {}, grpc-status {} {}", x.http_status,
                            x.grpc_status.empty() ? "(none)" : x.grpc_status, x.grpc_message));
  }
  auto m = UnframeGrpc(x.body);
  if (!m) {
    call.outcome = CriStatus::Outcome::kError;
    call.error = m.error().message;
    return call;
  }
  call.message = std::string(*m);
  return call;
}

CriStatus CriClient::Status(std::chrono::milliseconds deadline) {
  CriStatus out;
  const auto start = std::chrono::steady_clock::now();
  Call call = Invoke("Status", std::string_view(), deadline);  // StatusRequest{verbose: false}
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
  Call call = Invoke("Version", req, deadline);
  if (call.outcome != CriStatus::Outcome::kOk) return Error{call.error};
  return ParseCriVersion(call.message);
}

}  // namespace gpuheal
