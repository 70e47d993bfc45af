#pragma once
#include <string>

namespace gpuheal {
// This boot's id from /proc/sys/kernel/random/boot_id (empty if unreadable).
std::string ReadBootId();
}  // namespace gpuheal
