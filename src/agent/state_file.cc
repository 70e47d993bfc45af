#include "agent/state_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace gpuheal {
namespace {
constexpr size_t kRecordSize = 512;
}  // namespace

Result<std::unique_ptr<StateFile>> StateFile::Open(const std::string& dir, std::string* warning) {
  const std::string path = (std::filesystem::path(dir) / "agent-state.json").string();
  std::unique_ptr<StateFile> f(new StateFile(-1, dir, path, Cursor{}));
  if (auto s = f->OpenForWriting(); !s) {
    f->writable_ = false;
    f->open_error_ = s.error().message;
    f->fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);  // the cursor, where it can still be read
  }
  if (f->fd_ < 0) return f;
  std::string buf(kRecordSize, '\0');
  const ssize_t n = pread(f->fd_, buf.data(), buf.size(), 0);
  if (n > 0) {
    buf.resize(static_cast<size_t>(n));
    try {
      auto j = nlohmann::json::parse(buf);
      f->cursor_.boot_id = j.at("boot_id").get<std::string>();
      // A negative number is no sequence number (get<uint64_t> would wrap it).
      if (!j.at("last_seq").is_number_unsigned())
        throw std::runtime_error("last_seq is not a sequence number");
      f->cursor_.last_seq = j.at("last_seq").get<uint64_t>();
      f->cursor_.valid = true;
    } catch (const std::exception& e) {
      if (warning) *warning = fmt::format("{}: ignoring unreadable state ({})", path, e.what());
    }
  }
  return f;
}

Status StateFile::OpenForWriting() {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return Error{fmt::format("{}: cannot create state directory: {}", dir_, ec.message())};
  const int fd = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return Error{fmt::format("{}: cannot open state file: {}", path_, std::strerror(errno))};
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
  writable_ = true;
  return Status::Ok();
}

StateFile::~StateFile() {
  if (fd_ >= 0) close(fd_);
}

Status StateFile::Save(const Cursor& c) {
  if (!writable_) {
    if (auto s = OpenForWriting(); !s) return s;
  }
  nlohmann::json j;
  j["boot_id"] = c.boot_id;
  j["last_seq"] = c.last_seq;
  std::string doc = j.dump();
  if (doc.size() >= kRecordSize) return Error{"state record too large"};
  doc.resize(kRecordSize - 1, ' ');
  doc.push_back('\n');
  if (pwrite(fd_, doc.data(), doc.size(), 0) != static_cast<ssize_t>(doc.size())) {
    return Error{fmt::format("{}: write: {}", path_, std::strerror(errno))};
  }
  cursor_ = c;
  cursor_.valid = true;
  return Status::Ok();
}

}  // namespace gpuheal
