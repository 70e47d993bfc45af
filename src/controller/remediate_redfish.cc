// The redfish provider: power-cycles the node through its BMC (DMTF Redfish
// ComputerSystem.Reset) and waits for it to come back with its fault cleared.
//
// The BMC endpoint and the credentials are resolved and checked by controller/bmc_target.h (the
// administrator's ConfigMap; the allow-list and the http setting before any request). Remediating
// is written before the reset is sent, so the record is the lock: a reset is sent at most once per
// repair, whichever replica acts. After it the node is left to come back: when its agent reports
// the fault cleared, the usual probation and release follow (Recovered); when it has not within
// recovery_timeout, the repair ends Failed and the node stays quarantined.
//
// With auth: session, one Redfish session carries the reset and every look at the BMC while the
// node comes back (one login per watch, not per poll), and is logged out once when the watch ends
// (the repair's end, the rung's failure). A session the BMC ended is opened again once; a BMC
// that refuses the new one fails the rung with its answer.

#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "bmc/redfish.h"
#include "controller/bmc_target.h"
#include "controller/remediator.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/reasons.h"

namespace gpuheal::controller {
namespace {

using std::chrono::milliseconds;
using SysTime = std::chrono::system_clock::time_point;

constexpr milliseconds kPoll{2000};

std::string Human(milliseconds d) {
  if (d.count() % 60000 == 0) return fmt::format("{} min", d.count() / 60000);
  if (d.count() % 1000 == 0) return fmt::format("{} s", d.count() / 1000);
  return fmt::format("{} ms", d.count());
}

class Redfish final : public Remediator {
 public:
  explicit Redfish(RepairContext& ctx) : ctx_(ctx) {}

  Next Remediate(const kube::Node& node, const NodeFault& /*f*/, RepairRecord& r,
                 SysTime now) override {
    if (r.RungStarted()) return Wait(node, r, now);
    const auto& policy = ctx_.policy().redfish;
    auto target = Target(node);
    if (!target) return Fail(node, r, now, "BMC reset not sent: " + target.error().message);
    r.Action(target->Describe());
    auto client = std::make_shared<bmc::RedfishClient>(target->endpoint, target->credentials,
                                                       Options(*target));
    auto system = client->System();
    if (!system) {
      for (const auto& line : client->attempts_log()) r.Action(line);
      return Fail(node, r, now, "BMC reset not sent: " + system.error().message);
    }
    auto type = bmc::ChooseResetType(*system, policy.reset_types);
    if (!type) return Fail(node, r, now, "BMC reset not sent: " + type.error().message);
    const std::string what = fmt::format(
        "{} of {} ({}) through its BMC {}, power {}", *type, node.meta.name, system->path,
        target->url, system->power_state.empty() ? "unknown" : system->power_state);
    if (ctx_.dry_run()) {
      r.Action("would send " + what + " (dry-run)");
      r.Message("dry-run: would power-cycle the node through its BMC");
      return std::nullopt;
    }
    r.Phase("Remediating", now, "sending " + what);
    r.MarkRungStarted(now);
    // Before the reset: whatever happens next, no replica sends a second one for this repair.
    if (!ctx_.WriteStatus(r)) return milliseconds(2000);
    const auto sent = client->Reset(*system, *type);
    for (const auto& line : client->attempts_log()) r.Action(line);
    if (!sent) return Fail(node, r, now, "BMC reset failed: " + sent.error().message);
    r.Record(Step::kBmcResetSent, now, *type, r.RungNumber());
    r.Action(fmt::format("BMC accepted {} for {} (power was {}) at {}", *type, system->path,
                         system->power_state.empty() ? "unknown" : system->power_state,
                         kube::MicroTime(now)));
    r.Message(fmt::format(
        "power-cycled through the BMC ({}); waiting up to {} for the node to come back with its "
        "fault cleared",
        *type, Human(policy.recovery_timeout)));
    client->set_attempts(1);  // the looks that follow: the next poll is the next attempt
    {
      std::lock_guard<std::mutex> lock(mu_);
      watching_[WatchKey(r)] = Watch{system->power_state, now, *target, std::move(client)};
    }
    return kPoll;
  }

  // The repair ended: its watches go, and with them their sessions (logged out).
  void Ended(const RepairRecord& r) override {
    const std::string prefix = r.cr.meta.name + "#";
    std::vector<std::shared_ptr<bmc::RedfishClient>> done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = watching_.lower_bound(prefix);
           it != watching_.end() && it->first.starts_with(prefix);) {
        done.push_back(std::move(it->second.client));
        it = watching_.erase(it);
      }
    }
    // `done` logs out here, outside the lock: other nodes' workers need not wait for this BMC.
  }

 private:
  struct Watch {
    std::string power;  // the last power state recorded
    SysTime since;
    std::optional<BmcTarget> target;  // the BMC and credentials, resolved once per watch
    // The BMC client of the watch: with auth: session, its one session (logged out when the
    // last copy of the watch goes).
    std::shared_ptr<bmc::RedfishClient> client;
  };

  bmc::ClientOptions Options(const BmcTarget& target, int attempts = 0) const {
    const auto& p = ctx_.policy().redfish;
    bmc::ClientOptions o;
    o.auth = p.session_auth ? bmc::Auth::kSession : bmc::Auth::kBasic;
    o.ca_file = p.ca_file;
    o.insecure = p.insecure_skip_verify;
    o.timeout = p.request_timeout;
    o.attempts = attempts > 0 ? attempts : p.attempts;
    o.resolve = target.check.resolve;
    return o;
  }

  // The node's BMC endpoint and the credentials, read now (a rotated Secret takes effect at
  // once), checked before anything is sent. A weakened transport is logged at every use.
  Result<BmcTarget> Target(const kube::Node& node) {
    const auto& p = ctx_.policy().redfish;
    auto t = ResolveBmcTarget(ctx_.api(), p, node);
    if (!t) return t;
    if (t->check.http) {
      Log("warn", "BMC over plain http: its user and password cross the network unencrypted",
          {{"node", node.meta.name},
           {"endpoint", t->url},
           {"policy", "provider.redfish.allow_insecure_http"}});
    }
    if (p.insecure_skip_verify && !t->check.http) {
      Log("warn", "BMC certificate not verified",
          {{"node", node.meta.name},
           {"endpoint", t->url},
           {"policy", "provider.redfish.insecure_skip_verify"}});
    }
    return t;
  }

  // After the reset: records the power transitions the BMC shows, and ends the repair Failed
  // when the fault has not cleared within recovery_timeout (a cleared fault ends it elsewhere).
  Next Wait(const kube::Node& node, RepairRecord& r, SysTime now) {
    const auto& p = ctx_.policy().redfish;
    const SysTime since = r.RungSince().value_or(now);
    Watch watch;
    bool known;
    std::vector<std::shared_ptr<bmc::RedfishClient>> stale;  // logged out outside the lock
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = watching_.begin(); it != watching_.end();) {
        if (now - it->second.since > p.recovery_timeout + std::chrono::hours(1)) {
          stale.push_back(std::move(it->second.client));
          it = watching_.erase(it);
        } else {
          ++it;
        }
      }
      auto it = watching_.find(WatchKey(r));
      known = it != watching_.end();
      if (known) watch = it->second;
    }
    if (!known) {
      // Another replica (or this one before a restart) sent it, or died while sending it.
      if (!r.Done(Step::kBmcResetSent, r.RungNumber())) {
        r.Action(
            "did not send the BMC reset again: a controller stopped while it was being sent; "
            "waiting for the node");
      }
      watch.since = since;
    }
    if (now - since >= p.recovery_timeout) {
      return Fail(node, r, now,
                  fmt::format("the node did not come back with its fault cleared within {} of "
                              "the BMC reset",
                              Human(p.recovery_timeout)));
    }
    // The endpoint, the Secret and the session are one per watch, not one per poll.
    if (!watch.target) {
      if (auto t = Target(node)) watch.target = std::move(*t);
    }
    if (watch.target && !watch.client) {
      watch.client = std::make_shared<bmc::RedfishClient>(
          watch.target->endpoint, watch.target->credentials, Options(*watch.target, 1));
    }
    if (watch.client) {
      auto s = watch.client->System();
      if (s && s->power_state != watch.power) {
        r.Action(fmt::format("BMC power state {} at {}", s->power_state, kube::MicroTime(now)));
        watch.power = s->power_state;
      } else if (!s && watch.client->login_refused()) {
        // The session ended and the BMC refuses a new one (its password rotated, the account
        // locked): the rung cannot see the node come back through it.
        return Fail(
            node, r, now,
            "the BMC refused a new Redfish session while the node came back: " + s.error().message);
      }
      // Any other failure (the BMC busy or unreachable during the power cycle): the next look.
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      watching_[WatchKey(r)] = watch;
    }
    return std::min<milliseconds>(
        kPoll, std::chrono::duration_cast<milliseconds>(since + p.recovery_timeout - now));
  }

  Next Fail(const kube::Node& node, RepairRecord& r, SysTime now, const std::string& why) {
    const std::string key = WatchKey(r);  // the write below may move the ladder on
    r.Action(why);
    r.Phase("Failed", now, why);
    r.Message(why + "; the node stays quarantined");
    if (!ctx_.WriteStatus(r)) return milliseconds(2000);
    std::shared_ptr<bmc::RedfishClient> done;  // logged out outside the lock
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = watching_.find(key); it != watching_.end()) {
        done = std::move(it->second.client);
        watching_.erase(it);
      }
    }
    ctx_.Event(node, "Warning", std::string(reason::kRemediationFailed), r.cr.message);
    return std::nullopt;
  }

  // One watch per rung: {redfish: 2} resets the node a second time after the first timed out.
  static std::string WatchKey(const RepairRecord& r) {
    return r.cr.meta.name + "#" + std::to_string(r.cr.rung_index);
  }

  RepairContext& ctx_;
  std::mutex mu_;                          // workers reconcile different nodes at once
  std::map<std::string, Watch> watching_;  // NodeRepair#rung -> after this replica's reset
};

}  // namespace

std::unique_ptr<Remediator> MakeRedfishRemediator(RepairContext& ctx) {
  return std::make_unique<Redfish>(ctx);
}

}  // namespace gpuheal::controller
