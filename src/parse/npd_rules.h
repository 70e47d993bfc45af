#pragma once
// User rules in node-problem-detector's system-log-monitor format (kernel-monitor.json, plugin
// kmsg), compiled with RE2 (linear time). Matching follows NPD: each rule's pattern must match at
// the end of the last `bufferSize` messages joined by '\n' (NPD compiles `pattern + "\z"`).

#include <re2/set.h>

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpuheal {

struct NpdRule {
  bool permanent = false;     // "permanent" rules set a condition; "temporary" ones are events
  std::string npd_condition;  // permanent rules: the NPD condition type the file names
  // permanent rules: the condition gpuheal writes: npd_condition when it is one of gpuheal's
  // five, otherwise KernelReady (the rule's reason names the problem)
  std::string condition;
  std::string reason;
  std::string pattern;
};

struct NpdConfig {
  std::string source;      // the file they came from
  std::string npd_source;  // NPD's "source" field (e.g. "kernel-monitor")
  int buffer_size = 10;
  std::vector<NpdRule> rules;
  std::vector<std::string> notes;  // said once at load: how the file's conditions are reported
};

// Parses one NPD config file; errors name the file and the rule (index, reason) at fault.
Result<NpdConfig> LoadNpdConfig(const std::string& path);
Result<NpdConfig> ParseNpdConfig(std::string_view text, const std::string& source);

// Matches all rules of all loaded files in one RE2::Set pass per message.
class NpdMatcher {
 public:
  static Result<std::unique_ptr<NpdMatcher>> Create(std::vector<NpdConfig> configs);

  // Pushes `message` into the buffer and returns the rules that now match (indices into rules()).
  const std::vector<int>& Push(std::string_view message);
  const NpdRule& rule(int i) const { return *rules_[static_cast<size_t>(i)]; }
  bool empty() const { return rules_.empty(); }

 private:
  NpdMatcher() = default;
  std::vector<NpdConfig> configs_;
  std::vector<const NpdRule*> rules_;
  // Rules that cannot match a newline only ever match within the newest line, so they run on
  // that line alone; the rest run on the joined buffer, as in NPD. Same results, far less work.
  std::unique_ptr<RE2::Set> line_set_;
  std::unique_ptr<RE2::Set> buffer_set_;
  std::vector<int> line_index_;  // set index -> rule index
  std::vector<int> buffer_index_;
  size_t buffer_size_ = 1;
  std::deque<std::string> buffer_;
  std::string joined_;
  std::vector<int> hits_;
  std::vector<int> set_hits_;
};

// Whether `pattern` might match a newline (or is anchored with ^, which in NPD's joined buffer
// refers to the buffer's start): such rules must see the joined buffer. Conservative.
bool NpdPatternMaySpanLines(const std::string& pattern);

}  // namespace gpuheal
