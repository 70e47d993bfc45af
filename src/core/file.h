#pragma once
// Reading a small file whole (configs, tokens, /proc entries), and replacing one atomically.

#include <fcntl.h>
#include <fmt/format.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "core/result.h"

namespace gpuheal {

// The file's bytes, or nullopt when it cannot be opened.
inline std::optional<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `text` to `path` + ".tmp" and renames it over `path`: readers (and a restarted agent)
// see the old or the new content, never a torn one. No fsync: callers that need the write to
// survive a power loss sync afterwards, off their hot path.
inline Status WriteFileAtomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Error{fmt::format("{}: {}", tmp, std::strerror(errno))};
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      return Error{fmt::format("{}: {}", tmp, std::strerror(err))};
    }
    off += static_cast<size_t>(n);
  }
  if (close(fd) != 0) return Error{fmt::format("{}: {}", tmp, std::strerror(errno))};
  if (rename(tmp.c_str(), path.c_str()) != 0)
    return Error{fmt::format("{}: {}", path, std::strerror(errno))};
  return Status::Ok();
}

}  // namespace gpuheal
