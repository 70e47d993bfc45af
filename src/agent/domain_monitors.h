#pragma once
// The monitors of the four non-GPU domains beyond the kernel log (docs/domains.md):
//   network    rtnetlink link events for the fabric interfaces, InfiniBand port state (sysfs)
//   storage    the mount table (read-only remounts) and a stat of each path within a deadline
//   runtime    the container runtime's CRI Status, on a thread of its own, with a deadline
//   previous   the previous boot's crash, from pstore and the persistent journal, once per boot
// Each of the first three reports the complete set of faults it observes now to
// DomainSink::observed; the agent raises what is new and clears what is gone (recovery rule
// while-observed). Nothing here blocks the agent's loop: netlink and the mount table are
// non-blocking descriptors on the loop, and every call that can hang (stat, CRI) runs on a
// thread the loop never waits for.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/config.h"
#include "agent/event_loop.h"
#include "agent/monitor_queue.h"
#include "core/fault.h"
#include "serve/metrics.h"
#include "sources/cri_client.h"
#include "sources/mountinfo.h"
#include "sources/netlink_links.h"

namespace gpuheal {

struct DomainSink {
  // Everything `source` observes now (its while-observed faults); called on the loop thread.
  std::function<void(const std::string& source, std::vector<Fault> faults)> observed;
  // A fault of its own (an Event such as a flapping link, a previous boot's crash).
  std::function<void(Fault f)> fault;
  std::function<void(std::string_view level, std::string msg, nlohmann::ordered_json fields)> log;
  // The devices of `source`'s active faults (those saved by an earlier run count): what a
  // restarted monitor must keep watching for although it has not seen it in this run.
  std::function<std::vector<std::string>(const std::string& source)> active_devices;
};

// fnmatch(3) of an interface name against the configured patterns.
bool InterfaceWatched(const std::vector<std::string>& patterns, const std::string& name);

class LinkMonitor {
 public:
  static Result<std::unique_ptr<LinkMonitor>> Start(const NetworkMonitorConfig& config,
                                                    EventLoop& loop, MonitorQueue& queue,
                                                    Metrics& metrics, DomainSink sink);
  ~LinkMonitor();

 private:
  LinkMonitor(const NetworkMonitorConfig& c, EventLoop& l, Metrics& m, DomainSink s)
      : config_(c), loop_(l), metrics_(m), sink_(std::move(s)) {}
  void OnReadable();
  bool Required(const std::string& name) const;  // named in network.required
  void OnLink(const LinkState& s);
  void Report();
  void CheckInfiniBand();

  NetworkMonitorConfig config_;
  EventLoop& loop_;
  Metrics& metrics_;
  DomainSink sink_;
  std::unique_ptr<LinkWatch> watch_;
  bool dumped_ = false;
  std::map<std::string, LinkState> links_;  // watched interfaces present now, by name
  std::set<std::string> seen_;              // watched interfaces seen since the agent started
  std::map<std::string, std::deque<std::chrono::steady_clock::time_point>> losses_;
  std::set<std::string> ib_seen_;  // InfiniBand ports ("mlx5_0/1") seen since start
};

class MountMonitor {
 public:
  static Result<std::unique_ptr<MountMonitor>> Start(const StorageMonitorConfig& config,
                                                     EventLoop& loop, MonitorQueue& queue,
                                                     DomainSink sink);
  ~MountMonitor();

 private:
  struct Probe {  // one stat on a thread of its own; shared with that thread
    std::atomic<bool> done{false};
    int error = 0;  // errno of the stat, 0 when it answered
    std::chrono::steady_clock::time_point started;
  };
  MountMonitor(const StorageMonitorConfig& c, EventLoop& l, DomainSink s)
      : config_(c), loop_(l), sink_(std::move(s)) {}
  void ReadTable();
  void StartProbes();
  void Report();

  StorageMonitorConfig config_;
  EventLoop& loop_;
  DomainSink sink_;
  std::optional<MountTableWatch> table_;
  std::vector<MountEntry> mounts_;
  std::map<std::string, std::shared_ptr<Probe>> probes_;  // by path
  std::map<std::string, int> last_error_;                 // by path: the last probe's errno
  std::set<std::string> unresponsive_;  // paths reported unresponsive by the last Report
  int deadline_timer_ = -1;
};

class RuntimeMonitor {
 public:
  static Result<std::unique_ptr<RuntimeMonitor>> Start(const RuntimeMonitorConfig& config,
                                                       EventLoop& loop, Metrics& metrics,
                                                       DomainSink sink);
  ~RuntimeMonitor();

 private:
  RuntimeMonitor(const RuntimeMonitorConfig& c, EventLoop& l, Metrics& m, DomainSink s)
      : config_(c), loop_(l), metrics_(m), sink_(std::move(s)) {}
  void Run();
  void OnStatus(const CriStatus& st);

  RuntimeMonitorConfig config_;
  EventLoop& loop_;
  Metrics& metrics_;
  DomainSink sink_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                // guarded by mu_
  std::atomic<bool> cancel_{false};  // ends a CRI call in flight at once
  std::string version_;              // loop thread: the runtime's name and version, once known
  std::string last_outcome_;         // loop thread: for the log line on each change
  bool seen_ = false;                // loop thread: the runtime answered once since the start
};

// The previous boot's crash: the first panic, oops, machine check or hard lockup in pstore's
// dmesg records or in the persistent journal's kernel messages of the previous boot, as a
// KernelCrashPreviousBoot warning, at most once per boot (remembered in state_dir).
struct PreviousBootCrash {
  std::string source;   // pstore, journal
  std::string kind;     // the reason of the first crash line (KernelPanic, KernelOops, ...)
  std::string boot_id;  // the journal's previous boot id ("" for pstore)
  std::vector<std::string> lines;  // the crash line and up to 9 after it
};
std::optional<PreviousBootCrash> FindCrashInLines(const std::vector<std::string>& lines);
std::optional<PreviousBootCrash> ReadPstoreCrash(const std::string& dir);
// The kernel's messages of the boot before `current_boot_id` in the journal under `dir`, oldest
// first, at most `max_lines` (the newest of them); `boot_id` gets that boot's id. An error when
// libsystemd cannot be loaded or the journal cannot be opened.
struct JournalBoot {
  std::string boot_id;
  std::vector<std::string> lines;
};
Result<JournalBoot> ReadJournalPreviousBoot(const std::string& dir,
                                            const std::string& current_boot_id,
                                            size_t max_lines = 100000);
std::optional<PreviousBootCrash> ReadJournalCrash(const std::string& dir,
                                                  const std::string& current_boot_id,
                                                  std::string* error);
void ReportPreviousBoot(const PreviousBootConfig& config, const std::string& state_dir,
                        const std::string& boot_id, const DomainSink& sink);

}  // namespace gpuheal
