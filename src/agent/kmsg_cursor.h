#pragma once
// The kernel log's cursor, as sequence numbers: which records a restarted agent skips (reported
// before it stopped), how many the ring buffer overwrote before the agent read them, and how far
// the saved cursor may go. Write-ahead: the cursor passes a record only once that record's fault
// lines are written and the active faults it changed are saved, so a crash at any point reports a
// fault again rather than never. Bookkeeping only: the agent saves the cursor (StateFile) and the
// active faults (BackgroundFileSaver) and tells this class what happened.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

namespace gpuheal {

class KmsgCursor {
 public:
  // A cursor saved in this boot: the records up to it were reported before a restart.
  void Resume(uint64_t saved_seq);
  std::optional<uint64_t> resume_after() const { return resume_after_; }

  // Record `seq` was read. `lost`: records the kernel overwrote before it was read; `fresh`:
  // false for a record reported before the restart (skipped).
  struct Read {
    uint64_t lost = 0;
    bool fresh = true;
  };
  Read See(uint64_t seq);

  // A resumed cursor ahead of the newest record the kernel holds (a corrupt or hand-edited state
  // file) would skip every record of this boot; Forget() drops it, and the log is read again from
  // its start.
  bool AheadOfKernel() const;
  void Forget();

  // The record being handled (its faults change the active set); nullopt between records.
  void BeginRecord(std::optional<uint64_t> seq) { record_ = seq; }
  void EndRecord() { record_.reset(); }
  // The active faults changed while handling the current record; with a save of them in flight,
  // this change is not in it.
  void FaultsChanged(bool save_in_flight);
  // A save of the active faults started: it carries every change so far.
  void SnapshotTaken() { unsaved_after_snapshot_.reset(); }
  // That save ended: what changed after its snapshot is still unsaved (all of it, when it failed).
  void SnapshotSaved(bool ok);
  // The active faults were saved whole (on the loop's own thread).
  void AllSaved() { unsaved_since_.reset(); }

  // How far the saved cursor may go now: the last record read, but not past a record whose
  // lines are still queued (`oldest_pending_line`, the record of the oldest queued line) or whose
  // faults are unsaved; nullopt when that is not past the cursor already saved.
  std::optional<uint64_t> SafeToSave(std::optional<uint64_t> oldest_pending_line) const;
  void Saved(uint64_t seq) { saved_seq_ = seq; }

  // For the health endpoint and the diagnostic bundle: saved_seq, last_seq, newest_seen_seq.
  nlohmann::json ToJson() const;

 private:
  std::optional<uint64_t> resume_after_;  // skip records up to this seq (same boot, restarted)
  std::optional<uint64_t> expected_seq_;  // the next record's seq, when none is lost
  uint64_t last_seq_ = 0;                 // the newest record read and not skipped
  std::optional<uint64_t> saved_seq_;     // the cursor as saved (or resumed from) in this boot
  std::optional<uint64_t> max_seen_seq_;  // the newest kernel record read
  bool records_after_resume_ = false;
  std::optional<uint64_t> record_;                  // the record being handled
  std::optional<uint64_t> unsaved_since_;           // the first record whose faults are unsaved
  std::optional<uint64_t> unsaved_after_snapshot_;  // the first one after the save in flight
};

}  // namespace gpuheal
