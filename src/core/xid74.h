#pragma once
// NVIDIA's WORKFLOW_NVLINK_ERR for Xid 74 ("NVLink: fatal error detected on link N(0x.., x7)"):
// which register bits can be ignored, which are secondary, which point at ECC/parity, the link's
// mechanics or its signal integrity. Per NVIDIA, the first, third, fourth and fifth registers are
// the valid ones on Hopper-based products.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/severity.h"

namespace gpuheal {

struct Xid74Registers {
  int link = -1;
  std::array<uint32_t, 7> reg{};
};

// Parses "... link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"; nullopt when the text has no such
// register list.
std::optional<Xid74Registers> ParseXid74(std::string_view text);

struct Xid74Decision {
  Severity severity = Severity::kWarn;
  std::string decode;  // the rows that decided, in NVIDIA's terms ("register 0 bit 4: ...")
};

// The worst row any set bit falls in: ignorable bits and ECC thresholds are info; secondary,
// ECC/parity and report-a-bug bits are warnings (repeats escalate); mechanical and signal
// integrity bits of the first register, and the fabric-reset bit of the fourth, are fatal.
// A bit the sheet does not name is a warning ("report a bug").
Xid74Decision DecideXid74(const Xid74Registers& r);

}  // namespace gpuheal
