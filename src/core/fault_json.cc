#include "core/fault_json.h"

namespace gpuheal {

std::string_view ToString(FaultKind k) {
  switch (k) {
    case FaultKind::kXid:
      return "xid";
    case FaultKind::kGpuFallenOffBus:
      return "gpu_fallen_off_bus";
    case FaultKind::kSxid:
      return "sxid";
    case FaultKind::kKernel:
      return "kernel";
    case FaultKind::kStorage:
      return "storage";
    case FaultKind::kNetwork:
      return "network";
    case FaultKind::kRule:
      return "rule";
    case FaultKind::kGpuHealth:
      return "gpu_health";
    case FaultKind::kRuntime:
      return "runtime";
  }
  return "kernel";
}

nlohmann::ordered_json ToJson(const Fault& f) {
  nlohmann::ordered_json j;
  j["line"] = f.line;
  j["kind"] = ToString(f.kind);
  j["xid"] = f.xid ? nlohmann::ordered_json(*f.xid) : nlohmann::ordered_json(nullptr);
  j["pci"] = f.pci.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.pci);
  j["severity"] = ToString(f.severity);
  j["condition"] = f.condition;
  j["reason"] = f.reason;
  j["action"] = ToString(f.action);
  j["trusted"] = f.trusted;
  j["message"] = f.message;
  if (f.sxid) j["sxid"] = *f.sxid;
  if (!f.uuid.empty()) j["uuid"] = f.uuid;
  if (f.gpu_instance) j["gpu_instance"] = *f.gpu_instance;
  if (f.compute_instance) j["compute_instance"] = *f.compute_instance;
  if (f.pid) j["pid"] = *f.pid;
  if (!f.process.empty()) j["process"] = f.process;
  if (f.subcode) j["subcode"] = *f.subcode;
  if (!f.unit.empty()) j["unit"] = f.unit;
  if (f.recovery_action) j["recovery_action"] = *f.recovery_action;
  if (f.link) j["link"] = *f.link;
  if (!f.decode.empty()) j["decode"] = f.decode;
  if (!f.device.empty()) j["device"] = f.device;
  if (f.consequence_of) j["consequence_of"] = *f.consequence_of;
  if (f.count) j["count"] = *f.count;
  if (!f.incident.empty()) j["incident"] = f.incident;
  if (!f.repeat_of.empty()) j["repeat_of"] = f.repeat_of;
  if (f.escalated) j["escalated"] = true;
  if (f.escalation)
    j["escalation"] = {{"rule", f.escalation->rule}, {"evidence", f.escalation->evidence}};
  if (f.injected) j["injected"] = true;
  if (f.source != "kmsg") j["source"] = f.source;
  return j;
}

}  // namespace gpuheal

namespace gpuheal {

std::string ToJsonLine(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace gpuheal
