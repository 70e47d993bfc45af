// gpuheal controller: the cluster's repair controller (leader-elected; docs/controller.md).

#include <malloc.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "agent/config.h"
#include "cli/commands.h"
#include "controller/controller.h"
#include "kube/client.h"

namespace gpuheal::cli {
namespace {

// The namespace this controller runs in: the downward API's POD_NAMESPACE (the chart sets it),
// else, in a pod (in-cluster credentials), the one its service account mount names; "" when
// neither says.
std::string OwnNamespace(bool in_cluster) {
  if (const char* ns = std::getenv("POD_NAMESPACE"); ns && *ns) return ns;
  if (!in_cluster) return "";
  std::ifstream f("/var/run/secrets/kubernetes.io/serviceaccount/namespace");
  std::string ns;
  std::getline(f, ns);
  while (!ns.empty() && (ns.back() == ' ' || ns.back() == '\n' || ns.back() == '\r')) ns.pop_back();
  return ns;
}

}  // namespace

void RegisterController(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<controller::ControllerOptions>();
  auto policy = std::make_shared<std::string>();
  auto kubeconfig = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("controller",
                                     "Cluster repair controller: quarantine, checkpoint, drain, "
                                     "remediate and recover faulty GPU nodes");
  cmd->add_option("--policy", *policy,
                  "Policy YAML (docs/controller.md; default: built-in defaults)");
  cmd->add_option("--kubeconfig", *kubeconfig,
                  "Kubeconfig for out-of-cluster use (default: in-cluster service account)");
  cmd->add_flag("--dry-run", a->dry_run,
                "Log and record what would be done; write nothing but NodeRepair records");
  cmd->add_option("--id", a->identity,
                  "Leader-election identity (default: $POD_NAME or hostname, with the pid)");
  cmd->add_option("--lease-namespace", a->lease_namespace,
                  "Namespace of the leader-election Lease (default gpuheal-system)");
  cmd->add_option(
      "--lease-name", a->lease_name,
      "Name of the leader-election Lease, also where gpuheal.io/breaker-reset closes the breaker "
      "(default gpuheal-controller)");
  cmd->add_option("--listen", a->listen,
                  "host:port for /metrics and /healthz (default 127.0.0.1:9465; '' disables)");
  cmd->add_option("--workers", a->workers, "Nodes reconciled at once (default 8)")
      ->check(CLI::Range(1, 64));
  auto lease = std::make_shared<std::array<std::string, 3>>();
  cmd->add_option("--lease-duration", (*lease)[0], "Leader lease duration (default 15s)");
  cmd->add_option("--renew-deadline", (*lease)[1],
                  "How long the leader may fail to renew before it steps down (default 10s)");
  cmd->add_option("--retry-period", (*lease)[2], "Leader-election retry period (default 2s)");
  cmd->callback([a, policy, kubeconfig, lease, &exit_code] {
    // glibc gives each allocating thread an arena of its own, up to 8 per core; the controller's
    // workers, eviction threads and informers allocate in bursts and free, so most arenas hold
    // freed memory. Two arenas: 8-worker RSS 75 -> 48 MB at 1,500 nodes (docs/performance.md).
    // MALLOC_ARENA_MAX in the environment still decides when set.
    if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 2);
    std::chrono::milliseconds* fields[] = {&a->lease_duration, &a->renew_deadline,
                                           &a->retry_period};
    const char* names[] = {"--lease-duration", "--renew-deadline", "--retry-period"};
    for (int i = 0; i < 3; ++i) {
      if ((*lease)[i].empty()) continue;
      auto d = ParseDuration((*lease)[i]);
      if (!d || d->count() <= 0) {
        std::cerr << "gpuheal controller: " << names[i] << " " << (*lease)[i]
                  << ": not a duration (e.g. 15s)\n";
        exit_code = kExitUsage;
        return;
      }
      *fields[i] = *d;
    }
    if (!policy->empty()) {
      auto p = controller::LoadPolicy(*policy);
      if (!p) {
        std::cerr << "gpuheal controller: " << p.error().message << "\n";
        exit_code = kExitUsage;
        return;
      }
      a->policy = std::move(*p);
    }
    // Its own pods are never evicted, whatever the policy says (docs/controller.md).
    a->policy.controller_namespace = OwnNamespace(kubeconfig->empty());
    if (a->identity.empty()) {
      const char* pod = std::getenv("POD_NAME");
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      a->identity = std::string(pod && *pod ? pod : host) + "_" + std::to_string(getpid());
    }
    auto cfg = kubeconfig->empty() ? kube::InClusterConfig() : kube::LoadKubeconfig(*kubeconfig);
    if (!cfg) {
      std::cerr << "gpuheal controller: " << cfg.error().message << "\n";
      exit_code = kExitUsage;
      return;
    }
    cfg->user_agent = "gpuheal-controller/" GPUHEAL_VERSION;
    cfg->qps = 500;  // quarantining a burst of faulty nodes must not wait on a client-side limit
    cfg->burst = 1000;
    auto watch = kube::Client::Create(*cfg);
    auto client = kube::Client::Create(std::move(*cfg));
    if (!client || !watch) {
      std::cerr << "gpuheal controller: "
                << (client ? watch.error().message : client.error().message) << "\n";
      exit_code = kExitUsage;
      return;
    }
    auto c = controller::Controller::Create(std::move(*client), std::move(*watch), *a);
    if (!c) {
      std::cerr << "gpuheal controller: " << c.error().message << "\n";
      exit_code = kExitUsage;
      return;
    }
    exit_code = (*c)->Run();
  });
}

}  // namespace gpuheal::cli
