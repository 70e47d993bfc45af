#include "serve/http_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/listen_address.h"

namespace gpuheal {

class HttpServer::Router : public httplib::Server {
 public:
  void Serve(httplib::Stream& strm) {
    bool closed = false;
    process_request(strm, /*close_connection=*/true, closed, [](httplib::Request&) {});
  }
};

namespace {

using Clock = std::chrono::steady_clock;

// A connection as cpp-httplib reads it, with a byte budget and one deadline for the whole
// request: past either, reads fail and cpp-httplib answers 400 and closes.
class BoundedStream : public httplib::Stream {
 public:
  BoundedStream(int fd, int stop_fd)
      : fd_(fd), stop_fd_(stop_fd), deadline_(Clock::now() + HttpServer::kRequestDeadline) {}

  bool is_readable() const override { return pos_ < len_ || Wait(POLLIN); }
  bool is_writable() const override { return Wait(POLLOUT); }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ == len_) {
      if (budget_ == 0 || !Wait(POLLIN)) return -1;
      const ssize_t n = recv(fd_, buf_.data(), std::min(buf_.size(), budget_), 0);
      if (n <= 0) return n;
      budget_ -= static_cast<size_t>(n);
      pos_ = 0;
      len_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, len_ - pos_);
    std::memcpy(ptr, buf_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!Wait(POLLOUT)) return -1;
    return send(fd_, ptr, size, MSG_NOSIGNAL);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(getsockname, ip, port);
  }
  int socket() const override { return fd_; }

 private:
  // Waits for `events` until the deadline; false on timeout, error or shutdown.
  bool Wait(short events) const {
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
      if (left.count() <= 0) return false;
      std::array<pollfd, 2> p{pollfd{fd_, events, 0}, pollfd{stop_fd_, POLLIN, 0}};
      const int r = poll(p.data(), p.size(), static_cast<int>(left.count()));
      if (r < 0 && errno == EINTR) continue;
      return r > 0 && p[1].revents == 0 && (p[0].revents & events) != 0;
    }
  }

  void Address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    std::array<char, NI_MAXHOST> host{};
    std::array<char, NI_MAXSERV> serv{};
    if (get(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
        getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host.data(), host.size(), serv.data(),
                    serv.size(), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
      return;
    }
    ip = host.data();
    port = std::atoi(serv.data());
  }

  int fd_;
  int stop_fd_;
  Clock::time_point deadline_;
  size_t budget_ = HttpServer::kMaxRequestBytes;
  std::array<char, 4096> buf_{};
  size_t pos_ = 0;
  size_t len_ = 0;
};

// A listening socket on the first address `host` resolves to that binds, and its port.
Result<int> Listen(const ListenAddress& a, int& port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (const int rc = getaddrinfo(a.host.c_str(), std::to_string(a.port).c_str(), &hints, &res);
      rc != 0) {
    return Error{fmt::format("host \"{}\": {}", a.host, gai_strerror(rc))};
  }
  int fd = -1;
  int err = 0;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      err = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) return Error{std::strerror(err)};
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return fd;
}

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& listen,
                                                      const Metrics& metrics, HealthFn health,
                                                      HealthFn details) {
  auto addr = ParseListenAddress(listen);
  if (!addr) return addr.error();
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->host_ = addr->host;
  s->router_ = std::make_unique<Router>();
  s->router_->Get("/metrics", [&metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.Render(), "text/plain; version=0.0.4");
  });
  s->router_->Get("/healthz", [health, details](const httplib::Request&, httplib::Response& res) {
    const std::string why = health();
    res.status = why.empty() ? 200 : 503;
    res.set_content((why.empty() ? "ok\n" : why + "\n") + (details ? details() : ""), "text/plain");
  });
  auto fd = Listen(*addr, s->port_);
  if (!fd) return Error{fmt::format("cannot listen on {}: {}", listen, fd.error().message)};
  s->listen_fd_ = *fd;
  s->stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (s->stop_fd_ < 0) return Error{fmt::format("eventfd: {}", std::strerror(errno))};
  s->acceptor_ = std::thread([srv = s.get()] { srv->AcceptLoop(); });
  for (int i = 0; i < kWorkers; ++i) s->workers_.emplace_back([srv = s.get()] { srv->Work(); });
  return s;
}

void HttpServer::AcceptLoop() {
  for (;;) {
    std::array<pollfd, 2> p{pollfd{listen_fd_, POLLIN, 0}, pollfd{stop_fd_, POLLIN, 0}};
    if (poll(p.data(), p.size(), -1) < 0 && errno != EINTR) return;
    if (p[1].revents != 0) return;
    if ((p[0].revents & POLLIN) == 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(mu_);
    if (waiting_.size() >= kMaxWaiting) {
      close(fd);  // every worker is busy and the queue is full: shed rather than grow
      continue;
    }
    waiting_.push_back(fd);
    ready_.notify_one();
  }
}

void HttpServer::Work() {
  for (;;) {
    int fd = -1;
    {
      std::unique_lock lock(mu_);
      ready_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
      if (stopping_) return;
      fd = waiting_.front();
      waiting_.pop_front();
    }
    BoundedStream strm(fd, stop_fd_);
    router_->Serve(strm);
    close(fd);
  }
}

HttpServer::~HttpServer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  if (stop_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(stop_fd_, &one, sizeof(one));
  }
  if (acceptor_.joinable()) acceptor_.join();
  for (auto& w : workers_) w.join();
  for (int fd : waiting_) close(fd);
  if (listen_fd_ >= 0) close(listen_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

}  // namespace gpuheal
