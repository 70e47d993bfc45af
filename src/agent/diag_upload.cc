#include "agent/diag_upload.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "core/curl_library.h"

namespace gpuheal {
namespace {

size_t ReadFromFile(char* buf, size_t size, size_t n, void* user) {
  return std::fread(buf, 1, size * n, static_cast<FILE*>(user));
}

size_t KeepBody(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<std::string*>(user);
  if (s->size() < 8192) s->append(data, std::min(size * n, 8192 - s->size()));
  return size * n;
}

// "<Code>AccessDenied</Code>...<Message>Request has expired</Message>" -> "AccessDenied: Request
// has expired" (S3's error document); otherwise the body's first line.
std::string ErrorDetail(const std::string& body) {
  auto tag = [&](const std::string& name) {
    const std::string open = "<" + name + ">", close = "</" + name + ">";
    const size_t a = body.find(open);
    if (a == std::string::npos) return std::string();
    const size_t b = body.find(close, a);
    if (b == std::string::npos) return std::string();
    return body.substr(a + open.size(), b - a - open.size());
  };
  const std::string code = tag("Code"), message = tag("Message");
  if (!code.empty()) return message.empty() ? code : code + ": " + message;
  std::string first = body.substr(0, body.find('\n'));
  if (first.size() > 200) first.resize(200);
  return first;
}

int Progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* cancel = static_cast<const std::atomic<bool>*>(user);
  return cancel && cancel->load() ? 1 : 0;  // non-zero aborts the transfer
}

}  // namespace

std::string UrlWithoutQuery(const std::string& url) {
  return url.substr(0, std::min(url.find('?'), url.find('#')));
}

UploadResult UploadFile(const std::string& path, const std::string& url, const UploadOptions& o) {
  UploadResult res;
  const std::string where = UrlWithoutQuery(url);
  auto lib = LoadCurl();
  if (!lib) {
    res.message = lib.error().message;
    return res;
  }
  const CurlLibrary& c = **lib;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) {
    res.message = fmt::format("cannot read the bundle {}: {}", path, ec.message());
    return res;
  }
  auto backoff = o.backoff;
  for (int attempt = 1; attempt <= o.attempts; ++attempt) {
    res.attempts = attempt;
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
    if (!f) {
      res.message = fmt::format("cannot read the bundle {}", path);
      return res;
    }
    CURL* h = c.easy_init();
    if (!h) {
      res.message = "curl_easy_init failed";
      return res;
    }
    std::string body;
    curl_slist* headers = nullptr;
    headers = c.slist_append(headers, "Content-Type: application/gzip");
    headers = c.slist_append(headers, "Expect:");  // no 100-continue round trip
    c.easy_setopt(h, CURLOPT_URL, url.c_str());
    c.easy_setopt(h, CURLOPT_UPLOAD, 1L);
    c.easy_setopt(h, CURLOPT_READFUNCTION, ReadFromFile);
    c.easy_setopt(h, CURLOPT_READDATA, f.get());
    c.easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(size));
    c.easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    c.easy_setopt(h, CURLOPT_WRITEFUNCTION, KeepBody);
    c.easy_setopt(h, CURLOPT_WRITEDATA, &body);
    c.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    c.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    c.easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(o.timeout.count()));
    c.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    c.easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    c.easy_setopt(h, CURLOPT_XFERINFOFUNCTION, Progress);
    c.easy_setopt(h, CURLOPT_XFERINFODATA, o.cancel);
    const CURLcode rc = c.easy_perform(h);
    long status = 0;
    c.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    c.easy_cleanup(h);
    c.slist_free_all(headers);
    res.status = rc == CURLE_OK ? status : 0;
    bool retry = false;
    if (rc != CURLE_OK) {
      res.message = fmt::format("upload to {} failed: {}", where, c.easy_strerror(rc));
      retry = true;
    } else if (status >= 200 && status < 300) {
      res.ok = true;
      res.message = fmt::format("uploaded {} bytes to {}", size, where);
      return res;
    } else {
      res.message =
          fmt::format("upload to {} refused: HTTP {} {}", where, status, ErrorDetail(body));
      retry = status >= 500 || status == 429;
    }
    if (!retry || (o.cancel && o.cancel->load())) break;
    if (attempt < o.attempts) {
      for (auto slept = std::chrono::milliseconds(0);
           slept < backoff && !(o.cancel && o.cancel->load());
           slept += std::chrono::milliseconds(50)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      backoff *= 2;
    }
  }
  if (res.attempts > 1) res.message += fmt::format(" (after {} attempts)", res.attempts);
  return res;
}

}  // namespace gpuheal
