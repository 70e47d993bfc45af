#pragma once
// The agent's durable cursor: boot id and the last kmsg sequence number whose faults have been
// reported and saved. Written with one pwrite(2) of a fixed-size, space-padded JSON document to
// an open file, so a killed agent leaves either the old or the new cursor, never a torn one, and
// a write costs a few microseconds (the agent saves it after each batch of records with faults).

#include <cstdint>
#include <memory>
#include <string>

#include "core/result.h"

namespace gpuheal {

struct Cursor {
  std::string boot_id;
  uint64_t last_seq = 0;
  bool valid = false;  // false: no state yet (first start)
};

class StateFile {
 public:
  // Creates `dir` if needed and opens `dir`/agent-state.json. An unreadable or corrupt file is
  // reported in `warning` and treated as absent (the agent then re-reports this boot's faults).
  // A directory that takes no writes is not an error: the cursor is read where it can be, and
  // writable() is false until a Save succeeds.
  static Result<std::unique_ptr<StateFile>> Open(const std::string& dir, std::string* warning);
  ~StateFile();

  const Cursor& cursor() const { return cursor_; }
  // Fails while the directory takes no writes (read-only, full, gone); each call tries again.
  Status Save(const Cursor& c);
  const std::string& path() const { return path_; }
  bool writable() const { return writable_; }
  const std::string& open_error() const { return open_error_; }

 private:
  StateFile(int fd, std::string dir, std::string path, Cursor c)
      : fd_(fd), dir_(std::move(dir)), path_(std::move(path)), cursor_(std::move(c)) {}
  Status OpenForWriting();
  int fd_;
  std::string dir_;
  std::string path_;
  Cursor cursor_;
  bool writable_ = true;
  std::string open_error_;
};

}  // namespace gpuheal
