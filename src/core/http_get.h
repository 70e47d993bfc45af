#pragma once
// One plain HTTP GET through libcurl (core/curl_library.h), for what probes a server rather than
// talks to an API: the sim's readiness probes and the drill's service clients.

#include <chrono>
#include <string>

namespace gpuheal {

// GET `url` within `timeout`, no redirects followed, a fresh connection: the status of the answer,
// or 0 when none came (refused, timed out, not HTTP, libcurl not loadable). With `connect_only`,
// only the TCP connection is made: 200 when it was accepted (a tcpSocket probe).
int HttpGetStatus(const std::string& url, std::chrono::milliseconds timeout,
                  const std::string& user_agent, bool connect_only = false);

}  // namespace gpuheal
