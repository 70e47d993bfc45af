// A device plugin for tests: advertises devices of one extended resource to the kubelet through the
// kubelet's DevicePlugin gRPC API (deviceplugin/v1beta1) so that pods on a real node hold them and
// the kubelet's PodResources API names them. The devices' IDs are given on the command line (the
// NVML double's GPU UUIDs, as NVIDIA's device plugin names GPUs); allocation hands a container
// nothing but NVIDIA_VISIBLE_DEVICES.
//
//   gpuheal_test_device_plugin --resource nvidia.com/gpu --device GPU-… [--device …]
//       [--plugin-dir /var/lib/kubelet/device-plugins] [--socket gpuheal-test.sock]
//
// It serves on <plugin-dir>/<socket> (gRPC: HTTP/2 with prior knowledge, nghttp2), registers
// with the kubelet (<plugin-dir>/kubelet.sock, v1beta1.Registration/Register), registers again
// when the kubelet's socket is made anew (a restarted kubelet), and runs until SIGTERM/SIGINT.
// "registered" on stdout once the kubelet took the registration.

#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sources/grpc_unix.h"

namespace {

using gpuheal::FrameGrpc;
using gpuheal::ProtoPutBytes;
using gpuheal::ProtoReader;

std::atomic<bool> g_stop{false};
std::string g_resource;
std::vector<std::string> g_devices;

// One request stream: its path and body in, the framed answer out.
struct Stream {
  std::string path, body, out;
  bool streaming = false;  // ListAndWatch: the stream stays open
  bool trailers_sent = false;
};

struct Conn {
  int fd = -1;
  nghttp2_session* session = nullptr;
  std::map<int32_t, std::unique_ptr<Stream>> streams;
  std::string outq;
  bool dead = false;
};

nghttp2_nv Nv(const char* name, const char* value) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name)),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value)), strlen(name),
                    strlen(value), NGHTTP2_NV_FLAG_NONE};
}

std::string ListAndWatchResponse() {
  std::string m;
  for (const auto& id : g_devices) {
    std::string d;
    ProtoPutBytes(d, 1, id);
    ProtoPutBytes(d, 2, "Healthy");
    ProtoPutBytes(m, 1, d);
  }
  return m;
}

// AllocateResponse: one ContainerAllocateResponse per ContainerAllocateRequest, with
// NVIDIA_VISIBLE_DEVICES (envs map entry: key 1, value 2).
std::string AllocateResponse(std::string_view request) {
  std::string out;
  ProtoReader r(request);
  uint32_t f, t;
  std::string_view b;
  uint64_t v;
  while (!r.done() && r.Next(&f, &t, &b, &v)) {
    if (f != 1 || t != 2) continue;
    std::string ids;
    ProtoReader c(b);
    std::string_view id;
    while (!c.done() && c.Next(&f, &t, &id, &v)) {
      if (f == 1 && t == 2) ids += (ids.empty() ? "" : ",") + std::string(id);
    }
    std::string entry, resp;
    ProtoPutBytes(entry, 1, "NVIDIA_VISIBLE_DEVICES");
    ProtoPutBytes(entry, 2, ids);
    ProtoPutBytes(resp, 1, entry);
    ProtoPutBytes(out, 1, resp);
  }
  return out;
}

ssize_t ReadAnswer(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                   uint32_t* flags, nghttp2_data_source* source, void*) {
  auto* s = static_cast<Stream*>(source->ptr);
  if (s->out.empty()) {
    if (s->streaming && !g_stop.load()) return NGHTTP2_ERR_DEFERRED;
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    if (!s->trailers_sent) {
      s->trailers_sent = true;
      nghttp2_nv trailers[] = {Nv("grpc-status", "0")};
      nghttp2_submit_trailer(session, stream_id, trailers, 1);
    }
    return 0;
  }
  const size_t n = std::min(length, s->out.size());
  memcpy(buf, s->out.data(), n);
  s->out.erase(0, n);
  return static_cast<ssize_t>(n);
}

void Answer(nghttp2_session* session, int32_t id, Stream* s) {
  std::string body = s->body.size() >= 5 ? s->body.substr(5) : std::string();
  const std::string svc = "/v1beta1.DevicePlugin/";
  std::string message;
  if (s->path == svc + "GetDevicePluginOptions") {
    message = "";  // DevicePluginOptions{}: no pre-start, no preferred allocation
  } else if (s->path == svc + "ListAndWatch") {
    message = ListAndWatchResponse();
    s->streaming = true;
  } else if (s->path == svc + "Allocate") {
    message = AllocateResponse(body);
  } else if (s->path == svc + "PreStartContainer" || s->path == svc + "GetPreferredAllocation") {
    message = "";
  } else {
    nghttp2_nv h[] = {Nv(":status", "200"), Nv("content-type", "application/grpc"),
                      Nv("grpc-status", "12"), Nv("grpc-message", "unimplemented")};
    nghttp2_submit_response(session, id, h, 4, nullptr);
    return;
  }
  std::fprintf(stderr, "device plugin: %s\n", s->path.c_str());
  s->out = FrameGrpc(message);
  nghttp2_nv h[] = {Nv(":status", "200"), Nv("content-type", "application/grpc")};
  nghttp2_data_provider p{};
  p.source.ptr = s;
  p.read_callback = ReadAnswer;
  nghttp2_submit_response(session, id, h, 2, &p);
}

int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto* c = static_cast<Conn*>(user);
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
    c->streams[frame->hd.stream_id] = std::make_unique<Stream>();
  return 0;
}

int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
             const uint8_t* value, size_t valuelen, uint8_t, void* user) {
  auto* c = static_cast<Conn*>(user);
  auto it = c->streams.find(frame->hd.stream_id);
  if (it == c->streams.end()) return 0;
  if (std::string_view(reinterpret_cast<const char*>(name), namelen) == ":path")
    it->second->path.assign(reinterpret_cast<const char*>(value), valuelen);
  return 0;
}

int OnData(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
  auto* c = static_cast<Conn*>(user);
  auto it = c->streams.find(id);
  if (it != c->streams.end() && it->second->body.size() < (1u << 20))
    it->second->body.append(reinterpret_cast<const char*>(data), len);
  return 0;
}

int OnFrame(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
  auto* c = static_cast<Conn*>(user);
  if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
    auto it = c->streams.find(frame->hd.stream_id);
    if (it != c->streams.end()) Answer(session, frame->hd.stream_id, it->second.get());
  }
  return 0;
}

int OnClose(nghttp2_session*, int32_t id, uint32_t, void* user) {
  static_cast<Conn*>(user)->streams.erase(id);
  return 0;
}

void Flush(Conn& c) {
  for (;;) {
    const uint8_t* out = nullptr;
    const ssize_t n = nghttp2_session_mem_send(c.session, &out);
    if (n < 0) {
      c.dead = true;
      return;
    }
    if (n == 0) break;
    c.outq.append(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  }
  while (!c.outq.empty()) {
    const ssize_t n = send(c.fd, c.outq.data(), c.outq.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno != EAGAIN && errno != EINTR) c.dead = true;
      return;
    }
    c.outq.erase(0, static_cast<size_t>(n));
  }
}

std::unique_ptr<Conn> Accept(int listener) {
  const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return nullptr;
  auto c = std::make_unique<Conn>();
  c->fd = fd;
  nghttp2_session_callbacks* cbs = nullptr;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(cbs, OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, OnData);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, OnFrame);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, OnClose);
  nghttp2_session_server_new(&c->session, cbs, c.get());
  nghttp2_session_callbacks_del(cbs);
  nghttp2_settings_entry s{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100};
  nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, &s, 1);
  return c;
}

// Register with the kubelet; true once it took the registration.
bool Register(const std::string& kubelet_sock, const std::string& endpoint) {
  std::string req;
  ProtoPutBytes(req, 1, "v1beta1");
  ProtoPutBytes(req, 2, endpoint);
  ProtoPutBytes(req, 3, g_resource);
  ProtoPutBytes(req, 4, "");  // DevicePluginOptions{}
  gpuheal::GrpcTarget t{kubelet_sock, "Registration", "the kubelet", 1u << 20};
  auto call = gpuheal::GrpcUnaryCall(t, "/v1beta1.Registration/Register", req,
                                     std::chrono::seconds(10), &g_stop);
  if (call.outcome != gpuheal::GrpcCall::Outcome::kOk) {
    std::fprintf(stderr, "device plugin: Register: %s\n", call.error.c_str());
    return false;
  }
  std::printf("registered\n");
  std::fflush(stdout);
  return true;
}

ino_t InodeOf(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/var/lib/kubelet/device-plugins", name = "gpuheal-test.sock";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--resource")
      g_resource = v;
    else if (a == "--device")
      g_devices.push_back(v);
    else if (a == "--plugin-dir")
      dir = v;
    else if (a == "--socket")
      name = v;
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (g_resource.empty() || g_devices.empty()) {
    std::fprintf(stderr, "usage: %s --resource NAME --device ID [--device ID ...]\n", argv[0]);
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_stop = true; };
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const std::string path = dir + "/" + name;
  unlink(path.c_str());
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return 2;
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 16) != 0) {
    std::perror(("listen on " + path).c_str());
    return 1;
  }

  // Registration on a thread of its own: the kubelet dials back while it answers.
  const std::string kubelet_sock = dir + "/kubelet.sock";
  std::thread registrar([&] {
    ino_t registered_with = 0;
    while (!g_stop.load()) {
      const ino_t now = InodeOf(kubelet_sock);
      if (now != 0 && now != registered_with && Register(kubelet_sock, name)) registered_with = now;
      for (int i = 0; i < 10 && !g_stop.load(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  std::vector<std::unique_ptr<Conn>> conns;
  while (!g_stop.load()) {
    std::vector<pollfd> fds{{listener, POLLIN, 0}};
    for (auto& c : conns)
      fds.push_back({c->fd, static_cast<short>(POLLIN | (c->outq.empty() ? 0 : POLLOUT)), 0});
    if (poll(fds.data(), fds.size(), 200) < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) {
      if (auto c = Accept(listener)) conns.push_back(std::move(c));
    }
    for (size_t i = 0; i < conns.size(); ++i) {
      Conn& c = *conns[i];
      const short re = i + 1 < fds.size() ? fds[i + 1].revents : 0;
      if (re & (POLLIN | POLLHUP | POLLERR)) {
        uint8_t buf[16384];
        const ssize_t n = recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) c.dead = true;
        if (n > 0 && nghttp2_session_mem_recv(c.session, buf, static_cast<size_t>(n)) < 0)
          c.dead = true;
      }
      if (!c.dead) Flush(c);
    }
    for (auto it = conns.begin(); it != conns.end();) {
      if ((*it)->dead) {
        nghttp2_session_del((*it)->session);
        close((*it)->fd);
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
  }
  // End the ListAndWatch streams with their trailers.
  for (auto& c : conns) {
    for (auto& [id, s] : c->streams) nghttp2_session_resume_data(c->session, id);
    Flush(*c);
    nghttp2_session_del(c->session);
    close(c->fd);
  }
  registrar.join();
  close(listener);
  unlink(path.c_str());
  return 0;
}
