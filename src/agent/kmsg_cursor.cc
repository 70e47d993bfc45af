#include "agent/kmsg_cursor.h"

#include <algorithm>

namespace gpuheal {

void KmsgCursor::Resume(uint64_t saved_seq) {
  resume_after_ = saved_seq;
  saved_seq_ = saved_seq;
}

KmsgCursor::Read KmsgCursor::See(uint64_t seq) {
  Read r;
  if (expected_seq_ && seq > *expected_seq_) r.lost = seq - *expected_seq_;
  expected_seq_ = seq + 1;
  if (!max_seen_seq_ || seq > *max_seen_seq_) max_seen_seq_ = seq;
  if (resume_after_ && seq <= *resume_after_) {
    r.fresh = false;  // reported before a restart
    return r;
  }
  if (resume_after_) records_after_resume_ = true;
  last_seq_ = seq;
  return r;
}

bool KmsgCursor::AheadOfKernel() const {
  return resume_after_ && !records_after_resume_ && max_seen_seq_ &&
         *max_seen_seq_ < *resume_after_;
}

void KmsgCursor::Forget() {
  resume_after_.reset();
  saved_seq_.reset();
  expected_seq_.reset();
}

void KmsgCursor::FaultsChanged(bool save_in_flight) {
  if (!record_) return;
  if (!unsaved_since_) unsaved_since_ = record_;
  if (save_in_flight && !unsaved_after_snapshot_) unsaved_after_snapshot_ = record_;
}

void KmsgCursor::SnapshotSaved(bool ok) {
  if (ok) unsaved_since_ = unsaved_after_snapshot_;
  unsaved_after_snapshot_.reset();
}

std::optional<uint64_t> KmsgCursor::SafeToSave(std::optional<uint64_t> oldest_pending_line) const {
  uint64_t safe = last_seq_;
  if (oldest_pending_line && *oldest_pending_line > 0)
    safe = std::min(safe, *oldest_pending_line - 1);
  if (unsaved_since_ && *unsaved_since_ > 0) safe = std::min(safe, *unsaved_since_ - 1);
  if (safe == 0 || (saved_seq_ && safe <= *saved_seq_)) return std::nullopt;
  return safe;
}

nlohmann::json KmsgCursor::ToJson() const {
  auto opt = [](const std::optional<uint64_t>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json();
  };
  return {{"saved_seq", opt(saved_seq_)},
          {"last_seq", last_seq_},
          {"newest_seen_seq", opt(max_seen_seq_)}};
}

}  // namespace gpuheal
