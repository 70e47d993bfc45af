// The GPU-level rung: a critical fault of single GPUs leaves the node in service; the node's agent
// drains and resets just those GPUs (gpuheal.io/gpu-recovery-request, answered in
// gpuheal.io/gpu-recovery-status). Without an answer in time, or on a failed reset, the node is
// quarantined.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "controller/repair.h"
#include "core/keys.h"
#include "core/reasons.h"

namespace gpuheal::controller {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

bool Repairer::RequestGpuRecovery(const kube::Node& node, const std::vector<std::string>& gpus,
                                  RepairRecord& r) {
  const std::string request = nlohmann::json{{"id", r.cr.meta.name}, {"gpus", gpus}}.dump();
  auto res = api_.Update(kube::NodePath(node.meta.name), [&](nlohmann::json& n) {
    auto& ann = n["metadata"]["annotations"];
    if (ann.is_object() && ann.value(std::string(keys::kGpuRecoveryRequest), "") == request)
      return false;
    ann[std::string(keys::kGpuRecoveryRequest)] = request;
    return true;
  });
  if (!res || !res->ok()) return false;
  const std::string list = fmt::format("{}", fmt::join(gpus, ", "));
  r.Record(Step::kGpuRecoveryRequested, clock_.Now(), list);
  r.Action(fmt::format("requested GPU recovery of {} from the node's agent", list));
  return true;
}

std::string Repairer::RecoveryFailure(const std::optional<RecoveryAnswer>& answer, SysTime asked,
                                      SysTime now) const {
  if (answer && (answer->state == "failed" || answer->state == "rejected"))
    return fmt::format("the agent's GPU recovery {}: {}", answer->state, answer->detail);
  if (now - asked >= policy_.critical_request_timeout) {
    return fmt::format(
        "no answer from the node's agent within {} s",
        duration_cast<std::chrono::seconds>(policy_.critical_request_timeout).count());
  }
  return "";
}

Next Repairer::RepairGpu(const kube::Node& node, const NodeFault& f, RepairRecord& r) {
  const auto now = clock_.Now();
  // Gates: pause, the attempt cap and the breaker hold a GPU reset too; the pool gate does not
  // (the node stays in service). A GPU past the attempt cap is bad hardware: quarantine the node.
  if (const GateResult held = Gate(node, static_cast<int>(r.cr.attempts), false)) {
    Held(node, r, held);
    if (held.kind == GateResult::Kind::kAttemptCap) {
      Quarantine(node, f);
      return std::nullopt;
    }
    return milliseconds(10000);
  }
  r.Gate("");
  const std::string id = r.cr.meta.name;
  if (!r.Done(Step::kGpuRecoveryRequested)) {
    const std::string gpus = fmt::format("{}", fmt::join(f.gpus, ", "));
    // Where DRA names the GPUs, the scheduler places no new claim on them meanwhile, and the pods
    // holding them (just those) checkpoint and go before the reset. With a device plugin, the
    // pods the agent read from the kubelet's PodResources go the same way. Without either, the
    // agent's drain waits for the GPU's processes.
    const auto devices = TaintDevices(node, f, r, std::string(ToString(f.severity)), "NoSchedule");
    if (!devices) return milliseconds(2000);
    if (!devices->empty()) {
      if (auto wait = DrainDeviceHolders(node, *devices, r, now)) return *wait;
    } else if (f.gpu_holders) {
      const std::set<std::string> holders(f.gpu_holders->begin(), f.gpu_holders->end());
      if (auto wait = DrainGpuHolders(node, holders, r, now)) return *wait;
    }
    if (dry_run_) {
      r.Action("would request GPU recovery of " + gpus + " (dry-run)");
      r.Message("dry-run: would ask the agent to drain and reset GPU " + gpus);
      return std::nullopt;
    }
    if (!RequestGpuRecovery(node, f.gpus, r)) return milliseconds(2000);
    r.Phase("Remediating", now,
            fmt::format("{}: asked the node's agent to drain and reset GPU {} (request {})",
                        f.reason, gpus, id));
    r.Message(fmt::format("waiting for the agent to drain and reset GPU {}", gpus));
    Event(node, "Normal", std::string(reason::kGPURecoveryRequested),
          fmt::format("request {} for GPU {}", id, gpus));
    return policy_.critical_request_timeout;
  }
  const std::optional<RecoveryAnswer> answer = AnswerTo(node, id);
  const auto asked = r.At("Remediating").value_or(now);
  if (answer && answer->state == "succeeded") {
    if (!UntaintDevices(r)) return milliseconds(2000);
    r.Phase(
        "Recovered", now,
        "the agent drained, reset and verified GPU " + fmt::format("{}", fmt::join(f.gpus, ", ")));
    r.Message("GPU reset and verified by the node's agent; the node stayed in service");
    return std::nullopt;
  }
  const std::string failure = RecoveryFailure(answer, asked, now);
  if (failure.empty()) {
    if (answer) r.Message("the agent is recovering the GPU (" + answer->state + ")");
    return Until(now, asked + policy_.critical_request_timeout);
  }
  // The GPU could not be recovered in place: the node is quarantined (an operator, a reboot or a
  // node-level fault decides what comes next; the node is released when the fault clears).
  if (!Quarantine(node, f)) return milliseconds(500);
  if (!UntaintDevices(r)) return milliseconds(2000);  // the node's taint covers them now
  r.Action(fmt::format("tainted {}={}, cordoned", keys::kFaultTaint, ToString(f.severity)));
  r.Phase("Failed", now, failure + "; node quarantined");
  r.Message(failure + "; node quarantined");
  return std::nullopt;
}

}  // namespace gpuheal::controller
