#pragma once
// Serves /metrics and /healthz on its own thread (cpp-httplib, one worker). It only reads
// thread-safe state: the metrics registry and a health callback.

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "agent/metrics.h"
#include "core/result.h"

namespace httplib {
class Server;
}

namespace gpuheal {

class HttpServer {
 public:
  // Health: returns "" when healthy, otherwise why not (served as 503 with that text).
  using HealthFn = std::function<std::string()>;

  // `listen` is "host:port"; port 0 picks a free port (see port()).
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& listen, const Metrics& metrics,
                                                   HealthFn health);
  ~HttpServer();
  int port() const { return port_; }
  const std::string& host() const { return host_; }

 private:
  HttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string host_;
  int port_ = 0;
};

}  // namespace gpuheal
