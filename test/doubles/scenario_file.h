#pragma once
// The JSON scenario file that drives a hardware test double (NVML, DCGM): named by an environment
// variable, re-read whenever a test replaces it (write + rename), noticed through inotify on its
// directory so a double can also sleep on fd() until the "hardware" changes.

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace gpuheal::testing {

class ScenarioFile {
 public:
  // Points the watch at `path` (a library may stay loaded across dlclose, and one test process
  // may use several scenarios). Returns true when the path changed, then loads it.
  bool Open(const std::string& path, nlohmann::json& into) {
    path_ = path;
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    base_ = slash == std::string::npos ? path : path.substr(slash + 1);
    if (fd_ < 0) fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    bool changed = false;
    if (fd_ >= 0 && dir != dir_) {
      if (watch_ >= 0) inotify_rm_watch(fd_, watch_);
      watch_ = inotify_add_watch(fd_, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO);
      dir_ = dir;
      changed = true;
    }
    Load(into);
    return changed;
  }

  // Re-reads the file when it was replaced since the last look.
  void MaybeReload(nlohmann::json& into) {
    if (fd_ < 0) return;
    alignas(inotify_event) char buf[4096];
    bool changed = false;
    ssize_t n;
    while ((n = read(fd_, buf, sizeof buf)) > 0) {
      for (ssize_t off = 0; off < n;) {
        auto* ev = reinterpret_cast<inotify_event*>(buf + off);
        if (ev->len > 0 && base_ == ev->name) changed = true;
        off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      }
    }
    if (changed) Load(into);
  }

  // Waits up to `ms` for the directory to change.
  void Wait(int ms) const {
    pollfd p{fd_, POLLIN, 0};
    poll(&p, 1, ms);
  }

 private:
  void Load(nlohmann::json& into) const {
    std::ifstream in(path_);
    if (!in) return;
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (!j.is_discarded() && j.is_object()) into = std::move(j);
  }

  std::string path_, base_, dir_;
  int fd_ = -1;
  int watch_ = -1;
};

}  // namespace gpuheal::testing
