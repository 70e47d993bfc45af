#pragma once
// The mount table as the kernel shows it in /proc/self/mountinfo (proc(5)), and a watch of it:
// the kernel marks the file with POLLPRI|POLLERR whenever a mount, unmount or remount changes
// the table, so changes arrive without polling.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpuheal {

struct MountEntry {
  int id = 0;
  std::string mount_point;  // unescaped (\040 is a space)
  std::string fstype;
  std::string source;
  // The filesystem (superblock) is read-only: remounted ro, or turned ro by the filesystem itself
  // (ext4 errors=remount-ro, btrfs forced readonly). A mount's own "ro" flag (a bind mounted
  // read-only into a container, a mount made ro on purpose) is not a fault and does not count.
  bool read_only = false;
  std::string options;        // per-mount options
  std::string super_options;  // the filesystem's options
};

// Parses mountinfo text. A malformed line is an error naming its line number.
Result<std::vector<MountEntry>> ParseMountInfo(std::string_view text);

// The mount that holds `path`: the entry with the longest mount point that is `path` or one of
// its parent directories (the last such entry: a later mount hides an earlier one).
std::optional<MountEntry> MountOf(const std::vector<MountEntry>& mounts, std::string_view path);

class MountTableWatch {
 public:
  // Opens `path` (/proc/self/mountinfo); its fd is watched for EPOLLPRI.
  static Result<MountTableWatch> Open(const std::string& path = "/proc/self/mountinfo");
  MountTableWatch(MountTableWatch&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) {
    o.fd_ = -1;
  }
  MountTableWatch& operator=(MountTableWatch&&) = delete;
  ~MountTableWatch();
  int fd() const { return fd_; }
  // Reads the table again from the start (this also re-arms the change notification).
  Result<std::vector<MountEntry>> Read();

 private:
  MountTableWatch(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

}  // namespace gpuheal
