// A leader-election candidate process for the integration tests: campaigns for a Lease with the
// client's LeaderElector and prints one JSON line per transition. SIGTERM/SIGINT stop it (a
// leader releases the Lease); SIGKILL leaves the Lease to expire.
//   leader_candidate KUBECONFIG IDENTITY LEASE_NAME LEASE_MS RENEW_MS RETRY_MS

#include <signal.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "kube/client.h"
#include "kube/leader_election.h"

namespace {

void Emit(const std::string& event, const std::string& detail = "") {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  std::printf("%s\n",
              nlohmann::json{{"event", event}, {"detail", detail}, {"unix_ms", ms}}.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s KUBECONFIG IDENTITY LEASE_NAME LEASE_MS RENEW_MS RETRY_MS\n",
                 argv[0]);
    return 2;
  }
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);  // before any thread starts: only sigwait sees them

  auto cfg = gpuheal::kube::LoadKubeconfig(argv[1]);
  if (!cfg) {
    std::fprintf(stderr, "%s\n", cfg.error().message.c_str());
    return 2;
  }
  auto client = gpuheal::kube::Client::Create(std::move(*cfg));
  if (!client) return 2;
  gpuheal::kube::LeaderElectionConfig le;
  le.lease_namespace = "default";
  le.identity = argv[2];
  le.lease_name = argv[3];
  le.lease_duration = std::chrono::milliseconds(std::stol(argv[4]));
  le.renew_deadline = std::chrono::milliseconds(std::stol(argv[5]));
  le.retry_period = std::chrono::milliseconds(std::stol(argv[6]));
  le.on_started_leading = [] { Emit("leading"); };
  le.on_stopped_leading = [] { Emit("stopped"); };
  le.on_new_leader = [](const std::string& h) { Emit("observed", h); };
  if (auto ok = gpuheal::kube::ValidateLeaderElection(le); !ok) {
    std::fprintf(stderr, "%s\n", ok.error().message.c_str());
    return 2;
  }
  gpuheal::kube::LeaderElector elector(**client, le);
  elector.Start();
  Emit("started");
  int sig = 0;
  sigwait(&sigs, &sig);
  elector.Stop();
  Emit("exiting");
  return 0;
}
