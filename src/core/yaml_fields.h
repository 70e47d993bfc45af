#pragma once
// Validating YAML fields for the agent's config and the controller's policy: every error names
// file:line:column and the key, and says what is accepted.

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

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

// One mapping of a config file: its keys checked once, then each field read into its
// destination when present (absent: the default stays), errors naming file:line:column and
// "section.key". `name` "" is the file's top level.
//   GPUHEAL_TRY(s, Section::Open(err, root["pools"], "pools", {"label",
//   "max_unavailable_percent"})); GPUHEAL_CHECK(s.Int("max_unavailable_percent",
//   p.max_unavailable_percent, 1, 100));
class Section {
 public:
  // An error unless `node` is a mapping with only `known` keys; `not_a_map` replaces the default
  // "\"<name>\" must be a mapping".
  static Result<Section> Open(const ConfigError& err, const YAML::Node& node, std::string name,
                              const std::set<std::string>& known, std::string not_a_map = "");

  const YAML::Node& node() const { return node_; }
  YAML::Node operator[](const char* key) const { return node_[key]; }
  std::string Path(std::string_view key) const;  // "section.key"

  Status String(const char* key, std::string& out);
  Status Bool(const char* key, bool& out);
  // An integer from lo to hi into any integer field (or an optional one).
  template <typename T>
  Status Int(const char* key, T& out, int lo, int hi) {
    if (!node_[key]) return Status::Ok();
    GPUHEAL_TRY(v, AsInt(err_, node_[key], Path(key), lo, hi));
    out = static_cast<T>(v);
    return Status::Ok();
  }
  template <typename T>
  Status Int(const char* key, std::optional<T>& out, int lo, int hi) {
    T v{};
    if (!node_[key]) return Status::Ok();
    GPUHEAL_CHECK(Int(key, v, lo, hi));
    out = v;
    return Status::Ok();
  }
  // A positive duration (allow_zero: or 0s) of at least `min` (0: no minimum).
  Status Duration(const char* key, std::chrono::milliseconds& out, bool allow_zero = false,
                  std::chrono::milliseconds min = std::chrono::milliseconds(0));
  // A list of strings, replacing `out` (an empty list is an error when `non_empty`).
  Status Strings(const char* key, std::vector<std::string>& out, bool non_empty,
                 std::string_view what);

 private:
  Section(const ConfigError& err, YAML::Node node, std::string name)
      : err_(err), node_(std::move(node)), name_(std::move(name)) {}
  const ConfigError& err_;
  YAML::Node node_;
  std::string name_;
};

// "500ms", "30s", "10m", "24h", "7d" -> duration. nullopt when malformed.
std::optional<std::chrono::milliseconds> ParseDuration(std::string_view s);

}  // namespace gpuheal
