#include "core/yaml_fields.h"

#include <fmt/format.h>

#include <charconv>

#include "core/config.h"

namespace gpuheal {

Error ConfigError::At(const YAML::Node& n, const std::string& what) const {
  const YAML::Mark m = n.Mark();
  if (m.is_null()) return Error{fmt::format("{}: {}", source_, what)};
  return Error{fmt::format("{}:{}:{}: {}", source_, m.line + 1, m.column + 1, what)};
}

std::string Join(const std::set<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

std::optional<Error> CheckKeys(const ConfigError& err, const YAML::Node& map, const std::set<std::string>& known,
                               std::string_view section) {
  for (auto it = map.begin(); it != map.end(); ++it) {
    const std::string key = it->first.as<std::string>();
    if (!known.contains(key)) {
      return err.At(it->first, fmt::format("unknown key \"{}\"{} (known keys: {})", key,
                                           section.empty() ? "" : fmt::format(" in {}", section), Join(known)));
    }
  }
  return std::nullopt;
}

Result<std::string> AsString(const ConfigError& err, const YAML::Node& n, std::string_view key) {
  if (!n.IsScalar()) return err.At(n, fmt::format("\"{}\" must be a string", key));
  return n.as<std::string>();
}

Result<bool> AsBool(const ConfigError& err, const YAML::Node& n, std::string_view key) {
  bool v = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) {
    return err.At(n, fmt::format("\"{}\" must be true or false", key));
  }
  return v;
}

Result<int> AsInt(const ConfigError& err, const YAML::Node& n, std::string_view key, int lo, int hi) {
  if (n.IsScalar()) {
    const std::string s = n.as<std::string>();
    int v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && p == s.data() + s.size() && v >= lo && v <= hi) return v;
  }
  return err.At(n, fmt::format("\"{}\" must be an integer from {} to {}", key, lo, hi));
}

Result<std::chrono::milliseconds> AsDuration(const ConfigError& err, const YAML::Node& n, std::string_view key,
                                             bool allow_zero) {
  if (n.IsScalar()) {
    if (auto d = ParseDuration(n.as<std::string>()); d && (d->count() > 0 || (allow_zero && d->count() == 0))) return *d;
  }
  return err.At(n, fmt::format("\"{}\" must be a {}duration such as {}500ms, 30s, 10m, 24h, 7d", key,
                               allow_zero ? "" : "positive ", allow_zero ? "0s, " : ""));
}

}  // namespace gpuheal
