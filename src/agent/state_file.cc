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
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error{fmt::format("{}: cannot create state directory: {}", dir, ec.message())};
  const std::string path = (std::filesystem::path(dir) / "agent-state.json").string();
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Error{fmt::format("{}: cannot open state file: {}", path, std::strerror(errno))};
  Cursor c;
  std::string buf(kRecordSize, '\0');
  const ssize_t n = pread(fd, buf.data(), buf.size(), 0);
  if (n > 0) {
    buf.resize(static_cast<size_t>(n));
    try {
      auto j = nlohmann::json::parse(buf);
      c.boot_id = j.at("boot_id").get<std::string>();
      c.last_seq = j.at("last_seq").get<uint64_t>();
      c.valid = true;
    } catch (const std::exception& e) {
      if (warning) *warning = fmt::format("{}: ignoring unreadable state ({})", path, e.what());
    }
  }
  return std::unique_ptr<StateFile>(new StateFile(fd, path, std::move(c)));
}

StateFile::~StateFile() { close(fd_); }

Status StateFile::Save(const Cursor& c) {
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
