#pragma once
// PCI bus ids as the NVIDIA driver prints them, normalised to lowercase "dddd:bb:dd".

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gpuheal {

struct PciMatch {
  std::string id;       // "dddd:bb:dd", lowercase, function dropped
  size_t consumed = 0;  // characters of the input that formed the id (incl. "PCI:" and ".f")
};

// Parses a bus id at the start of `s`: optional "PCI:", domain (4-8 hex digits, optional for
// "bb:dd.f"), bus (2 hex), device (2 hex), optional ".f". nullopt when `s` does not start with one.
std::optional<PciMatch> ParsePciPrefix(std::string_view s);

// Accepts a complete bus id (as on the command line) and returns its normal form.
std::optional<std::string> NormalisePci(std::string_view s);

}  // namespace gpuheal
