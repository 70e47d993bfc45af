#pragma once
// The agent's single event-loop thread: epoll over file descriptors, timerfds and a wake-up
// eventfd. All agent state is owned by this thread; other threads hand it work with Post().

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/result.h"

namespace gpuheal {

class EventLoop {
 public:
  using Callback = std::function<void(uint32_t events)>;

  static Result<std::unique_ptr<EventLoop>> Create();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Watches `fd` (not owned) for `events` (EPOLLIN, ...).
  Status Watch(int fd, uint32_t events, Callback cb);
  void Unwatch(int fd);

  // A one-shot timer; re-arm it from its callback for periodic work. Returns its id.
  Result<int> AddTimer(Callback cb);
  void ArmTimer(int timer_id, std::chrono::nanoseconds delay);

  // Thread-safe: runs `fn` on the loop thread.
  void Post(std::function<void()> fn);
  // Thread-safe: makes Run() return after the current iteration.
  void Stop();

  void Run();

 private:
  EventLoop(int epfd, int wakefd);
  void DrainPosted();

  int epfd_;
  int wakefd_;
  std::unordered_map<int, Callback> callbacks_;
  std::vector<int> timers_;
  std::mutex mu_;
  std::vector<std::function<void()>> posted_;
  bool stop_ = false;
};

}  // namespace gpuheal
