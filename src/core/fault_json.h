#pragma once
// JSON encoding of faults: the schema `gpuheal classify` and `gpuheal agent --standalone` print.

#include <nlohmann/json.hpp>

#include "core/fault.h"

namespace gpuheal {

// The classify fields: line, kind, xid, pci, severity, condition, reason, action, trusted,
// message, plus the optional detail fields that are present for this fault.
nlohmann::ordered_json ToJson(const Fault& f);

// One line of JSON (no newline). Invalid UTF-8 in kernel text is replaced, never thrown on.
std::string ToJsonLine(const nlohmann::ordered_json& j);

}  // namespace gpuheal
