#include "core/gpu_at_risk.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/pci.h"
#include "core/reasons.h"
#include "core/time.h"

namespace gpuheal {
namespace {
constexpr std::string_view kShape =
    R"(expected {"0000:3b:00": {"since": "2026-01-01T00:00:00Z", "signals": {"row_remap": 1}}, ...})";
constexpr size_t kMaxGpus = 64;
}  // namespace

const std::vector<std::string_view>& PrecursorSignals() {
  static const std::vector<std::string_view> s = {kSignalRowRemap, kSignalContainedEcc,
                                                  kSignalSbeRate, kSignalNvlinkErrors,
                                                  kSignalPcieDegraded};
  return s;
}

std::string_view PrecursorSignalOf(const Fault& f) {
  if (f.pci.empty()) return "";
  // Worse faults act on their own (a pending remap NVML reports is already a critical fault:
  // drain and reset that GPU); a precursor is what does not.
  if (f.severity >= Severity::kCritical) return "";
  if (f.xid) {
    switch (*f.xid) {
      case 63:  // row remapping event: the remap is pending until the GPU's next reset
        return kSignalRowRemap;
      case 94:  // contained uncorrectable ECC error: the GPU runs on, a remap is scheduled
        return kSignalContainedEcc;
      case 92:  // excessive single-bit ECC interrupts
        return kSignalSbeRate;
      default:
        return "";
    }
  }
  if (f.reason == reason::kNvidiaSingleBitErrorStorm) return kSignalSbeRate;
  if (f.reason == reason::kNvidiaNVLinkErrorRate) return kSignalNvlinkErrors;
  if (f.reason == reason::kNvidiaPCIeLinkDegraded) return kSignalPcieDegraded;
  return "";
}

std::string AtRiskToJson(const AtRiskGpus& gpus) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [pci, g] : gpus) {
    nlohmann::ordered_json e;
    e["since"] = kube::RfcTime(g.since);
    e["signals"] = nlohmann::ordered_json::object();
    for (const auto& [s, n] : g.signals) e["signals"][s] = n;
    j[pci] = e;
  }
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

Result<AtRiskGpus> ParseAtRisk(std::string_view json) {
  if (json == "{}") return AtRiskGpus{};
  const std::string_view key = keys::kGpuAtRisk;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err) {
    return Error{fmt::format("{} is not JSON ({}); {}", key, simdjson::error_message(err), kShape)};
  }
  simdjson::dom::object obj;
  if (doc.get_object().get(obj))
    return Error{fmt::format("{} is not a JSON object; {}", key, kShape)};
  AtRiskGpus out;
  for (auto field : obj) {
    auto pci = NormalisePci(field.key);
    if (!pci) {
      return Error{fmt::format("{}: \"{}\" is not a PCI bus id (e.g. 0000:3b:00)", key,
                               std::string(field.key.substr(0, 64)))};
    }
    simdjson::dom::object e;
    if (field.value.get_object().get(e))
      return Error{fmt::format("{}: the entry of {} is not an object; {}", key, *pci, kShape)};
    AtRiskGpu g;
    std::string_view s;
    if (e["since"].get_string().get(s))
      return Error{fmt::format("{}: {}: \"since\" must be an RFC 3339 time", key, *pci)};
    auto since = kube::ParseTime(s);
    if (!since)
      return Error{fmt::format("{}: {}: \"since\" is not an RFC 3339 UTC time: \"{}\"", key, *pci,
                               std::string(s.substr(0, 40)))};
    g.since = std::chrono::time_point_cast<std::chrono::seconds>(*since);
    simdjson::dom::object sig;
    if (e["signals"].get_object().get(sig))
      return Error{fmt::format("{}: {}: \"signals\" must be an object; {}", key, *pci, kShape)};
    for (auto sf : sig) {
      int64_t n = 0;
      if (sf.key.empty() || sf.key.size() > 32 || sf.value.get_int64().get(n) || n < 1) {
        return Error{fmt::format("{}: {}: signal \"{}\" must map to a positive count", key, *pci,
                                 std::string(sf.key.substr(0, 32)))};
      }
      g.signals[std::string(sf.key)] = n;
    }
    out[*pci] = std::move(g);
    if (out.size() > kMaxGpus) return Error{fmt::format("{}: more than {} GPUs", key, kMaxGpus)};
  }
  return out;
}

}  // namespace gpuheal
