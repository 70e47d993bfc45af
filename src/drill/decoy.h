#pragma once
// A decoy server for the drill's adversarial probes: a listener on loopback that accepts and
// counts every connection and answers nothing. A compromised node points gpuheal at it (say, as
// its BMC); any connection it receives is a request that should never have been made.

#include <atomic>
#include <string>
#include <thread>

#include "core/result.h"

namespace gpuheal::drill {

class Decoy {
 public:
  // Listens on 127.0.0.1, an unused port.
  static Result<std::unique_ptr<Decoy>> Start();
  ~Decoy();
  Decoy(const Decoy&) = delete;
  Decoy& operator=(const Decoy&) = delete;

  int port() const { return port_; }
  int connections() const { return connections_.load(); }

 private:
  Decoy(int fd, int port);
  void Run();

  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> connections_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gpuheal::drill
