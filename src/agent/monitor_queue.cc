#include "agent/monitor_queue.h"

#include <algorithm>

#include "core/file.h"

namespace gpuheal {

const std::string& ProcCache::Read(const std::string& path) {
  auto it = files_.find(path);
  if (it != files_.end()) return it->second;
  ++reads_;
  return files_.emplace(path, ReadWholeFile(path).value_or("")).first->second;
}

void MonitorSchedule::Add(std::unique_ptr<Monitor> m, Clock::time_point now) {
  const auto period = std::chrono::duration_cast<std::chrono::nanoseconds>(m->period());
  std::uniform_int_distribution<int64_t> jitter(0, period.count() / 5);
  entries_.push_back({std::move(m), now + std::chrono::nanoseconds(jitter(rng_))});
}

size_t MonitorSchedule::RunDue(Clock::time_point now) {
  std::vector<Entry*> due;
  for (Entry& e : entries_) {
    if (e.deadline <= now) due.push_back(&e);
  }
  std::sort(due.begin(), due.end(), [](Entry* a, Entry* b) { return a->deadline < b->deadline; });
  cache_.Clear();
  for (Entry* e : due) {
    e->monitor->Tick(cache_);
    e->deadline += e->monitor->period();
    if (e->deadline <= now)
      e->deadline = now + e->monitor->period();  // fell behind: skip, no burst
  }
  return due.size();
}

MonitorSchedule::Clock::time_point MonitorSchedule::next_deadline() const {
  auto best = Clock::time_point::max();
  for (const Entry& e : entries_) best = std::min(best, e.deadline);
  return best;
}

Result<std::unique_ptr<MonitorQueue>> MonitorQueue::Create(EventLoop& loop, uint64_t seed) {
  std::unique_ptr<MonitorQueue> q(new MonitorQueue(loop, seed));
  auto t = loop.AddTimer([qp = q.get()](uint32_t) {
    qp->schedule_.RunDue(MonitorSchedule::Clock::now());
    qp->Rearm();
  });
  if (!t) return t.error();
  q->timer_ = *t;
  return q;
}

void MonitorQueue::Add(std::unique_ptr<Monitor> m) {
  schedule_.Add(std::move(m), MonitorSchedule::Clock::now());
  Rearm();
}

void MonitorQueue::Rearm() {
  if (schedule_.size() == 0) return;
  loop_.ArmTimer(timer_, schedule_.next_deadline() - MonitorSchedule::Clock::now());
}

}  // namespace gpuheal
