#include "agent/boot_id.h"

#include "core/file.h"

namespace gpuheal {

std::string ReadBootId() {
  std::string id = ReadWholeFile("/proc/sys/kernel/random/boot_id").value_or("");
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

}  // namespace gpuheal
