#include "kube/leader_election.h"

#include <fmt/format.h>

#include "core/time.h"

namespace gpuheal::kube {

Result<bool> ValidateLeaderElection(const LeaderElectionConfig& c) {
  if (c.lease_name.empty() || c.lease_namespace.empty())
    return Error{"leader election: lease name and namespace are required"};
  if (c.identity.empty()) return Error{"leader election: identity is required"};
  if (c.retry_period.count() <= 0 || c.renew_deadline <= c.retry_period ||
      c.lease_duration <= c.renew_deadline) {
    return Error{
        fmt::format("leader election: need lease duration ({} ms) > renew deadline ({} ms) > retry "
                    "period ({} ms) > 0",
                    c.lease_duration.count(), c.renew_deadline.count(), c.retry_period.count())};
  }
  return true;
}

LeaderElector::LeaderElector(Api& client, LeaderElectionConfig cfg)
    : client_(client), cfg_(std::move(cfg)) {}

LeaderElector::~LeaderElector() { Stop(); }

void LeaderElector::Start() {
  thread_ = std::thread([this] { Run(); });
}

void LeaderElector::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool LeaderElector::Sleep(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stop_; });
}

void LeaderElector::Run() {
  for (;;) {
    // Candidate: try every retry_period until this one holds the Lease.
    while (!TryAcquireOrRenew()) {
      if (!Sleep(cfg_.retry_period)) return;
    }
    leader_ = true;
    if (cfg_.on_started_leading) cfg_.on_started_leading();
    auto last_renew = std::chrono::steady_clock::now();
    bool stopped = false;
    for (;;) {
      if (!Sleep(cfg_.retry_period)) {
        stopped = true;
        break;
      }
      if (TryAcquireOrRenew()) {
        last_renew = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - last_renew >= cfg_.renew_deadline ||
                 !HeldByMe()) {
        break;  // lost it: another holder, or no renewal within the deadline
      }
    }
    if (stopped) Release();
    leader_ = false;
    if (cfg_.on_stopped_leading) cfg_.on_stopped_leading();
    if (stopped) return;
  }
}

bool LeaderElector::HeldByMe() const {
  std::lock_guard<std::mutex> lock(mu_);
  return observed_holder_ == cfg_.identity || observed_holder_.empty();
}

bool LeaderElector::TryAcquireOrRenew() {
  const std::string path = LeasePath(cfg_.lease_namespace, cfg_.lease_name);
  const std::string now = MicroTime(std::chrono::system_clock::now());
  const int64_t duration_s = std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(cfg_.lease_duration).count());
  auto cur = client_.Get(path);
  if (!cur) return false;
  if (cur->status == 404) {
    nlohmann::json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", cfg_.lease_name}, {"namespace", cfg_.lease_namespace}}},
        {"spec",
         {{"holderIdentity", cfg_.identity},
          {"leaseDurationSeconds", duration_s},
          {"acquireTime", now},
          {"renewTime", now},
          {"leaseTransitions", 0}}}};
    auto r = client_.Create(LeasePath(cfg_.lease_namespace), lease);
    if (!r || r->status != 201) return false;
    std::lock_guard<std::mutex> lock(mu_);
    observed_holder_ = cfg_.identity;
    observed_renew_ = now;
    observed_at_ = std::chrono::steady_clock::now();
    return true;
  }
  if (!cur->ok()) return false;
  auto lease = DecodeLease(cur->body);
  if (!lease) return false;
  const auto seen = std::chrono::steady_clock::now();
  bool new_holder = false, held_by_other = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    new_holder = lease->holder != observed_holder_;
    if (new_holder || lease->renew_time != observed_renew_) {
      observed_holder_ = lease->holder;
      observed_renew_ = lease->renew_time;
      observed_at_ = seen;
    }
    const auto held_for = std::chrono::seconds(std::max<int64_t>(1, lease->lease_duration_seconds));
    held_by_other =
        !lease->holder.empty() && lease->holder != cfg_.identity && observed_at_ + held_for > seen;
  }
  if (held_by_other) {
    if (new_holder && cfg_.on_new_leader) cfg_.on_new_leader(lease->holder);
    return false;  // held by a live leader
  }
  nlohmann::json obj = nlohmann::json::parse(cur->body, nullptr, false);
  if (obj.is_discarded()) return false;
  auto& spec = obj["spec"];
  if (lease->holder != cfg_.identity) {
    spec["acquireTime"] = now;
    spec["leaseTransitions"] = lease->transitions + 1;
  }
  spec["holderIdentity"] = cfg_.identity;
  spec["leaseDurationSeconds"] = duration_s;
  spec["renewTime"] = now;
  auto put = client_.Request("PUT", path, obj.dump());  // carries the resourceVersion we read
  if (!put || !put->ok()) return false;                 // 409: somebody else wrote first
  std::lock_guard<std::mutex> lock(mu_);
  observed_holder_ = cfg_.identity;
  observed_renew_ = now;
  observed_at_ = std::chrono::steady_clock::now();
  return true;
}

void LeaderElector::Release() {
  const std::string path = LeasePath(cfg_.lease_namespace, cfg_.lease_name);
  auto cur = client_.Get(path);
  if (!cur || !cur->ok()) return;
  nlohmann::json obj = nlohmann::json::parse(cur->body, nullptr, false);
  if (obj.is_discarded() || obj["spec"].value("holderIdentity", "") != cfg_.identity) return;
  const std::string now = MicroTime(std::chrono::system_clock::now());
  obj["spec"]["holderIdentity"] = "";
  obj["spec"]["leaseDurationSeconds"] = 1;
  obj["spec"]["renewTime"] = now;
  (void)client_.Request("PUT", path, obj.dump());
}

}  // namespace gpuheal::kube
