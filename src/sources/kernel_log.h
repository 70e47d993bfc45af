#pragma once
// The kernel-log port: where the agent's records come from. The real one is KmsgReader
// (/dev/kmsg, or a FIFO carrying the same format for simulated nodes); tests feed a fake.
// A record is "PRI,SEQ,TS,FLAGS;MSG" plus "\n KEY=VALUE" lines, without the final newline.

#include <string>
#include <string_view>

namespace gpuheal {

class KernelLog {
 public:
  enum class Status { kRecord, kAgain, kOverrun, kEof, kError };
  virtual ~KernelLog() = default;

  // Readable (for epoll) when a record may be there.
  virtual int fd() const = 0;
  virtual const std::string& path() const = 0;
  // On kRecord, `record` holds the next record and stays valid until the next call. kOverrun:
  // records were overwritten before they were read (reading goes on).
  virtual Status Next(std::string_view& record) = 0;
  // Skips what the buffer holds now: the next record read is the next one written.
  virtual void SeekEnd() = 0;
  // Back to the oldest record the buffer still holds.
  virtual void SeekStart() = 0;
  virtual int last_errno() const = 0;
};

}  // namespace gpuheal
