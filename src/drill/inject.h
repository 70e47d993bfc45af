#pragma once
// Realistic NVIDIA driver lines for fault drills, and writing them into the kernel log.
// Records written from user space carry facility LOG_USER, so the agent knows they are injected.

#include <string>
#include <vector>

#include "core/result.h"

namespace gpuheal {

struct InjectSpec {
  int xid = 79;
  std::string pci = "0000:3b:00";  // normalised
  std::string pid;                 // empty: the driver's '<unknown>'
  std::string name;                // empty: <unknown>
};

// The message(s) the driver prints for this Xid, without a "<level>" prefix. Xid 79 also yields
// the "GPU has fallen off the bus" line that accompanies it.
std::vector<std::string> InjectMessages(const InjectSpec& spec);

// Writes each message as its own record (one write(2) each, opening `path` per record so the
// kernel's per-open ratelimit of /dev/kmsg never suppresses a drill line), at level `level`
// (4 = warning, below the console threshold so the serial console does not slow the write).
Status WriteKmsg(const std::string& path, const std::vector<std::string>& messages, int level = 4);

// The simulated kernel of a `gpuheal sim` node: writes each message as a kernel record
// ("LEVEL,SEQ,USEC,-;MESSAGE", facility 0, so the node's agent trusts it, as it trusts the
// kernel) to the node's FIFO <sim_dir>/<node>/kmsg. SEQ continues from <sim_dir>/<node>/seq;
// USEC is CLOCK_MONOTONIC, as the kernel's. An error when no agent reads the FIFO.
Status WriteSimKernel(const std::string& sim_dir, const std::string& node,
                      const std::vector<std::string>& messages, int level = 4);

}  // namespace gpuheal
