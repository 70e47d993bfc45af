#include "controller/remediator.h"

namespace gpuheal::controller {
namespace {

// The none provider: quarantined and drained, the node waits for its fault to clear (then the
// release) or for an operator.
class None final : public Remediator {
 public:
  Next Remediate(const kube::Node& /*node*/, const NodeFault& /*f*/, RepairRecord& r,
                 std::chrono::system_clock::time_point /*now*/) override {
    r.Message("quarantined and drained; provider none: waiting for recovery or an operator");
    return std::nullopt;
  }
};

}  // namespace

std::unique_ptr<Remediator> MakeNoneRemediator() { return std::make_unique<None>(); }

std::unique_ptr<Remediator> MakeRemediator(const Policy& policy, RepairContext& ctx) {
  switch (policy.provider) {
    case Provider::kNone:
      return MakeNoneRemediator();
    case Provider::kStandby:
      return MakeStandbyRemediator(ctx);
    case Provider::kDeleteNode:
      return MakeDeleteNodeRemediator(ctx);
    case Provider::kExec:
      return MakeExecRemediator(ctx);
    case Provider::kRedfish:
      return MakeRedfishRemediator(ctx);
  }
  return MakeNoneRemediator();
}

}  // namespace gpuheal::controller
