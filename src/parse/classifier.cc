#include "parse/classifier.h"

#include <fmt/format.h>

#include "core/nvlink5.h"
#include "core/reasons.h"
#include "core/sxid_catalog.h"
#include "core/xid74.h"
#include "core/xid_catalog.h"
#include "parse/kernel_parser.h"
#include "parse/line_format.h"
#include "parse/nvidia_parser.h"

namespace gpuheal {
namespace {

// A multi-record driver message is abandoned when this many unrelated records interleave.
constexpr int kMaxInterleave = 8;
constexpr size_t kMaxUuids = 1024;

void FillProvenance(Fault& f, const Record& rec) {
  f.trusted = rec.trusted;
  f.line = rec.line;
  f.kmsg_seq = rec.kmsg_seq;
  f.kmsg_usec = rec.kmsg_usec;
  f.message = std::string(rec.message);
}

}  // namespace

Result<std::unique_ptr<Classifier>> Classifier::Create(ClassifierOptions options) {
  std::vector<NpdConfig> npd = std::move(options.npd_rules);
  std::unique_ptr<Classifier> c(new Classifier(std::move(options)));
  auto matcher = NpdMatcher::Create(std::move(npd));
  if (!matcher) return matcher.error();
  c->npd_ = std::move(*matcher);
  return c;
}

Classifier::Classifier(ClassifierOptions options)
    : options_(std::move(options)), scanner_(KernelKeywords()) {}

std::string Classifier::UuidFor(const std::string& pci) const {
  auto it = uuids_.find(pci);
  return it == uuids_.end() ? std::string() : it->second;
}

Severity Classifier::XidSeverity(int xid, Severity catalog) const {
  auto it = options_.xid_overrides.find(xid);
  if (it != options_.xid_overrides.end() && it->second.severity) return *it->second.severity;
  return catalog;
}

Action Classifier::XidAction(int xid, Severity sev) const {
  auto it = options_.xid_overrides.find(xid);
  if (it != options_.xid_overrides.end() && it->second.action) return *it->second.action;
  return DefaultAction(sev);
}

Fault Classifier::MakeXidFault(int xid, const Record& rec) const {
  Fault f;
  const XidInfo* info = FindXid(xid);
  // An Xid newer than the catalog is reported, as a warning, rather than dropped.
  f.severity = XidSeverity(xid, info ? info->severity : Severity::kWarn);
  f.action = XidAction(xid, f.severity);
  f.xid = xid;
  f.condition = std::string(ToString(Condition::kAcceleratedHardwareReady));
  FillProvenance(f, rec);
  return f;
}

Fault Classifier::DriverXid(int xid, std::optional<int> recovery_action) const {
  Fault f = MakeXidFault(xid, Record{});
  f.kind = FaultKind::kXid;
  f.recovery_action = recovery_action;
  const auto ov = options_.xid_overrides.find(xid);
  const bool overridden = ov != options_.xid_overrides.end() && ov->second.severity;
  if (!overridden && xid == 154 && recovery_action) {
    f.severity = RecoveryActionSeverity(*recovery_action);
    f.action = XidAction(xid, f.severity);
  }
  f.reason = reason::XidReason(xid, f.severity);
  return f;
}

void Classifier::ClassifyNvidia(const Record& rec, std::vector<Fault>& out) {
  NvidiaSignal sig;
  if (!ParseNvidia(rec.message, sig)) return;
  switch (sig.kind) {
    case NvidiaMessage::kNone:
      return;
    case NvidiaMessage::kGpuAnnounce:
      if (uuids_.size() >= kMaxUuids) uuids_.clear();
      uuids_[sig.pci] = sig.uuid;
      return;
    case NvidiaMessage::kXid: {
      Fault f = MakeXidFault(sig.number, rec);
      f.kind = FaultKind::kXid;
      f.pci = sig.pci;
      f.uuid = UuidFor(sig.pci);
      f.gpu_instance = sig.gpu_instance;
      f.compute_instance = sig.compute_instance;
      f.pid = sig.pid;
      f.process = sig.process;
      f.unit = sig.unit;
      f.subcode = sig.subcode;
      f.recovery_action = sig.recovery_action;
      f.channel = sig.channel;
      if (sig.previous_xid && *sig.previous_xid != sig.number) f.consequence_of = sig.previous_xid;
      const auto ov = options_.xid_overrides.find(sig.number);
      const bool overridden = ov != options_.xid_overrides.end() && ov->second.severity;
      if (!overridden) {
        // IGNORE with the stopped process named (Xid 43 after a user's `trap;`, say): NVIDIA
        // attributes it to that application, so it is a workload-level Event, not a log line.
        const XidInfo* info = FindXid(sig.number);
        if (info && info->bucket == Bucket::kIgnore && (sig.pid || !sig.process.empty())) {
          f.severity = Severity::kWarn;
        }
        // NVIDIA's register-bit rule for Xid 74 (WORKFLOW_NVLINK_ERR), when the line has them.
        if (sig.number == 74) {
          if (auto regs = ParseXid74(sig.text)) {
            const Xid74Decision d = DecideXid74(*regs);
            f.severity = d.severity;
            f.decode = d.decode;
            f.link = regs->link;
          }
        }
        // The line itself says how bad it is for these two families.
        if (sig.number == 154 && sig.recovery_action) {
          f.severity = RecoveryActionSeverity(*sig.recovery_action);
        } else if (sig.number >= 144 && sig.number <= 150) {
          // NVIDIA's decode sheet (WORKFLOW_NVLINK5_ERR) by unit, subcode and error status; the
          // Fatal/Nonfatal word only where the sheet has no row for the registers.
          std::optional<Nvlink5Decision> d;
          if (sig.nvlink_regs) d = DecideNvlink5(sig.number, *sig.nvlink_regs);
          if (d) {
            f.severity = d->severity;
            f.decode = d->decode;
          } else {
            if (sig.nvlink_fatal && !*sig.nvlink_fatal) f.severity = Severity::kWarn;
            f.decode =
                fmt::format("registers not in NVIDIA's decode sheet: the line's {} word decides",
                            sig.nvlink_fatal ? (*sig.nvlink_fatal ? "Fatal" : "Nonfatal")
                                             : "(missing) severity");
          }
          f.link = sig.link;
        }
        f.action = XidAction(sig.number, f.severity);
      }
      f.reason = reason::XidReason(sig.number, f.severity);
      out.push_back(std::move(f));
      return;
    }
    case NvidiaMessage::kFallenOffBus: {
      Fault f = MakeXidFault(79, rec);
      f.kind = FaultKind::kGpuFallenOffBus;
      f.pci = sig.pci;
      f.uuid = UuidFor(sig.pci);
      f.reason = std::string(reason::kNvidiaGPUFallenOffBus);
      out.push_back(std::move(f));
      return;
    }
    case NvidiaMessage::kFallenStart:
      pending_fallen_ = PendingFallen{sig.pci, std::string(rec.message), rec, 0};
      return;
    case NvidiaMessage::kFallenMiddle:
      return;
    case NvidiaMessage::kFallenEnd: {
      // The fault starts at the first of the three records when we saw it.
      Record first = rec;
      if (pending_fallen_) {
        first = pending_fallen_->first;
        first.message = pending_fallen_->message;
      }
      Fault f = MakeXidFault(79, first);
      f.kind = FaultKind::kGpuFallenOffBus;
      f.trusted = first.trusted && rec.trusted;
      if (pending_fallen_) {
        f.pci = pending_fallen_->pci;
        f.uuid = UuidFor(f.pci);
        f.message = std::string(first.message) + " " + std::string(rec.message);
      }
      f.reason = std::string(reason::kNvidiaGPUFallenOffBus);
      pending_fallen_.reset();
      out.push_back(std::move(f));
      return;
    }
    case NvidiaMessage::kSxid: {
      Fault f;
      f.kind = FaultKind::kSxid;
      f.sxid = sig.number;
      f.pci = sig.pci;
      // NVIDIA's SXid tables decide; the line's Fatal/Non-fatal word only for an SXid they omit.
      f.severity = SxidSeverity(sig.number, sig.sxid_fatal);
      if (const SxidInfo* info = FindSxid(sig.number)) {
        f.decode = fmt::format("NVIDIA: {}, {}", ToString(info->cls), info->nvidia_action);
      } else {
        f.decode = fmt::format("not in NVIDIA's SXid tables: the line's {} word decides",
                               sig.sxid_fatal ? "Fatal" : "Non-fatal");
      }
      f.action = DefaultAction(f.severity);
      f.condition = std::string(ToString(Condition::kAcceleratedHardwareReady));
      f.reason = reason::SxidReason(sig.number, f.severity);
      FillProvenance(f, rec);
      out.push_back(std::move(f));
      return;
    }
  }
}

void Classifier::Classify(const Record& rec, std::vector<Fault>& out) {
  // Records stored for a later multi-record message must outlive this call.
  if (pending_fallen_ && ++pending_fallen_->records_since > kMaxInterleave) pending_fallen_.reset();

  const uint64_t kw = scanner_.Scan(rec.message);
  if (kw != 0) {
    if (kw & ((uint64_t{1} << kKwNvrm) | (uint64_t{1} << kKwSxid))) {
      ClassifyNvidia(rec, out);
    } else if (auto k = ParseKernel(rec.message, kw)) {
      Fault f;
      f.kind = k->kind;
      f.severity = k->severity;
      f.action = DefaultAction(k->severity);
      f.condition = std::string(ToString(k->condition));
      f.reason = std::string(k->reason);
      f.device = std::move(k->device);
      FillProvenance(f, rec);
      out.push_back(std::move(f));
    }
  }
  if (!npd_->empty()) {
    for (int i : npd_->Push(rec.message)) {
      const NpdRule& r = npd_->rule(i);
      Fault f;
      f.kind = FaultKind::kRule;
      f.severity = r.permanent ? Severity::kFatal : Severity::kWarn;
      f.action = DefaultAction(f.severity);
      f.condition = r.permanent ? r.condition : std::string(ToString(Condition::kKernelReady));
      f.reason = r.reason;
      FillProvenance(f, rec);
      out.push_back(std::move(f));
    }
  }
}

void Classifier::ClassifyLine(std::string_view line, size_t line_no, std::vector<Fault>& out) {
  const ParsedLine p = ParseLine(line);
  if (p.format == LineFormat::kKmsgContinuation) return;
  Record rec;
  rec.message = p.message;
  rec.trusted = p.kernel_origin;
  rec.line = line_no;
  rec.kmsg_seq = p.seq;
  rec.kmsg_usec = p.usec;
  Classify(rec, out);
}

}  // namespace gpuheal
