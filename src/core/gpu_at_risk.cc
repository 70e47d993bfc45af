#include "core/gpu_at_risk.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/gpu_map_json.h"
#include "core/reasons.h"
#include "core/time.h"

namespace gpuheal {
namespace {
constexpr std::string_view kShape =
    R"(expected {"0000:3b:00": {"since": "2026-01-01T00:00:00Z", "signals": {"row_remap": 1}}, ...})";
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
  AtRiskGpus out;
  auto parsed = ParseGpuMap(
      json, key, kShape, [&](const std::string& pci, simdjson::dom::object e) -> Status {
        AtRiskGpu g;
        auto since = ParseSince(e, key, pci);
        if (!since) return since.error();
        g.since = *since;
        simdjson::dom::object sig;
        if (e["signals"].get_object().get(sig))
          return Error{fmt::format("{}: {}: \"signals\" must be an object; {}", key, pci, kShape)};
        for (auto sf : sig) {
          int64_t n = 0;
          if (sf.key.empty() || sf.key.size() > 32 || sf.value.get_int64().get(n) || n < 1) {
            return Error{fmt::format("{}: {}: signal \"{}\" must map to a positive count", key, pci,
                                     std::string(sf.key.substr(0, 32)))};
          }
          g.signals[std::string(sf.key)] = n;
        }
        out[pci] = std::move(g);
        return Status::Ok();
      });
  if (!parsed) return parsed.error();
  return out;
}

}  // namespace gpuheal
