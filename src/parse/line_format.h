#pragma once
// Recognises the textual forms a kernel log line comes in and extracts the kernel message:
// /dev/kmsg records ("PRI,SEQ,TS,FLAGS;MSG" and " KEY=VALUE" continuation lines), dmesg
// ("[ 1234.567890] MSG", "dmesg -T", "dmesg -x", "dmesg -r"), syslog/journalctl -k
// ("<Mon> <day> <hh:mm:ss> <host> kernel: MSG", any 3-letter month token; short-iso timestamps)
// and bare messages. Auto-detected per line; no allocation.

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpuheal {

enum class LineFormat {
  kKmsg,              // PRI,SEQ,TS_USEC,FLAGS[,...];MESSAGE
  kKmsgContinuation,  // " KEY=VALUE" after a kmsg record (not a message)
  kDmesg,             // [    5.123456] MESSAGE  (also -T, -x, -r forms)
  kSyslog,            // Nov 30 04:28:50 host kernel: MESSAGE (journalctl -k, /var/log/kern.log)
  kBare,              // the whole line is the message
};

struct ParsedLine {
  LineFormat format = LineFormat::kBare;
  std::string_view message;
  // Syslog facility when the line carries it (kmsg PRI, dmesg -x/-r); nullopt when unknown.
  std::optional<int> facility;
  int level = -1;                // syslog level 0-7 when known
  std::optional<uint64_t> seq;   // kmsg sequence number
  std::optional<uint64_t> usec;  // kmsg timestamp, microseconds since boot
  // False when the line says it was not written by the kernel (facility != 0 or a syslog
  // identifier other than "kernel").
  bool kernel_origin = true;
};

ParsedLine ParseLine(std::string_view line);

}  // namespace gpuheal
