#pragma once
// `gpuheal drill --backend slurm` (docs/slurm.md): a Slurm cluster on loopback (scripts/slurm.sh),
// the agent with --slurm, a batch job that checkpoints on USR1, and a fault written into
// /dev/kmsg; the timeline runs from the kernel line to DRAIN, the signal, the requeue and, for
// the transient scenario, the node resumed and the job running again. Root.

#include <atomic>
#include <string>
#include <vector>

#include "core/result.h"
#include "drill/drill.h"
#include "drill/report.h"

namespace gpuheal::drill {

// single: an Xid (79 unless --xid) holds the node drained; transient: soft lockups escalated by
// repetition, cleared by a quiet period, so the node is resumed.
const std::vector<std::string>& SlurmScenarios();

Result<Report> RunSlurmDrill(const DrillOptions& opts, const std::atomic<bool>& interrupted);

}  // namespace gpuheal::drill
