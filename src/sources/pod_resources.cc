#include "sources/pod_resources.h"

#include <fmt/format.h>

namespace gpuheal {
namespace {

constexpr size_t kMaxUses = 100000;
constexpr size_t kMaxString = 512;  // names are DNS names (253); device IDs are short

Error Malformed(std::string_view what) {
  return Error{fmt::format(
      "PodResources: malformed {} (not the kubelet's podresources.v1 protobuf message)", what)};
}

std::string Cut(std::string_view s) { return std::string(s.substr(0, kMaxString)); }

}  // namespace

Result<std::vector<PodDeviceUse>> ParsePodResources(std::string_view message) {
  std::vector<PodDeviceUse> out;
  ProtoReader list(message);
  uint32_t f, t;
  std::string_view b;
  uint64_t v;
  while (!list.done()) {
    if (!list.Next(&f, &t, &b, &v)) return Malformed("ListPodResourcesResponse");
    if (f != 1 || t != 2) continue;  // pod_resources
    // The pod's name and namespace may follow its containers on the wire: containers first.
    std::string name, ns;
    std::vector<std::string_view> containers;
    ProtoReader pod(b);
    while (!pod.done()) {
      std::string_view s;
      if (!pod.Next(&f, &t, &s, &v)) return Malformed("PodResources");
      if (t != 2) continue;
      if (f == 1) name = Cut(s);
      if (f == 2) ns = Cut(s);
      if (f == 3) containers.push_back(s);
    }
    for (std::string_view cb : containers) {
      std::string container;
      std::vector<std::string_view> devices;
      ProtoReader c(cb);
      while (!c.done()) {
        std::string_view s;
        if (!c.Next(&f, &t, &s, &v)) return Malformed("ContainerResources");
        if (t != 2) continue;
        if (f == 1) container = Cut(s);
        if (f == 2) devices.push_back(s);
      }
      for (std::string_view db : devices) {
        PodDeviceUse use{ns, name, container, "", {}};
        ProtoReader d(db);
        while (!d.done()) {
          std::string_view s;
          if (!d.Next(&f, &t, &s, &v)) return Malformed("ContainerDevices");
          if (t != 2) continue;
          if (f == 1) use.resource = Cut(s);
          if (f == 2) {
            if (use.device_ids.size() >= 1024)
              return Malformed("ContainerDevices (more than 1024 device IDs)");
            use.device_ids.push_back(Cut(s));
          }
        }
        if (out.size() >= kMaxUses) return Malformed("answer (more than 100000 device uses)");
        out.push_back(std::move(use));
      }
    }
  }
  return out;
}

PodResourcesClient::PodResourcesClient(const std::string& socket_path) {
  target_.socket_path = socket_path;
  target_.label = "PodResources";
  target_.peer = "the kubelet";
  target_.max_response = 16u << 20;  // a node's pods: kilobytes; a bound all the same
}

Result<std::vector<PodDeviceUse>> PodResourcesClient::List(std::chrono::milliseconds deadline) {
  // ListPodResourcesRequest{}: no fields.
  GrpcCall call =
      GrpcUnaryCall(target_, "/v1.PodResourcesLister/List", std::string_view(), deadline, cancel_);
  if (call.outcome != GrpcCall::Outcome::kOk) {
    return Error{fmt::format("PodResources List ({}): {}", target_.socket_path, call.error)};
  }
  return ParsePodResources(call.message);
}

}  // namespace gpuheal
