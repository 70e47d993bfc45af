#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
// Kubernetes timestamps: Time is RFC 3339 in UTC with seconds ("2026-11-30T05:42:00Z");
// MicroTime adds microseconds ("2026-11-30T05:42:00.123456Z") as Lease fields want.

#include <chrono>
#include <string>

namespace gpuheal::kube {

std::string RfcTime(std::chrono::system_clock::time_point t);
std::string MicroTime(std::chrono::system_clock::time_point t);
// Parses RfcTime/MicroTime output (UTC, "Z"; fractional seconds optional). nullopt otherwise.
std::optional<std::chrono::system_clock::time_point> ParseTime(std::string_view s);

}  // namespace gpuheal::kube
