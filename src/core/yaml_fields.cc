#include "core/yaml_fields.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include <charconv>
#include <cstdint>
#include <sstream>
#include <vector>

namespace gpuheal {

Error ConfigError::At(const YAML::Node& n, const std::string& what) const {
  const YAML::Mark m = n.Mark();
  if (m.is_null()) return Error{fmt::format("{}: {}", source_, what)};
  return Error{fmt::format("{}:{}:{}: {}", source_, m.line + 1, m.column + 1, what)};
}

namespace {

// Walks the parser's events rather than the loaded node graph: aliases stay leaves (no cycles),
// and every key keeps its own mark, so the second occurrence of a key can be named.
class DuplicateKeyFinder : public YAML::EventHandler {
 public:
  std::optional<std::pair<std::string, YAML::Mark>> duplicate;

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { Leaf(m, "~"); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { Leaf(m, std::nullopt); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                const std::string& value) override {
    Leaf(m, value);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Open(m, false);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Open(m, true);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Frame {
    bool is_map = false;
    bool expect_key = true;  // maps alternate key, value
    std::set<std::string> keys;
  };

  // A scalar (or null) as a key is compared; an alias or collection as a key is not.
  void Leaf(const YAML::Mark& m, std::optional<std::string> key) {
    if (!stack_.empty() && stack_.back().is_map && stack_.back().expect_key && key &&
        !stack_.back().keys.insert(*key).second && !duplicate) {
      duplicate.emplace(*key, m);
    }
    Advance();
  }
  void Open(const YAML::Mark&, bool is_map) {
    Advance();  // a collection used as a key or value consumes that slot of its parent
    stack_.push_back(Frame{is_map, true, {}});
  }
  void Close() { stack_.pop_back(); }
  void Advance() {
    if (!stack_.empty() && stack_.back().is_map)
      stack_.back().expect_key = !stack_.back().expect_key;
  }

  std::vector<Frame> stack_;
};

}  // namespace

Result<YAML::Node> LoadYaml(std::string_view text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    DuplicateKeyFinder finder;
    // The first document only, as YAML::Load reads: yaml-cpp 0.7 can loop for ever on some
    // malformed text after it (the config fuzz corpus has such an input).
    parser.HandleNextDocument(finder);
    if (finder.duplicate) {
      const auto& [key, m] = *finder.duplicate;
      return Error{fmt::format("{}:{}:{}: key \"{}\" appears twice in the same mapping; keep one",
                               source, m.line + 1, m.column + 1, key)};
    }
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return Error{fmt::format("{}: not valid YAML: {}", source, e.msg)};
    return Error{fmt::format("{}:{}:{}: not valid YAML: {}", source, e.mark.line + 1,
                             e.mark.column + 1, e.msg)};
  }
  return root;
}

std::string Join(const std::set<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

std::optional<Error> CheckKeys(const ConfigError& err, const YAML::Node& map,
                               const std::set<std::string>& known, std::string_view section) {
  for (auto it = map.begin(); it != map.end(); ++it) {
    const std::string key = it->first.as<std::string>();
    if (!known.contains(key)) {
      return err.At(it->first, fmt::format("unknown key \"{}\"{} (known keys: {})", key,
                                           section.empty() ? "" : fmt::format(" in {}", section),
                                           Join(known)));
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

Result<int> AsInt(const ConfigError& err, const YAML::Node& n, std::string_view key, int lo,
                  int hi) {
  if (n.IsScalar()) {
    const std::string s = n.as<std::string>();
    int v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && p == s.data() + s.size() && v >= lo && v <= hi) return v;
  }
  return err.At(n, fmt::format("\"{}\" must be an integer from {} to {}", key, lo, hi));
}

Result<std::chrono::milliseconds> AsDuration(const ConfigError& err, const YAML::Node& n,
                                             std::string_view key, bool allow_zero) {
  if (n.IsScalar()) {
    if (auto d = ParseDuration(n.as<std::string>());
        d && (d->count() > 0 || (allow_zero && d->count() == 0)))
      return *d;
  }
  return err.At(n, fmt::format("\"{}\" must be a {}duration such as {}500ms, 30s, 10m, 24h, 7d",
                               key, allow_zero ? "" : "positive ", allow_zero ? "0s, " : ""));
}

Result<Section> Section::Open(const ConfigError& err, const YAML::Node& node, std::string name,
                              const std::set<std::string>& known, std::string not_a_map) {
  if (!node.IsMap()) {
    return err.At(node, not_a_map.empty() ? fmt::format("\"{}\" must be a mapping", name)
                                          : std::move(not_a_map));
  }
  if (auto e = CheckKeys(err, node, known, name)) return *e;
  return Section(err, node, std::move(name));
}

std::string Section::Path(std::string_view key) const {
  return name_.empty() ? std::string(key) : fmt::format("{}.{}", name_, key);
}

Status Section::String(const char* key, std::string& out) {
  if (!node_[key]) return Status::Ok();
  GPUHEAL_TRY(v, AsString(err_, node_[key], Path(key)));
  out = std::move(v);
  return Status::Ok();
}

Status Section::Bool(const char* key, bool& out) {
  if (!node_[key]) return Status::Ok();
  GPUHEAL_TRY(v, AsBool(err_, node_[key], Path(key)));
  out = v;
  return Status::Ok();
}

Status Section::Duration(const char* key, std::chrono::milliseconds& out, bool allow_zero,
                         std::chrono::milliseconds min) {
  if (!node_[key]) return Status::Ok();
  GPUHEAL_TRY(v, AsDuration(err_, node_[key], Path(key), allow_zero));
  if (v < min) {
    return err_.At(node_[key],
                   fmt::format("\"{}\" must be at least {}", Path(key),
                               min.count() % 1000 == 0 ? fmt::format("{}s", min.count() / 1000)
                                                       : fmt::format("{}ms", min.count())));
  }
  out = v;
  return Status::Ok();
}

Status Section::Strings(const char* key, std::vector<std::string>& out, bool non_empty,
                        std::string_view what) {
  const YAML::Node list = node_[key];
  if (!list) return Status::Ok();
  if (!list.IsSequence() || (non_empty && list.size() == 0))
    return err_.At(list, fmt::format("\"{}\" must be {}", Path(key), what));
  out.clear();
  for (const YAML::Node& item : list) {
    GPUHEAL_TRY(v, AsString(err_, item, Path(key) + "[]"));
    out.push_back(std::move(v));
  }
  return Status::Ok();
}

std::optional<std::chrono::milliseconds> ParseDuration(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data() || v < 0) return std::nullopt;
  std::string_view unit(p, static_cast<size_t>(s.data() + s.size() - p));
  int64_t ms_per = 0;
  if (unit == "ms")
    ms_per = 1;
  else if (unit == "s")
    ms_per = 1000;
  else if (unit == "m")
    ms_per = 60'000;
  else if (unit == "h")
    ms_per = 3'600'000;
  else if (unit == "d")
    ms_per = 86'400'000;
  else
    return std::nullopt;
  if (v > INT64_MAX / ms_per / 2) return std::nullopt;
  return std::chrono::milliseconds(v * ms_per);
}

}  // namespace gpuheal
