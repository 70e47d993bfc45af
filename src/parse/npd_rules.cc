#include "parse/npd_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "core/file.h"
#include "core/severity.h"

namespace gpuheal {
namespace {

constexpr std::string_view kKubeletConditions[] = {"Ready", "MemoryPressure", "DiskPressure",
                                                   "PIDPressure", "NetworkUnavailable"};

Error Err(const std::string& source, const std::string& what) {
  return Error{fmt::format("{}: {}", source, what)};
}

}  // namespace

Result<NpdConfig> ParseNpdConfig(std::string_view text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return Err(source, fmt::format("not valid JSON (byte {}): {}", e.byte, e.what()));
  }
  if (!j.is_object())
    return Err(source, "expected a JSON object (an NPD system-log-monitor config)");
  NpdConfig cfg;
  cfg.source = source;
  // NPD (Go encoding/json) ignores fields it does not know, so gpuheal does too: an existing
  // kernel-monitor.json with pluginConfig, logPath, lookback, metricsReporting... loads unchanged.
  auto str = [&](const char* key, std::string& out) -> Status {
    if (!j.contains(key)) return Status::Ok();
    if (!j[key].is_string()) return Err(source, fmt::format("\"{}\" must be a string", key));
    out = j[key].get<std::string>();
    return Status::Ok();
  };
  std::string plugin;
  if (auto s = str("plugin", plugin); !s) return s.error();
  if (!plugin.empty() && plugin != "kmsg") {
    return Err(source,
               fmt::format("plugin \"{}\" is not supported: gpuheal reads the kernel log, so "
                           "only kernel-monitor configs (\"plugin\": \"kmsg\") apply",
                           plugin));
  }
  if (auto s = str("source", cfg.npd_source); !s) return s.error();
  if (j.contains("bufferSize")) {
    if (!j["bufferSize"].is_number_integer() || j["bufferSize"].get<int64_t>() < 0 ||
        j["bufferSize"].get<int64_t>() > 1000) {
      return Err(source, "\"bufferSize\" must be an integer between 0 and 1000");
    }
    cfg.buffer_size = j["bufferSize"].get<int>();
    if (cfg.buffer_size == 0) cfg.buffer_size = 10;  // NPD's default
  }
  std::set<std::string> conditions;
  if (j.contains("conditions")) {
    if (!j["conditions"].is_array()) return Err(source, "\"conditions\" must be an array");
    for (size_t i = 0; i < j["conditions"].size(); ++i) {
      const auto& c = j["conditions"][i];
      if (!c.is_object() || !c.contains("type") || !c["type"].is_string()) {
        return Err(source, fmt::format("conditions[{}]: needs a string \"type\"", i));
      }
      conditions.insert(c["type"].get<std::string>());
    }
  }
  if (j.contains("rules")) {
    if (!j["rules"].is_array()) return Err(source, "\"rules\" must be an array");
    for (size_t i = 0; i < j["rules"].size(); ++i) {
      const auto& r = j["rules"][i];
      const std::string where = fmt::format("rules[{}]", i);
      if (!r.is_object()) return Err(source, where + ": must be an object");
      NpdRule rule;
      for (const char* key : {"type", "reason", "pattern"}) {
        if (!r.contains(key) || !r[key].is_string()) {
          return Err(source, fmt::format("{}: needs a string \"{}\"", where, key));
        }
      }
      const std::string type = r["type"].get<std::string>();
      rule.reason = r["reason"].get<std::string>();
      rule.pattern = r["pattern"].get<std::string>();
      const std::string named = fmt::format("{} (reason {})", where, rule.reason);
      if (type == "permanent") {
        rule.permanent = true;
        if (!r.contains("condition") || !r["condition"].is_string()) {
          return Err(source, named + ": a permanent rule needs a string \"condition\"");
        }
        rule.npd_condition = r["condition"].get<std::string>();
        if (!conditions.contains(rule.npd_condition)) {
          return Err(source, fmt::format("{}: condition \"{}\" is not declared in \"conditions\"",
                                         named, rule.npd_condition));
        }
        if (std::find(std::begin(kKubeletConditions), std::end(kKubeletConditions),
                      rule.npd_condition) != std::end(kKubeletConditions)) {
          return Err(
              source,
              fmt::format("{}: condition \"{}\" belongs to the kubelet, and gpuheal never writes "
                          "the kubelet's conditions; name a condition of your own (it is reported "
                          "as KernelReady=False with this rule's reason)",
                          named, rule.npd_condition));
        }
        // The agent writes only its five condition types (NPD's own would read True = problem,
        // the inverse of ours), so another condition becomes KernelReady with the rule's reason.
        if (ParseCondition(rule.npd_condition)) {
          rule.condition = rule.npd_condition;
        } else {
          rule.condition = std::string(ToString(Condition::kKernelReady));
          cfg.notes.push_back(
              fmt::format("{}: {}: NPD condition \"{}\" is reported as KernelReady=False with "
                          "reason {}",
                          source, named, rule.npd_condition, rule.reason));
        }
      } else if (type != "temporary") {
        return Err(source,
                   fmt::format("{}: type must be \"temporary\" or \"permanent\", not \"{}\"", named,
                               type));
      }
      RE2 probe(rule.pattern + "\\z", RE2::Quiet);
      if (!probe.ok()) {
        return Err(source,
                   fmt::format("{}: pattern {} is not accepted by RE2 ({}); RE2 has no "
                               "backreferences or lookaround, rewrite the pattern without them",
                               named, nlohmann::json(rule.pattern).dump(), probe.error()));
      }
      cfg.rules.push_back(std::move(rule));
    }
  }
  return cfg;
}

Result<NpdConfig> LoadNpdConfig(const std::string& path) {
  auto text = ReadWholeFile(path);
  if (!text) return Error{fmt::format("{}: cannot open NPD rules file", path)};
  return ParseNpdConfig(*text, path);
}

bool NpdPatternMaySpanLines(const std::string& pattern) {
  for (const char* token : {"\\n", "\\s", "\\D", "\\W", "\\x", "\\0", "\\p", "\\P", "\\C", "\\v",
                            "[^", "(?s", "(?m", "[[:", "^"}) {
    if (pattern.find(token) != std::string::npos) return true;
  }
  return pattern.find('\n') != std::string::npos;
}

Result<std::unique_ptr<NpdMatcher>> NpdMatcher::Create(std::vector<NpdConfig> configs) {
  std::unique_ptr<NpdMatcher> m(new NpdMatcher());
  m->configs_ = std::move(configs);
  RE2::Options opts;
  opts.set_log_errors(false);
  m->line_set_ = std::make_unique<RE2::Set>(opts, RE2::UNANCHORED);
  m->buffer_set_ = std::make_unique<RE2::Set>(opts, RE2::UNANCHORED);
  std::set<std::string> line_files, buffer_files;
  for (const NpdConfig& c : m->configs_) {
    m->buffer_size_ = std::max(m->buffer_size_, static_cast<size_t>(c.buffer_size));
    for (const NpdRule& r : c.rules) {
      const bool spans = NpdPatternMaySpanLines(r.pattern);
      (spans ? buffer_files : line_files).insert(c.source);
      RE2::Set& set = spans ? *m->buffer_set_ : *m->line_set_;
      std::string err;
      if (set.Add(r.pattern + "\\z", &err) < 0) {
        return Error{fmt::format("{}: rule {}: {}", c.source, r.reason, err)};
      }
      (spans ? m->buffer_index_ : m->line_index_).push_back(static_cast<int>(m->rules_.size()));
      m->rules_.push_back(&r);
    }
  }
  // All rules compile into one automaton, so past RE2's memory budget no single rule is at fault:
  // name every file that contributed.
  for (auto [set, index, files] :
       {std::tuple{m->line_set_.get(), &m->line_index_, &line_files},
        std::tuple{m->buffer_set_.get(), &m->buffer_index_, &buffer_files}}) {
    if (!index->empty() && !set->Compile()) {
      std::string names;
      for (const std::string& f : *files) names += (names.empty() ? "" : ", ") + f;
      return Error{fmt::format(
          "{}: RE2 could not compile these {} NPD rules together: the set is larger than "
          "RE2's {} MiB budget; use fewer rules or shorter patterns",
          names, index->size(), opts.max_mem() >> 20)};
    }
  }
  return m;
}

const std::vector<int>& NpdMatcher::Push(std::string_view message) {
  hits_.clear();
  if (rules_.empty()) return hits_;
  if (!line_index_.empty()) {
    set_hits_.clear();
    line_set_->Match(message, &set_hits_);
    for (int i : set_hits_) hits_.push_back(line_index_[static_cast<size_t>(i)]);
  }
  if (!buffer_index_.empty()) {
    if (buffer_.size() == buffer_size_) buffer_.pop_front();
    buffer_.emplace_back(message);
    joined_.clear();
    for (size_t i = 0; i < buffer_.size(); ++i) {
      if (i) joined_.push_back('\n');
      joined_ += buffer_[i];
    }
    set_hits_.clear();
    buffer_set_->Match(joined_, &set_hits_);
    for (int i : set_hits_) hits_.push_back(buffer_index_[static_cast<size_t>(i)]);
  }
  std::sort(hits_.begin(), hits_.end());
  return hits_;
}

}  // namespace gpuheal
