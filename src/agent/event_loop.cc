#include "agent/event_loop.h"

#include <fmt/format.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuheal {

Result<std::unique_ptr<EventLoop>> EventLoop::Create() {
  const int epfd = epoll_create1(EPOLL_CLOEXEC);
  if (epfd < 0) return Error{fmt::format("epoll_create1: {}", std::strerror(errno))};
  const int wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wakefd < 0) {
    close(epfd);
    return Error{fmt::format("eventfd: {}", std::strerror(errno))};
  }
  std::unique_ptr<EventLoop> loop(new EventLoop(epfd, wakefd));
  if (auto s = loop->Watch(wakefd, EPOLLIN, [l = loop.get()](uint32_t) { l->DrainPosted(); }); !s) {
    return s.error();
  }
  return loop;
}

EventLoop::EventLoop(int epfd, int wakefd) : epfd_(epfd), wakefd_(wakefd) {}

EventLoop::~EventLoop() {
  for (int t : timers_) close(t);
  close(wakefd_);
  close(epfd_);
}

Status EventLoop::Watch(int fd, uint32_t events, Callback cb) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    return Error{fmt::format("epoll_ctl(ADD, fd {}): {}", fd, std::strerror(errno))};
  }
  callbacks_[fd] = std::move(cb);
  return Status::Ok();
}

void EventLoop::Unwatch(int fd) {
  epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
  callbacks_.erase(fd);
}

Result<int> EventLoop::AddTimer(Callback cb) {
  const int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  if (tfd < 0) return Error{fmt::format("timerfd_create: {}", std::strerror(errno))};
  auto s = Watch(tfd, EPOLLIN, [tfd, cb = std::move(cb)](uint32_t events) {
    uint64_t expirations = 0;
    if (read(tfd, &expirations, sizeof expirations) == sizeof expirations) cb(events);
  });
  if (!s) {
    close(tfd);
    return s.error();
  }
  timers_.push_back(tfd);
  return tfd;
}

void EventLoop::ArmTimer(int timer_id, std::chrono::nanoseconds delay) {
  if (delay.count() <= 0) delay = std::chrono::nanoseconds(1);  // 0 would disarm
  itimerspec spec{};
  spec.it_value.tv_sec = static_cast<time_t>(delay.count() / 1'000'000'000);
  spec.it_value.tv_nsec = static_cast<long>(delay.count() % 1'000'000'000);
  timerfd_settime(timer_id, 0, &spec, nullptr);
}

void EventLoop::Post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    posted_.push_back(std::move(fn));
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wakefd_, &one, sizeof one);
}

void EventLoop::Stop() {
  Post([this] { stop_ = true; });
}

void EventLoop::DrainPosted() {
  uint64_t v = 0;
  [[maybe_unused]] ssize_t n = read(wakefd_, &v, sizeof v);
  std::vector<std::function<void()>> work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    work.swap(posted_);
  }
  for (auto& fn : work) fn();
}

void EventLoop::Run() {
  constexpr int kMaxEvents = 16;
  epoll_event events[kMaxEvents];
  while (!stop_) {
    const int n = epoll_wait(epfd_, events, kMaxEvents, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < n && !stop_; ++i) {
      auto it = callbacks_.find(events[i].data.fd);
      if (it != callbacks_.end()) {
        Callback cb = it->second;  // the callback may Unwatch itself
        cb(events[i].events);
      }
    }
  }
}

}  // namespace gpuheal
