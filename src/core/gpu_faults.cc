#include "core/gpu_faults.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <nlohmann/json.hpp>

#include "core/gpu_map_json.h"
#include "core/pci.h"
#include "core/time.h"

namespace gpuheal {
namespace {
constexpr std::string_view kShape =
    R"(expected {"0000:3b:00": {"severity": "critical", "reason": "NvidiaXID45Warning", "since": "2026-01-01T00:00:00Z", "count": 1}, ...})";
}  // namespace

std::string GpuFaultsToJson(const GpuFaults& faults) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [pci, f] : faults) {
    nlohmann::ordered_json e;
    e["severity"] = std::string(ToString(f.severity));
    e["reason"] = f.reason;
    if (f.xid) e["xid"] = f.xid;
    e["since"] = kube::RfcTime(f.since);
    e["count"] = f.count;
    if (f.pods) {
      e["pods"] = nlohmann::ordered_json::array();
      for (const auto& p : *f.pods) {
        e["pods"].push_back(
            {{"namespace", p.namespace_}, {"name", p.name}, {"container", p.container}});
      }
    }
    j[pci] = e;
  }
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

Result<GpuFaults> ParseGpuFaults(std::string_view json) {
  // What a healthy node's agent writes: the controller reads it for every node in every gate
  // pass, so it costs no parser.
  if (json == "{}") return GpuFaults{};
  const std::string_view key = keys::kGpuFaults;
  GpuFaults out;
  auto parsed = ParseGpuMap(
      json, key, kShape, [&](const std::string& pci, simdjson::dom::object e) -> Status {
        GpuFaultEntry f;
        std::string_view s;
        if (e["severity"].get_string().get(s))
          return Error{fmt::format("{}: {}: \"severity\" must be a string", key, pci)};
        auto sev = ParseSeverity(s);
        if (!sev) {
          return Error{fmt::format(
              "{}: {}: unknown severity \"{}\" (info, warn, critical, fatal, catastrophic)", key,
              pci, std::string(s.substr(0, 32)))};
        }
        f.severity = *sev;
        if (e["reason"].get_string().get(s) || s.empty() || s.size() > 128) {
          return Error{fmt::format("{}: {}: \"reason\" must be a reason code", key, pci)};
        }
        f.reason = std::string(s);
        auto since = ParseSince(e, key, pci);
        if (!since) return since.error();
        f.since = *since;
        int64_t n = 0;
        if (e["count"].get_int64().get(n) || n < 1)
          return Error{fmt::format("{}: {}: \"count\" must be a positive integer", key, pci)};
        f.count = n;
        if (simdjson::dom::element x; !e["xid"].get(x)) {
          int64_t xid = 0;
          if (x.get_int64().get(xid) || xid < 1 || xid > 100000)
            return Error{fmt::format("{}: {}: \"xid\" must be an Xid number", key, pci)};
          f.xid = static_cast<int>(xid);
        }
        if (simdjson::dom::element x; !e["pods"].get(x)) {
          simdjson::dom::array pods;
          if (x.get_array().get(pods) || pods.size() > 1024) {
            return Error{fmt::format(
                "{}: {}: \"pods\" must be a list of at most 1024 {{\"namespace\", \"name\", "
                "\"container\"}}",
                key, pci)};
          }
          f.pods.emplace();
          for (simdjson::dom::element p : pods) {
            GpuHolder h;
            std::string_view ns, name, container;
            if (p["namespace"].get_string().get(ns) || p["name"].get_string().get(name) ||
                p["container"].get_string().get(container) || ns.empty() || name.empty() ||
                ns.size() > 253 || name.size() > 253 || container.size() > 253) {
              return Error{
                  fmt::format("{}: {}: each of \"pods\" must be {{\"namespace\", \"name\", "
                              "\"container\"}} with a namespace and a name",
                              key, pci)};
            }
            f.pods->push_back(
                GpuHolder{std::string(ns), std::string(name), std::string(container)});
          }
        }
        out[pci] = std::move(f);
        return Status::Ok();
      });
  if (!parsed) return parsed.error();
  return out;
}

}  // namespace gpuheal
