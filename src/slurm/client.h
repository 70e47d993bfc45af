#pragma once
// The Slurm client: slurmctld's RPCs through libslurm (Slurm's own C API, the one scontrol and
// scancel use), opened with dlopen when the Slurm backend starts, so an agent on a Kubernetes
// node never maps it. Built against the headers of Debian's libslurm-dev; the library must be
// the same ABI (its SONAME, kLibslurmSoname). The agent's Slurm reporter and `gpuheal drill
// --backend slurm` talk to Slurm only through Api, so a test can hand them another.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpuheal::slurm {

// The libslurm this build speaks to (Slurm 22.05's ABI).
extern const char* const kLibslurmSoname;

struct NodeInfo {
  std::string name;
  std::string state;   // Slurm's own words: "IDLE", "ALLOCATED", "IDLE+DRAIN", "MIXED+DRAIN", ...
  bool drain = false;  // the DRAIN flag: draining (jobs still running) or drained
  bool down = false;   // base state DOWN
  std::string reason;  // why it is drained or down; "" when none
};

struct JobInfo {
  uint32_t id = 0;
  std::string name;
  std::string state;  // "RUNNING", "PENDING", ...
  bool running = false;
  bool batch = false;    // submitted with sbatch (has a batch step to signal)
  bool requeue = false;  // the job allows requeueing (sbatch --requeue, or JobRequeue=1)
  uint32_t restarts = 0;
  std::string nodes;  // Slurm's host list expression
};

class Api {
 public:
  virtual ~Api() = default;
  virtual Result<NodeInfo> GetNode(const std::string& node) = 0;
  // DRAIN with `reason` (running jobs continue; nothing new starts).
  virtual Status Drain(const std::string& node, const std::string& reason) = 0;
  // RESUME: back to service (clears DRAIN and DOWN, and the reason).
  virtual Status Resume(const std::string& node) = 0;
  // Jobs with `node` in their allocation (running, completing or suspended).
  virtual Result<std::vector<JobInfo>> JobsOn(const std::string& node) = 0;
  virtual Result<JobInfo> GetJob(uint32_t id) = 0;
  // Sends `signal` to the job's batch step only (scancel --signal=SIG --batch).
  virtual Status SignalBatch(uint32_t job, int signal) = 0;
  // Back to the queue (scontrol requeue): the job ends and is pending again.
  virtual Status Requeue(uint32_t job) = 0;
  // Submits a batch job (as sbatch does) running `script` in `work_dir` with `gpus` of the gpu
  // gres; its id. For drills: the agent never submits.
  virtual Result<uint32_t> SubmitBatch(const std::string& name, const std::string& script,
                                       const std::string& work_dir, int gpus, bool requeue) = 0;
  // Ends a job (scancel).
  virtual Status Cancel(uint32_t job) = 0;
};

// Opens `library` (kLibslurmSoname when empty) and initialises it with `slurm_conf` (empty:
// libslurm's default, $SLURM_CONF or /etc/slurm/slurm.conf). Errors say what to install.
// libslurm keeps process-wide state: one configuration per process.
Result<std::unique_ptr<Api>> OpenLibslurm(const std::string& library = "",
                                          const std::string& slurm_conf = "");

// A signal by name as scancel takes it ("USR1", "SIGUSR1", "TERM", "10"); -1 when unknown.
int ParseSignal(const std::string& name);

}  // namespace gpuheal::slurm
