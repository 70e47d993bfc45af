#pragma once
// `gpuheal sim`: simulated GPU nodes for tests, drills and scale runs — the kubelet's side of the
// API, nothing more (and, for pods that opt in, containers run as local processes: the process
// runtime, process_runtime.cc). It registers Nodes (pool label, GPU capacity, addresses, nodeInfo,
// Ready), keeps them alive as a kubelet does (a Lease in kube-node-lease renewed every lease
// period, the Ready condition's heartbeat), reports the pods bound to them Running (conditions,
// container statuses, pod IP), completes their deletion after the grace period (capped: the
// simulated containers stop at once when asked), and answers the checkpoint protocol
// (gpuheal.io/checkpoint-requested -> gpuheal.io/checkpoint-done after a delay). Standby nodes
// carry the gpuheal.io/standby taint. All API writes go through a small pool of threads fed by
// one timer queue, so thousands of nodes cost one core.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/result.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/kube_config.h"
#include "kube/objects.h"

namespace gpuheal::sim {

struct SimOptions {
  int nodes = 16;  // GPU nodes in service, spread over the pools
  int pools = 2;
  int standby_per_pool = 1;  // extra nodes per pool carrying gpuheal.io/standby
  int gpus_per_node = 8;
  std::string prefix =
      "sim";  // node names: <prefix>-<pool>-<index>, standby <prefix>-<pool>-standby-<i>
  std::chrono::milliseconds lease_period{10000};    // kubelet: renew every 10 s (40 s lease)
  std::chrono::milliseconds status_period{60000};   // Ready condition heartbeat
  std::chrono::milliseconds checkpoint_delay{500};  // negative: workloads never say done
  std::chrono::milliseconds max_termination{2000};  // cap on a deleted pod's grace period
  bool keep_nodes = false;                          // leave the Nodes registered on exit
  int api_threads = 4;
  // A gpuheal agent per node, in this process, reading the node's simulated kernel log: the FIFO
  // <state_dir>/<node>/kmsg, where `gpuheal inject --node` writes kernel records (the sim plays
  // the kernel, so they are trusted). Its fault lines go to <state_dir>/<node>/faults.jsonl.
  bool agents = false;
  std::string state_dir = "/tmp/gpuheal-sim";
  kube::Config agent_kube;  // the agents' API server and credentials
  // With `agents`: only these nodes run one (empty: every node). An agent costs a few threads;
  // a drill on a thousand nodes runs them on the nodes it faults.
  std::set<std::string> agent_nodes;
  // Nodes whose kernel log FIFO is made but whose agent is not hosted here: a `gpuheal agent`
  // process reads it (gpuheal drill's agent-restart scenario kills and restarts it).
  std::set<std::string> external_agents;
  // With `agents`: this node's agent reads the machine's real /dev/kmsg instead of a FIFO, from
  // the end of the buffer (kmsg_start: end) and acting on records written from user space, so
  // `gpuheal inject --xid N` (no --node) faults it through the real kernel. Root.
  std::string real_kmsg_node;
  // The hosted agents' recovery.quiet_period (0: the agent's default, 10 min).
  std::chrono::milliseconds agent_quiet_period{0};
  // Failure domains: with a label key, the nodes in service carry it with value rack-<k>, k =
  // (the node's ordinal over all pools, <prefix>-<i % pools>-<i / pools> being ordinal i) /
  // rack_size, so a rack holds nodes of every pool; standby nodes are in rack-spare.
  std::string rack_label;
  int rack_size = 4;
  // Nodes that a provisioner registers itself (Karpenter's kwok cloud provider creates the Node
  // object a kubelet would): those matching this label selector are adopted as they appear, and
  // the sim is their kubelet from then on (status Ready, a Lease, their pods, an agent with
  // `agents`), their pool taken from the gpuheal.io/pool label. One the provisioner deletes is
  // let go (its agent stopped). Empty: none.
  std::string adopt_selector;
  // The process runtime (docs/sim.md): a pod annotated sim.gpuheal.io/runtime=process has its
  // containers run as processes of this host, each at a pod IP of its own (added to the loopback
  // interface: root), with its env, the downward API's annotations file, SIGTERM and the grace
  // period at deletion, and its exit code reported in the pod's status. Off: such pods are
  // reported Running as every other, with nothing run.
  bool process_runtime = false;
};

struct SimNode {
  std::string name, pool;
  bool standby = false;
  std::string ip;           // InternalIP, and the hostIP of its pods
  std::string rack;         // the value of SimOptions::rack_label ("" without one)
  std::string provider_id;  // spec.providerID ("": sim://<name>)
};

class Sim {
 public:
  // `client` for writes (shared by the API threads), `watch_client` for the pod informer.
  static Result<std::unique_ptr<Sim>> Start(std::unique_ptr<kube::Client> client,
                                            std::unique_ptr<kube::Client> watch_client,
                                            SimOptions opts);
  ~Sim();  // stops; deletes the Nodes unless keep_nodes

  const std::vector<SimNode>& nodes() const { return nodes_; }
  // A node that joins later, as a provisioner's new machine (registered Ready, kept alive, with
  // an agent when the sim hosts agents), and a node whose machine is gone (its agent stopped,
  // its Node object deleted). Safe while the sim runs.
  Status AddNode(const std::string& name, const std::string& pool,
                 const std::string& provider_id = "");
  Status RemoveNode(const std::string& name);
  // A machine a provisioner made that boots a kubelet (a Cluster API infrastructure provider's):
  // the sim registers its Node under the machine's provider ID, counted as adopted. Once; a
  // second call for the same name does nothing.
  Status Join(const std::string& name, const std::string& pool, const std::string& provider_id);
  // The machine is gone (its provisioner deleted it): its kubelet and agent stop; the Node
  // object is left to whoever deletes it (the sim's destructor, at the latest).
  void PowerOff(const std::string& name);
  // The nodes adopted so far (adopt_selector), in the order they appeared.
  std::vector<std::string> adopted() const;
  // A fault took `node`'s GPUs (or, with `pod`, that pod's GPU alone) from the processes on them
  // (the process runtime): each container process of those pods gets SIGUSR1, after which a
  // CUDA program's every call fails, and a container started there until GpuReset gets
  // SIM_GPU_LOST=1 (a new CUDA context on a lost GPU fails too). Returns the IPs of the pods
  // whose processes were signalled.
  std::vector<std::string> GpuLost(const std::string& node, const std::string& pod = "");
  // `node`'s GPUs were reset: containers started from now on have their GPU (those running keep
  // the error: a CUDA context does not survive a reset).
  void GpuReset(const std::string& node);
  struct Stats {
    uint64_t pods_started = 0, pods_deleted = 0, checkpoints = 0, lease_renewals = 0,
             api_errors = 0, processes_started = 0;
  };
  Stats stats() const;

 private:
  Sim() = default;
  using Clock = std::chrono::steady_clock;
  // Work for the API threads. A node's own kubelet would start a pod at once; here one pool of
  // threads serves every node, so pod work (and registration) goes ahead of the Lease renewals
  // and heartbeats that fall due, which have seconds of slack: behind 1,500 nodes' renewals on a
  // busy API server, a replacement pod waited 600 ms to be reported Running.
  enum class Lane { kPods, kKeepAlive };
  void At(Clock::time_point when, std::function<void()> fn,
          Lane lane = Lane::kPods);  // runs fn on an API thread at `when`
  void ApiThread();
  Status RegisterNode(const SimNode& n);
  void RenewLease(const std::string& node);
  void Heartbeat(const std::string& node);
  void OnPod(const kube::Pod& p);
  void StartPod(const std::string& ns, const std::string& name, const std::string& node);
  bool Ok(const Result<kube::Response>& r);

  SimOptions opts_;
  std::unique_ptr<kube::Client> client_, watch_client_;
  std::vector<SimNode> nodes_;
  std::vector<std::string> added_;              // AddNode's, under mu_
  std::map<std::string, std::string> node_ip_;  // name -> InternalIP; under mu_ once started
  std::unique_ptr<kube::Informer<kube::Pod>> pods_;
  std::unique_ptr<kube::Client> adopt_client_;
  std::unique_ptr<kube::Informer<kube::Node>> adopt_;
  std::vector<std::string> adopted_;  // under mu_
  void Adopt(const kube::Node& n);
  void LetGo(const std::string& name);  // the provisioner deleted it: its agent stops
  Status StartAgent(const SimNode& n);
  struct HostedAgent;
  // Under mu_: `name` is no longer served (no pods, no keep-alive); its hosted agent, if any, to
  // be stopped (joined) outside the lock.
  std::unique_ptr<HostedAgent> StopServing(const std::string& name);
  std::vector<std::unique_ptr<HostedAgent>> agents_;

  // The process runtime (process_runtime.cc).
  struct PodProcesses;
  static bool IsProcessPod(const kube::Pod& p);
  // False for a pod deleted before its processes started: it goes as any other pod.
  bool OnProcessPod(const kube::Pod& p, const std::string& id);
  void StartProcessPod(const std::string& ns, const std::string& name, const std::string& node);
  void RuntimeLoop();  // reaps, kills at the grace period's end, relays answers
  void ProberLoop();   // readiness and liveness probes
  // Whether the pod's GPU is lost (GpuLost, not GpuReset since); under mu_.
  bool LostGpu(const PodProcesses& pp) const;
  void StopProcesses();  // the sim's end: every process killed, every address removed
  static void KillPodProcesses(PodProcesses& pp);   // SIGKILL, reaped, its address removed
  void KillNodeProcesses(const std::string& node);  // under mu_: each pod's, forgotten
  std::map<std::string, std::shared_ptr<PodProcesses>> procs_;  // by pod uid, under mu_
  uint64_t process_ips_ = 0;                                    // under mu_
  std::set<std::string> gpu_lost_;  // "<node>" or "<node>/<ns>/<pod>", under mu_
  std::thread runtime_thread_, prober_thread_;
  std::condition_variable runtime_cv_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<Clock::time_point, std::function<void()>> timers_[2];  // by Lane
  bool stop_ = false;
  std::vector<std::thread> threads_;
  std::set<std::string>
      handled_;  // "<kind>/<ns>/<pod>/<uid>" already scheduled: started, deleted, checkpointed
  Stats stats_;
};

}  // namespace gpuheal::sim
