#pragma once
// Validating YAML fields for the agent's config and the controller's policy: every error names
// file:line:column and the key, and says what is accepted.

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpuheal {

class ConfigError {
 public:
  explicit ConfigError(std::string source) : source_(std::move(source)) {}
  Error At(const YAML::Node& n, const std::string& what) const;

 private:
  std::string source_;
};

// Loads YAML text, rejecting syntax errors and a key repeated in one mapping (yaml-cpp keeps the
// first and ignores the rest silently); errors name source:line:column.
Result<YAML::Node> LoadYaml(std::string_view text, const std::string& source);

std::string Join(const std::set<std::string>& keys);
// Rejects keys of `map` not in `known`, naming the first unknown one and its position.
std::optional<Error> CheckKeys(const ConfigError& err, const YAML::Node& map,
                               const std::set<std::string>& known, std::string_view section);
Result<std::string> AsString(const ConfigError& err, const YAML::Node& n, std::string_view key);
Result<bool> AsBool(const ConfigError& err, const YAML::Node& n, std::string_view key);
Result<int> AsInt(const ConfigError& err, const YAML::Node& n, std::string_view key, int lo,
                  int hi);
Result<std::chrono::milliseconds> AsDuration(const ConfigError& err, const YAML::Node& n,
                                             std::string_view key, bool allow_zero = false);

// "500ms", "30s", "10m", "24h", "7d" -> duration. nullopt when malformed.
std::optional<std::chrono::milliseconds> ParseDuration(std::string_view s);

}  // namespace gpuheal
