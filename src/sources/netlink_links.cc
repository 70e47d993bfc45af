#include "sources/netlink_links.h"

#include <fmt/format.h>
#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace gpuheal {
namespace {

std::string_view OperName(uint8_t s) {
  switch (s) {
    case IF_OPER_NOTPRESENT:
      return "notpresent";
    case IF_OPER_DOWN:
      return "down";
    case IF_OPER_LOWERLAYERDOWN:
      return "lowerlayerdown";
    case IF_OPER_TESTING:
      return "testing";
    case IF_OPER_DORMANT:
      return "dormant";
    case IF_OPER_UP:
      return "up";
    default:
      return "unknown";
  }
}

}  // namespace

bool ParseLinkMessages(std::string_view d, const std::function<void(const LinkState&)>& fn,
                       bool* dump_done) {
  // NLMSG_* macros work on a mutable header pointer and an int length; copy to aligned storage.
  std::vector<uint32_t> buf((d.size() + 3) / 4);
  memcpy(buf.data(), d.data(), d.size());
  auto* h = reinterpret_cast<nlmsghdr*>(buf.data());
  int len = static_cast<int>(d.size());
  for (; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
    if (h->nlmsg_type == NLMSG_DONE) {
      if (dump_done) *dump_done = true;
      continue;
    }
    if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type == NLMSG_NOOP) continue;
    if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK) continue;
    if (h->nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg))) return false;
    const auto* ifi = static_cast<const ifinfomsg*>(NLMSG_DATA(h));
    LinkState s;
    s.index = ifi->ifi_index;
    s.admin_up = ifi->ifi_flags & IFF_UP;
    s.running = ifi->ifi_flags & IFF_RUNNING;
    s.carrier = ifi->ifi_flags & IFF_LOWER_UP;
    s.deleted = h->nlmsg_type == RTM_DELLINK;
    int alen = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof(ifinfomsg)));
    for (auto* a = IFLA_RTA(ifi); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
      const size_t plen = RTA_PAYLOAD(a);
      const char* p = static_cast<const char*>(RTA_DATA(a));
      if (a->rta_type == IFLA_IFNAME && plen > 0) {
        s.name.assign(p, strnlen(p, plen));
      } else if (a->rta_type == IFLA_OPERSTATE && plen >= 1) {
        s.operstate = OperName(static_cast<uint8_t>(p[0]));
      }
    }
    if (alen != 0 && alen >= static_cast<int>(sizeof(rtattr))) return false;
    if (s.name.empty()) return false;
    fn(s);
  }
  return len == 0 || len < static_cast<int>(sizeof(nlmsghdr));
}

Result<std::unique_ptr<LinkWatch>> LinkWatch::Open() {
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return Error{fmt::format("netlink socket: {}", strerror(errno))};
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = RTMGRP_LINK;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    const int e = errno;
    close(fd);
    return Error{fmt::format("netlink bind RTNLGRP_LINK: {}", strerror(e))};
  }
  // Room for a burst (an interface flapping, a dump of many interfaces) before ENOBUFS.
  const int rcv = 1 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
  return std::unique_ptr<LinkWatch>(new LinkWatch(fd));
}

LinkWatch::~LinkWatch() {
  if (fd_ >= 0) close(fd_);
}

Status LinkWatch::RequestDump() {
  struct {
    nlmsghdr h;
    ifinfomsg i;
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(ifinfomsg));
  req.h.nlmsg_type = RTM_GETLINK;
  req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.h.nlmsg_seq = ++seq_;
  req.i.ifi_family = AF_UNSPEC;
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  if (sendto(fd_, &req, req.h.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) < 0) {
    return Error{fmt::format("netlink dump request: {}", strerror(errno))};
  }
  return {};
}

Status LinkWatch::Drain(const std::function<void(const LinkState&)>& fn, bool* dump_done) {
  // Not zeroed: the kernel writes what it sends, and only those pages of the 64 kB become
  // resident (a zeroed buffer kept all 16 in the agent's heap after the first drain).
  constexpr size_t kSize = 64 * 1024;
  const auto buf = std::make_unique_for_overwrite<char[]>(kSize);
  for (;;) {
    const ssize_t n = recv(fd_, buf.get(), kSize, 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return {};
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) return Error{"netlink: the kernel dropped link events (ENOBUFS)"};
      return Error{fmt::format("netlink recv: {}", strerror(errno))};
    }
    if (!ParseLinkMessages(std::string_view(buf.get(), static_cast<size_t>(n)), fn, dump_done)) {
      return Error{"netlink: malformed link message"};
    }
  }
}

}  // namespace gpuheal
