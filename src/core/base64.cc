#include "core/base64.h"

#include <fmt/format.h>

namespace gpuheal {

Result<std::string> Base64Decode(std::string_view in, const std::string& where) {
  static constexpr std::string_view kChars =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0, bits = -8;
  for (char c : in) {
    if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
    const size_t p = kChars.find(c);
    if (p == std::string_view::npos) return Error{fmt::format("{}: not valid base64", where)};
    val = ((val << 6) + static_cast<int>(p)) & 0xffffff;
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((val >> bits) & 0xff));
      bits -= 8;
    }
  }
  return out;
}

}  // namespace gpuheal
