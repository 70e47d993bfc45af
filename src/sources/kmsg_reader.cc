#include "sources/kmsg_reader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuheal {
namespace {
// The kernel's record limit is 8 KiB (CONSOLE_EXT_LOG_MAX); a larger buffer never hurts.
constexpr size_t kRecordMax = 16 * 1024;
}  // namespace

void KmsgReader::SeekEnd() {
  if (device_) (void)lseek(fd_, 0, SEEK_END);
}

void KmsgReader::SeekStart() {
  if (device_) (void)lseek(fd_, 0, SEEK_SET);
}

Result<std::unique_ptr<KmsgReader>> KmsgReader::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return Error{fmt::format("{}: cannot open kernel log: {}{}", path, std::strerror(errno),
                             errno == EACCES ? " (the agent needs root or CAP_SYSLOG)" : "")};
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    close(fd);
    return Error{fmt::format("{}: fstat: {}", path, std::strerror(errno))};
  }
  const bool device = S_ISCHR(st.st_mode);
  if (!device && !S_ISFIFO(st.st_mode)) {
    close(fd);
    return Error{
        fmt::format("{}: must be /dev/kmsg (a character device) or a FIFO carrying kmsg "
                    "records; use `gpuheal classify` for log files",
                    path)};
  }
  if (!device) {
    // Hold the FIFO open for writing too, so it never reports end-of-file (and epoll never
    // reports a hang-up) between simulated kernels writing to it.
    close(fd);
    const int rw = open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (rw < 0) return Error{fmt::format("{}: cannot open FIFO: {}", path, std::strerror(errno))};
    return std::unique_ptr<KmsgReader>(new KmsgReader(rw, path, false));
  }
  return std::unique_ptr<KmsgReader>(new KmsgReader(fd, path, device));
}

KmsgReader::KmsgReader(int fd, std::string path, bool device)
    : fd_(fd), path_(std::move(path)), device_(device) {
  buf_.resize(device_ ? kRecordMax : 0);
}

KmsgReader::~KmsgReader() { close(fd_); }

KmsgReader::Status KmsgReader::Next(std::string_view& record) {
  if (device_) {
    for (;;) {
      const ssize_t n = read(fd_, buf_.data(), buf_.size());
      if (n > 0) {
        size_t len = static_cast<size_t>(n);
        if (buf_[len - 1] == '\n') --len;
        record = std::string_view(buf_.data(), len);
        return Status::kRecord;
      }
      if (n == 0) return Status::kEof;
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return Status::kAgain;
      // Records were overwritten before we read them; the next read continues at the oldest
      // record still in the buffer, and the sequence-number gap says how many were lost.
      if (errno == EPIPE) return Status::kOverrun;
      errno_ = errno;
      return Status::kError;
    }
  }
  // FIFO: one record per line. Continuation lines (" KEY=VALUE") come back as records of
  // their own; the caller's line parser recognises and skips them.
  for (;;) {
    if (consumed_ > 0 && consumed_ >= buf_.size() / 2) {
      buf_.erase(0, consumed_);
      consumed_ = 0;
    }
    const size_t nl = buf_.find('\n', consumed_);
    if (nl != std::string::npos) {
      record = std::string_view(buf_).substr(consumed_, nl - consumed_);
      consumed_ = nl + 1;
      return Status::kRecord;
    }
    char tmp[64 * 1024];
    const ssize_t n = read(fd_, tmp, sizeof tmp);
    if (n > 0) {
      buf_.append(tmp, static_cast<size_t>(n));
      if (buf_.size() - consumed_ > 4 * kRecordMax &&
          buf_.find('\n', consumed_) == std::string::npos) {
        buf_.clear();  // a writer that never ends its line: drop it rather than grow without bound
        consumed_ = 0;
      }
      continue;
    }
    if (n == 0) return Status::kEof;
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return Status::kAgain;
    errno_ = errno;
    return Status::kError;
  }
}

}  // namespace gpuheal
