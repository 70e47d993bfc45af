#pragma once
// A doorbell for /dev/kmsg readers. The kernel wakes a sleeping /dev/kmsg reader through a lazy
// irq_work that runs at the next scheduler tick (up to 4 ms at CONFIG_HZ=250), although the
// record is readable microseconds after it is written. A BPF program on the printk `console`
// raw tracepoint (src/sources/bpf/kmsg_doorbell.bpf.c) rings a BPF ring buffer for every record
// the kernel stores, and the ring buffer wakes its reader at once. The reader then drains
// /dev/kmsg as always: the doorbell carries nothing of the record, so what is read, its sequence
// number and its facility (the trust rule) still come from /dev/kmsg alone.
//
// Loading needs root or CAP_BPF + CAP_PERFMON. A record for which the tracepoint does not fire
// (the kernel skips it where RCU is not watching) rings nothing and is read at the next tick, as
// without the doorbell: keep the /dev/kmsg descriptor in the same epoll set.

#include <cstdint>
#include <memory>

#include "core/result.h"

struct kmsg_doorbell_bpf;
struct ring_buffer;

namespace gpuheal {

class KmsgDoorbell {
 public:
  // Loads and attaches the program. The error says why not, in words an operator can act on.
  static Result<std::unique_ptr<KmsgDoorbell>> Open();
  ~KmsgDoorbell();
  KmsgDoorbell(const KmsgDoorbell&) = delete;
  KmsgDoorbell& operator=(const KmsgDoorbell&) = delete;

  // Readable (for epoll) while a ring is pending.
  int fd() const { return fd_; }
  // Takes the pending rings: the next record stored rings again. Call it before draining
  // /dev/kmsg, so that a record stored during the drain rings anew. Returns the rings taken.
  uint64_t Take();

 private:
  KmsgDoorbell() = default;
  kmsg_doorbell_bpf* skel_ = nullptr;
  ring_buffer* rb_ = nullptr;
  int fd_ = -1;
  uint64_t taken_ = 0;
};

// /dev/kmsg itself (character device 1:11), not a FIFO or another file: only its records ring.
bool IsKernelKmsgDevice(int fd);

}  // namespace gpuheal
