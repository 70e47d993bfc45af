#pragma once
// The agent's durable cursor: boot id and the last kmsg sequence number whose faults have been
// reported. Written with one pwrite(2) of a fixed-size, space-padded JSON document to an open
// file, so a killed agent leaves either the old or the new cursor, never a torn one, and a write
// costs a few microseconds (it is on the detection path: the cursor is saved before a fault is
// reported, so a restart never reports it twice).

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
  static Result<std::unique_ptr<StateFile>> Open(const std::string& dir, std::string* warning);
  ~StateFile();

  const Cursor& cursor() const { return cursor_; }
  Status Save(const Cursor& c);
  const std::string& path() const { return path_; }

 private:
  StateFile(int fd, std::string path, Cursor c) : fd_(fd), path_(std::move(path)), cursor_(std::move(c)) {}
  int fd_;
  std::string path_;
  Cursor cursor_;
};

}  // namespace gpuheal
