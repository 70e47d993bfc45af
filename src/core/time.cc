#include "core/time.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdio>
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
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::string s = RfcTime(t);
  s.pop_back();  // 'Z'
  return s + fmt::format(".{:06d}Z", us % 1000000);
}

std::optional<std::chrono::system_clock::time_point> ParseTime(std::string_view s) {
  std::tm tm{};
  int n = 0;
  const std::string str(s);
  if (sscanf(str.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
             &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6) {
    return std::nullopt;
  }
  // system_clock counts nanoseconds in 64 bits: years past 2262 would overflow it. Anything
  // outside 1970..2200 is not a time the API server or an agent writes.
  if (tm.tm_year < 1970 || tm.tm_year > 2200 || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 ||
      tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60 || tm.tm_hour < 0 ||
      tm.tm_min < 0 || tm.tm_sec < 0) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  int64_t us = 0;
  size_t i = static_cast<size_t>(n);
  if (i < str.size() && str[i] == '.') {
    int64_t scale = 100000;
    for (++i; i < str.size() && isdigit(static_cast<unsigned char>(str[i])); ++i) {
      us += (str[i] - '0') * scale;
      scale /= 10;
    }
  }
  if (i + 1 != str.size() || str[i] != 'Z') return std::nullopt;
  const time_t t = timegm(&tm);
  if (t == static_cast<time_t>(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(t) + std::chrono::microseconds(us);
}

}  // namespace gpuheal::kube
