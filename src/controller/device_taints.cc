#include "controller/device_taints.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "core/keys.h"
#include "core/log.h"
#include "core/object_names.h"
#include "core/pci.h"

namespace gpuheal::controller {
namespace {

using nlohmann::json;

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::string DeviceTaints::RuleName(const std::string& record, const std::string& pci) {
  std::string p = pci;
  std::replace(p.begin(), p.end(), ':', '-');
  std::replace(p.begin(), p.end(), '.', '-');
  return NameWithSuffix(record, p);
}

bool DeviceTaints::Served() {
  const auto now = clock_.Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (served_ && now - asked_ < std::chrono::minutes(10)) return *served_;
  }
  auto res = api_.Get(std::string(kDeviceTaintRulesPath) + "?limit=1");
  std::lock_guard<std::mutex> lock(mu_);
  if (!res) return served_.value_or(false);  // unreachable: ask again next time
  asked_ = now;
  served_ = res->ok();
  return *served_;
}

std::optional<std::vector<DeviceRef>> DeviceTaints::DevicesOf(
    const std::string& node, const std::vector<std::string>& pcis) {
  auto res = api_.Get("/apis/resource.k8s.io/v1/resourceslices?fieldSelector=" +
                      kube::UrlEncode("spec.nodeName=" + node));
  if (!res || !res->ok()) return std::nullopt;
  const json list = json::parse(res->body, nullptr, false);
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array())
    return std::nullopt;
  std::vector<DeviceRef> out;
  for (const auto& slice : list["items"]) {
    const json spec = slice.value("spec", json::object());
    if (Str(spec, "nodeName") != node) continue;
    const std::string driver = Str(spec, "driver");
    const std::string pool = Str(spec.value("pool", json::object()), "name");
    for (const auto& d : spec.value("devices", json::array())) {
      const json attrs = d.value("attributes", json::object());
      auto bus = attrs.find("pciBusID");
      if (bus == attrs.end() || !bus->is_object()) continue;
      auto pci = NormalisePci(Str(*bus, "string"));
      if (!pci || std::find(pcis.begin(), pcis.end(), *pci) == pcis.end()) continue;
      out.push_back({driver, pool, Str(d, "name"), *pci});
    }
  }
  std::set<std::string> found;
  for (const auto& d : out) found.insert(d.pci);
  if (found.size() != std::set<std::string>(pcis.begin(), pcis.end()).size()) return std::nullopt;
  return out;
}

Result<std::string> DeviceTaints::Taint(const std::string& record, const std::string& node,
                                        const DeviceRef& d, const std::string& value,
                                        const std::string& effect) {
  const std::string name = RuleName(record, d.pci);
  const json rule = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "DeviceTaintRule"},
      {"metadata",
       {{"name", name}, {"labels", {{std::string(keys::kRepairNodeLabel), NodeLabelValue(node)}}}}},
      {"spec",
       {{"deviceSelector", {{"driver", d.driver}, {"pool", d.pool}, {"device", d.device}}},
        {"taint",
         {{"key", std::string(keys::kFaultTaint)}, {"value", value}, {"effect", effect}}}}}};
  auto res = api_.Create(std::string(kDeviceTaintRulesPath), rule);
  if (!res) return res.error();
  if (!res->ok() && res->status != 409)
    return Error{"DeviceTaintRule " + name + ": " + res->Describe()};
  return name;
}

Status DeviceTaints::Untaint(const std::vector<std::string>& names) {
  for (const auto& name : names) {
    const std::string path = std::string(kDeviceTaintRulesPath) + "/" + name;
    auto res = api_.Delete(path);
    if (!res) return res.error();
    if (!res->ok() && res->status != 404) return Error{path + ": " + res->Describe()};
  }
  return Status::Ok();
}

Result<std::vector<std::string>> DeviceTaints::PodsUsing(const std::vector<DeviceRef>& devices) {
  auto res = api_.Get("/apis/resource.k8s.io/v1/resourceclaims");
  if (!res) return res.error();
  if (!res->ok()) return Error{"listing ResourceClaims: " + res->Describe()};
  const json list = json::parse(res->body, nullptr, false);
  std::set<std::string> pods;
  for (const auto& claim : list.value("items", json::array())) {
    const json status = claim.value("status", json::object());
    bool holds = false;
    for (const auto& r : status.value("allocation", json::object())
                             .value("devices", json::object())
                             .value("results", json::array())) {
      for (const auto& d : devices) {
        holds |= Str(r, "driver") == d.driver && Str(r, "pool") == d.pool &&
                 Str(r, "device") == d.device;
      }
    }
    if (!holds) continue;
    const std::string ns = Str(claim.value("metadata", json::object()), "namespace");
    for (const auto& ref : status.value("reservedFor", json::array())) {
      if (Str(ref, "resource") == "pods") pods.insert(ns + "/" + Str(ref, "name"));
    }
  }
  return std::vector<std::string>(pods.begin(), pods.end());
}

}  // namespace gpuheal::controller
