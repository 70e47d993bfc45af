#include "agent/boot_id.h"

#include <fstream>

namespace gpuheal {

std::string ReadBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

}  // namespace gpuheal
