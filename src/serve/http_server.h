#pragma once
// Serves /metrics and /healthz with civetweb on a small fixed pool of workers. Each connection
// may send at most kMaxRequestBytes of request head within kRequestDeadline and gets one
// response: a slow or oversized client holds one worker for a bounded time and memory, never the
// endpoint. It only reads thread-safe state: the metrics registry and a health callback.
// civetweb is built without TLS, so an agent that serves metrics loads no TLS library for it.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "core/result.h"
#include "serve/metrics.h"

struct mg_context;
struct mg_connection;

namespace gpuheal {

class HttpServer {
 public:
  // Health: returns "" when healthy, otherwise why not (served as 503 with that text).
  using HealthFn = std::function<std::string()>;

  // A scrape request is a few hundred bytes.
  static constexpr size_t kMaxRequestBytes = 16 * 1024;
  static constexpr std::chrono::seconds kRequestDeadline{5};
  static constexpr int kWorkers = 4;
  static constexpr size_t kMaxWaiting = 64;  // accepted connections queued for a worker

  // `listen` is "host:port"; port 0 picks a free port (see port()).
  // /healthz: 200 "ok" when `health` returns "", else 503 and what it returned; then the lines
  // `details` returns (how the server works, not whether it is healthy), if given.
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& listen,
                                                   const Metrics& metrics, HealthFn health,
                                                   HealthFn details = nullptr);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  int port() const { return port_; }
  const std::string& host() const { return host_; }

 private:
  explicit HttpServer(const Metrics& metrics) : metrics_(metrics) {}
  static int ServeMetrics(mg_connection* conn, void* self);
  static int ServeHealth(mg_connection* conn, void* self);

  const Metrics& metrics_;
  HealthFn health_;
  HealthFn details_;
  mg_context* ctx_ = nullptr;
  std::string host_;
  int port_ = 0;
};

}  // namespace gpuheal
