// Agent footprint by mapping: the resident set of an idle standalone agent, 3 s after "agent
// started", restarted on its state directory so that no ring buffer is left to replay (the
// first start's figure is printed too), attributed to what is mapped: the agent's own anonymous
// memory (heap, stacks), the gpuheal binary, the C/C++ runtime, libcurl with its TLS stack, NVML,
// other libraries. File-backed pages are shared with every process that maps the same file;
// VmRSS counts them all, Pss divides them.
//   1. no NVML, the container-runtime monitor off
//   2. no NVML, the container-runtime monitor on (the default; no runtime answers here)
//   3. the NVML test double with 1 GPU, then 8 GPUs: the growth per GPU
//   4. no NVML, the kernel-log doorbell on (`--kmsg-bpf true`; 1-3 run with it off): what
//      libbpf and the BPF ring buffer add
//   5. what a TLS stack costs a process before its first request: in a child process each,
//      libcurl (as the agent opens it), libcurl's GnuTLS build, OpenSSL's libssl and GnuTLS
//      alone, opened with dlopen and initialised; the growth of VmRSS at each step
// The agent in Kubernetes mode (libcurl loaded, connected) is in bench_agent_kube.
//
//   bench_footprint

#include <curl/curl.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent_process.h"
#include "bench_util.h"
#include "nvml_scenario.h"

namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// Starts the agent, waits until it has started and settled, reports it; its VmRSS, or -1.
// Starts the agent on a fresh state directory (it replays the whole kernel ring buffer) and
// reads its VmRSS once it has settled; stops it and starts it again on the same directory (its
// cursor is at the end: the idle agent of a node that has run for a while) and reports that one.
// Returns the restarted agent's VmRSS, or -1.
long Measure(const char* what, const std::string& config, std::vector<std::string> extra = {},
             const char* kmsg_bpf = "false") {
  char tmpl[] = "/tmp/gpuheal-bench-footprint-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/config.yaml") << config << "nvidia:\n  sysfs_pci_devices: " << dir << "\n";
  std::vector<std::string> args = {
      GPUHEAL_BIN,   "agent",    "--standalone",       "--state-dir", dir,     "--listen",
      "127.0.0.1:0", "--config", dir + "/config.yaml", "--kmsg-bpf",  kmsg_bpf};
  args.insert(args.end(), extra.begin(), extra.end());
  auto started = [](const json& j) { return j.value("msg", "") == "agent started"; };
  long replayed = -1, rss = -1;
  {
    gpuheal::testing::AgentProcess first(args);
    if (first.WaitLog(started, 20s)) {
      std::this_thread::sleep_for(3s);
      replayed = gpuheal::bench::RssKb(first.pid());
    }
    first.Kill(SIGTERM);
  }
  gpuheal::testing::AgentProcess agent(args);
  if (replayed > 0 && agent.WaitLog(started, 20s)) {
    std::this_thread::sleep_for(3s);
    const std::string bin = std::filesystem::canonical(GPUHEAL_BIN).string();
    gpuheal::bench::ReportFootprint(what, agent.pid(), bin);
    rss = gpuheal::bench::RssKb(agent.pid());
    std::printf("  the first start, replaying the ring buffer: VmRSS %ld kB\n", replayed);
  } else {
    std::printf("%s: the agent did not start\n", what);
  }
  std::filesystem::remove_all(dir);
  return rss;
}

// Records in the kernel ring buffer now: a first start replays them all (a fresh state
// directory), so its figure depends on them.
int KernelRecords() {
  const int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[8192];
  int n = 0;
  for (;;) {
    const ssize_t r = read(fd, buf, sizeof(buf));
    if (r > 0) ++n;
    if (r < 0 && errno == EPIPE) continue;  // overwritten while read: the next one
    if (r <= 0) break;
  }
  close(fd);
  return n;
}

json Devices(int n) {
  json d = json::array();
  for (int i = 0; i < n; ++i)
    d.push_back(gpuheal::testing::HealthyDevice(gpuheal::testing::UniqueGpu()));
  return d;
}

}  // namespace

long VmRssKb() { return gpuheal::bench::RssKb(getpid()); }

// In a child process: `soname` opened and `init` (a function of no arguments the library
// exports, or nullptr) called; prints the VmRSS growth of each step.
void TlsCost(const char* soname, const char* init, void (*call)(void*)) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return;
  if (pid == 0) {
    const long before = VmRssKb();
    void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::printf("  %-22s not installed\n", soname);
      std::fflush(stdout);
      _exit(0);
    }
    const long opened = VmRssKb();
    void* fn = init ? dlsym(h, init) : nullptr;
    if (fn) call(fn);
    const long ready = VmRssKb();
    std::printf("  %-22s dlopen %+6ld kB, %s %+6ld kB: %+6ld kB\n", soname, opened - before,
                init ? init : "-", ready - opened, ready - before);
    std::fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
}

int main() {
  if (geteuid() != 0) {
    std::fprintf(stderr, "bench_footprint: the agent reads /dev/kmsg; run as root\n");
    return 2;
  }
  std::printf("kernel ring buffer: %d records, replayed by each first start\n", KernelRecords());
  const long off =
      Measure("standalone, no NVML, runtime monitor off", "monitors:\n  runtime: false\n");
  const long on = Measure("standalone, no NVML, runtime monitor on (default)", "");
  gpuheal::testing::Scenario sc;
  sc.Write({{"devices", Devices(1)}});
  const long one = Measure("standalone, NVML double, 1 GPU", "", {"--nvml-library", NVML_DOUBLE});
  sc.Write({{"devices", Devices(8)}});
  const long eight =
      Measure("standalone, NVML double, 8 GPUs", "", {"--nvml-library", NVML_DOUBLE});
  const long bpf = Measure("standalone, no NVML, kernel-log doorbell on", "", {}, "true");
  std::printf("what a TLS stack adds to a process before its first request:\n");
  TlsCost("libcurl.so.4", "curl_global_init",
          [](void* f) { reinterpret_cast<CURLcode (*)(long)>(f)(CURL_GLOBAL_DEFAULT); });
  TlsCost("libcurl-gnutls.so.4", "curl_global_init",
          [](void* f) { reinterpret_cast<CURLcode (*)(long)>(f)(CURL_GLOBAL_DEFAULT); });
  TlsCost("libssl.so.3", "OPENSSL_init_ssl",
          [](void* f) { reinterpret_cast<int (*)(uint64_t, const void*)>(f)(0, nullptr); });
  TlsCost("libgnutls.so.30", "gnutls_global_init",
          [](void* f) { reinterpret_cast<int (*)()>(f)(); });
  std::printf(
      "summary: no NVML %ld kB (runtime monitor off) / %ld kB (on); NVML double 1 GPU %ld kB, "
      "8 GPUs %ld kB: %+.0f kB per GPU; doorbell on %ld kB\n",
      off, on, one, eight, static_cast<double>(eight - one) / 7.0, bpf);
  return off > 0 && on > 0 && one > 0 && eight > 0 ? 0 : 1;
}
