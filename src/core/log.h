#pragma once
// The agent's and the controller's log: one JSON object per line on stderr
// ({"level": ..., "msg": ..., fields...}); invalid UTF-8 in fields is replaced, never thrown on.

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace gpuheal {

inline void Log(std::string_view level, std::string_view msg, nlohmann::ordered_json fields = {}) {
  nlohmann::ordered_json j;
  j["level"] = level;
  j["msg"] = msg;
  if (fields.is_object()) {
    for (auto& [k, v] : fields.items()) j[k] = v;
  }
  std::string line =
      j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  [[maybe_unused]] ssize_t n = write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace gpuheal
