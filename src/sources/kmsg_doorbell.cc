#include "sources/kmsg_doorbell.h"

#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "kmsg_doorbell.skel.h"

namespace gpuheal {
namespace {

// libbpf reports through a process-wide print hook. Its lines are kept (the last few) to explain
// a failure, never printed: the agent's stderr carries JSON log lines only.
std::mutex g_libbpf_mu;
std::string* g_libbpf_log = nullptr;

int LibbpfPrint(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG || g_libbpf_log == nullptr) return 0;
  char line[512];
  vsnprintf(line, sizeof line, format, args);
  std::string& log = *g_libbpf_log;
  log += line;
  if (log.size() > 2048) log.erase(0, log.size() - 2048);
  return 0;
}

// The first line libbpf said is the cause; the ones after it only pass the failure up.
std::string FirstLine(const std::string& log) {
  std::string s = log.substr(0, log.find('\n'));
  if (s.rfind("libbpf: ", 0) == 0) s.erase(0, 8);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

Error Explain(const char* step, int err, const std::string& log) {
  err = err < 0 ? -err : err;
  std::string why;
  if (err == EPERM || err == EACCES) {
    why = "permission denied: loading it needs root or CAP_BPF and CAP_PERFMON";
  } else if (err == ENOENT && std::strcmp(step, "attach") == 0) {
    why = "this kernel has no printk console tracepoint";
  } else if (err == ENOSYS || err == EINVAL) {
    why = "this kernel refuses the program (BPF syscall, ring buffers: Linux 5.8 or later)";
  } else {
    why = std::strerror(err);
  }
  const std::string detail = FirstLine(log);
  return Error{fmt::format("kernel-log doorbell (BPF) not loaded: {} failed: {}{}", step, why,
                           detail.empty() ? "" : " (libbpf: " + detail + ")")};
}

int CountRing(void* ctx, void*, size_t) {
  ++*static_cast<uint64_t*>(ctx);
  return 0;
}

}  // namespace

Result<std::unique_ptr<KmsgDoorbell>> KmsgDoorbell::Open() {
  std::lock_guard<std::mutex> lock(g_libbpf_mu);
  std::string log;
  g_libbpf_log = &log;
  libbpf_set_print(LibbpfPrint);
  struct Restore {
    ~Restore() { g_libbpf_log = nullptr; }
  } restore;

  std::unique_ptr<KmsgDoorbell> d(new KmsgDoorbell());
  d->skel_ = kmsg_doorbell_bpf__open();
  if (d->skel_ == nullptr) return Explain("open", errno, log);
  if (int err = kmsg_doorbell_bpf__load(d->skel_); err != 0) return Explain("load", err, log);
  if (int err = kmsg_doorbell_bpf__attach(d->skel_); err != 0) return Explain("attach", err, log);
  d->rb_ = ring_buffer__new(bpf_map__fd(d->skel_->maps.doorbell), CountRing, &d->taken_, nullptr);
  if (d->rb_ == nullptr) return Explain("ring buffer", errno, log);
  d->fd_ = ring_buffer__epoll_fd(d->rb_);
  return d;
}

KmsgDoorbell::~KmsgDoorbell() {
  if (rb_ != nullptr) ring_buffer__free(rb_);
  if (skel_ != nullptr) kmsg_doorbell_bpf__destroy(skel_);
}

uint64_t KmsgDoorbell::Take() {
  const uint64_t before = taken_;
  ring_buffer__consume(rb_);
  return taken_ - before;
}

bool IsKernelKmsgDevice(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 &&
         minor(st.st_rdev) == 11;
}

}  // namespace gpuheal
