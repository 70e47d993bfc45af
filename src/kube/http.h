#pragma once
// HTTP to the API server over libcurl: one connection per HttpConnection (keep-alive), HTTP/2
// when the server offers it, TLS verification always on, client certificates or bearer tokens.
// A connection is used by one thread at a time; Client keeps a pool.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"
#include "kube/kube_config.h"

namespace gpuheal::kube {

struct HttpRequest {
  std::string method = "GET";
  std::string path;  // "/api/v1/nodes?limit=500"
  std::string body;
  std::string content_type = "application/json";
};

struct HttpResponse {
  long status = 0;
  std::string body;
  std::string retry_after;  // Retry-After header, if any
};

class HttpConnection {
 public:
  static Result<std::unique_ptr<HttpConnection>> Create(const Config& cfg);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // A transport failure (connect, TLS, timeout) is an Error; any HTTP status is a response.
  Result<HttpResponse> Do(const HttpRequest& req);

  // Streams the response body to `on_data` until the server ends it, `on_data` returns false,
  // or `timeout` passes, or `*cancel` becomes true (checked about once a second while idle).
  // The status is known once the first byte arrives.
  Result<HttpResponse> Stream(const HttpRequest& req,
                              const std::function<bool(std::string_view)>& on_data,
                              std::chrono::seconds timeout,
                              const std::atomic<bool>* cancel = nullptr);

 private:
  HttpConnection() = default;
  Result<HttpResponse> Perform(const HttpRequest& req,
                               const std::function<bool(std::string_view)>* on_data,
                               std::chrono::milliseconds timeout, const std::atomic<bool>* cancel);
  const Config* cfg_ = nullptr;
  void* curl_ = nullptr;  // CURL*
};

}  // namespace gpuheal::kube
