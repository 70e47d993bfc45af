#include "core/recovery_request.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/pci.h"

namespace gpuheal {
namespace {
constexpr std::string_view kShape =
    R"(expected {"id": "<request id>", "gpus": ["0000:3b:00", ...]})";
constexpr size_t kMaxGpus = 64;
}  // namespace

Result<RecoveryRequest> ParseRecoveryRequest(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err) {
    return Error{fmt::format("{} is not JSON ({}); {}", kRecoveryRequestAnnotation,
                             simdjson::error_message(err), kShape)};
  }
  simdjson::dom::object obj;
  if (doc.get_object().get(obj))
    return Error{fmt::format("{} is not a JSON object; {}", kRecoveryRequestAnnotation, kShape)};
  RecoveryRequest r;
  std::string_view id;
  if (obj["id"].get_string().get(id) || id.empty() || id.size() > 253) {
    return Error{fmt::format("{}: \"id\" must be a non-empty string of at most 253 characters; {}",
                             kRecoveryRequestAnnotation, kShape)};
  }
  r.id = std::string(id);
  simdjson::dom::array gpus;
  if (obj["gpus"].get_array().get(gpus)) {
    return Error{fmt::format("{}: \"gpus\" must be a list of PCI bus ids; {}",
                             kRecoveryRequestAnnotation, kShape)};
  }
  for (simdjson::dom::element g : gpus) {
    std::string_view s;
    if (g.get_string().get(s))
      return Error{
          fmt::format("{}: \"gpus\" holds a non-string; {}", kRecoveryRequestAnnotation, kShape)};
    auto pci = NormalisePci(s);
    if (!pci) {
      return Error{
          fmt::format("{}: \"{}\" is not a PCI bus id (e.g. 0000:3b:00 or 00000000:3B:00.0)",
                      kRecoveryRequestAnnotation, std::string(s.substr(0, 64)))};
    }
    if (std::find(r.gpus.begin(), r.gpus.end(), *pci) == r.gpus.end()) r.gpus.push_back(*pci);
  }
  if (r.gpus.empty())
    return Error{fmt::format("{}: \"gpus\" is empty; {}", kRecoveryRequestAnnotation, kShape)};
  if (r.gpus.size() > kMaxGpus)
    return Error{fmt::format("{}: more than {} GPUs", kRecoveryRequestAnnotation, kMaxGpus)};
  return r;
}

Result<RecoveryAnswer> ParseRecoveryStatus(std::string_view json) {
  const std::string_view key = kRecoveryStatusAnnotation;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err) {
    return Error{fmt::format("{} is not JSON ({})", key, simdjson::error_message(err))};
  }
  simdjson::dom::object obj;
  if (doc.get_object().get(obj)) return Error{fmt::format("{} is not a JSON object", key)};
  RecoveryAnswer a;
  std::string_view s;
  if (!obj["id"].get_string().get(s)) a.id = std::string(s.substr(0, 253));
  if (obj["state"].get_string().get(s))
    return Error{fmt::format("{}: \"state\" must be a string", key)};
  if (s != "running" && s != "succeeded" && s != "failed" && s != "rejected") {
    return Error{fmt::format("{}: unknown state \"{}\" (running, succeeded, failed, rejected)", key,
                             std::string(s.substr(0, 32)))};
  }
  a.state = std::string(s);
  if (!obj["error"].get_string().get(s)) a.detail = std::string(s.substr(0, 512));
  simdjson::dom::object gpus;
  if (!obj["gpus"].get_object().get(gpus)) {
    for (auto g : gpus) {
      simdjson::dom::object e;
      bool ok = true;
      if (g.value.get_object().get(e) || e["ok"].get_bool().get(ok) || ok) continue;
      std::string_view step, msg;
      if (e["step"].get_string().get(step)) step = "?";
      if (e["message"].get_string().get(msg)) msg = "";
      if (a.detail.size() < 512) {
        a.detail += fmt::format("{}GPU {}: {}: {}", a.detail.empty() ? "" : "; ",
                                std::string(g.key.substr(0, 32)), std::string(step.substr(0, 32)),
                                std::string(msg.substr(0, 200)));
      }
    }
  }
  return a;
}

void RecoveryStatus::Settle() {
  if (state == "rejected") return;
  bool all_final = !gpus.empty(), all_ok = true;
  for (const auto& [pci, g] : gpus) {
    all_final &= g.final;
    all_ok &= g.ok;
  }
  state = !all_final ? "running" : all_ok ? "succeeded" : "failed";
}

std::string RecoveryStatus::ToJson(const std::string& updated) const {
  nlohmann::ordered_json j;
  j["id"] = id;
  j["state"] = state;
  if (!error.empty()) j["error"] = error;
  nlohmann::ordered_json g = nlohmann::ordered_json::object();
  for (const auto& [pci, s] : gpus) {
    g[pci] = {{"step", s.step}, {"ok", s.ok}, {"message", s.message}};
  }
  j["gpus"] = g;
  j["updated"] = updated;
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace gpuheal
