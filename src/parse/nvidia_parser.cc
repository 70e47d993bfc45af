#include "parse/nvidia_parser.h"

#include <charconv>

#include "core/pci.h"

namespace gpuheal {
namespace {

bool Consume(std::string_view& s, std::string_view prefix) {
  if (!s.starts_with(prefix)) return false;
  s.remove_prefix(prefix.size());
  return true;
}

std::optional<int> ConsumeInt(std::string_view& s, int base = 10) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || p == s.data()) return std::nullopt;
  s.remove_prefix(static_cast<size_t>(p - s.data()));
  return v;
}

std::optional<unsigned long> ConsumeHex(std::string_view& s) {
  unsigned long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || p == s.data()) return std::nullopt;
  s.remove_prefix(static_cast<size_t>(p - s.data()));
  return v;
}

std::optional<std::string> ConsumePci(std::string_view& s) {
  auto m = ParsePciPrefix(s);
  if (!m) return std::nullopt;
  s.remove_prefix(m->consumed);
  return std::move(m->id);
}

// " GPU-I:05" / " GPU-CI:01" inside the Xid parentheses (MIG).
void ParseMig(std::string_view& s, NvidiaSignal& out) {
  while (!s.empty() && s.front() == ' ') {
    std::string_view t = s.substr(1);
    if (Consume(t, "GPU-I:")) {
      if (auto v = ConsumeInt(t)) out.gpu_instance = v;
    } else if (Consume(t, "GPU-CI:")) {
      if (auto v = ConsumeInt(t)) out.compute_instance = v;
    } else {
      return;
    }
    s = t;
  }
}

// "pid=1234, name=python3, " or "pid='<unknown>', name=<unknown>, ".
void ParsePidName(std::string_view& s, NvidiaSignal& out) {
  std::string_view t = s;
  if (!Consume(t, "pid=")) return;
  const size_t comma = t.find(", name=");
  if (comma == std::string_view::npos) return;
  std::string_view pid = t.substr(0, comma);
  int v = 0;
  auto [p, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), v);
  if (ec == std::errc() && p == pid.data() + pid.size()) out.pid = v;
  t.remove_prefix(comma + 7);
  const size_t end = t.find(", ");
  std::string_view name = t.substr(0, end);
  if (name != "<unknown>") out.process = std::string(name);
  s = end == std::string_view::npos ? std::string_view() : t.substr(end + 2);
}

void ParseNvlink5(std::string_view text, NvidiaSignal& out) {
  const size_t sp = text.find(' ');
  if (sp == std::string_view::npos) return;
  out.unit = std::string(text.substr(0, sp));
  std::string_view rest = text.substr(sp + 1);
  if (rest.starts_with("Fatal"))
    out.nvlink_fatal = true;
  else if (rest.starts_with("Nonfatal") || rest.starts_with("Non-fatal"))
    out.nvlink_fatal = false;
  if (const size_t at = rest.find(" Link "); at != std::string_view::npos) {
    std::string_view l = rest.substr(at + 6);
    if (auto v = ConsumeInt(l); v && *v >= 0) out.link = *v;
  }
  out.nvlink_regs = ParseNvlink5Registers(rest);
  if (out.nvlink_regs) out.subcode = static_cast<int>((out.nvlink_regs->intrinfo >> 20) & 0x3f);
}

void ParseRecoveryAction(std::string_view text, NvidiaSignal& out) {
  // "GPU recovery action changed from 0x%x (%s) to 0x%x (%s)"
  if (!text.starts_with("GPU recovery action changed from 0x")) return;
  const size_t to = text.find(" to 0x");
  if (to == std::string_view::npos) return;
  std::string_view r = text.substr(to + 6);
  if (auto v = ConsumeHex(r)) out.recovery_action = static_cast<int>(*v);
}

void ParseChannelAndCause(std::string_view text, NvidiaSignal& out) {
  for (std::string_view key : {std::string_view("channel 0x"), std::string_view("Ch ")}) {
    const size_t at = text.find(key);
    if (at == std::string_view::npos) continue;
    std::string_view r = text.substr(at + key.size());
    if (auto v = ConsumeHex(r)) out.channel = static_cast<unsigned>(*v);
    break;
  }
  const size_t cause = text.find("caused by previous Xid ");
  if (cause != std::string_view::npos) {
    std::string_view r = text.substr(cause + 23);
    if (auto v = ConsumeInt(r); v && *v > 0) out.previous_xid = v;
  }
}

bool ParseXid(std::string_view s, NvidiaSignal& out) {
  // s starts after "Xid "
  if (!Consume(s, "(")) return false;
  auto pci = ConsumePci(s);
  if (!pci) return false;
  out.pci = std::move(*pci);
  ParseMig(s, out);
  if (!Consume(s, "): ")) return false;
  auto n = ConsumeInt(s);
  if (!n || *n <= 0) return false;
  out.number = *n;
  out.kind = NvidiaMessage::kXid;
  Consume(s, ",");
  Consume(s, " ");
  ParsePidName(s, out);
  out.text = s;
  ParseChannelAndCause(s, out);
  if (out.number >= 144 && out.number <= 150) ParseNvlink5(s, out);
  if (out.number == 154) ParseRecoveryAction(s, out);
  return true;
}

bool ParseNvrm(std::string_view s, NvidiaSignal& out) {
  if (Consume(s, "Xid ")) return ParseXid(s, out);
  if (Consume(s, "GPU at ")) {
    auto pci = ConsumePci(s);
    if (!pci) return false;
    out.pci = std::move(*pci);
    if (Consume(s, ": GPU-")) {
      out.kind = NvidiaMessage::kGpuAnnounce;
      const size_t end = s.find_first_of(" \t");
      out.uuid = "GPU-" + std::string(s.substr(0, end));
      return true;
    }
    // Older drivers: "GPU at %04x:%02x:%02x.%x has fallen off the bus."
    if (s.starts_with(" has fallen off the bus")) {
      out.kind = NvidiaMessage::kFallenOffBus;
      out.number = 79;
      return true;
    }
    return false;
  }
  if (Consume(s, "GPU ")) {
    auto pci = ConsumePci(s);
    if (!pci) return false;
    // "GPU %04x:%02x:%02x.%x: GPU has fallen off the bus."
    if (!s.starts_with(": GPU has fallen off the bus")) return false;
    out.pci = std::move(*pci);
    out.kind = NvidiaMessage::kFallenOffBus;
    out.number = 79;
    return true;
  }
  if (Consume(s, "The NVIDIA GPU ")) {
    auto pci = ConsumePci(s);
    if (!pci) return false;
    out.pci = std::move(*pci);
    // One printk in kernel-open/nvidia/nv.c prints all three lines; /dev/kmsg keeps it as one
    // record (newlines escaped as \x0a) and older drivers print it as one line. Only when the
    // rest arrives as separate records is this the start of a multi-record message.
    if (s.find("fallen off the bus") != std::string_view::npos) {
      out.kind = NvidiaMessage::kFallenOffBus;
      out.number = 79;
    } else {
      out.kind = NvidiaMessage::kFallenStart;
    }
    return true;
  }
  if (s.starts_with("fallen off the bus and is not responding")) {
    out.kind = NvidiaMessage::kFallenEnd;
    out.number = 79;
    return true;
  }
  if ((s.starts_with("(PCI ID: ") || s.starts_with("installed in this system")) &&
      s.find("installed in this system has") != std::string_view::npos) {
    if (s.find("fallen off the bus") != std::string_view::npos) {
      out.kind = NvidiaMessage::kFallenEnd;  // "...installed in this system has fallen off..."
      out.number = 79;
    } else {
      out.kind = NvidiaMessage::kFallenMiddle;
    }
    return true;
  }
  return false;
}

bool ParseSxid(std::string_view s, NvidiaSignal& out) {
  // s starts after "SXid "
  if (!Consume(s, "(")) return false;
  auto pci = ConsumePci(s);
  if (!pci) return false;
  if (!Consume(s, "): ")) return false;
  auto n = ConsumeInt(s);
  if (!n || *n <= 0) return false;
  out.pci = std::move(*pci);
  out.number = *n;
  out.kind = NvidiaMessage::kSxid;
  Consume(s, ",");
  Consume(s, " ");
  out.sxid_fatal = s.starts_with("Fatal");
  out.text = s;
  return true;
}

// "nvidia-nvswitch%d: " (the NVSwitch driver's prefix), returning what follows it.
bool ConsumeNvswitchPrefix(std::string_view& s) {
  if (!Consume(s, "nvidia-nvswitch")) return false;
  while (!s.empty() && s.front() >= '0' && s.front() <= '9') s.remove_prefix(1);
  return Consume(s, ": ");
}

}  // namespace

// Both drivers' messages are recognised only at the start of the message, with their own
// prefix: the kernel prints text chosen by user space in other messages ("tmpfs: Unknown
// parameter 'NVRM: Xid ...'", "<comm>[<pid>]: segfault at ..."), and such text is not the driver.
bool ParseNvidia(std::string_view message, NvidiaSignal& out) {
  out = NvidiaSignal{};
  std::string_view s = message;
  if (Consume(s, "NVRM: ")) {
    if (ParseNvrm(s, out)) return true;
    out = NvidiaSignal{};
    return false;
  }
  if (ConsumeNvswitchPrefix(s) && Consume(s, "SXid ")) {
    if (ParseSxid(s, out)) return true;
    out = NvidiaSignal{};
  }
  return false;
}

}  // namespace gpuheal
