#include "sources/kmsg_doorbell.h"

#include <bpf/libbpf.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "core/dl_symbol.h"

// libbpf, opened with dlopen the first time a doorbell opens rather than linked: it and what it
// loads (libelf, zlib) cost an agent 0.3 MB of resident memory, which an agent whose doorbell is
// off (`kmsg_bpf: false`) or cannot load never needs. Its calls, the skeleton's included, go
// through pointers of the exact types libbpf's header declares.
namespace {

struct Libbpf {
  decltype(&::libbpf_set_print) set_print;
  decltype(&::bpf_object__open_skeleton) open_skeleton;
  decltype(&::bpf_object__load_skeleton) load_skeleton;
  decltype(&::bpf_object__attach_skeleton) attach_skeleton;
  decltype(&::bpf_object__detach_skeleton) detach_skeleton;
  decltype(&::bpf_object__destroy_skeleton) destroy_skeleton;
  decltype(&::bpf_map__fd) map_fd;
  decltype(&::ring_buffer__new) ring_new;
  decltype(&::ring_buffer__epoll_fd) ring_epoll_fd;
  decltype(&::ring_buffer__consume) ring_consume;
  decltype(&::ring_buffer__free) ring_free;
};
Libbpf g_bpf{};

int OpenSkeleton(bpf_object_skeleton* s, const bpf_object_open_opts* opts) {
  return g_bpf.open_skeleton(s, opts);
}
int LoadSkeleton(bpf_object_skeleton* s) { return g_bpf.load_skeleton(s); }
int AttachSkeleton(bpf_object_skeleton* s) { return g_bpf.attach_skeleton(s); }
void DetachSkeleton(bpf_object_skeleton* s) { g_bpf.detach_skeleton(s); }
void DestroySkeleton(bpf_object_skeleton* s) { g_bpf.destroy_skeleton(s); }

}  // namespace

#define bpf_object__open_skeleton OpenSkeleton
#define bpf_object__load_skeleton LoadSkeleton
#define bpf_object__attach_skeleton AttachSkeleton
#define bpf_object__detach_skeleton DetachSkeleton
#define bpf_object__destroy_skeleton DestroySkeleton
#include "kmsg_doorbell.skel.h"
#undef bpf_object__open_skeleton
#undef bpf_object__load_skeleton
#undef bpf_object__attach_skeleton
#undef bpf_object__detach_skeleton
#undef bpf_object__destroy_skeleton

namespace gpuheal {
namespace {

constexpr const char* kLibbpf = "libbpf.so.1";

// Opens libbpf once, thread-safe; the error says what is missing and how to install it.
Result<const Libbpf*> LoadLibbpf() {
  static std::once_flag once;
  static std::string error;
  static bool loaded = false;
  std::call_once(once, [] {
    auto opened = OpenLibrary(kLibbpf, RTLD_NOW | RTLD_LOCAL,
                              "install libbpf (Debian/Ubuntu: libbpf1, RHEL: libbpf) or put it "
                              "on LD_LIBRARY_PATH");
    if (!opened) {
      error = "kernel-log doorbell (BPF) not loaded: " + opened.error().message;
      return;
    }
    void* h = *opened;
    std::string missing;
    if (!ResolveSymbol(h, "libbpf_set_print", g_bpf.set_print, missing) ||
        !ResolveSymbol(h, "bpf_object__open_skeleton", g_bpf.open_skeleton, missing) ||
        !ResolveSymbol(h, "bpf_object__load_skeleton", g_bpf.load_skeleton, missing) ||
        !ResolveSymbol(h, "bpf_object__attach_skeleton", g_bpf.attach_skeleton, missing) ||
        !ResolveSymbol(h, "bpf_object__detach_skeleton", g_bpf.detach_skeleton, missing) ||
        !ResolveSymbol(h, "bpf_object__destroy_skeleton", g_bpf.destroy_skeleton, missing) ||
        !ResolveSymbol(h, "bpf_map__fd", g_bpf.map_fd, missing) ||
        !ResolveSymbol(h, "ring_buffer__new", g_bpf.ring_new, missing) ||
        !ResolveSymbol(h, "ring_buffer__epoll_fd", g_bpf.ring_epoll_fd, missing) ||
        !ResolveSymbol(h, "ring_buffer__consume", g_bpf.ring_consume, missing) ||
        !ResolveSymbol(h, "ring_buffer__free", g_bpf.ring_free, missing)) {
      error = fmt::format(
          "kernel-log doorbell (BPF) not loaded: {} has no {} (libbpf 1.0 or "
          "newer is needed)",
          kLibbpf, missing);
      return;
    }
    loaded = true;
  });
  if (!loaded) return Error{error};
  return &g_bpf;
}

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
  auto lib = LoadLibbpf();
  if (!lib) return lib.error();
  std::lock_guard<std::mutex> lock(g_libbpf_mu);
  std::string log;
  g_libbpf_log = &log;
  g_bpf.set_print(LibbpfPrint);
  struct Restore {
    ~Restore() { g_libbpf_log = nullptr; }
  } restore;

  std::unique_ptr<KmsgDoorbell> d(new KmsgDoorbell());
  d->skel_ = kmsg_doorbell_bpf__open();
  if (d->skel_ == nullptr) return Explain("open", errno, log);
  if (int err = kmsg_doorbell_bpf__load(d->skel_); err != 0) return Explain("load", err, log);
  if (int err = kmsg_doorbell_bpf__attach(d->skel_); err != 0) return Explain("attach", err, log);
  d->rb_ = g_bpf.ring_new(g_bpf.map_fd(d->skel_->maps.doorbell), CountRing, &d->taken_, nullptr);
  if (d->rb_ == nullptr) return Explain("ring buffer", errno, log);
  d->fd_ = g_bpf.ring_epoll_fd(d->rb_);
  return d;
}

KmsgDoorbell::~KmsgDoorbell() {
  if (rb_ != nullptr) g_bpf.ring_free(rb_);
  if (skel_ != nullptr) kmsg_doorbell_bpf__destroy(skel_);
}

uint64_t KmsgDoorbell::Take() {
  const uint64_t before = taken_;
  g_bpf.ring_consume(rb_);
  return taken_ - before;
}

bool IsKernelKmsgDevice(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 &&
         minor(st.st_rdev) == 11;
}

}  // namespace gpuheal
