#pragma once
// A durable save on a thread of its own: the text is written to a temporary file, renamed over
// the path and fsynced (ActiveFaults::Write, Sync: milliseconds, which a fault record waited for
// on the agent's loop thread). One save at a time; a save asked for while one runs replaces any
// that waits, and `done` gets each one's outcome on the saver's thread (the agent posts it to its
// loop). The thread starts at the first save and ends with Stop() or the destructor.

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/result.h"

namespace gpuheal {

class BackgroundSaver {
 public:
  using Done = std::function<void(const Status&)>;
  BackgroundSaver(std::string path, Done done) : path_(std::move(path)), done_(std::move(done)) {}
  ~BackgroundSaver() { Stop(); }
  BackgroundSaver(const BackgroundSaver&) = delete;
  BackgroundSaver& operator=(const BackgroundSaver&) = delete;

  void Save(std::string text);
  // Waits for the saves asked for (the one under way and the one that waits, if any); no `done`
  // after it returns, and Save() does nothing after it.
  void Stop();

 private:
  void Loop();

  const std::string path_;
  const Done done_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::string> job_;  // guarded by mu_
  bool stop_ = false;               // guarded by mu_
};

}  // namespace gpuheal
