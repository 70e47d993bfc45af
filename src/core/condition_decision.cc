#include "core/condition_decision.h"

#include <fmt/format.h>

namespace gpuheal {

std::string DecisionPrefix(const ConditionDecision& d) {
  return fmt::format("[{}/{}] ", ToString(d.severity), ToString(d.action));
}

std::optional<ConditionDecision> ParseDecisionPrefix(std::string_view message) {
  if (!message.starts_with('[')) return std::nullopt;
  const size_t slash = message.find('/');
  const size_t close = message.find("] ");
  if (slash == std::string_view::npos || close == std::string_view::npos || slash > close)
    return std::nullopt;
  const auto severity = ParseSeverity(message.substr(1, slash - 1));
  const auto action = ParseAction(message.substr(slash + 1, close - slash - 1));
  if (!severity || !action) return std::nullopt;
  return ConditionDecision{*severity, *action};
}

}  // namespace gpuheal
