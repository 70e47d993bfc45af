#include "sources/mountinfo.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuheal {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const bool octal = s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' &&
                       s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7';
    if (octal) {
      out.push_back(
          static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool HasOption(std::string_view opts, std::string_view name) {
  while (!opts.empty()) {
    const size_t comma = opts.find(',');
    if (opts.substr(0, comma) == name) return true;
    if (comma == std::string_view::npos) break;
    opts.remove_prefix(comma + 1);
  }
  return false;
}

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> f;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    if (i >= line.size()) break;
    size_t j = line.find(' ', i);
    if (j == std::string_view::npos) j = line.size();
    f.push_back(line.substr(i, j - i));
    i = j;
  }
  return f;
}

}  // namespace

Result<std::vector<MountEntry>> ParseMountInfo(std::string_view text) {
  std::vector<MountEntry> out;
  size_t lineno = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++lineno;
    if (line.empty()) continue;
    const auto f = Fields(line);
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    size_t sep = 6;
    while (sep < f.size() && f[sep] != "-") ++sep;
    if (f.size() < 6 || sep + 2 >= f.size()) {
      return Error{
          fmt::format("mountinfo line {}: expected \"ID PARENT MAJ:MIN ROOT MOUNT OPTIONS "
                      "... - FSTYPE SOURCE SUPER-OPTIONS\", got \"{}\"",
                      lineno, line.substr(0, 200))};
    }
    MountEntry m;
    m.id = atoi(std::string(f[0]).c_str());
    m.mount_point = Unescape(f[4]);
    m.options = std::string(f[5]);
    m.fstype = std::string(f[sep + 1]);
    m.source = Unescape(f[sep + 2]);
    m.super_options = sep + 3 < f.size() ? std::string(f[sep + 3]) : std::string();
    m.read_only = HasOption(m.super_options, "ro");
    out.push_back(std::move(m));
  }
  return out;
}

std::optional<MountEntry> MountOf(const std::vector<MountEntry>& mounts, std::string_view path) {
  const MountEntry* best = nullptr;
  for (const MountEntry& m : mounts) {
    const std::string_view mp = m.mount_point;
    const bool covers =
        path == mp || mp == "/" ||
        (path.size() > mp.size() && path.substr(0, mp.size()) == mp && path[mp.size()] == '/');
    if (covers && (!best || mp.size() >= best->mount_point.size())) best = &m;
  }
  if (!best) return std::nullopt;
  return *best;
}

Result<MountTableWatch> MountTableWatch::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{fmt::format("{}: {}", path, strerror(errno))};
  return MountTableWatch(fd, path);
}

MountTableWatch::~MountTableWatch() {
  if (fd_ >= 0) close(fd_);
}

Result<std::vector<MountEntry>> MountTableWatch::Read() {
  if (lseek(fd_, 0, SEEK_SET) < 0) return Error{fmt::format("{}: {}", path_, strerror(errno))};
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t n = read(fd_, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error{fmt::format("{}: {}", path_, strerror(errno))};
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  auto r = ParseMountInfo(text);
  if (!r) return Error{fmt::format("{}: {}", path_, r.error().message)};
  return r;
}

}  // namespace gpuheal
