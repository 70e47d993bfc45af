#pragma once
// Kubernetes names and label values derived from a node's name, which may be up to 253
// characters (a DNS subdomain) while a label value is at most 63. A name that fits is used as it
// is; a longer one is cut and given a hash of the whole, so distinct nodes keep distinct values.

#include <string>
#include <string_view>

namespace gpuheal {

// The value of a label naming `node` (gpuheal.io/node on NodeRepair records): `node` itself when
// it is at most 63 characters, else its first characters, '-' and 16 hex digits of its hash.
std::string NodeLabelValue(std::string_view node);

// `base` + "-" + `suffix` as an object name of at most `max` characters (253: a DNS subdomain),
// `base` cut and hashed as above when the whole would be longer.
std::string NameWithSuffix(std::string_view base, std::string_view suffix, size_t max = 253);

}  // namespace gpuheal
