#include "slurm/reason.h"

#include <fmt/format.h>

#include <cctype>

namespace gpuheal::slurm {

std::string FormatReason(const DrainReason& r) {
  std::string head = std::string(kReasonPrefix) + r.code;
  if (!r.gpu.empty()) head += " GPU " + r.gpu;
  const std::string tail = r.more > 0 ? fmt::format(" (+{} more)", r.more) : "";
  // One line, no control characters: Slurm shows the reason as is.
  std::string msg;
  for (char c : r.message) msg += std::iscntrl(static_cast<unsigned char>(c)) ? ' ' : c;
  while (!msg.empty() && msg.back() == ' ') msg.pop_back();
  const size_t room = kMaxReasonBytes > head.size() + 1 + tail.size()
                          ? kMaxReasonBytes - head.size() - 1 - tail.size()
                          : 0;
  if (msg.size() > room) {
    size_t cut = room >= 3 ? room - 3 : 0;
    // Never split a UTF-8 sequence.
    while (cut > 0 && (static_cast<unsigned char>(msg[cut]) & 0xC0) == 0x80) --cut;
    msg = msg.substr(0, cut) + (room >= 3 ? "..." : "");
  }
  std::string out = head;
  if (!msg.empty()) out += " " + msg;
  out += tail;
  return out;
}

std::optional<DrainReason> ParseReason(std::string_view reason) {
  if (!IsGpuhealReason(reason)) return std::nullopt;
  std::string_view rest = reason.substr(kReasonPrefix.size());
  DrainReason r;
  auto word = [&rest]() {
    const size_t sp = rest.find(' ');
    std::string_view w = rest.substr(0, sp);
    rest = sp == std::string_view::npos ? std::string_view{} : rest.substr(sp + 1);
    return std::string(w);
  };
  r.code = word();
  // Reason codes are CamelCase words (docs/reasons.md); bus ids hex digits, ':' and '.'.
  if (r.code.empty()) return std::nullopt;
  for (char c : r.code)
    if (!std::isalnum(static_cast<unsigned char>(c))) return std::nullopt;
  if (rest.starts_with("GPU ")) {
    rest.remove_prefix(4);
    r.gpu = word();
    for (char c : r.gpu)
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.')
        return std::nullopt;
  }
  if (rest.ends_with(" more)")) {
    const size_t open = rest.rfind("(+");
    if (open != std::string_view::npos && (open == 0 || rest[open - 1] == ' ')) {
      const std::string_view num = rest.substr(open + 2, rest.size() - open - 2 - 6);
      int n = 0;
      bool digits = !num.empty() && num.size() <= 6;  // at most 999,999: no overflow
      for (size_t i = 0; digits && i < num.size(); ++i) {
        if (!std::isdigit(static_cast<unsigned char>(num[i])))
          digits = false;
        else
          n = n * 10 + (num[i] - '0');
      }
      if (digits && n > 0) {
        r.more = n;
        rest = rest.substr(0, open == 0 ? 0 : open - 1);
      }
    }
  }
  r.message = std::string(rest);
  return r;
}

std::string ReasonContractListing() {
  std::string out = fmt::format(
      "# slurm drain reason: {}<ReasonCode>[ GPU <pci bus id>] <message>[ (+N more)], at most {} "
      "bytes\n",
      kReasonPrefix, kMaxReasonBytes);
  const DrainReason examples[] = {
      {"NvidiaXID79Error", "0000:3b:00", "GPU has fallen off the bus.", 0},
      {"NvidiaXID48Error", "0000:86:00",
       "An uncorrectable double bit error (DBE) has been detected "
       "on GPU in the framebuffer at partition 0, subpartition 1.",
       2},
      {"KernelSoftLockup", "", "watchdog: BUG: soft lockup - CPU#12 stuck for 23s! [nccl:77]", 0},
      {"NvidiaXID119Error", "0000:3b:00", std::string(300, 'x'), 1},
  };
  for (const auto& e : examples) out += FormatReason(e) + "\n";
  return out;
}

}  // namespace gpuheal::slurm
