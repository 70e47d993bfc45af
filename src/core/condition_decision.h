#pragma once
// The agent's decision on the fault that holds a condition False, carried to the repair
// controller as the prefix of the condition's message, so that a severity or action overridden or
// escalated on the node is the one the controller acts on. Public contract (docs/reasons.md):
//   "[<severity>/<action>] <description>"   e.g. "[catastrophic/isolate] GPU 0000:3b:00: Xid 48
//   ..."
// A message without the prefix (another tool's condition) leaves the controller to its own
// reading of the reason code.

#include <optional>
#include <string>
#include <string_view>

#include "core/severity.h"

namespace gpuheal {

struct ConditionDecision {
  Severity severity = Severity::kFatal;
  Action action = Action::kQuarantine;
  bool operator==(const ConditionDecision&) const = default;
};

// "[<severity>/<action>] ", with the trailing space.
std::string DecisionPrefix(const ConditionDecision& d);
// The decision at the start of `message`; nullopt when it has none or an unknown word.
std::optional<ConditionDecision> ParseDecisionPrefix(std::string_view message);

}  // namespace gpuheal
