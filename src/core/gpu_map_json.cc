#include "core/gpu_map_json.h"

#include <fmt/format.h>

#include "core/pci.h"
#include "core/time.h"

namespace gpuheal {
namespace {
constexpr size_t kMaxGpus = 64;
}  // namespace

Status ParseGpuMap(
    std::string_view json, std::string_view key, std::string_view shape,
    const std::function<Status(const std::string& pci, simdjson::dom::object entry)>& entry) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err) {
    return Error{fmt::format("{} is not JSON ({}); {}", key, simdjson::error_message(err), shape)};
  }
  simdjson::dom::object obj;
  if (doc.get_object().get(obj))
    return Error{fmt::format("{} is not a JSON object; {}", key, shape)};
  size_t n = 0;
  for (auto field : obj) {
    auto pci = NormalisePci(field.key);
    if (!pci) {
      return Error{fmt::format("{}: \"{}\" is not a PCI bus id (e.g. 0000:3b:00)", key,
                               std::string(field.key.substr(0, 64)))};
    }
    simdjson::dom::object e;
    if (field.value.get_object().get(e))
      return Error{fmt::format("{}: the entry of {} is not an object; {}", key, *pci, shape)};
    if (++n > kMaxGpus) return Error{fmt::format("{}: more than {} GPUs", key, kMaxGpus)};
    if (auto s = entry(*pci, e); !s) return s;
  }
  return Status::Ok();
}

Result<std::chrono::system_clock::time_point> ParseSince(simdjson::dom::object entry,
                                                         std::string_view key,
                                                         const std::string& pci) {
  std::string_view s;
  if (entry["since"].get_string().get(s))
    return Error{fmt::format("{}: {}: \"since\" must be an RFC 3339 time", key, pci)};
  auto since = kube::ParseTime(s);
  if (!since) {
    return Error{fmt::format("{}: {}: \"since\" is not an RFC 3339 UTC time: \"{}\"", key, pci,
                             std::string(s.substr(0, 40)))};
  }
  return std::chrono::system_clock::time_point(
      std::chrono::time_point_cast<std::chrono::seconds>(*since));
}

}  // namespace gpuheal
