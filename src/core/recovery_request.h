#pragma once
// The controller's GPU-level request to a node's agent, and the agent's answer, as annotations on
// the Node (public contract, docs/nvml.md):
//   gpuheal.io/gpu-recovery-request  {"id": "nr-1234", "gpus": ["0000:3b:00"]}   written by the
//   controller gpuheal.io/gpu-recovery-status   {"id": ..., "state":
//   "running|succeeded|failed|rejected",
//                                      "gpus": {"0000:3b:00": {"step", "ok", "message"}}, "error",
//                                      "updated"}
// written by the agent through nodes/status (its only write permission; the admission policy
// keeps it to its own Node). Each request id is acted on at most once: a retry is a new id.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/keys.h"
#include "core/result.h"

namespace gpuheal {

inline constexpr std::string_view kRecoveryRequestAnnotation = keys::kGpuRecoveryRequest;
inline constexpr std::string_view kRecoveryStatusAnnotation = keys::kGpuRecoveryStatus;

struct RecoveryRequest {
  std::string id;
  std::vector<std::string> gpus;  // normalised "dddd:bb:dd"
};

// Errors say what is wrong and what a valid request looks like.
Result<RecoveryRequest> ParseRecoveryRequest(std::string_view json);

struct RecoveryStatus {
  struct Gpu {
    std::string step;
    bool ok = true;
    bool final = false;
    std::string message;
  };
  std::string id;
  std::string state;  // running, succeeded, failed, rejected
  std::string error;
  std::map<std::string, Gpu> gpus;

  // running until every GPU's sequence ended; then succeeded only if all of them did.
  void Settle();
  std::string ToJson(const std::string& updated) const;
};

// The agent's answer as the controller reads it: the request id, its state, and for a failed or
// rejected one what went wrong (the error, or each failed GPU's step and message).
struct RecoveryAnswer {
  std::string id, state, detail;
};
Result<RecoveryAnswer> ParseRecoveryStatus(std::string_view json);

}  // namespace gpuheal
