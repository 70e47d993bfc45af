#pragma once
// Network interface state from the kernel's rtnetlink, event-driven: a NETLINK_ROUTE socket
// joined to RTNLGRP_LINK receives an RTM_NEWLINK for every change of an interface's flags or
// carrier and an RTM_DELLINK when it goes away; a dump request lists every interface once.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpuheal {

struct LinkState {
  int index = 0;
  std::string name;
  bool admin_up = false;  // IFF_UP
  bool carrier = false;   // IFF_LOWER_UP: the physical link is up
  bool running = false;   // IFF_RUNNING: operationally up
  std::string operstate;  // IF_OPER_* as the kernel names it: up, down, lowerlayerdown, ...
  bool deleted = false;   // RTM_DELLINK
};

// Parses the link messages in one netlink datagram (RTM_NEWLINK/RTM_DELLINK; others and the
// dump's NLMSG_DONE are skipped). Returns false when the datagram is malformed.
bool ParseLinkMessages(std::string_view datagram, const std::function<void(const LinkState&)>& fn,
                       bool* dump_done = nullptr);

class LinkWatch {
 public:
  // Opens the socket (non-blocking) and joins RTNLGRP_LINK. Needs no privilege; follows the
  // network namespace of the calling thread.
  static Result<std::unique_ptr<LinkWatch>> Open();
  ~LinkWatch();
  int fd() const { return fd_; }
  // Asks for every interface (answers arrive on fd() like events).
  Status RequestDump();
  // Reads what is queued. ENOBUFS (the kernel dropped events) comes back as an error whose
  // message says so: the caller dumps again.
  Status Drain(const std::function<void(const LinkState&)>& fn, bool* dump_done = nullptr);

 private:
  explicit LinkWatch(int fd) : fd_(fd) {}
  int fd_ = -1;
  uint32_t seq_ = 0;
};

}  // namespace gpuheal
