#include "sim/local_address.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuheal::sim {
namespace {

// One RTM_NEWADDR or RTM_DELADDR request for ipv4/32 on "lo", acknowledged by the kernel.
Status Change(int type, const std::string& ipv4) {
  in_addr addr{};
  if (inet_pton(AF_INET, ipv4.c_str(), &addr) != 1)
    return Error{fmt::format("{}: not an IPv4 address", ipv4)};
  const unsigned lo = if_nametoindex("lo");
  if (lo == 0) return Error{"no loopback interface \"lo\""};
  struct {
    nlmsghdr nh;
    ifaddrmsg ifa;
    char attrs[64];
  } req{};
  req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(ifaddrmsg));
  req.nh.nlmsg_type = static_cast<uint16_t>(type);
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | (type == RTM_NEWADDR ? NLM_F_CREATE : 0);
  req.nh.nlmsg_seq = 1;
  req.ifa.ifa_family = AF_INET;
  req.ifa.ifa_prefixlen = 32;
  req.ifa.ifa_scope = RT_SCOPE_HOST;
  req.ifa.ifa_index = lo;
  for (unsigned short kind : {IFA_LOCAL, IFA_ADDRESS}) {
    auto* rta =
        reinterpret_cast<rtattr*>(reinterpret_cast<char*>(&req) + NLMSG_ALIGN(req.nh.nlmsg_len));
    rta->rta_type = kind;
    rta->rta_len = RTA_LENGTH(sizeof addr);
    std::memcpy(RTA_DATA(rta), &addr, sizeof addr);
    req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_ALIGN(rta->rta_len);
  }
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return Error{fmt::format("netlink socket: {}", std::strerror(errno))};
  sockaddr_nl to{};
  to.nl_family = AF_NETLINK;
  if (sendto(fd, &req, req.nh.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0) {
    const int e = errno;
    close(fd);
    return Error{fmt::format("netlink send: {}", std::strerror(e))};
  }
  char buf[4096];
  const ssize_t n = recv(fd, buf, sizeof buf, 0);
  const int recv_errno = errno;
  close(fd);
  if (n < static_cast<ssize_t>(NLMSG_HDRLEN))
    return Error{fmt::format("netlink receive: {}", std::strerror(recv_errno))};
  const auto* h = reinterpret_cast<const nlmsghdr*>(buf);
  if (h->nlmsg_type != NLMSG_ERROR) return Status::Ok();
  const int err = -reinterpret_cast<const nlmsgerr*>(NLMSG_DATA(h))->error;
  if (err == 0) return Status::Ok();
  if (type == RTM_NEWADDR && err == EEXIST) return Status::Ok();
  if (type == RTM_DELADDR && (err == EADDRNOTAVAIL || err == ENOENT)) return Status::Ok();
  return Error{fmt::format(
      "{} {}/32 on lo: {}{}", type == RTM_NEWADDR ? "adding" : "removing", ipv4, std::strerror(err),
      err == EPERM ? " (the process runtime needs CAP_NET_ADMIN: run as root)" : "")};
}

}  // namespace

Status AddLoopbackAddress(const std::string& ipv4) { return Change(RTM_NEWADDR, ipv4); }
Status RemoveLoopbackAddress(const std::string& ipv4) { return Change(RTM_DELADDR, ipv4); }

}  // namespace gpuheal::sim
