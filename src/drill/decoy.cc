#include "drill/decoy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace gpuheal::drill {

Result<std::unique_ptr<Decoy>> Decoy::Start() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Error{std::string("decoy: socket: ") + std::strerror(errno)};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    return Error{"decoy: cannot listen on 127.0.0.1: " + why};
  }
  return std::unique_ptr<Decoy>(new Decoy(fd, ntohs(a.sin_port)));
}

Decoy::Decoy(int fd, int port) : fd_(fd), port_(port) {
  thread_ = std::thread([this] { Run(); });
}

Decoy::~Decoy() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  close(fd_);
}

void Decoy::Run() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    for (;;) {
      const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) break;
      ++connections_;
      close(c);
    }
  }
}

}  // namespace gpuheal::drill
