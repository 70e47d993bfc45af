#pragma once
// Plain-text tables for the commands' default output: columns padded to their widest cell, two
// spaces apart, the last column unpadded.

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

namespace gpuheal::cli {

inline void PrintTable(const std::vector<std::vector<std::string>>& rows,
                       const std::string& indent = "") {
  if (rows.empty()) return;
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += i + 1 == row.size() ? row[i] : fmt::format("{:<{}}  ", row[i], width[i]);
    }
    std::cout << indent << line << "\n";
  }
}

}  // namespace gpuheal::cli
