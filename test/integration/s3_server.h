#pragma once
// Test helper: an S3-compatible server on loopback, for tests that upload a bundle through a
// presigned URL and read it back: moto's S3 backend, served by tools/s3-server/s3_server.py, which
// adds the presigned-URL checks moto lacks. Installed into a virtualenv by
// scripts/build-s3-server.sh (run-tests.sh exports GPUHEAL_S3_SERVER, the launcher it prints; run
// alone, a test runs the script itself). The URLs are real AWS SigV4 query-string presigned URLs
// (path-style, region us-east-1, access key and secret "testing"), signed here with libcrypto; the
// requests go through libcurl.
//
// What it checks (s3_server_test.cc pins it): a missing bucket is 404 NoSuchBucket, a missing key
// 404 NoSuchKey, an unsigned GET of a private object 403 (moto); and, as S3 does, every presigned
// URL (s3_server.py; moto 5.2.5 alone accepts any): past X-Amz-Date + X-Amz-Expires 403
// AccessDenied "Request has expired", X-Amz-Date over 15 min ahead 403 AccessDenied "Request is
// not valid yet", a signature that is not the one of key "testing" 403 SignatureDoesNotMatch, an
// unknown access key 403 InvalidAccessKeyId. Moto drops the body of a PUT sent as
// application/x-www-form-urlencoded (what curl -d sends): Put() sends no Content-Type.

#include <curl/curl.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bmc_emulator.h"  // FreeLoopbackPort

namespace gpuheal::testing {

namespace s3_detail {

inline std::string Hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 0xf];
  }
  return out;
}

inline std::string Sha256Hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("EVP_Digest(sha256) failed");
  return Hex(md, len);
}

// HMAC-SHA256 of `data` under `key`, raw bytes.
inline std::string HmacSha256(const std::string& key, const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(data.data()), data.size(), md, &len))
    throw std::runtime_error("HMAC(sha256) failed");
  return std::string(reinterpret_cast<const char*>(md), len);
}

// SigV4's URI encoding: every byte but A-Z a-z 0-9 - . _ ~ as %XX (upper case); '/' kept when
// `keep_slash` (an object key in the path), encoded otherwise (a query value).
inline std::string UriEncode(const std::string& s, bool keep_slash) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~' || (c == '/' && keep_slash)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kDigits[c >> 4];
      out += kDigits[c & 0xf];
    }
  }
  return out;
}

struct Credentials {
  std::string access_key = "testing";
  std::string secret_key = "testing";
  std::string region = "us-east-1";
};

// An AWS SigV4 query-string presigned URL for service s3: `scheme`://`host``path`?...; `host` as
// the Host header will carry it (with a port unless the scheme's default), `path` unencoded
// ("/bucket/key"), `query` extra parameters, signed too. Only the host header is signed; the
// payload is UNSIGNED-PAYLOAD, as S3 presigned URLs have it.
inline std::string PresignV4(const std::string& method, const std::string& scheme,
                             const std::string& host, const std::string& path,
                             const Credentials& creds, int expires_seconds,
                             std::chrono::system_clock::time_point at,
                             const std::map<std::string, std::string>& query = {}) {
  const std::time_t t = std::chrono::system_clock::to_time_t(at);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char amz_date[32], day[16];
  std::strftime(amz_date, sizeof amz_date, "%Y%m%dT%H%M%SZ", &tm);
  std::strftime(day, sizeof day, "%Y%m%d", &tm);
  const std::string scope = std::string(day) + "/" + creds.region + "/s3/aws4_request";

  std::map<std::string, std::string> params = query;  // sorted by name, as SigV4 wants
  params["X-Amz-Algorithm"] = "AWS4-HMAC-SHA256";
  params["X-Amz-Credential"] = creds.access_key + "/" + scope;
  params["X-Amz-Date"] = amz_date;
  params["X-Amz-Expires"] = std::to_string(expires_seconds);
  params["X-Amz-SignedHeaders"] = "host";
  std::string canonical_query;
  for (const auto& [name, value] : params) {
    if (!canonical_query.empty()) canonical_query += '&';
    canonical_query += UriEncode(name, false) + "=" + UriEncode(value, false);
  }
  const std::string canonical_uri = UriEncode(path, true);
  const std::string canonical_request = method + "\n" + canonical_uri + "\n" + canonical_query +
                                        "\nhost:" + host + "\n\nhost\nUNSIGNED-PAYLOAD";
  const std::string string_to_sign = "AWS4-HMAC-SHA256\n" + std::string(amz_date) + "\n" + scope +
                                     "\n" + Sha256Hex(canonical_request);
  std::string key = HmacSha256("AWS4" + creds.secret_key, day);
  key = HmacSha256(key, creds.region);
  key = HmacSha256(key, "s3");
  key = HmacSha256(key, "aws4_request");
  const std::string sig = HmacSha256(key, string_to_sign);
  const auto* sig_bytes = reinterpret_cast<const unsigned char*>(sig.data());
  return scheme + "://" + host + canonical_uri + "?" + canonical_query +
         "&X-Amz-Signature=" + Hex(sig_bytes, sig.size());
}

// The text of the first <tag>...</tag> in `xml`, "" if none: an S3 error's Code, say.
inline std::string XmlText(const std::string& xml, const std::string& tag) {
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  const auto a = xml.find(open);
  if (a == std::string::npos) return "";
  const auto b = xml.find(close, a + open.size());
  if (b == std::string::npos) return "";
  return xml.substr(a + open.size(), b - a - open.size());
}

inline std::string XmlUnescape(std::string s) {
  static const std::pair<const char*, const char*> kEntities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}};
  for (const auto& [from, to] : kEntities) {
    for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += std::strlen(to))
      s.replace(at, std::strlen(from), to);
  }
  return s;
}

}  // namespace s3_detail

class S3Server {
 public:
  struct Response {
    long status = 0;  // 0: no HTTP answer (connection refused, timeout); `body` says why
    std::string body;
  };

  S3Server() = default;
  ~S3Server() {
    Stop();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  S3Server(const S3Server&) = delete;
  S3Server& operator=(const S3Server&) = delete;

  // The server's launcher: $GPUHEAL_S3_SERVER, else what scripts/build-s3-server.sh prints
  // (it installs on first use), then exported for the rest of the process. "" if neither.
  static std::string ServerPath() {
    return SetupToolPath("GPUHEAL_S3_SERVER", "build-s3-server.sh", "S3_SERVER");
  }

  // Starts the server on a free loopback port, in its own process group, its output in a log
  // under a temporary directory of its own; returns once it answers HTTP. Throws (with the log's
  // tail) if it does not within 30 s.
  void Start() {
    if (pid_ > 0) return;
    const std::string exe = ServerPath();
    if (exe.empty()) throw std::runtime_error("no S3 server: run scripts/build-s3-server.sh");
    if (dir_.empty()) {
      char tmpl[] = "/tmp/gpuheal-s3-XXXXXX";
      if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
      dir_ = tmpl;
    }
    // The port is free when picked, not reserved: if another process takes it first, the server
    // exits at once and another port is tried.
    for (int attempt = 0; attempt < 3; ++attempt) {
      port_ = FreeLoopbackPort();
      if (port_ <= 0) throw std::runtime_error("no free loopback port");
      Spawn(exe);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      bool exited = false;
      while (std::chrono::steady_clock::now() < deadline) {
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
          pid_ = -1;
          exited = true;
          break;
        }
        if (Http("GET", endpoint() + "/", nullptr, 1000).status > 0) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (!exited) {
        Stop();
        throw std::runtime_error("S3 server did not answer within 30 s; log " + log_path() + ":\n" +
                                 LogTail());
      }
      if (Log().find("Address already in use") == std::string::npos) break;
    }
    throw std::runtime_error("S3 server exited; log " + log_path() + ":\n" + LogTail());
  }

  // Ends the server's process group and waits for it (SIGKILL after 10 s).
  void Stop() {
    if (pid_ <= 0) return;
    kill(-pid_, SIGTERM);
    kill(pid_, SIGTERM);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        kill(-pid_, SIGKILL);
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
  }

  int port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log_path() const { return dir_ + "/s3_server.log"; }
  std::string Log() const {
    std::ifstream in(log_path());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // A presigned URL for `method` on /bucket[/key], valid `expires_seconds` from `at` (default:
  // now; a time in the past makes an expired URL).
  std::string Presign(const std::string& method, const std::string& bucket, const std::string& key,
                      int expires_seconds,
                      std::optional<std::chrono::system_clock::time_point> at = std::nullopt,
                      const std::map<std::string, std::string>& query = {}) const {
    const std::string path = "/" + bucket + (key.empty() ? "" : "/" + key);
    return s3_detail::PresignV4(method, "http", "127.0.0.1:" + std::to_string(port_), path,
                                s3_detail::Credentials{}, expires_seconds,
                                at.value_or(std::chrono::system_clock::now()), query);
  }
  std::string PresignPut(const std::string& bucket, const std::string& key, int expires_seconds,
                         std::optional<std::chrono::system_clock::time_point> at = {}) const {
    return Presign("PUT", bucket, key, expires_seconds, at);
  }
  std::string PresignGet(const std::string& bucket, const std::string& key, int expires_seconds,
                         std::optional<std::chrono::system_clock::time_point> at = {}) const {
    return Presign("GET", bucket, key, expires_seconds, at);
  }

  // CreateBucket (path-style PUT /bucket, presigned); throws unless S3 answers 200.
  void CreateBucket(const std::string& bucket) const {
    const std::string empty;
    auto r = Http("PUT", Presign("PUT", bucket, "", 60), &empty);
    if (r.status != 200)
      throw std::runtime_error("CreateBucket " + bucket + ": " + std::to_string(r.status) + " " +
                               r.body);
  }

  // The object's bytes (a presigned GET); nullopt on 404. Throws on any other answer.
  std::optional<std::string> GetObject(const std::string& bucket, const std::string& key) const {
    auto r = Http("GET", PresignGet(bucket, key, 60));
    if (r.status == 404) return std::nullopt;
    if (r.status != 200)
      throw std::runtime_error("GetObject " + bucket + "/" + key + ": " + std::to_string(r.status) +
                               " " + r.body);
    return std::move(r.body);
  }

  // The bucket's keys (ListObjectsV2, first 1000). Throws unless S3 answers 200.
  std::vector<std::string> ListKeys(const std::string& bucket) const {
    auto r = Http("GET", Presign("GET", bucket, "", 60, std::nullopt, {{"list-type", "2"}}));
    if (r.status != 200)
      throw std::runtime_error("ListObjectsV2 " + bucket + ": " + std::to_string(r.status) + " " +
                               r.body);
    std::vector<std::string> keys;
    for (size_t at = 0; (at = r.body.find("<Key>", at)) != std::string::npos;) {
      const auto end = r.body.find("</Key>", at);
      if (end == std::string::npos) break;
      keys.push_back(s3_detail::XmlUnescape(r.body.substr(at + 5, end - at - 5)));
      at = end;
    }
    return keys;
  }

  // One HTTP request with libcurl: `body` (if any) uploaded as the request body (CURLOPT_UPLOAD,
  // with its length), sending `headers` (curl's form; the default: no Content-Type and no Expect:
  // 100-continue).
  static Response Http(const std::string& method, const std::string& url,
                       const std::string* body = nullptr, long timeout_ms = 30000,
                       const std::vector<std::string>& headers = {"Expect:", "Content-Type:"}) {
    static const bool initialised = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    Response r;
    CURL* c = initialised ? curl_easy_init() : nullptr;
    if (!c) {
      r.body = "curl_easy_init failed";
      return r;
    }
    struct Upload {
      const std::string* data;
      size_t off = 0;
    } up{body};
    curl_slist* header_list = nullptr;
    for (const auto& h : headers) header_list = curl_slist_append(header_list, h.c_str());
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    if (body) {
      curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(body->size()));
      curl_easy_setopt(c, CURLOPT_READDATA, &up);
      curl_easy_setopt(
          c, CURLOPT_READFUNCTION, +[](char* buf, size_t size, size_t n, void* p) -> size_t {
            auto* u = static_cast<Upload*>(p);
            const size_t len = std::min(size * n, u->data->size() - u->off);
            std::memcpy(buf, u->data->data() + u->off, len);
            u->off += len;
            return len;
          });
    }
    if (method != (body ? "PUT" : "GET"))
      curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(
        c, CURLOPT_WRITEFUNCTION, +[](char* buf, size_t size, size_t n, void* p) -> size_t {
          static_cast<std::string*>(p)->append(buf, size * n);
          return size * n;
        });
    const CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) {
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    } else {
      r.body = curl_easy_strerror(rc);
    }
    curl_slist_free_all(header_list);
    curl_easy_cleanup(c);
    return r;
  }

  // A PUT of `body` to `url` (a presigned URL): the HTTP status, 0 if no answer.
  static long Put(const std::string& url, const std::string& body) {
    return Http("PUT", url, &body).status;
  }

 private:
  void Spawn(const std::string& exe) {
    std::vector<std::string> args = {exe, "-H", "127.0.0.1", "-p", std::to_string(port_)};
    const std::string log = log_path();
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      setpgid(0, 0);
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    setpgid(pid_, pid_);  // also from here: Stop() may signal the group before the child ran
  }

  std::string LogTail() const {
    const std::string log = Log();
    return log.size() > 3000 ? log.substr(log.size() - 3000) : log;
  }

  std::string dir_;
  int port_ = -1;
  pid_t pid_ = -1;
};

}  // namespace gpuheal::testing
