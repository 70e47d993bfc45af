#include "kube/http.h"

#include <fmt/format.h>

#include <mutex>

#include "core/curl_library.h"

namespace gpuheal::kube {
namespace {

struct Sink {
  HttpResponse* resp;
  const std::function<bool(std::string_view)>* on_data;
  const std::atomic<bool>* cancel = nullptr;
  bool aborted = false;
};

int ProgressCb(void* userdata, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* s = static_cast<Sink*>(userdata);
  if (s->cancel && s->cancel->load(std::memory_order_relaxed)) {
    s->aborted = true;
    return 1;  // CURLE_ABORTED_BY_CALLBACK
  }
  return 0;
}

size_t WriteCb(char* ptr, size_t size, size_t n, void* userdata) {
  auto* s = static_cast<Sink*>(userdata);
  const size_t len = size * n;
  if (s->on_data) {
    if (s->resp->status == 0 || s->resp->status >= 300) {
      s->resp->body.append(ptr, len);  // an error status: keep the Status body
      return len;
    }
    if (!(*s->on_data)(std::string_view(ptr, len))) {
      s->aborted = true;
      return 0;  // makes curl stop the transfer
    }
    return len;
  }
  s->resp->body.append(ptr, len);
  return len;
}

size_t HeaderCb(char* buf, size_t size, size_t n, void* userdata) {
  auto* s = static_cast<Sink*>(userdata);
  std::string_view h(buf, size * n);
  if (h.starts_with("HTTP/")) {
    // "HTTP/2 200" or "HTTP/1.1 200 OK": the status of the final response.
    const size_t sp = h.find(' ');
    if (sp != std::string_view::npos) s->resp->status = std::strtol(h.data() + sp + 1, nullptr, 10);
  }
  constexpr std::string_view kRetry = "retry-after:";
  if (h.size() > kRetry.size()) {
    std::string lower(h.substr(0, kRetry.size()));
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == kRetry) {
      std::string v(h.substr(kRetry.size()));
      while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.pop_back();
      while (!v.empty() && v.front() == ' ') v.erase(v.begin());
      s->resp->retry_after = v;
    }
  }
  return size * n;
}

}  // namespace

Result<std::unique_ptr<HttpConnection>> HttpConnection::Create(const Config& cfg) {
  auto lib = LoadCurl();
  if (!lib) return lib.error();
  std::unique_ptr<HttpConnection> c(new HttpConnection());
  c->cfg_ = &cfg;
  const CurlLibrary& curl = **lib;
  CURL* h = curl.easy_init();
  if (!h) return Error{"curl_easy_init failed"};
  c->curl_ = h;
  curl.easy_setopt(h, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS);
  curl.easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
  curl.easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
  curl.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl.easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl.easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  curl.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(cfg.connect_timeout.count()));
  curl.easy_setopt(h, CURLOPT_USERAGENT, cfg.user_agent.c_str());
  curl.easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");  // gzip when the server offers it
  if (!cfg.ca_pem.empty()) {
    curl_blob blob{const_cast<char*>(cfg.ca_pem.data()), cfg.ca_pem.size(), CURL_BLOB_COPY};
    curl.easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
  }
  if (!cfg.client_cert_pem.empty()) {
    curl_blob cert{const_cast<char*>(cfg.client_cert_pem.data()), cfg.client_cert_pem.size(),
                   CURL_BLOB_COPY};
    curl_blob key{const_cast<char*>(cfg.client_key_pem.data()), cfg.client_key_pem.size(),
                  CURL_BLOB_COPY};
    curl.easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    curl.easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
    curl.easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    curl.easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
  }
  return c;
}

HttpConnection::~HttpConnection() {
  if (curl_) Curl().easy_cleanup(static_cast<CURL*>(curl_));
}

Result<HttpResponse> HttpConnection::Do(const HttpRequest& req) {
  return Perform(req, nullptr, cfg_->timeout, nullptr);
}

Result<HttpResponse> HttpConnection::Stream(const HttpRequest& req,
                                            const std::function<bool(std::string_view)>& on_data,
                                            std::chrono::seconds timeout,
                                            const std::atomic<bool>* cancel) {
  return Perform(req, &on_data, timeout, cancel);
}

Result<HttpResponse> HttpConnection::Perform(const HttpRequest& req,
                                             const std::function<bool(std::string_view)>* on_data,
                                             std::chrono::milliseconds timeout,
                                             const std::atomic<bool>* cancel) {
  const CurlLibrary& curl = Curl();  // loaded: Create made the handle
  CURL* h = static_cast<CURL*>(curl_);
  HttpResponse resp;
  Sink sink{&resp, on_data, cancel};
  const std::string url = cfg_->server + req.path;
  curl.easy_setopt(h, CURLOPT_URL, url.c_str());
  curl.easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  curl.easy_setopt(h, CURLOPT_NOBODY, req.method == "HEAD" ? 1L : 0L);
  if (req.method == "GET" || req.method == "HEAD") {
    curl.easy_setopt(h, CURLOPT_HTTPGET, 1L);
    curl.easy_setopt(h, CURLOPT_CUSTOMREQUEST, nullptr);
  } else {
    curl.easy_setopt(h, CURLOPT_POSTFIELDS, req.body.data());
    curl.easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(req.body.size()));
  }
  curl.easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl.easy_setopt(h, CURLOPT_WRITEFUNCTION, WriteCb);
  curl.easy_setopt(h, CURLOPT_WRITEDATA, &sink);
  curl.easy_setopt(h, CURLOPT_HEADERFUNCTION, HeaderCb);
  curl.easy_setopt(h, CURLOPT_HEADERDATA, &sink);
  curl.easy_setopt(h, CURLOPT_NOPROGRESS, cancel ? 0L : 1L);
  curl.easy_setopt(h, CURLOPT_XFERINFOFUNCTION, ProgressCb);
  curl.easy_setopt(h, CURLOPT_XFERINFODATA, &sink);
  curl_slist* headers = nullptr;
  headers = curl.slist_append(headers, "Accept: application/json");
  if (!req.body.empty() || req.method != "GET") {
    headers = curl.slist_append(headers, ("Content-Type: " + req.content_type).c_str());
  }
  if (cfg_->token) {
    auto tok = cfg_->token->Get();
    if (!tok) {
      curl.slist_free_all(headers);
      return tok.error();
    }
    headers = curl.slist_append(headers, ("Authorization: Bearer " + *tok).c_str());
  }
  curl.easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  const CURLcode rc = curl.easy_perform(h);
  curl.slist_free_all(headers);
  curl.easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
  const bool stopped = sink.aborted && (rc == CURLE_WRITE_ERROR || rc == CURLE_ABORTED_BY_CALLBACK);
  if (rc != CURLE_OK && !stopped) {
    // A stream that ran for its whole timeout ended normally from the caller's point of view.
    if (on_data && rc == CURLE_OPERATION_TIMEDOUT && resp.status == 200) return resp;
    return Error{fmt::format("{} {}: {}", req.method, url, curl.easy_strerror(rc))};
  }
  long code = 0;
  curl.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  if (code) resp.status = code;
  return resp;
}

}  // namespace gpuheal::kube
