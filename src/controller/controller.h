#pragma once
// `gpuheal controller`: informers on Nodes, Pods and NodeRepairs (running on every replica, so a
// successor's cache is warm), leader election on a Lease, and while leading a de-duplicating work
// queue keyed by node feeding the Repairer's idempotent reconcile.

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "controller/policy.h"
#include "controller/repair.h"
#include "controller/work_queue.h"
#include "core/clock.h"
#include "kube/informer.h"
#include "kube/leader_election.h"
#include "serve/http_server.h"
#include "serve/metrics.h"

namespace gpuheal::controller {

struct ControllerOptions {
  Policy policy;
  bool dry_run = false;
  std::string identity;  // leader-election identity (pod name + pid by default)
  std::string lease_namespace = "gpuheal-system";
  std::string lease_name = "gpuheal-controller";
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  std::string listen = "127.0.0.1:9465";  // /metrics and /healthz; "" disables
  int workers = 8;  // nodes reconciled at once; a drain holds its worker for its evictions
};

class Controller {
 public:
  // `client` for reads and writes, `watch_client` for the informers' long watches.
  static Result<std::unique_ptr<Controller>> Create(std::unique_ptr<kube::Api> client,
                                                    std::unique_ptr<kube::Api> watch_client,
                                                    ControllerOptions opts);
  ~Controller();
  // Runs until SIGINT/SIGTERM. A replica that loses its Lease (e.g. it could not renew it through
  // an API server outage) stops acting and campaigns again; the process and its informer caches
  // stay, so it is ready at once when it wins again.
  int Run();
  // Makes Run() return as a SIGTERM would (the current reconciles finish, the Lease is released):
  // for a controller that runs inside another program or a test. Safe from any thread.
  void Stop();

 private:
  Controller() = default;
  void StartWorkers();
  void Worker();
  // Deletes the records of episodes that ended more than records.keep ago; when to sweep again.
  std::chrono::milliseconds SweepRecords();

  ControllerOptions opts_;
  std::unique_ptr<kube::Api> client_, watch_client_;
  SystemClock clock_;
  Metrics metrics_;
  std::unique_ptr<kube::Informer<kube::Node>> nodes_;
  std::unique_ptr<kube::Informer<kube::Pod>> pods_;
  std::unique_ptr<kube::Informer<kube::NodeRepair>> repairs_;
  std::unique_ptr<kube::Informer<kube::PodDisruptionBudget>> budgets_;
  std::unique_ptr<Repairer> repairer_;
  WorkQueue queue_;
  std::unique_ptr<kube::LeaderElector> elector_;
  std::unique_ptr<HttpServer> http_;
  std::mutex workers_mu_;  // StartWorkers runs on the elector's thread, shutdown on the main one
  std::vector<std::thread> workers_;
  bool stopping_ = false;
  // Stops the workers after their current reconcile; `final`: for good (shutdown).
  void StopWorkers(bool final);
  std::atomic<bool> leading_{false};
  std::atomic<bool> shutting_down_{false};  // a signal asked us to stop
  int signal_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd: Stop() writes to it
};

}  // namespace gpuheal::controller
