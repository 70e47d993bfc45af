#include "parse/line_format.h"

#include <array>
#include <charconv>

namespace gpuheal {
namespace {

// The kernel keeps 8 bits of facility ((pri >> 3) & 0xff) for a record written to /dev/kmsg, so
// records carry PRI up to 2047: a user-space write of "<1024>..." is stored as facility 128, not 0.
constexpr uint64_t kMaxPri = 255 * 8 + 7;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::optional<uint64_t> ParseU64(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// "PRI,SEQ,TS,FLAGS[,...];MESSAGE"
bool ParseKmsg(std::string_view line, ParsedLine& out) {
  const size_t semi = line.find(';');
  if (semi == std::string_view::npos || semi > 64) return false;
  std::string_view head = line.substr(0, semi);
  std::array<std::string_view, 4> f;
  for (size_t i = 0; i < 4; ++i) {
    const size_t comma = head.find(',');
    if (i < 3 && comma == std::string_view::npos) return false;
    f[i] = head.substr(0, comma);
    head = comma == std::string_view::npos ? std::string_view() : head.substr(comma + 1);
  }
  auto pri = ParseU64(f[0]);
  auto seq = ParseU64(f[1]);
  auto ts = ParseU64(f[2]);
  if (!pri || !seq || !ts || *pri > kMaxPri) return false;
  out.format = LineFormat::kKmsg;
  out.facility = static_cast<int>(*pri >> 3);
  out.level = static_cast<int>(*pri & 7);
  out.seq = seq;
  out.usec = ts;
  out.message = line.substr(semi + 1);
  out.kernel_origin = *out.facility == 0;
  return true;
}

constexpr std::array<std::string_view, 20> kFacilities{
    "kern",   "user",   "mail",   "daemon",   "auth",   "syslog", "lpr",
    "news",   "uucp",   "cron",   "authpriv", "ftp",    "local0", "local1",
    "local2", "local3", "local4", "local5",   "local6", "local7"};

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return s;
}

// dmesg -x: "kern  :err   : [  12.345] MSG"
bool StripDmesgFacility(std::string_view& s, ParsedLine& out) {
  const size_t colon = s.find(':');
  if (colon == std::string_view::npos || colon > 12) return false;
  std::string_view name = s.substr(0, colon);
  while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
  for (size_t i = 0; i < kFacilities.size(); ++i) {
    if (kFacilities[i] == name) {
      std::string_view rest = s.substr(colon + 1);
      const size_t colon2 = rest.find(':');
      if (colon2 == std::string_view::npos || colon2 > 10) return false;
      out.facility = static_cast<int>(i);
      out.kernel_origin = i == 0;
      s = TrimLeft(rest.substr(colon2 + 1));
      return true;
    }
  }
  return false;
}

// "<N>" as written by dmesg -r or into /dev/kmsg.
bool StripPri(std::string_view& s, ParsedLine& out) {
  if (s.size() < 3 || s[0] != '<') return false;
  const size_t close = s.find('>');
  if (close == std::string_view::npos || close > 5) return false;
  auto pri = ParseU64(s.substr(1, close - 1));
  if (!pri || *pri > kMaxPri) return false;
  out.facility = static_cast<int>(*pri >> 3);
  out.level = static_cast<int>(*pri & 7);
  out.kernel_origin = *out.facility == 0;
  s.remove_prefix(close + 1);
  return true;
}

// "[    5.123456] ", "[Mon Nov 30 04:28:50 2026] ", optionally followed by a caller id "[  T123] ".
bool StripBracketTime(std::string_view& s) {
  if (s.empty() || s[0] != '[') return false;
  const size_t close = s.find(']');
  if (close == std::string_view::npos || close > 40 || close < 2) return false;
  std::string_view inner = TrimLeft(s.substr(1, close - 1));
  if (inner.empty()) return false;
  bool numeric = true;
  for (char c : inner) {
    if (!IsDigit(c) && c != '.') numeric = false;
  }
  const bool human = IsAlpha(inner[0]) && inner.find(':') != std::string_view::npos;
  if (!numeric && !human) return false;
  s.remove_prefix(close + 1);
  if (!s.empty() && s[0] == ' ') s.remove_prefix(1);
  // CONFIG_PRINTK_CALLER: "[  T123]" or "[   C2]".
  if (s.size() > 3 && s[0] == '[') {
    const size_t c2 = s.find(']');
    if (c2 != std::string_view::npos && c2 < 12) {
      std::string_view id = TrimLeft(s.substr(1, c2 - 1));
      if (id.size() >= 2 && (id[0] == 'T' || id[0] == 'C') && IsDigit(id[1])) {
        s.remove_prefix(c2 + 1);
        if (!s.empty() && s[0] == ' ') s.remove_prefix(1);
      }
    }
  }
  return true;
}

// "ident[pid]:" - a syslog identifier with the pid journald and rsyslog add for user space.
bool IsPidIdent(std::string_view tok) {
  if (!tok.ends_with("]:")) return false;
  const size_t open = tok.find('[');
  if (open == std::string_view::npos || open == 0) return false;
  for (size_t i = open + 1; i + 2 < tok.size(); ++i) {
    if (!IsDigit(tok[i])) return false;
  }
  return open + 3 < tok.size();  // at least one digit
}

// After the timestamp of a syslog line: "host ident: MSG", where ident is "kernel" for kernel
// lines, or without the host ("journalctl --no-hostname": "kernel: MSG", "ident[pid]: MSG").
// With `strict`, only an ident of the kernel or of the "name[pid]" form is accepted (the text
// after a dmesg timestamp is a kernel message that may itself contain "word: ").
bool ParseSyslogTail(std::string_view rest, ParsedLine& out, bool strict = false) {
  rest = TrimLeft(rest);
  const size_t sp = rest.find(' ');
  if (sp == std::string_view::npos || sp == 0) return false;
  const std::string_view first = rest.substr(0, sp);
  std::string_view ident, msg;
  if (first == "kernel:" || IsPidIdent(first)) {
    ident = first.substr(0, first.size() - 1);
    msg = rest.substr(sp + 1);
  } else {
    std::string_view tail = rest.substr(sp + 1);
    const size_t colon = tail.find(": ");
    if (colon == std::string_view::npos || colon == 0 || colon > 64) return false;
    ident = tail.substr(0, colon);
    if (ident.find(' ') != std::string_view::npos) return false;
    if (strict && ident != "kernel" && !IsPidIdent(tail.substr(0, colon + 1))) return false;
    msg = tail.substr(colon + 2);
  }
  out.format = LineFormat::kSyslog;
  // "kernel" (journalctl, rsyslog); "kernel[0]" is not used by either but is harmless to accept.
  out.kernel_origin = ident == "kernel" || ident.starts_with("kernel[");
  StripBracketTime(msg);  // rsyslog may keep the kernel's own "[  12.34]" timestamp
  out.message = msg;
  return true;
}

// "Nov 30 04:28:50 host kernel: MSG": any 3-letter month token (locales differ), 1-2 digit day,
// hh:mm:ss[.frac].
bool ParseSyslog(std::string_view line, ParsedLine& out) {
  if (line.size() < 16) return false;
  if (!IsAlpha(line[0]) || !IsAlpha(line[1]) || !IsAlpha(line[2]) || line[3] != ' ') return false;
  size_t p = 4;
  if (line[p] == ' ') ++p;
  if (!IsDigit(line[p])) return false;
  ++p;
  if (p < line.size() && IsDigit(line[p])) ++p;
  if (p >= line.size() || line[p] != ' ') return false;
  ++p;
  if (p + 8 > line.size()) return false;
  std::string_view t = line.substr(p, 8);
  if (!IsDigit(t[0]) || !IsDigit(t[1]) || t[2] != ':' || !IsDigit(t[3]) || !IsDigit(t[4]) ||
      t[5] != ':' || !IsDigit(t[6]) || !IsDigit(t[7])) {
    return false;
  }
  p += 8;
  while (p < line.size() && (IsDigit(line[p]) || line[p] == '.')) ++p;
  return ParseSyslogTail(line.substr(p), out);
}

// "2026-11-30T04:28:50[.frac][+zone] host kernel: MSG" (journalctl -o short-iso, RFC 3339 syslog)
// and "2026-11-30T04:28:50,123456+00:00 MSG" (dmesg --time-format iso: a comma before the
// fraction, no host or ident).
bool ParseIsoSyslog(std::string_view line, ParsedLine& out) {
  if (line.size() < 20 || !IsDigit(line[0]) || line[4] != '-' || line[7] != '-' ||
      line[10] != 'T') {
    return false;
  }
  const size_t sp = line.find(' ');
  if (sp == std::string_view::npos || sp > 40) return false;
  if (line.substr(0, sp).find(',') != std::string_view::npos) {
    out.format = LineFormat::kDmesg;
    out.message = line.substr(sp + 1);
    return true;
  }
  return ParseSyslogTail(line.substr(sp), out);
}

}  // namespace

ParsedLine ParseLine(std::string_view line) {
  ParsedLine out;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) {
    out.message = line;
    return out;
  }
  const char c = line[0];
  if (IsDigit(c)) {
    if (ParseKmsg(line, out)) return out;
    if (ParseIsoSyslog(line, out)) return out;
  } else if (c == ' ') {
    // kmsg continuation: " KEY=VALUE" (SUBSYSTEM=, DEVICE=, ...).
    const size_t eq = line.find('=');
    if (eq != std::string_view::npos && eq > 1) {
      bool key = true;
      for (size_t i = 1; i < eq; ++i) {
        const char k = line[i];
        if (!(IsAlpha(k) || IsDigit(k) || k == '_')) key = false;
      }
      if (key) {
        out.format = LineFormat::kKmsgContinuation;
        out.message = std::string_view();
        return out;
      }
    }
  } else if (IsAlpha(c)) {
    if (ParseSyslog(line, out)) return out;
    // Only the syslog tag kept ("kernel: NVRM: ...": journalctl -o cat variants, trimmed
    // copies): the kernel's message after it, as the same line with a timestamp is read.
    if (line.starts_with("kernel: ") && ParseSyslogTail(line, out)) return out;
    std::string_view s = line;
    if (StripDmesgFacility(s, out)) {
      StripBracketTime(s);
      out.format = LineFormat::kDmesg;
      out.message = s;
      return out;
    }
  } else if (c == '<') {
    std::string_view s = line;
    if (StripPri(s, out)) {
      out.format = StripBracketTime(s) ? LineFormat::kDmesg : LineFormat::kBare;
      out.message = s;
      return out;
    }
  } else if (c == '[') {
    std::string_view s = line;
    if (StripBracketTime(s)) {
      // journalctl -o short-monotonic: "[ 1234.567890] host kernel: MSG".
      if (ParseSyslogTail(s, out, /*strict=*/true)) return out;
      out.format = LineFormat::kDmesg;
      out.message = s;
      return out;
    }
  }
  out.format = LineFormat::kBare;
  // The indented continuation lines of dmesg and syslog ("               NVRM: fallen off ...").
  out.message = TrimLeft(line);
  return out;
}

}  // namespace gpuheal
