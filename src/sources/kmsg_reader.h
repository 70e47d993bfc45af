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
#include "sources/kernel_log.h"

namespace gpuheal {

class KmsgReader final : public KernelLog {
 public:
  // Opens `path` non-blocking. A character device is read record-per-read; a FIFO line by line.
  static Result<std::unique_ptr<KmsgReader>> Open(const std::string& path);
  ~KmsgReader() override;
  KmsgReader(const KmsgReader&) = delete;
  KmsgReader& operator=(const KmsgReader&) = delete;

  int fd() const override { return fd_; }
  const std::string& path() const override { return path_; }
  Status Next(std::string_view& record) override;
  // A FIFO has no history: SeekEnd and SeekStart do nothing there.
  void SeekEnd() override;
  void SeekStart() override;
  int last_errno() const override { return errno_; }

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
