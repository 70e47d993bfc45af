#pragma once
// One pass over a message that finds which of a fixed set of keywords occur in it. The hot path
// of classification: most kernel lines match nothing, and this rejects them in ~1 ns per byte
// (a 4-byte-prefix filter; only prefix hits are compared).

#include <bitset>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace gpuheal {

class KeywordScanner {
 public:
  // Keyword i sets bit i of Scan()'s result; at most 64 keywords, each at least 4 bytes long.
  explicit KeywordScanner(std::vector<std::string_view> keywords) : keywords_(std::move(keywords)) {
    for (size_t i = 0; i < keywords_.size(); ++i) {
      const uint32_t p = Load4(keywords_[i].data());
      prefixes_.push_back(p);
      filter_.set(Hash(p));
    }
  }

  uint64_t Scan(std::string_view s) const {
    uint64_t found = 0;
    if (s.size() < 4) return 0;
    const char* d = s.data();
    const size_t last = s.size() - 4;
    for (size_t i = 0; i <= last; ++i) {
      const uint32_t v = Load4(d + i);
      if (!filter_.test(Hash(v))) continue;
      for (size_t k = 0; k < keywords_.size(); ++k) {
        if (prefixes_[k] == v && s.size() - i >= keywords_[k].size() &&
            std::memcmp(d + i, keywords_[k].data(), keywords_[k].size()) == 0) {
          found |= uint64_t{1} << k;
        }
      }
    }
    return found;
  }

 private:
  static uint32_t Load4(const char* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  static size_t Hash(uint32_t v) { return (v * 2654435761u) >> 16; }

  std::vector<std::string_view> keywords_;
  std::vector<uint32_t> prefixes_;
  std::bitset<65536> filter_;
};

}  // namespace gpuheal
