#include "kube/time.h"

#include <fmt/format.h>

#include <ctime>

namespace gpuheal::kube {

std::string RfcTime(std::chrono::system_clock::time_point t) {
  const std::time_t s = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string MicroTime(std::chrono::system_clock::time_point t) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::string s = RfcTime(t);
  s.pop_back();  // 'Z'
  return s + fmt::format(".{:06d}Z", us % 1000000);
}

}  // namespace gpuheal::kube
