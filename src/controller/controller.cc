#include "controller/controller.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>

#include "controller/node_fault.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/time.h"

namespace gpuheal::controller {
namespace {

std::vector<std::string> RepairNodeIndex(const kube::NodeRepair& r) { return {r.node}; }

// The work queue's key for the record sweep: a space is never part of a node's name.
const std::string kSweepKey = " sweep-records";

// The node cache's indexes and their values.
const std::string kPoolIndex = "pool";
const std::string kFaultIndex = "fault", kFaulty = "faulty";
const std::string kGpuIndex = "gpus", kHasGpus = "yes";

}  // namespace

Result<std::unique_ptr<Controller>> Controller::Create(std::unique_ptr<kube::Api> client,
                                                       std::unique_ptr<kube::Api> watch_client,
                                                       ControllerOptions opts) {
  std::unique_ptr<Controller> c(new Controller());
  c->opts_ = std::move(opts);
  c->stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (c->stop_fd_ < 0) return Error{std::string("cannot create an eventfd: ") + strerror(errno)};
  c->client_ = std::move(client);
  c->watch_client_ = std::move(watch_client);
  kube::LeaderElectionConfig le;
  le.lease_namespace = c->opts_.lease_namespace;
  le.lease_name = c->opts_.lease_name;
  le.identity = c->opts_.identity;
  le.lease_duration = c->opts_.lease_duration;
  le.renew_deadline = c->opts_.renew_deadline;
  le.retry_period = c->opts_.retry_period;
  if (auto v = kube::ValidateLeaderElection(le); !v) return v.error();
  Controller* self = c.get();
  le.on_started_leading = [self] {
    Log("info", "started leading", {{"identity", self->opts_.identity}});
    self->leading_ = true;
    self->metrics_.GetGauge("gpuheal_controller_leader", "1 while this replica leads").Set(1);
    self->StartWorkers();
  };
  le.on_stopped_leading = [self] {
    if (!self->leading_) return;
    self->leading_ = false;
    self->metrics_.GetGauge("gpuheal_controller_leader", "1 while this replica leads").Set(0);
    if (self->shutting_down_) return;  // our own SIGTERM released the Lease: a clean exit
    // Another replica may take the Lease once it expires: stop acting before that, keep the
    // informers' caches (a restart would list everything again) and campaign again.
    Log("warn", "lost leadership: stopped acting, campaigning again",
        {{"identity", self->opts_.identity}});
    self->StopWorkers(false);
    self->repairer_->CancelEvictions();
  };

  World w;
  w.node = [self](const std::string& n) { return self->nodes_->Get(n); };
  w.nodes = [self] { return self->nodes_->Items(); };
  w.each_node = [self](const std::function<void(const kube::Node&)>& fn) {
    self->nodes_->ForEach(fn);
  };
  w.each_pool_node = [self](const std::string& pool,
                            const std::function<void(const kube::Node&)>& fn) {
    self->nodes_->ForEachIn(kPoolIndex, pool, fn);
  };
  w.each_faulty_node = [self](const std::function<void(const kube::Node&)>& fn) {
    self->nodes_->ForEachIn(kFaultIndex, kFaulty, fn);
  };
  w.gpu_nodes = [self] { return self->nodes_->CountIn(kGpuIndex, kHasGpus); };
  w.pods = [self](const std::string& n) { return self->pods_->ByIndex("node", n); };
  w.repairs = [self](const std::string& n) { return self->repairs_->ByIndex("node", n); };
  w.budgets = [self](const std::string& ns) { return self->budgets_->ByIndex("namespace", ns); };
  w.backlog = [self] { return self->queue_.Len() > 0; };
  w.wake = [self](const std::string& n) { self->queue_.Add(n); };
  c->repairer_ = std::make_unique<Repairer>(*c->client_, c->clock_, std::move(w), c->opts_.policy,
                                            c->opts_.dry_run, c->metrics_);
  c->repairer_->SetBreakerKey(c->opts_.lease_namespace, c->opts_.lease_name);

  kube::Api& wc = *c->watch_client_;
  c->nodes_ = std::make_unique<kube::Informer<kube::Node>>(wc, kube::NodePath(),
                                                           kube::DecodeNodeList, kube::DecodeNode);
  c->pods_ = std::make_unique<kube::Informer<kube::Pod>>(wc, "/api/v1/pods", kube::DecodePodList,
                                                         kube::DecodePod);
  c->repairs_ = std::make_unique<kube::Informer<kube::NodeRepair>>(
      wc, kNodeRepairs, kube::DecodeNodeRepairList, kube::DecodeNodeRepair);
  // Budgets tell the drain which of a node's pods may be evicted side by side (repair_drain.cc).
  c->budgets_ = std::make_unique<kube::Informer<kube::PodDisruptionBudget>>(
      wc, kube::PdbPath(""), kube::DecodePdbList, kube::DecodePdb);
  c->budgets_->AddIndex("namespace", [](const kube::PodDisruptionBudget& b) {
    return std::vector<std::string>{b.meta.namespace_};
  });
  // The gates' and remediators' passes visit a pool or the faulty nodes through these (World).
  c->nodes_->AddIndex(kPoolIndex, [policy = c->opts_.policy](const kube::Node& n) {
    return std::vector<std::string>{PoolOf(n, policy)};
  });
  c->nodes_->AddIndex(kFaultIndex, [](const kube::Node& n) {
    return FaultOf(n) ? std::vector<std::string>{kFaulty} : std::vector<std::string>{};
  });
  c->nodes_->AddIndex(kGpuIndex, [](const kube::Node& n) {
    return n.gpu_capacity > 0 ? std::vector<std::string>{kHasGpus} : std::vector<std::string>{};
  });
  c->pods_->AddIndex("node", kube::PodNodeIndex);
  c->repairs_->AddIndex("node", RepairNodeIndex);
  // Updates that change nothing the controller reads (kubelets' heartbeats, pod status details)
  // are not worth a reconcile: 1,500 nodes heartbeat 25 times a second.
  // A node that joins, or changes while Ready (its agent's condition turning True), may be the
  // replacement a delete-node repair waits for: those repairs are looked at now, not at their
  // next scheduled look (remediate_delete_node.cc).
  auto wake_awaiting = [self](const kube::Node& n) {
    if (n.meta.deleting || !ConditionIs(n, "Ready", "True")) return;
    self->repairs_->ForEach([&](const kube::NodeRepair& cr) {
      if (cr.node == n.meta.name || cr.phase != "Remediating") return;
      if (AwaitingReplacement(RepairRecord::Read(cr))) self->queue_.Add(cr.node);
    });
  };
  c->nodes_->SetHandlers({[self, wake_awaiting](const kube::Node& n) {
                            self->queue_.Add(n.meta.name);
                            wake_awaiting(n);
                          },
                          [self, wake_awaiting](const kube::Node& old_n, const kube::Node& n) {
                            if (!kube::ChangedBeyondVersion(old_n, n)) return;
                            self->queue_.Add(n.meta.name);
                            wake_awaiting(n);
                          },
                          [self](const kube::Node& n) { self->queue_.Add(n.meta.name); }});
  auto enqueue_pod = [self](const kube::Pod& p) {
    if (!p.node_name.empty()) self->queue_.Add(p.node_name);
  };
  c->pods_->SetHandlers({nullptr,
                         [enqueue_pod](const kube::Pod& old_p, const kube::Pod& p) {
                           if (kube::ChangedBeyondVersion(old_p, p)) enqueue_pod(p);
                         },
                         enqueue_pod});
  c->elector_ = std::make_unique<kube::LeaderElector>(*c->client_, le);
  return c;
}

Controller::~Controller() {
  StopWorkers(true);
  repairer_.reset();  // its evictions in flight end; they wake nodes through queue_
  if (elector_) elector_->Stop();
  http_.reset();
  // The four watches are asked to end together (each notices within about a second), then each
  // is joined: a second at exit, not four (the pod's termination in `helm uninstall`).
  if (repairs_) repairs_->RequestStop();
  if (budgets_) budgets_->RequestStop();
  if (pods_) pods_->RequestStop();
  if (nodes_) nodes_->RequestStop();
  if (repairs_) repairs_->Stop();
  if (budgets_) budgets_->Stop();
  if (pods_) pods_->Stop();
  if (nodes_) nodes_->Stop();
  if (signal_fd_ >= 0) close(signal_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

void Controller::Stop() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(stop_fd_, &one, sizeof one);
}

void Controller::StartWorkers() {
  std::lock_guard<std::mutex> lock(workers_mu_);
  if (stopping_) return;
  queue_.Reopen();
  for (const auto& n : nodes_->Items()) queue_.Add(n.meta.name);
  queue_.Add(kSweepKey);
  for (int i = 0; i < opts_.workers; ++i) workers_.emplace_back([this] { Worker(); });
}

void Controller::StopWorkers(bool final) {
  std::vector<std::thread> ws;
  {
    std::lock_guard<std::mutex> lock(workers_mu_);
    stopping_ |= final;
    ws.swap(workers_);
  }
  queue_.ShutDown();
  for (auto& t : ws) {
    if (t.joinable()) t.join();
  }
}

void Controller::Worker() {
  while (auto key = queue_.Get()) {
    if (!leading_) {
      queue_.Done(*key);
      break;
    }
    auto again = *key == kSweepKey ? std::optional(SweepRecords()) : repairer_->Reconcile(*key);
    queue_.Done(*key);
    if (again) queue_.AddAfter(*key, *again);
  }
}

std::chrono::milliseconds Controller::SweepRecords() {
  const auto keep = opts_.policy.records_keep;
  const auto again = std::clamp<std::chrono::milliseconds>(keep / 4, std::chrono::seconds(1),
                                                           std::chrono::minutes(10));
  if (opts_.dry_run) return again;  // dry-run writes only its own records
  const auto now = clock_.Now();
  int deleted = 0;
  for (const auto& r : repairs_->Items()) {
    if (!RecordExpired(r, now, keep)) continue;
    auto res = client_->Delete(kNodeRepairs + "/" + r.meta.name, r.meta.uid);
    if (res && (res->ok() || res->status == 404)) {
      ++deleted;
    } else {
      Log("warn", "cannot delete an expired NodeRepair record; retrying at the next sweep",
          {{"record", r.meta.name}, {"error", res ? res->Describe() : res.error().message}});
    }
  }
  if (deleted > 0) {
    Log("info",
        "deleted the NodeRepair records of episodes that ended longer ago than records.keep",
        {{"count", deleted},
         {"keep_seconds", std::chrono::duration_cast<std::chrono::seconds>(keep).count()}});
  }
  return again;
}

int Controller::Run() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  signal_fd_ = signalfd(-1, &mask, SFD_CLOEXEC);
  if (!opts_.listen.empty()) {
    auto http = HttpServer::Start(opts_.listen, metrics_, [this]() -> std::string {
      if (!nodes_->synced() || !pods_->synced() || !repairs_->synced())
        return "informers not synced yet";
      return "";
    });
    if (!http) {
      Log("error", "cannot serve metrics", {{"error", http.error().message}});
      return 2;
    }
    http_ = std::move(*http);
  }
  nodes_->Start();
  pods_->Start();
  repairs_->Start();
  budgets_->Start();
  if (!nodes_->WaitForSynced(std::chrono::seconds(60)) ||
      !pods_->WaitForSynced(std::chrono::seconds(60)) ||
      !repairs_->WaitForSynced(std::chrono::seconds(60)) ||
      !budgets_->WaitForSynced(std::chrono::seconds(60))) {
    Log("warn", "informers not synced within 60 s; campaigning anyway (they keep retrying)");
  }
  nlohmann::ordered_json f;
  f["identity"] = opts_.identity;
  f["dry_run"] = opts_.dry_run;
  f["provider"] = std::string(ToString(opts_.policy.provider));
  f["lease"] = opts_.lease_namespace + "/" + opts_.lease_name;
  // Its own pods are never evicted (Policy::controller_namespace).
  if (!opts_.policy.controller_namespace.empty())
    f["own_namespace"] = opts_.policy.controller_namespace;
  if (http_) f["listen"] = fmt::format("{}:{}", http_->host(), http_->port());
  Log("info", "controller started", f);
  elector_->Start();
  // Until SIGINT/SIGTERM or Stop().
  pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  while (poll(fds, 2, -1) < 0 && errno == EINTR) {
  }
  shutting_down_ = true;
  StopWorkers(true);  // the current reconciles finish first...
  elector_->Stop();   // ...then the Lease is released: a successor takes over at once
  Log("info", "controller stopped");
  return 0;
}

}  // namespace gpuheal::controller
