#include "sources/cri_client.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <cstdint>

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

size_t OnBody(char* p, size_t size, size_t n, void* out) {
  auto* s = static_cast<std::string*>(out);
  if (s->size() + size * n > (4u << 20)) return 0;  // a Status answer is bytes, not megabytes
  s->append(p, size * n);
  return size * n;
}

// Headers and trailers both come here: gRPC's grpc-status and grpc-message are trailers (or
// headers of a response without a body).
size_t OnHeader(char* p, size_t size, size_t n, void* out) {
  auto* h = static_cast<std::vector<std::string>*>(out);
  std::string line(p, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (h->size() < 64) h->push_back(std::move(line));
  return size * n;
}

std::string HeaderValue(const std::vector<std::string>& headers, std::string_view name) {
  for (const auto& h : headers) {
    if (h.size() > name.size() && h[name.size()] == ':' &&
        strncasecmp(h.data(), name.data(), name.size()) == 0) {
      std::string v = h.substr(name.size() + 1);
      while (!v.empty() && v.front() == ' ') v.erase(v.begin());
      return v;
    }
  }
  return "";
}

int OnProgress(void* cancel, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* c = static_cast<const std::atomic<bool>*>(cancel);
  return c && c->load() ? 1 : 0;  // non-zero aborts the transfer
}

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
  curl_ = curl_easy_init();
}

CriClient::~CriClient() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

CriClient::Call CriClient::Invoke(const std::string& method, std::string_view request,
                                  std::chrono::milliseconds deadline) {
  Call call;
  CURL* c = static_cast<CURL*>(curl_);
  if (!c) {
    call.outcome = CriStatus::Outcome::kError;
    call.error = "CRI: libcurl could not make a handle";
    return call;
  }
  std::string frame(5, '\0');
  const uint32_t len = static_cast<uint32_t>(request.size());
  frame[1] = static_cast<char>(len >> 24);
  frame[2] = static_cast<char>(len >> 16);
  frame[3] = static_cast<char>(len >> 8);
  frame[4] = static_cast<char>(len);
  frame.append(request);
  std::string body;
  std::vector<std::string> headers;
  curl_slist* h = nullptr;
  h = curl_slist_append(h, "content-type: application/grpc");
  h = curl_slist_append(h, "te: trailers");
  h = curl_slist_append(h, "user-agent: gpuheal-agent/" GPUHEAL_VERSION);
  curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, socket_path_.c_str());
  curl_easy_setopt(c, CURLOPT_URL,
                   ("http://localhost/runtime.v1.RuntimeService/" + method).c_str());
  curl_easy_setopt(c, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, frame.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(frame.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(deadline.count()));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  if (cancel_) {
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, OnProgress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(cancel_));
  }
  // A connection per call (a local socket: microseconds): a runtime restarted between two calls
  // never meets a connection of its previous life, and containerd's HTTP/2 server does not take
  // a second prior-knowledge request on a reused libcurl connection.
  curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
  curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &headers);
  const CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(h);
  if (rc != CURLE_OK) {
    call.error = fmt::format("{} ({})", curl_easy_strerror(rc), socket_path_);
    if (rc == CURLE_OPERATION_TIMEDOUT) {
      call.outcome = CriStatus::Outcome::kDeadline;
      call.error = fmt::format("no answer within {}ms", deadline.count());
    } else if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_GOT_NOTHING || rc == CURLE_SEND_ERROR ||
               rc == CURLE_RECV_ERROR || rc == CURLE_HTTP2 || rc == CURLE_HTTP2_STREAM) {
      call.outcome = CriStatus::Outcome::kUnreachable;
      return call;
    } else {
      call.outcome = CriStatus::Outcome::kError;
    }
    return call;
  }
  long http = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
  const std::string grpc_status = HeaderValue(headers, "grpc-status");
  if (http != 200 || grpc_status != "0") {
    call.outcome = CriStatus::Outcome::kError;
    call.error = fmt::format("HTTP {}, grpc-status {} {}", http,
                             grpc_status.empty() ? "(none)" : grpc_status,
                             HeaderValue(headers, "grpc-message"));
    return call;
  }
  auto m = UnframeGrpc(body);
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
