#pragma once
// Base64 (RFC 4648, standard alphabet) decoding for Kubernetes *-data fields and Secret values.

#include <string>
#include <string_view>

#include "core/result.h"

namespace gpuheal {

// Padding optional; newlines and spaces ignored. `where` names the field in the error.
Result<std::string> Base64Decode(std::string_view in, const std::string& where);

}  // namespace gpuheal
