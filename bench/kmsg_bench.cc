// Detection latency through the real kernel: time from write(2) of a record to /dev/kmsg until
// the consumer has emitted its line, for
//   bare:  a minimal blocking read() loop on /dev/kmsg that writes one line per matching record;
//   spin:  the same loop never sleeping (when a record is readable at all);
//   agent: `gpuheal agent --standalone --accept-injected --kmsg-bpf false` (parse, classify, node
//          state, cursor save, JSON event), woken by /dev/kmsg at the kernel's next tick;
//   agent_bpf: the same agent with `--kmsg-bpf true`, woken by the BPF doorbell.
// All are child processes writing to a pipe, measured in the same run. Then both agents under a
// flood of unrelated records, the kmsg agent under a flood of 1,000 distinct GPU faults, and the
// doorbell agent's idle footprint. --json prints one JSON object instead of the tables.
//
//   bench_kmsg [--records 500] [--flood-rate 100000] [--flood-seconds 5] [--idle-seconds 10]
//              [--json]

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "agent_process.h"
#include "bench_util.h"

using gpuheal::bench::CpuSeconds;
using gpuheal::bench::RssKb;

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using gpuheal::testing::AgentProcess;

constexpr const char* kMarker = "gpuheal-bench-xid";

// Records from earlier runs stay in the kernel buffer and a fresh agent reports them first, so
// every name this run matches on carries the run's id.
std::string RunName(int i) { return fmt::format("r{}b{}", getpid(), i); }

// The bare consumer: the least any kmsg reader can do. With `spin` it never sleeps
// (non-blocking reads in a loop, a whole core): that shows when the record becomes readable,
// as opposed to when the kernel wakes a sleeping reader.
int BareChild(bool spin) {
  const int fd = open("/dev/kmsg", O_RDONLY | O_CLOEXEC | (spin ? O_NONBLOCK : 0));
  if (fd < 0) return 1;
  lseek(fd, 0, SEEK_END);
  char buf[8192];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n < 0) {
      if (errno == EPIPE || errno == EINTR || errno == EAGAIN) continue;
      return 1;
    }
    buf[n] = '\0';
    if (strstr(buf, kMarker) != nullptr) {
      if (write(STDOUT_FILENO, "1\n", 2) != 2) return 0;
    }
  }
}

// Reads one line from `fd` (blocking with a deadline). Returns false on timeout/EOF.
bool ReadLine(int fd, std::string& pending, std::string& line, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const size_t nl = pending.find('\n');
    if (nl != std::string::npos) {
      line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      return true;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char tmp[65536];
    const ssize_t n = read(fd, tmp, sizeof tmp);
    if (n <= 0) return false;
    pending.append(tmp, static_cast<size_t>(n));
  }
}

struct Stats {
  double p50, p99, max, mean;
  size_t n;
};

Stats Summarise(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  Stats s{};
  s.n = us.size();
  if (us.empty()) return s;
  auto pct = [&](double p) {
    return us[std::min(us.size() - 1, static_cast<size_t>(p * static_cast<double>(us.size())))];
  };
  s.p50 = pct(0.50);
  s.p99 = pct(0.99);
  s.max = us.back();
  double sum = 0;
  for (double v : us) sum += v;
  s.mean = sum / static_cast<double>(us.size());
  return s;
}

std::string XidRecord(int i, const std::string& pci = "0000:3b:00") {
  return fmt::format("<4>NVRM: Xid (PCI:{}): 13, pid={}, name={}, {} {}\n", pci, 1000 + i,
                     RunName(i), kMarker, i);
}

// Writes records to /dev/kmsg and times each until one line arrives on `out`.
std::vector<double> Measure(int kfd, int out, int records, const std::string& label,
                            bool verify_json) {
  std::vector<double> us;
  std::string pending, line;
  for (int i = 0; i < records; ++i) {
    const std::string rec = XidRecord(i);
    const auto t0 = Clock::now();
    if (write(kfd, rec.data(), rec.size()) != static_cast<ssize_t>(rec.size())) {
      fmt::print(stderr, "{}: write to /dev/kmsg failed: {}\n", label, strerror(errno));
      break;
    }
    if (!ReadLine(out, pending, line, 5s)) {
      fmt::print(stderr, "{}: no output for record {}\n", label, i);
      break;
    }
    const auto t1 = Clock::now();
    if (verify_json) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || j.value("process", "") != RunName(i)) {
        fmt::print(stderr, "{}: unexpected event {}\n", label, line);
        continue;
      }
    }
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    std::this_thread::sleep_for(1ms);  // let both sides go idle again: we measure wake-ups
  }
  return us;
}

// `bpf`: with the kernel-log doorbell (required: the run fails if it cannot load); else without.
std::unique_ptr<AgentProcess> StartAgent(const std::string& state_dir, std::string* listen,
                                         bool bpf) {
  // New records only: what earlier runs left in the kernel buffer (up to 1,000 GPUs lost) would
  // otherwise become active faults that every save writes again.
  const std::string config = state_dir + ".yaml";
  std::ofstream(config) << "kmsg_start: end\n";
  auto a = std::make_unique<AgentProcess>(std::vector<std::string>{
      GPUHEAL_BIN, "agent", "--standalone", "--accept-injected", "--config", config, "--kmsg-bpf",
      bpf ? "true" : "false", "--state-dir", state_dir, "--listen", "127.0.0.1:0"});
  auto started =
      a->WaitLog([](const auto& j) { return j.value("msg", "") == "agent started"; }, 10s);
  if (!started) return nullptr;
  if (started->value("kmsg_wakeup", "") != (bpf ? "bpf" : "kmsg")) return nullptr;
  *listen = started->value("listen", "");
  return a;
}

// Drains the agent's report of records already in the buffer: inject a sentinel, wait for it.
bool Settle(AgentProcess& a, int kfd) {
  // A name of its own per call: the next agent reads this sentinel again from the buffer.
  static int settles = 0;
  const std::string name = RunName(-1 - settles++);
  const std::string rec =
      fmt::format("<4>NVRM: Xid (PCI:0000:3b:00): 31, pid=1, name={}, settle\n", name);
  if (write(kfd, rec.data(), rec.size()) < 0) return false;
  return a.WaitEvent([&](const auto& j) { return j.value("process", "") == name; }, 30s)
      .has_value();
}

double MetricValue(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

void PrintRow(const std::string& name, const Stats& s) {
  fmt::print("| {:<34} | {:>5} | {:>9.1f} | {:>9.1f} | {:>9.1f} |\n", name, s.n, s.p50, s.p99,
             s.max);
}

struct FloodResult {
  std::vector<double> us;
  int injected = 0, received = 0;
  long written = 0;
  double elapsed = 0, read_total = -1, lost = -1;
  double cpu = 0;  // the agent's CPU time over the flood, in cores
};

// Unrelated records at flood_rate/s while an Xid line is injected every 10 ms; the agent's time to
// report each Xid line.
std::optional<FloodResult> Flood(int kfd, const std::string& state_dir, bool bpf, int flood_rate,
                                 int flood_seconds) {
  std::filesystem::remove_all(state_dir);
  std::filesystem::create_directories(state_dir);
  std::string listen;
  auto agent = StartAgent(state_dir, &listen, bpf);
  if (!agent || !Settle(*agent, kfd)) return std::nullopt;
  FloodResult r;
  std::atomic<bool> stop{false};
  std::atomic<long> flood_written{0};
  std::thread flooder([&] {
    const int ffd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
    const int per_ms = std::max(1, flood_rate / 1000);
    auto next = Clock::now();
    long n = 0;
    while (!stop) {
      for (int k = 0; k < per_ms; ++k) {
        const std::string rec =
            fmt::format("<7>bench-flood {} eth0: renamed from veth{}c0ffee\n", n, n);
        if (write(ffd, rec.data(), rec.size()) > 0) ++n;
      }
      next += 1ms;
      std::this_thread::sleep_until(next);
    }
    flood_written = n;
    close(ffd);
  });
  r.injected = flood_seconds * 100;
  std::string pending, line;
  const double cpu0 = CpuSeconds(agent->pid());
  const auto t_start = Clock::now();
  for (int i = 0; i < r.injected; ++i) {
    const std::string rec = XidRecord(i, "0000:86:00");
    const auto t0 = Clock::now();
    if (write(kfd, rec.data(), rec.size()) < 0) break;
    bool got = false;
    while (ReadLine(agent->out_fd(), pending, line, 1s)) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("process", "") == RunName(i)) {
        got = true;
        break;
      }
    }
    // Not there within 1 s: lost to the kernel buffer (or too late), counted as not detected.
    if (got) {
      ++r.received;
      r.us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    std::this_thread::sleep_until(t0 + 10ms);
  }
  r.elapsed = std::chrono::duration<double>(Clock::now() - t_start).count();
  r.cpu = (CpuSeconds(agent->pid()) - cpu0) / r.elapsed;
  stop = true;
  flooder.join();
  r.written = flood_written.load();
  const std::string metrics = gpuheal::testing::HttpGet(listen, "/metrics");
  r.lost = MetricValue(metrics, "gpuheal_kmsg_records_lost_total");
  r.read_total = MetricValue(metrics, "gpuheal_kmsg_records_total");
  return r;
}

nlohmann::ordered_json StatsJson(const Stats& s) {
  return {{"n", s.n}, {"p50_us", s.p50}, {"p99_us", s.p99}, {"max_us", s.max}};
}

}  // namespace

int main(int argc, char** argv) {
  int records = 500;
  int flood_rate = 100000;
  int flood_seconds = 5;
  int idle_seconds = 10;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--bare-child") return BareChild(false);
    if (a == "--spin-child") return BareChild(true);
    if (a == "--json") {
      json = true;
      continue;
    }
    if (i + 1 < argc) {
      if (a == "--records")
        records = std::stoi(argv[++i]);
      else if (a == "--flood-rate")
        flood_rate = std::stoi(argv[++i]);
      else if (a == "--flood-seconds")
        flood_seconds = std::stoi(argv[++i]);
      else if (a == "--idle-seconds")
        idle_seconds = std::stoi(argv[++i]);
    }
  }
  if (!gpuheal::testing::CanWriteKmsg()) {
    fmt::print(stderr, "bench_kmsg needs root and a writable /dev/kmsg\n");
    return 2;
  }
  gpuheal::testing::DevKmsgMode devkmsg("on");  // no per-open ratelimit while we measure
  const int kfd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
  char tmpl[] = "/tmp/gpuheal-bench-XXXXXX";
  const std::string state_dir = mkdtemp(tmpl);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");

  // 1. Bare read() loop.
  std::vector<double> bare;
  {
    AgentProcess child({self, "--bare-child"});
    std::this_thread::sleep_for(200ms);  // let it open and seek to the end before the first write
    bare = Measure(kfd, child.out_fd(), records, "bare", false);
  }
  // 1b. Spinning reader: when the record is readable at all.
  std::vector<double> spin;
  {
    AgentProcess child({self, "--spin-child"});
    std::this_thread::sleep_for(200ms);
    spin = Measure(kfd, child.out_fd(), std::min(records, 200), "spin", false);
  }
  // 2. The agent woken by /dev/kmsg, then by the doorbell (BPF).
  std::vector<double> agent_us, agent_bpf_us;
  long rss_after_events = -1;
  for (const bool bpf : {false, true}) {
    std::filesystem::remove_all(state_dir);
    std::filesystem::create_directories(state_dir);
    std::string listen;
    auto agent = StartAgent(state_dir, &listen, bpf);
    if (!agent || !Settle(*agent, kfd)) {
      fmt::print(stderr, "agent ({}) did not start or settle\n", bpf ? "bpf" : "kmsg");
      return 1;
    }
    (bpf ? agent_bpf_us : agent_us) =
        Measure(kfd, agent->out_fd(), records, bpf ? "agent_bpf" : "agent", true);
    if (bpf) rss_after_events = RssKb(agent->pid());
  }
  const Stats sp = Summarise(spin), b = Summarise(bare), g = Summarise(agent_us),
              gb = Summarise(agent_bpf_us);
  if (!json) {
    fmt::print("\n## Detection latency: write(2) to /dev/kmsg -> line emitted (µs)\n\n");
    fmt::print("| {:<34} | {:>5} | {:>9} | {:>9} | {:>9} |\n", "consumer", "n", "p50", "p99",
               "max");
    fmt::print("|{:-<36}|{:->7}|{:->11}|{:->11}|{:->11}|\n", "", "", "", "", "");
    PrintRow("spinning non-blocking reader", sp);
    PrintRow("bare read() loop (baseline)", b);
    PrintRow("agent, woken by /dev/kmsg", g);
    PrintRow("agent, woken by the BPF doorbell", gb);
    fmt::print("\nagent/bare: p50 {:.2f}x, p99 {:.2f}x; agent_bpf/bare: p50 {:.2f}x, p99 {:.2f}x\n",
               g.p50 / b.p50, g.p99 / b.p99, gb.p50 / b.p50, gb.p99 / b.p99);
  }

  // 3. Flood: unrelated records at flood_rate/s while Xid lines are injected every 10 ms.
  std::optional<FloodResult> flood[2];
  for (const bool bpf : {false, true}) {
    flood[bpf] = Flood(kfd, state_dir, bpf, flood_rate, flood_seconds);
    if (!flood[bpf]) return 1;
  }
  if (!json) {
    fmt::print("\n## Under a flood of unrelated records\n\n");
    for (const bool bpf : {false, true}) {
      const FloodResult& f = *flood[bpf];
      fmt::print(
          "{}: flood written {} records in {:.1f} s = {:.0f} records/s; agent read {:.0f}, "
          "lost (sequence gaps) {:.0f}; Xid lines injected {}, detected {}; agent CPU {:.0f}% of "
          "a core\n",
          bpf ? "agent_bpf" : "agent", f.written, f.elapsed,
          static_cast<double>(f.written) / f.elapsed, f.read_total, f.lost, f.injected, f.received,
          100 * f.cpu);
    }
    fmt::print("\n| {:<34} | {:>5} | {:>9} | {:>9} | {:>9} |\n", "consumer", "n", "p50", "p99",
               "max");
    fmt::print("|{:-<36}|{:->7}|{:->11}|{:->11}|{:->11}|\n", "", "", "", "", "");
    PrintRow("agent (kmsg), Xid under flood", Summarise(flood[0]->us));
    PrintRow("agent (bpf), Xid under flood", Summarise(flood[1]->us));
  }

  // 3b. Flood with distinct faults: 1,000 GPUs lost (Xid 79, each on a GPU of its own, so each is
  // a new active fault the agent saves) among unrelated records at flood_rate/s. The agent and a
  // bare read() loop read the same kernel buffer side by side; each counts the Xid records it saw.
  // Once for the agent woken by /dev/kmsg, once for the doorbell agent, each with its own loop.
  int distinct_lost[2] = {-1, -1}, distinct_bare_lost[2] = {-1, -1};
  double distinct_cpu[2] = {0, 0};
  for (const bool bpf : {false, true}) {
    std::filesystem::remove_all(state_dir);
    std::filesystem::create_directories(state_dir);
    AgentProcess bare_child({self, "--bare-child"});
    std::string listen;
    auto agent = StartAgent(state_dir, &listen, bpf);
    if (!agent || !Settle(*agent, kfd)) return 1;
    constexpr int kGpus = 1000;
    // This run's and this pass's GPUs: no other run's records match.
    const int domain = 0xa000 + (getpid() % 0x800) * 2 + (bpf ? 1 : 0);
    auto pci = [&](int i) { return fmt::format("{:04x}:{:02x}:{:02x}", domain, i / 100, i % 100); };
    std::atomic<bool> stop{false};
    std::atomic<long> written{0};
    const double cpu0 = CpuSeconds(agent->pid()), bare_cpu0 = CpuSeconds(bare_child.pid());
    const auto t_start = Clock::now();
    std::thread flooder([&] {
      const int ffd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
      const int per_ms = std::max(1, flood_rate / 1000);
      const int every_ms = std::max(1, flood_seconds * 1000 / kGpus);
      auto next = Clock::now();
      long n = 0;
      int xid = 0;
      for (int ms = 0; !stop; ++ms) {
        for (int k = 0; k < per_ms; ++k) {
          const std::string r =
              fmt::format("<7>bench-flood {} eth0: renamed from veth{}c0ffee\n", n, n);
          if (write(ffd, r.data(), r.size()) > 0) ++n;
        }
        if (xid < kGpus && ms % every_ms == 0) {
          const std::string r = fmt::format(
              "<4>NVRM: Xid (PCI:{}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the "
              "bus. {}\n",
              pci(xid++), kMarker);
          if (write(ffd, r.data(), r.size()) > 0) ++n;
        }
        if (xid == kGpus && ms >= flood_seconds * 1000) break;
        next += 1ms;
        std::this_thread::sleep_until(next);
      }
      written = n;
      close(ffd);
    });
    flooder.join();
    const double elapsed = std::chrono::duration<double>(Clock::now() - t_start).count();
    // Whatever is still coming: the agent's lines for the last GPUs, then nothing for 2 s.
    std::set<std::string> seen;
    agent->WaitEvent(
        [&](const nlohmann::json& j) {
          if (j.value("kind", "") == "xid" && j.value("xid", 0) == 79 && j["pci"].is_string()) {
            seen.insert(j["pci"].get<std::string>());
          }
          return false;
        },
        2s);
    const double cpu1 = CpuSeconds(agent->pid()), bare_cpu1 = CpuSeconds(bare_child.pid());
    int agent_seen = 0;
    for (int i = 0; i < kGpus; ++i) agent_seen += seen.count(pci(i));
    int bare_seen = 0;
    std::string pending, line;
    while (ReadLine(bare_child.out_fd(), pending, line, 200ms)) ++bare_seen;
    distinct_lost[bpf] = kGpus - agent_seen;
    distinct_bare_lost[bpf] = kGpus - bare_seen;
    distinct_cpu[bpf] = (cpu1 - cpu0) / elapsed;
    if (json) continue;
    fmt::print("\n## Under a flood with {} distinct GPU faults ({})\n\n", kGpus,
               bpf ? "agent woken by the doorbell" : "agent woken by /dev/kmsg");
    fmt::print(
        "flood written: {} records in {:.1f} s = {:.0f} records/s, {} of them Xid 79 on {} GPUs\n",
        written.load(), elapsed, static_cast<double>(written.load()) / elapsed, kGpus, kGpus);
    fmt::print("| {:<34} | {:>12} | {:>10} |\n", "consumer", "Xids lost", "CPU (core)");
    fmt::print("|{:-<36}|{:->14}|{:->12}|\n", "", "", "");
    fmt::print("| {:<34} | {:>12} | {:>9.0f}% |\n", "bare read() loop (baseline)",
               kGpus - bare_seen, 100.0 * (bare_cpu1 - bare_cpu0) / elapsed);
    fmt::print("| {:<34} | {:>12} | {:>9.0f}% |\n",
               bpf ? "gpuheal agent --kmsg-bpf true" : "gpuheal agent --kmsg-bpf false",
               kGpus - agent_seen, 100.0 * (cpu1 - cpu0) / elapsed);
  }

  // 4. Idle footprint, with the doorbell: idle CPU must stay ~0 (nothing polls).
  double idle_cpu = 0;
  long idle_rss = 0;
  {
    std::filesystem::remove_all(state_dir);
    std::filesystem::create_directories(state_dir);
    std::string listen;
    auto agent = StartAgent(state_dir, &listen, true);
    if (!agent || !Settle(*agent, kfd)) return 1;
    const double cpu0 = CpuSeconds(agent->pid());
    std::this_thread::sleep_for(std::chrono::seconds(idle_seconds));
    idle_cpu = CpuSeconds(agent->pid()) - cpu0;
    idle_rss = RssKb(agent->pid());
  }
  if (json) {
    nlohmann::ordered_json j;
    j["spin"] = StatsJson(sp);
    j["bare"] = StatsJson(b);
    j["agent"] = StatsJson(g);
    j["agent_bpf"] = StatsJson(gb);
    j["flood"] = {{"records_per_s", static_cast<double>(flood[1]->written) / flood[1]->elapsed},
                  {"agent", StatsJson(Summarise(flood[0]->us))},
                  {"agent_bpf", StatsJson(Summarise(flood[1]->us))},
                  {"xid_injected", flood[1]->injected},
                  {"xid_detected", flood[0]->received},
                  {"xid_detected_bpf", flood[1]->received},
                  {"records_lost", flood[0]->lost},
                  {"records_lost_bpf", flood[1]->lost},
                  {"cpu_cores", flood[0]->cpu},
                  {"cpu_cores_bpf", flood[1]->cpu}};
    j["distinct_flood"] = {{"gpus", 1000},
                           {"agent",
                            {{"xids_lost", distinct_lost[0]},
                             {"bare_xids_lost", distinct_bare_lost[0]},
                             {"cpu_cores", distinct_cpu[0]}}},
                           {"agent_bpf",
                            {{"xids_lost", distinct_lost[1]},
                             {"bare_xids_lost", distinct_bare_lost[1]},
                             {"cpu_cores", distinct_cpu[1]}}}};
    j["idle_bpf"] = {{"seconds", idle_seconds},
                     {"cpu_seconds", idle_cpu},
                     {"rss_kb", idle_rss},
                     {"rss_after_events_kb", rss_after_events}};
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("\n## Agent footprint (with the doorbell)\n\n");
    fmt::print("idle RSS: {} kB; RSS after {} events: {} kB\n", idle_rss, records,
               rss_after_events);
    fmt::print("idle CPU over {} s: {:.3f} s ({:.3f}% of a core)\n", idle_seconds, idle_cpu,
               100.0 * idle_cpu / idle_seconds);
  }
  close(kfd);
  std::filesystem::remove_all(state_dir);
  std::filesystem::remove(state_dir + ".yaml");
  return 0;
}
