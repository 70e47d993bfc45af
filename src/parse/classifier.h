#pragma once
// Classifier: kernel message -> Fault, using the Xid catalog, the built-in kernel fault table,
// per-Xid overrides from config and NPD-format user rules. Holds only the small state that
// multi-record driver messages and NPD's line buffer need; escalation lives in the node state.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/fault.h"
#include "core/result.h"
#include "parse/keyword_scan.h"
#include "parse/npd_rules.h"

namespace gpuheal {

struct XidOverride {
  std::optional<Severity> severity;
  std::optional<Action> action;
};

struct ClassifierOptions {
  std::map<int, XidOverride> xid_overrides;
  std::vector<NpdConfig> npd_rules;
};

// One kernel message with what is known about where it came from.
struct Record {
  std::string_view message;
  bool trusted = true;
  size_t line = 0;
  std::optional<uint64_t> kmsg_seq;
  std::optional<uint64_t> kmsg_usec;
};

class Classifier {
 public:
  static Result<std::unique_ptr<Classifier>> Create(ClassifierOptions options);

  // Appends the faults in `rec` (usually none, at most one per matching source) to `out`.
  void Classify(const Record& rec, std::vector<Fault>& out);

  // Parses one line in any supported text form (core of `gpuheal classify`) and classifies it.
  void ClassifyLine(std::string_view line, size_t line_no, std::vector<Fault>& out);

  // The GPU UUID the driver announced for a bus id, if seen.
  std::string UuidFor(const std::string& pci) const;

  // An Xid reported by the driver API (NVML/DCGM) rather than the kernel log: the same catalog,
  // overrides and Xid 154 recovery-action rule as a kernel line, without provenance.
  Fault DriverXid(int xid, std::optional<int> recovery_action = std::nullopt) const;

 private:
  explicit Classifier(ClassifierOptions options);
  void ClassifyNvidia(const Record& rec, std::vector<Fault>& out);
  Fault MakeXidFault(int xid, const Record& rec) const;
  Severity XidSeverity(int xid, Severity catalog) const;
  Action XidAction(int xid, Severity sev) const;

  ClassifierOptions options_;
  KeywordScanner scanner_;
  std::unique_ptr<NpdMatcher> npd_;
  std::unordered_map<std::string, std::string> uuids_;

  // "The NVIDIA GPU <bdf>" / "(PCI ID: ...) installed in this system has" / "fallen off the bus
  // ..."
  struct PendingFallen {
    std::string pci;
    std::string message;  // owned: the record's buffer is gone by the time the message completes
    Record first;         // first.message is re-pointed at `message` when used
    int records_since = 0;
  };
  std::optional<PendingFallen> pending_fallen_;
};

}  // namespace gpuheal
