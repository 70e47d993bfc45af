#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <thread>

#include "controller/policy.h"
#include "controller/repair.h"
#include "controller/work_queue.h"
#include "core/condition_decision.h"

namespace gpuheal::controller {
namespace {

using namespace std::chrono_literals;

TEST(Policy, DefaultsAndFullPolicy) {
  auto d = ParsePolicy("", "p.yaml");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->TolerationFor("AcceleratedHardwareReady"), 10min);
  EXPECT_EQ(d->TolerationFor("KernelReady"), 30min);
  EXPECT_EQ(d->checkpoint_window, 30s);
  EXPECT_EQ(d->max_unavailable_percent, 20);
  EXPECT_EQ(d->max_repairs, 3);
  EXPECT_EQ(d->eviction_parallel, 8);
  EXPECT_EQ(d->eviction_concurrency, 32);
  EXPECT_EQ(d->provider, Provider::kNone);
  auto p = ParsePolicy(R"(
toleration: {AcceleratedHardwareReady: 5m, default: 1h}
checkpoint: {window: 1m, catastrophic_window: 2s}
eviction: {grace_period_seconds: 10, drain_timeout: 3m, after_drain_timeout: force-delete, gpu_pods_only: true, parallel: 16, concurrency: 64}
skip: {namespaces: [kube-system, monitoring], pod_labels: {gpuheal.io/skip: "true"}}
pools: {label: example.com/pool, max_unavailable_percent: 10}
breaker: {share_percent: 40, window: 2m, quiet: 30m}
attempts: {max: 5, window: 14d}
probation: 2m
provider: {name: exec, command: [/usr/local/bin/replace-node, --force], timeout: 1m}
paused: true
critical: {action: node, request_timeout: 3m}
)",
                       "p.yaml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->TolerationFor("AcceleratedHardwareReady"), 5min);
  EXPECT_EQ(p->TolerationFor("StorageReady"), 1h);
  EXPECT_EQ(p->catastrophic_checkpoint_window, 2s);
  EXPECT_EQ(p->eviction_grace_seconds, 10);
  EXPECT_TRUE(p->force_delete_after_drain_timeout);
  EXPECT_TRUE(p->gpu_pods_only);
  EXPECT_EQ(p->eviction_parallel, 16);
  EXPECT_EQ(p->eviction_concurrency, 64);
  EXPECT_EQ(p->skip_namespaces, (std::vector<std::string>{"kube-system", "monitoring"}));
  EXPECT_EQ(p->skip_pod_labels.at("gpuheal.io/skip"), "true");
  EXPECT_EQ(p->pool_label, "example.com/pool");
  EXPECT_DOUBLE_EQ(p->breaker_share, 0.4);
  EXPECT_EQ(p->repairs_window, std::chrono::hours(24 * 14));
  EXPECT_EQ(p->provider, Provider::kExec);
  EXPECT_EQ(p->exec_command, (std::vector<std::string>{"/usr/local/bin/replace-node", "--force"}));
  EXPECT_TRUE(p->paused);
  EXPECT_TRUE(p->critical_node_level);
  EXPECT_EQ(p->critical_request_timeout, 3min);
  EXPECT_FALSE(d->critical_node_level) << "default: the agent drains and resets the GPU";
  EXPECT_EQ(d->critical_request_timeout, 15min);
}

// The policy shipped in deploy/kubernetes/controller.yaml is valid and states the defaults.
TEST(Policy, TheShippedConfigMapIsValidAndStatesTheDefaults) {
  std::string text;
  for (const YAML::Node& doc : YAML::LoadAllFromFile(std::string(GPUHEAL_SOURCE_DIR) +
                                                     "/deploy/kubernetes/controller.yaml")) {
    if (doc["kind"].as<std::string>() == "ConfigMap")
      text = doc["data"]["policy.yaml"].as<std::string>();
  }
  ASSERT_FALSE(text.empty());
  auto p = ParsePolicy(text, "controller.yaml");
  ASSERT_TRUE(p) << p.error().message;
  const Policy d;
  EXPECT_EQ(p->toleration, d.toleration);
  EXPECT_EQ(p->default_toleration, d.default_toleration);
  EXPECT_EQ(p->checkpoint_window, d.checkpoint_window);
  EXPECT_EQ(p->drain_timeout, d.drain_timeout);
  EXPECT_EQ(p->max_unavailable_percent, d.max_unavailable_percent);
  EXPECT_DOUBLE_EQ(p->breaker_share, d.breaker_share);
  EXPECT_EQ(p->probation, d.probation);
  EXPECT_EQ(p->critical_request_timeout, d.critical_request_timeout);
  // The one difference: the shipped agent is not privileged (agent.privileged=false in the Helm
  // chart the manifests are rendered from), so it cannot reset a GPU and the shipped critical
  // action is the node's repair, not the binary's default gpu-reset.
  EXPECT_FALSE(d.critical_node_level);
  EXPECT_TRUE(p->critical_node_level);
}

TEST(Policy, TheLadderPerSeverityElseTheProviderAlone) {
  auto p = ParsePolicy(R"(
provider: {name: redfish, command: [/usr/local/bin/reimage], redfish: {endpoints_configmap: ops/bmc}}
ladder:
  catastrophic: [redfish, exec, delete-node]
  fatal: [exec]
)",
                       "p.yaml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->LadderFor("catastrophic"),
            (std::vector<Provider>{Provider::kRedfish, Provider::kExec, Provider::kDeleteNode}));
  EXPECT_EQ(p->LadderFor("fatal"), std::vector<Provider>{Provider::kExec});
  EXPECT_EQ(p->LadderFor("critical"), std::vector<Provider>{Provider::kRedfish});
  EXPECT_EQ(Policy().LadderFor("fatal"), std::vector<Provider>{Provider::kNone});
}

TEST(Policy, ARungTriedSeveralTimes) {
  auto p = ParsePolicy(
      "provider: {name: none, redfish: {endpoints_configmap: ops/bmc}}\n"
      "ladder:\n  catastrophic: [{redfish: 2}, delete-node]\n",
      "p.yaml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->LadderFor("catastrophic"),
            (std::vector<Provider>{Provider::kRedfish, Provider::kRedfish, Provider::kDeleteNode}));
}

TEST(Policy, StandbySizesPerPoolAndTheReplacementTimeout) {
  auto p = ParsePolicy(R"(
pools: {standby: {default: 1, h200-a: 2, spare: 0}}
provider: {name: delete-node, replacement_timeout: 45m}
)",
                       "p.yaml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->StandbySizeFor("h200-a"), 2);
  EXPECT_EQ(p->StandbySizeFor("spare"), 0);
  EXPECT_EQ(p->StandbySizeFor("other"), 1);
  EXPECT_EQ(p->replacement_timeout, std::chrono::minutes(45));
  auto q = ParsePolicy(
      "pools: {standby: 3}\nprovider: {name: delete-node, replacement_timeout: 0s}\n", "p.yaml");
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_EQ(q->StandbySizeFor("any"), 3);
  EXPECT_EQ(q->replacement_timeout.count(), 0);
  EXPECT_FALSE(Policy().StandbySizeFor("any")) << "no size unless the policy sets one";
  EXPECT_EQ(Policy().replacement_timeout, std::chrono::minutes(30));
}

TEST(Policy, FinishedRecordsExpireAfterRecordsKeep) {
  auto p = ParsePolicy("records: {keep: 10d}\n", "p.yaml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->records_keep, std::chrono::hours(240));
  EXPECT_EQ(Policy().records_keep, std::chrono::hours(24 * 30));
  kube::NodeRepair r;
  r.phase = "Recovered";
  r.phase_times["Detected"] = "2026-11-01T00:00:00Z";
  r.phase_times["Recovered"] = "2026-11-20T00:00:00Z";
  const auto at = [](const char* t) { return *kube::ParseTime(t); };
  EXPECT_FALSE(RecordExpired(r, at("2026-11-29T00:00:00Z"), p->records_keep));
  EXPECT_TRUE(RecordExpired(r, at("2026-12-01T00:00:00Z"), p->records_keep));
  r.phase = "Draining";  // open: never
  EXPECT_FALSE(RecordExpired(r, at("2027-12-01T00:00:00Z"), p->records_keep));
  r.phase = "Failed";  // no time for its last phase: kept
  EXPECT_FALSE(RecordExpired(r, at("2027-12-01T00:00:00Z"), p->records_keep));
}

TEST(Policy, ACheckpointWindowOfZeroEvictsWithoutWaiting) {
  auto p = ParsePolicy("checkpoint: {window: 0s, catastrophic_window: 0s}\n", "p.yaml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->checkpoint_window.count(), 0);
  EXPECT_EQ(p->catastrophic_checkpoint_window.count(), 0);
}

TEST(Policy, ErrorsNameFileLineAndField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"tolerations: {}\n", "p.yaml:1:1: unknown key \"tolerations\""},
      {"toleration:\n  GPUReady: 5m\n", "p.yaml:2:3: unknown condition \"GPUReady\""},
      {"checkpoint:\n  window: soon\n", "\"checkpoint.window\" must be a duration such as 0s"},
      {"probation: 0s\n", "\"probation\" must be a positive duration"},
      {"eviction:\n  after_drain_timeout: kill\n", "must be wait or force-delete"},
      {"eviction:\n  parallel: 0\n", "\"eviction.parallel\" must be an integer from 1 to 64"},
      {"eviction:\n  concurrency: 1000\n",
       "\"eviction.concurrency\" must be an integer from 1 to 256"},
      {"pools:\n  max_unavailable_percent: 0\n",
       "\"pools.max_unavailable_percent\" must be an integer from 1 to 100"},
      {"provider:\n  name: reboot\n",
       "\"provider.name\" must be one of none, delete-node, exec, standby, redfish"},
      {"provider:\n  name: exec\n  command: [x]\n  redfish: {}\n", "only for provider redfish"},
      {"ladder:\n  fatal: [redfish, standby]\n", "p.yaml:2:20: standby is not a rung"},
      {"ladder:\n  provider: [exec]\n", "unknown severity \"provider\" in ladder"},
      {"ladder:\n  fatal: [delete-node, redfish]\n", "nothing can follow delete-node"},
      {"ladder:\n  warn: [redfish]\n", "unknown severity \"warn\" in ladder"},
      {"ladder:\n  fatal: []\n", "\"ladder.fatal\" must be a non-empty list"},
      {"ladder:\n  fatal: [reboot]\n", "unknown provider \"reboot\" in ladder.fatal"},
      {"ladder:\n  fatal: [{redfish: 0}]\n",
       "\"ladder.fatal.redfish\" must be an integer from 1 to 10"},
      {"ladder:\n  fatal: [{delete-node: 2}]\n", "p.yaml:2:12: delete-node is tried once"},
      {"ladder:\n  fatal: [{redfish: 2, exec: 1}]\n", "a rung of ladder.fatal is a provider or"},
      {"ladder:\n  fatal: [{redfish: 2}, redfish]\n", "provider redfish appears twice"},
      {"pools:\n  standby: [1]\n", "p.yaml:2:12: \"pools.standby\" must be a number"},
      {"pools:\n  standby: {a: -1}\n", "\"pools.standby.a\" must be an integer from 0 to 1000"},
      {"provider:\n  name: standby\n  replacement_timeout: 5m\n",
       "p.yaml:3:24: \"provider.replacement_timeout\" is only for provider delete-node"},
      {"ladder:\n  fatal: [redfish, redfish]\n", "provider redfish appears twice"},
      {"ladder:\n  fatal: [exec, delete-node]\n", "provider exec needs \"provider.command\""},
      {"records:\n  keep: 1d\n",
       "p.yaml:2:9: \"records.keep\" must be at least \"attempts.window\""},
      {"attempts: {window: 60d}\n", "\"records.keep\" must be at least \"attempts.window\""},
      {"provider:\n  name: redfish\n  redfish:\n    reset_types: [PowerCycle, Reboot]\n",
       "p.yaml:4:31: unknown Redfish ResetType \"Reboot\" (known: On, ForceOff"},
      {"provider:\n  name: redfish\n  redfish:\n    reset_types: []\n",
       "\"provider.redfish.reset_types\" must be a non-empty list"},
      {"provider:\n  name: redfish\n  redfish:\n    credentials_secret: bmc\n",
       "\"provider.redfish.credentials_secret\" must be NAMESPACE/NAME"},
      {"provider:\n  name: redfish\n  redfish:\n    endpoints_configmap: a/b/c\n",
       "\"provider.redfish.endpoints_configmap\" must be NAMESPACE/NAME"},
      {"provider:\n  name: redfish\n  redfish:\n    attempts: 0\n",
       "\"provider.redfish.attempts\" must be an integer from 1 to 10"},
      {"provider:\n  name: redfish\n  redfish:\n    password: x\n",
       "unknown key \"password\" in provider.redfish"},
      {"provider:\n  name: exec\n", "provider exec needs \"provider.command\""},
      {"provider:\n  name: none\n  command: [x]\n", "only for provider exec"},
      {"paused: maybe\n", "\"paused\" must be true or false"},
      {"critical:\n  action: reboot\n", "p.yaml:2:11: \"critical.action\" must be gpu-reset"},
      {"critical:\n  timeout: 1m\n", "unknown key \"timeout\" in critical"},
      {"[1, 2]\n", "must be a mapping"},
      {"paused: false\npaused: true\n",
       "p.yaml:2:1: key \"paused\" appears twice in the same mapping"},
      {"toleration:\n  KernelReady: 5m\n  default: 1m\n  KernelReady: 1h\n",
       "p.yaml:4:3: key \"KernelReady\" appears twice"},
  };
  for (const auto& [yaml, want] : cases) {
    auto p = ParsePolicy(yaml, "p.yaml");
    ASSERT_FALSE(p) << yaml;
    EXPECT_NE(p.error().message.find(want), std::string::npos) << p.error().message;
  }
}

TEST(WorkQueue, DeduplicatesAndNeverHandsAKeyToTwoWorkers) {
  WorkQueue q;
  q.Add("a");
  q.Add("a");
  q.Add("b");
  EXPECT_EQ(q.Len(), 2u);
  auto k = q.Get();
  ASSERT_EQ(k, "a");
  q.Add("a");  // while processing: queued again after Done, not handed out now
  EXPECT_EQ(q.Get(), "b");
  EXPECT_EQ(q.Len(), 0u);
  q.Done("a");
  EXPECT_EQ(q.Get(), "a");
  q.Done("a");
  q.Done("b");
}

TEST(WorkQueue, DelaysAndShutdown) {
  WorkQueue q;
  const auto t0 = std::chrono::steady_clock::now();
  q.AddAfter("late", 200ms);
  q.AddAfter("later", 5s);
  q.AddAfter("later", 100ms);  // the earliest request wins
  EXPECT_EQ(q.Get(), "later");
  EXPECT_EQ(q.Get(), "late");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 190ms);
  // A worker blocked in Get (or about to be) gets nothing once the queue shuts down.
  std::optional<std::string> got = "unset";
  std::thread t([&] { got = q.Get(); });
  q.ShutDown();
  t.join();
  EXPECT_FALSE(got.has_value());
  // Shut down, nothing is queued; reopened (a replica that won its Lease again), it works empty.
  q.Add("while-down");
  q.AddAfter("delayed", 5s);
  q.Reopen();
  EXPECT_EQ(q.Len(), 0u);
  q.Add("again");
  EXPECT_EQ(q.Get(), "again");
}

TEST(WorkQueue, RateLimitedBacksOffUntilForget) {
  WorkQueue q(20ms, 1s);
  auto t0 = std::chrono::steady_clock::now();
  q.AddRateLimited("x");
  EXPECT_EQ(q.Get(), "x");
  q.Done("x");
  q.AddRateLimited("x");
  EXPECT_EQ(q.Get(), "x");
  q.Done("x");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 55ms) << "20 ms, then 40 ms";
  q.Forget("x");
  t0 = std::chrono::steady_clock::now();
  q.AddRateLimited("x");
  EXPECT_EQ(q.Get(), "x");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 40ms);
}

kube::Node NodeWith(std::vector<kube::NodeCondition> conds) {
  kube::Node n;
  n.meta.name = "n";
  n.conditions = std::move(conds);
  return n;
}

TEST(NodeFaults, TheWorstFalseDomainDecides) {
  EXPECT_FALSE(
      FaultOf(NodeWith({{"Ready", "False", "KubeletNotReady", "", ""},
                        {"AcceleratedHardwareReady", "True", "NvidiaGPUIsReady", "", ""}})))
      << "kubelet's conditions are not ours";
  auto f = FaultOf(NodeWith({{"KernelReady", "False", "KernelHungTask", "", "2026-11-30T08:00:00Z"},
                             {"AcceleratedHardwareReady", "False", "NvidiaXID79Error", "gpu lost",
                              "2026-11-30T08:05:00Z"}}));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->condition, "AcceleratedHardwareReady");
  EXPECT_EQ(f->severity, Severity::kCatastrophic);
  EXPECT_EQ(SeverityOfReason("NvidiaXID48Error"), Severity::kFatal);
  EXPECT_EQ(SeverityOfReason("NvidiaXID13Error"), Severity::kFatal)
      << "a warning raised by repetition";
  EXPECT_EQ(SeverityOfReason("NvidiaGPUFallenOffBus"), Severity::kCatastrophic);
  EXPECT_EQ(SeverityOfReason("NvidiaGPULost"), Severity::kCatastrophic);
  EXPECT_EQ(SeverityOfReason("KernelPanic"), Severity::kFatal);
  EXPECT_EQ(SeverityOfReason("NvidiaXIDabcError"), Severity::kFatal);
}

// The agent's decision in the message's prefix wins over the catalog's reading of the reason:
// an Xid 48 the agent's config made catastrophic is isolated; an Xid 79 set to quarantine is not.
TEST(NodeFaults, TheAgentsDecisionInTheMessageWinsOverTheReason) {
  auto up = FaultOf(
      NodeWith({{"AcceleratedHardwareReady", "False", "NvidiaXID48Error",
                 "[catastrophic/isolate] GPU 0000:3b:00: Xid 48", "2026-11-30T08:05:00Z"}}));
  ASSERT_TRUE(up);
  EXPECT_EQ(up->severity, Severity::kCatastrophic);
  EXPECT_EQ(up->action, Action::kIsolate);
  auto down = FaultOf(
      NodeWith({{"AcceleratedHardwareReady", "False", "NvidiaXID79Error",
                 "[catastrophic/quarantine] GPU 0000:3b:00: Xid 79", "2026-11-30T08:05:00Z"}}));
  ASSERT_TRUE(down);
  EXPECT_EQ(down->severity, Severity::kCatastrophic);
  EXPECT_EQ(down->action, Action::kQuarantine);
  // Another tool's message (no prefix, or not one of ours): the reason decides, as before.
  for (const char* m :
       {"gpu lost", "[note] gpu lost", "[catastrophic/explode] x", "[fatal/isolate]no space"}) {
    auto f = FaultOf(NodeWith(
        {{"AcceleratedHardwareReady", "False", "NvidiaXID48Error", m, "2026-11-30T08:05:00Z"}}));
    ASSERT_TRUE(f);
    EXPECT_EQ(f->severity, Severity::kFatal) << m;
    EXPECT_EQ(f->action, Action::kQuarantine) << m;
  }
  EXPECT_EQ(DecisionPrefix({Severity::kFatal, Action::kQuarantine}), "[fatal/quarantine] ");
}

TEST(NodeFaults, CriticalGpuFaultsComeFromTheAgentsAnnotationWhenNoDomainIsFalse) {
  auto n = NodeWith({{"AcceleratedHardwareReady", "True", "NvidiaGPUIsReady", "", ""}});
  n.meta.annotations["gpuheal.io/gpu-faults"] = R"({
    "0000:3b:00": {"severity": "critical", "reason": "NvidiaXID45Warning", "xid": 45, "since": "2026-11-30T08:00:05Z", "count": 2},
    "0000:5e:00": {"severity": "critical", "reason": "NvidiaXID119Warning", "xid": 119, "since": "2026-11-30T08:00:01Z", "count": 1},
    "0000:86:00": {"severity": "warn", "reason": "NvidiaXID13Warning", "since": "2026-11-30T07:00:00Z", "count": 1}})";
  auto f = FaultOf(n);
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->gpu_level);
  EXPECT_EQ(f->severity, Severity::kCritical);
  EXPECT_EQ(f->reason, "NvidiaXID119Warning") << "the earliest";
  EXPECT_EQ(f->gpus, (std::vector<std::string>{"0000:3b:00", "0000:5e:00"}))
      << "critical ones only";
  EXPECT_FALSE(FaultOf(n, false)) << "not a node-level fault: the pool gate does not count it";
  // A False domain is worse and decides.
  n.conditions[0] = {"AcceleratedHardwareReady", "False", "NvidiaXID48Error", "",
                     "2026-11-30T08:00:00Z"};
  ASSERT_TRUE(FaultOf(n));
  EXPECT_FALSE(FaultOf(n)->gpu_level);
  // Unreadable or empty: no GPU-level fault.
  n.conditions[0].status = "True";
  n.meta.annotations["gpuheal.io/gpu-faults"] = "{}";
  EXPECT_FALSE(FaultOf(n));
  n.meta.annotations["gpuheal.io/gpu-faults"] = "{not json";
  EXPECT_FALSE(FaultOf(n));
}

TEST(NodeFaults, WhichPodsTheDrainEvicts) {
  Policy p;
  kube::Pod pod;
  pod.meta.namespace_ = "work";
  pod.phase = "Running";
  EXPECT_TRUE(Evictable(pod, p));
  kube::Pod ds = pod;
  ds.meta.controller_kind = "DaemonSet";
  EXPECT_FALSE(Evictable(ds, p));
  kube::Pod mirror = pod;
  mirror.meta.controller_kind = "Node";
  EXPECT_FALSE(Evictable(mirror, p));
  kube::Pod done = pod;
  done.phase = "Succeeded";
  EXPECT_FALSE(Evictable(done, p));
  kube::Pod sys = pod;
  sys.meta.namespace_ = "kube-system";
  EXPECT_FALSE(Evictable(sys, p));
  // The controller's own namespace, its own pod among them, whatever skip.namespaces says.
  kube::Pod self = pod;
  self.meta.namespace_ = "gpuheal-system";
  EXPECT_TRUE(Evictable(self, p)) << "the controller's namespace unknown (not in a pod)";
  p.controller_namespace = "gpuheal-system";
  p.skip_namespaces.clear();
  EXPECT_FALSE(Evictable(self, p));
  EXPECT_TRUE(Evictable(pod, p));
  p.skip_pod_labels = {{"tier", "infra"}};
  kube::Pod infra = pod;
  infra.meta.labels = {{"tier", "infra"}};
  EXPECT_FALSE(Evictable(infra, p));
  p.gpu_pods_only = true;
  EXPECT_FALSE(Evictable(pod, p));
  pod.gpu_requests = 8;
  EXPECT_TRUE(Evictable(pod, p));
}

}  // namespace
}  // namespace gpuheal::controller

namespace gpuheal::controller {
namespace {

TEST(Policy, EachErrorNamesItsPlaceKeyAndWhatIsAccepted) {
  const std::pair<const char*, const char*> cases[] = {
      {"provider: {command: [a]}",
       "p.yaml:1:11: \"provider.name\" is required: none, delete-node, exec, standby or redfish"},
      {"provider: 3", "p.yaml:1:11: \"provider\" must be a mapping with a \"name\""},
      {"provider: {name: exec}", "p.yaml:1:11: provider exec needs \"provider.command\""},
      {"provider: {name: none, command: [a]}",
       "p.yaml:1:33: \"provider.command\" is only for provider exec"},
      {"skip: {namespaces: 3}", "p.yaml:1:20: \"skip.namespaces\" must be a list of namespaces"},
      {"pools: {label: \"\"}", "p.yaml:1:16: \"pools.label\" must not be empty"},
      {"eviction: {after_drain_timeout: x}",
       "p.yaml:1:33: \"eviction.after_drain_timeout\" must be wait or force-delete"},
      {"breaker: {share_percent: 0}",
       "p.yaml:1:26: \"breaker.share_percent\" must be an integer from 1 to 100"},
      {"checkpoint: {window: -1s}", "p.yaml:1:22: \"checkpoint.window\" must be a duration"},
      {"attempts: {tries: 3}", "p.yaml:1:12: unknown key \"tries\" in attempts"},
      {"critical: {action: maybe}", "p.yaml:1:20: \"critical.action\" must be gpu-reset"},
      {"probation: soon", "p.yaml:1:12: \"probation\" must be a positive duration"},
  };
  for (const auto& [yaml, want] : cases) {
    auto p = ParsePolicy(yaml, "p.yaml");
    ASSERT_FALSE(p) << yaml;
    EXPECT_EQ(p.error().message.substr(0, std::string(want).size()), want) << yaml;
  }
}

}  // namespace
}  // namespace gpuheal::controller
