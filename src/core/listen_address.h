#pragma once
// The host:port an HTTP endpoint listens on, checked where it is configured (config file or flag)
// so that a mistake is reported with its position rather than when the server starts.

#include <string>

#include "core/result.h"

namespace gpuheal {

struct ListenAddress {
  std::string host;  // IPv6 brackets removed
  int port = 0;      // 0: any free port
};

// Accepts "host:port" and "[v6]:port", port 0-65535; the error says what is accepted.
Result<ListenAddress> ParseListenAddress(const std::string& listen);

}  // namespace gpuheal
