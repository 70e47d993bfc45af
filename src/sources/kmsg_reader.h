#pragma once
// Reads kernel log records from /dev/kmsg (one record per read(2); EPIPE when the reader was
// overtaken and records were overwritten) or, for simulated nodes, from a FIFO carrying the same
// record format one per line.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpuheal {

class KmsgReader {
 public:
  enum class Status { kRecord, kAgain, kOverrun, kEof, kError };

  // Opens `path` non-blocking. A character device is read record-per-read; a FIFO line by line.
  static Result<std::unique_ptr<KmsgReader>> Open(const std::string& path);
  ~KmsgReader();
  KmsgReader(const KmsgReader&) = delete;
  KmsgReader& operator=(const KmsgReader&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

  // On kRecord, `record` holds the raw record ("PRI,SEQ,TS,FLAGS;MSG" plus "\n KEY=VALUE" lines,
  // without the final newline) and stays valid until the next call.
  Status Next(std::string_view& record);
  // Skips what the kernel buffer holds now: the next record read is the next one written. A FIFO
  // has no history to skip.
  void SeekEnd();
  // Back to the oldest record the kernel buffer still holds. A FIFO has no history.
  void SeekStart();
  int last_errno() const { return errno_; }

 private:
  KmsgReader(int fd, std::string path, bool device);
  int fd_;
  std::string path_;
  bool device_;
  int errno_ = 0;
  std::string buf_;      // device: one record; FIFO: bytes not yet split into lines
  size_t consumed_ = 0;  // FIFO: bytes of buf_ already returned
};

}  // namespace gpuheal
