#include "drill/inject.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/xid_catalog.h"

namespace gpuheal {
namespace {

// Representative driver texts (NVIDIA Xid catalog descriptions and public bug reports).
std::string XidText(int xid) {
  switch (xid) {
    case 13:
      return "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address";
    case 31:
      return "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ "
             "0x7f3a_2c000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ";
    case 43:
      return "Ch 00000010";
    case 45:
      return "Ch 00000010";
    case 48:
      return "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer "
             "at partition 6, subpartition 0.";
    case 63:
      return "Row Remapper: New row (0x00000000000123a0) is marked for remapping, reset gpu to "
             "activate.";
    case 64:
      return "Row Remapper: Failed to remap row (0x00000000000123a0), the GPU has no spare rows.";
    case 74:
      return "NVLink: fatal error detected on link 5(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)";
    case 79:
      return "GPU has fallen off the bus.";
    case 94:
      return "Contained: SM (0x1). RST: No, D-RST: No";
    case 95:
      return "Uncontained: LTC TAG (0x2,0x0). RST: Yes, D-RST: No";
    case 109:
      return "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x3c046";
    case 119:
      return "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 "
             "(GSP_RM_CONTROL) (0x20800a4c 0x4).";
    case 154:
      return "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)";
    default: {
      const XidInfo* info = FindXid(xid);
      return info ? std::string(info->description) : "Unknown error";
    }
  }
}

}  // namespace

std::vector<std::string> InjectMessages(const InjectSpec& spec) {
  const std::string pid = spec.pid.empty() ? "'<unknown>'" : spec.pid;
  const std::string name = spec.name.empty() ? "<unknown>" : spec.name;
  std::vector<std::string> out;
  out.push_back(fmt::format("NVRM: Xid (PCI:{}): {}, pid={}, name={}, {}", spec.pci, spec.xid, pid,
                            name, XidText(spec.xid)));
  if (spec.xid == 79) {
    out.push_back(fmt::format("NVRM: GPU {}.0: GPU has fallen off the bus.", spec.pci));
  }
  return out;
}

Status WriteKmsg(const std::string& path, const std::vector<std::string>& messages, int level) {
  for (const std::string& m : messages) {
    const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      return Error{fmt::format("{}: cannot open for writing: {}{}", path, std::strerror(errno),
                               errno == EACCES || errno == EPERM ? " (run as root)" : "")};
    }
    const std::string rec = fmt::format("<{}>{}\n", level, m);
    const ssize_t n = write(fd, rec.data(), rec.size());
    const int err = errno;
    close(fd);
    if (n != static_cast<ssize_t>(rec.size())) {
      return Error{fmt::format("{}: write failed: {}", path, std::strerror(err))};
    }
  }
  return Status::Ok();
}

Status WriteSimKernel(const std::string& sim_dir, const std::string& node,
                      const std::vector<std::string>& messages, int level) {
  const std::string dir = sim_dir + "/" + node;
  const std::string fifo = dir + "/kmsg";
  const int fd = open(fifo.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return Error{fmt::format("{}: {}{}", fifo, std::strerror(errno),
                             errno == ENXIO || errno == ENOENT
                                 ? " (no agent reads this node's kernel log: is `gpuheal sim "
                                   "--agents` running with this "
                                   "--state-dir, and is the node one of its nodes?)"
                                 : "")};
  }
  // The sequence number goes on where the last injection left it (one writer at a time).
  const std::string seq_path = dir + "/seq";
  const int sfd = open(seq_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (sfd < 0 || flock(sfd, LOCK_EX) != 0) {
    const int err = errno;
    close(fd);
    if (sfd >= 0) close(sfd);
    return Error{fmt::format("{}: {}", seq_path, std::strerror(err))};
  }
  char buf[32] = {};
  const ssize_t got = pread(sfd, buf, sizeof buf - 1, 0);
  uint64_t seq = got > 0 ? std::strtoull(buf, nullptr, 10) : 0;
  Status st = Status::Ok();
  for (const std::string& m : messages) {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const uint64_t usec =
        static_cast<uint64_t>(ts.tv_sec) * 1000000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
    const std::string rec = fmt::format("{},{},{},-;{}\n", level, ++seq, usec, m);
    if (write(fd, rec.data(), rec.size()) != static_cast<ssize_t>(rec.size())) {
      st = Error{fmt::format("{}: write failed: {}", fifo, std::strerror(errno))};
      break;
    }
  }
  const std::string next = std::to_string(seq);
  if (ftruncate(sfd, 0) != 0 ||
      pwrite(sfd, next.data(), next.size(), 0) != static_cast<ssize_t>(next.size())) {
    if (st) st = Error{fmt::format("{}: cannot save the sequence number", seq_path)};
  }
  close(sfd);
  close(fd);
  return st;
}

}  // namespace gpuheal
