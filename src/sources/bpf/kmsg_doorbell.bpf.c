// The kernel-log doorbell (src/sources/kmsg_doorbell.h): rings a BPF ring buffer when the kernel
// stores a printk record, so that the agent wakes at once instead of at the next scheduler tick.
//
// Attached to the printk `console` raw tracepoint, which printk_sprint() fires for every record
// it formats into the log buffer (kernel messages and /dev/kmsg writes alike), with interrupts
// off until the record is committed. The ring buffer's wake-up is an irq_work that runs on the
// self-IPI as soon as interrupts are back on: after the commit, so the record is readable when
// the agent wakes. A raw tracepoint needs neither BTF nor tracefs, and it reads no kernel
// structure: there is nothing to relocate across kernels.
//
// Nothing of the record travels here: the agent reads it from /dev/kmsg as before (content,
// sequence number, facility), so the trust rule and the cursor are untouched. At most one ring
// is pending: while the agent has not taken the last one, it will drain this record too.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 4096);
} doorbell SEC(".maps");

SEC("raw_tp/console")
int ring(void *ctx) {
  (void)ctx;
  if (bpf_ringbuf_query(&doorbell, BPF_RB_AVAIL_DATA) > 0) return 0;
  __u8 one = 1;
  bpf_ringbuf_output(&doorbell, &one, sizeof one, BPF_RB_FORCE_WAKEUP);
  return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
