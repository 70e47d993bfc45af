#include "agent/http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <charconv>

namespace gpuheal {

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& listen,
                                                      const Metrics& metrics, HealthFn health) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return Error{fmt::format("listen address \"{}\" must be host:port (e.g. 127.0.0.1:9464)", listen)};
  }
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->host_ = listen.substr(0, colon);
  if (s->host_.size() > 2 && s->host_.front() == '[' && s->host_.back() == ']') {
    s->host_ = s->host_.substr(1, s->host_.size() - 2);
  }
  int port = -1;
  const std::string p = listen.substr(colon + 1);
  auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  if (ec != std::errc() || ptr != p.data() + p.size() || port < 0 || port > 65535) {
    return Error{fmt::format("listen address \"{}\": port must be 0-65535", listen)};
  }
  s->server_ = std::make_unique<httplib::Server>();
  s->server_->new_task_queue = [] { return new httplib::ThreadPool(1); };
  s->server_->Get("/metrics", [&metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.Render(), "text/plain; version=0.0.4");
  });
  s->server_->Get("/healthz", [health](const httplib::Request&, httplib::Response& res) {
    const std::string why = health();
    res.status = why.empty() ? 200 : 503;
    res.set_content(why.empty() ? "ok\n" : why + "\n", "text/plain");
  });
  if (port == 0) {
    s->port_ = s->server_->bind_to_any_port(s->host_);
    if (s->port_ < 0) return Error{fmt::format("cannot listen on {}", listen)};
  } else {
    if (!s->server_->bind_to_port(s->host_, port)) {
      return Error{fmt::format("cannot listen on {} (address in use or not local?)", listen)};
    }
    s->port_ = port;
  }
  s->thread_ = std::thread([srv = s->server_.get()] { srv->listen_after_bind(); });
  return s;
}

HttpServer::~HttpServer() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gpuheal
