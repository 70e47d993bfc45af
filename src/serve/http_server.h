#pragma once
// Serves /metrics and /healthz (cpp-httplib routes and responses) on a small fixed pool of
// workers. Each connection may send at most kMaxRequestBytes within kRequestDeadline and gets
// one response: a slow or oversized client holds one worker for a bounded time and memory, never
// the endpoint. It only reads thread-safe state: the metrics registry and a health callback.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/result.h"
#include "serve/metrics.h"

namespace gpuheal {

class HttpServer {
 public:
  // Health: returns "" when healthy, otherwise why not (served as 503 with that text).
  using HealthFn = std::function<std::string()>;

  // A scrape request is a few hundred bytes; cpp-httplib itself bounds only each header line.
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
  int port() const { return port_; }
  const std::string& host() const { return host_; }

  class Router;  // the cpp-httplib server whose request handling the workers call

 private:
  HttpServer() = default;
  void AcceptLoop();
  void Work();

  std::unique_ptr<Router> router_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // eventfd: wakes the acceptor and aborts workers' waits on shutdown
  std::thread acceptor_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<int> waiting_;
  bool stopping_ = false;
  std::string host_;
  int port_ = 0;
};

}  // namespace gpuheal
