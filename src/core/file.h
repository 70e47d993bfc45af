#pragma once
// Reading a small file whole (configs, tokens, /proc entries).

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace gpuheal {

// The file's bytes, or nullopt when it cannot be opened.
inline std::optional<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace gpuheal
