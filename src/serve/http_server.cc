#include "serve/http_server.h"

#include <civetweb.h>
#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>

#include <array>
#include <cstring>
#include <mutex>

#include "core/listen_address.h"

namespace gpuheal {

namespace {

// civetweb accepts numeric addresses only: a host name is resolved here, first address wins.
Result<std::string> ListeningPort(const ListenAddress& a) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (const int rc = getaddrinfo(a.host.c_str(), nullptr, &hints, &res); rc != 0) {
    return Error{fmt::format("host \"{}\": {}", a.host, gai_strerror(rc))};
  }
  std::array<char, NI_MAXHOST> host{};
  const int rc = getnameinfo(res->ai_addr, res->ai_addrlen, host.data(), host.size(), nullptr, 0,
                             NI_NUMERICHOST);
  const bool v6 = res->ai_family == AF_INET6;
  freeaddrinfo(res);
  if (rc != 0) return Error{fmt::format("host \"{}\": {}", a.host, gai_strerror(rc))};
  if (v6 && mg_check_feature(8) == 0) {
    return Error{fmt::format("host \"{}\" is IPv6 and this civetweb has no IPv6", a.host)};
  }
  return v6 ? fmt::format("[{}]:{}", host.data(), a.port)
            : fmt::format("{}:{}", host.data(), a.port);
}

// One response and the connection closes (keep-alive is off): status, type, length, body.
int Reply(mg_connection* conn, int status, const char* reason, const char* type,
          const std::string& body, const char* extra_header = "") {
  const bool head = std::strcmp(mg_get_request_info(conn)->request_method, "HEAD") == 0;
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
            "Connection: close\r\n\r\n",
            status, reason, type, body.size(), extra_header);
  if (!head) mg_write(conn, body.data(), body.size());
  return status;
}

bool Readable(mg_connection* conn) {
  const char* m = mg_get_request_info(conn)->request_method;
  return std::strcmp(m, "GET") == 0 || std::strcmp(m, "HEAD") == 0;
}

int NotAllowed(mg_connection* conn) {
  return Reply(conn, 405, "Method Not Allowed", "text/plain", "GET or HEAD only\n",
               "Allow: GET, HEAD\r\n");
}

}  // namespace

int HttpServer::ServeMetrics(mg_connection* conn, void* self) {
  if (!Readable(conn)) return NotAllowed(conn);
  const auto* s = static_cast<const HttpServer*>(self);
  return Reply(conn, 200, "OK", "text/plain; version=0.0.4", s->metrics_.Render());
}

int HttpServer::ServeHealth(mg_connection* conn, void* self) {
  if (!Readable(conn)) return NotAllowed(conn);
  const auto* s = static_cast<const HttpServer*>(self);
  const std::string why = s->health_();
  std::string body = (why.empty() ? "ok\n" : why + "\n") + (s->details_ ? s->details_() : "");
  return why.empty() ? Reply(conn, 200, "OK", "text/plain", body)
                     : Reply(conn, 503, "Service Unavailable", "text/plain", body);
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& listen,
                                                      const Metrics& metrics, HealthFn health,
                                                      HealthFn details) {
  auto addr = ParseListenAddress(listen);
  if (!addr) return addr.error();
  auto ports = ListeningPort(*addr);
  if (!ports) return Error{fmt::format("cannot listen on {}: {}", listen, ports.error().message)};
  static std::once_flag library;
  std::call_once(library, [] { mg_init_library(0); });

  std::unique_ptr<HttpServer> s(new HttpServer(metrics));
  s->host_ = addr->host;
  s->health_ = std::move(health);
  s->details_ = std::move(details);
  const std::string workers = std::to_string(kWorkers);
  const std::string queue = std::to_string(kMaxWaiting);
  const std::string deadline_ms = std::to_string(
      std::chrono::duration_cast<std::chrono::milliseconds>(kRequestDeadline).count());
  const std::string max_request = std::to_string(kMaxRequestBytes);
  const char* options[] = {"listening_ports",
                           ports->c_str(),
                           "num_threads",
                           workers.c_str(),
                           "connection_queue",
                           queue.c_str(),
                           "request_timeout_ms",
                           deadline_ms.c_str(),
                           "max_request_size",
                           max_request.c_str(),
                           "enable_keep_alive",
                           "no",
                           nullptr};
  mg_callbacks callbacks{};
  // civetweb's own messages (a refused request, a closed client) are routine here: not logged.
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };
  mg_init_data init{&callbacks, s.get(), options};
  unsigned code = 0;
  std::array<char, 256> text{};
  mg_error_data error{&code, text.data(), text.size()};
  s->ctx_ = mg_start2(&init, &error);
  if (s->ctx_ == nullptr) {
    return Error{fmt::format("cannot listen on {}: {}", listen, text.data())};
  }
  mg_set_request_handler(s->ctx_, "/metrics$", &HttpServer::ServeMetrics, s.get());
  mg_set_request_handler(s->ctx_, "/healthz$", &HttpServer::ServeHealth, s.get());
  mg_server_port bound{};
  if (mg_get_server_ports(s->ctx_, 1, &bound) < 1) {
    return Error{fmt::format("cannot listen on {}: no port bound", listen)};
  }
  s->port_ = bound.port;
  return s;
}

HttpServer::~HttpServer() {
  if (ctx_ != nullptr) mg_stop(ctx_);
}

}  // namespace gpuheal
