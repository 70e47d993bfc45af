// gpuheal-workload: two test workloads for `gpuheal sim`'s process runtime (docs/sim.md), so that
// a drill measures what users of a GPU node feel through a failover. Not part of the product.
//
//   gpuheal-workload serve --listen IP:PORT [--cost 2ms]
//     An HTTP server answering GET / after a fixed cost. Once its GPU is lost (SIGUSR1, sent by
//     the sim when the drill faults the GPU the process sits on) every request gets 500, as a
//     CUDA process gets an error from every call after the fault. SIGTERM: answers what is in
//     flight, then exits 0 (within 0.1 s).
//
//   Both start with their GPU lost when $SIM_GPU_LOST is 1 (the sim starts a container that
//   way while its GPU has not been reset: a new CUDA context on it fails too).
//
//   gpuheal-workload train --dir DIR [--slots N] [--step 100ms] [--every 10s]
//                          [--checkpoint-cost 50ms] [--podinfo FILE] [--answer FILE]
//                          [--ignore-requests] [--lost-exit DURATION]
//     A training loop of fixed-length steps, one rank of a job of N. It holds one slot of DIR (an
//     flock on DIR/slot-<k>.lock, k < N: a replacement takes, or waits for, the slot its
//     predecessor leaves) and resumes from
//     that slot's checkpoint, DIR/slot-<k>.ckpt. It checkpoints every `--every` (a fixed schedule
//     from its start) and when gpuheal asks: a new value of the gpuheal.io/checkpoint-requested
//     annotation in FILE (the downward API's annotations file) makes it write a checkpoint of its
//     last completed step and then FILE `--answer` (the sim turns that into the pod's
//     gpuheal.io/checkpoint-done). SIGUSR1 (its GPU is lost): the step in progress is lost and no
//     more steps complete; a checkpoint can still be written from the last completed step, which
//     a training framework keeps in host memory. With --lost-exit, a rank whose GPU has been lost
//     that long exits 1, as a collective's watchdog aborts a rank that stopped answering (the
//     kubelet restarts it by the pod's restartPolicy). Every event goes to DIR/slot-<k>.jsonl, one JSON
//     object a line: {"t_ms", "pid", "slot", "pod" ($POD_NAME), "event":
//     start|checkpoint|gpu_lost|exit, "step", ...}; a start says "gpu": false when its GPU is
//     lost from the start.

#include <civetweb.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::atomic<bool> g_gpu_lost{false};
std::atomic<bool> g_stop{false};

void OnSignal(int sig) {
  if (sig == SIGUSR1) g_gpu_lost = true;
  if (sig == SIGTERM || sig == SIGINT) g_stop = true;
}

void InstallSignals() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGUSR1, SIGTERM, SIGINT}) sigaction(s, &sa, nullptr);
}

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "100ms", "2s", "1m": a duration as the project's flags write them.
std::optional<std::chrono::milliseconds> ParseDuration(const std::string& s) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    return std::nullopt;
  }
  const std::string unit = s.substr(used);
  double ms = unit == "ms" ? v : unit == "s" ? v * 1e3 : unit == "m" ? v * 6e4 : -1;
  if (ms < 0 || v < 0) return std::nullopt;
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

std::chrono::milliseconds DurationFlag(const std::string& flag, const std::string& value) {
  auto d = ParseDuration(value);
  if (!d) {
    std::fprintf(stderr, "gpuheal-workload: %s %s: not a duration (e.g. 100ms, 2s, 1m)\n",
                 flag.c_str(), value.c_str());
    std::exit(2);
  }
  return *d;
}

// --- serve ------------------------------------------------------------------------------------

struct ServeState {
  std::chrono::milliseconds cost{2};
  std::atomic<uint64_t> served{0}, failed{0};
};

int Answer(mg_connection* conn, int status, const char* reason, const std::string& body) {
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
            "Connection: keep-alive\r\n\r\n",
            status, reason, body.size());
  mg_write(conn, body.data(), body.size());
  return status;
}

int ServeRequest(mg_connection* conn, void* data) {
  auto* st = static_cast<ServeState*>(data);
  if (g_gpu_lost) {
    ++st->failed;
    return Answer(conn, 500, "Internal Server Error",
                  "CUDA error: an illegal memory access was encountered (the GPU is lost)\n");
  }
  std::this_thread::sleep_for(st->cost);  // the request's fixed GPU time
  ++st->served;
  return Answer(conn, 200, "OK", "ok\n");
}

int Serve(const std::string& listen, std::chrono::milliseconds cost) {
  ServeState st;
  st.cost = cost;
  mg_init_library(0);
  const char* options[] = {"listening_ports", listen.c_str(), "num_threads", "16",
                           "enable_keep_alive", "yes", nullptr};
  mg_callbacks callbacks{};
  mg_context* ctx = mg_start(&callbacks, nullptr, options);
  if (ctx == nullptr) {
    std::fprintf(stderr, "gpuheal-workload serve: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  mg_set_request_handler(ctx, "/", ServeRequest, &st);
  std::printf("%s\n", json{{"event", "serving"}, {"listen", listen}, {"pid", getpid()}}.dump().c_str());
  std::fflush(stdout);
  bool lost_said = false;
  for (bool last = false; !last;) {
    last = g_stop;
    if (g_gpu_lost && !lost_said) {
      lost_said = true;
      std::printf("%s\n", json{{"event", "gpu_lost"}, {"t_ms", WallMs()}}.dump().c_str());
      std::fflush(stdout);
    }
    if (!last) std::this_thread::sleep_for(10ms);
  }
  // What is in flight is answered (a request takes milliseconds); then the process ends without
  // civetweb's own shutdown, which takes about 2 s: a server asked to stop within its pod's grace
  // period stops within it.
  std::this_thread::sleep_for(50ms);
  std::printf("%s\n", json{{"event", "exit"},
                           {"served", st.served.load()},
                           {"failed", st.failed.load()}}
                          .dump()
                          .c_str());
  std::fflush(stdout);
  std::_Exit(0);
}

// --- train ------------------------------------------------------------------------------------

struct TrainOptions {
  std::string dir, podinfo, answer;
  std::chrono::milliseconds step{100}, every{10000}, checkpoint_cost{50};
  bool ignore_requests = false;
  std::chrono::milliseconds lost_exit{0};  // 0: a rank whose GPU is lost waits to be stopped
  int slots = 1;  // the job's ranks: processes beyond them wait for a slot
};

class Trainer {
 public:
  explicit Trainer(TrainOptions o) : o_(std::move(o)) {}

  int Run() {
    if (!TakeSlot()) return 1;
    const int64_t resumed = ReadCheckpoint();
    step_ = resumed < 0 ? 0 : resumed;
    // "gpu": false when it starts on a lost GPU: it cannot go on from there.
    Log({{"event", "start"}, {"step", step_}, {"resumed", resumed >= 0}, {"gpu", !g_gpu_lost}});
    auto step_began = Clock::now();
    auto next_periodic = Clock::now() + o_.every;
    bool lost_said = false;
    Clock::time_point lost_at{};
    while (!g_stop) {
      const auto now = Clock::now();
      if (g_gpu_lost && !lost_said) {
        lost_said = true;
        lost_at = now;
        Log({{"event", "gpu_lost"},
             {"step", step_},
             {"partial_ms",
              std::chrono::duration_cast<std::chrono::milliseconds>(now - step_began).count()}});
      }
      if (lost_said && o_.lost_exit.count() > 0 && now - lost_at >= o_.lost_exit) {
        Log({{"event", "exit"}, {"step", step_}, {"why", "gpu_lost"}});
        return 1;
      }
      if (!g_gpu_lost && now - step_began >= o_.step) {
        ++step_;
        step_began += o_.step;
      }
      if (now >= next_periodic) {
        // The periodic schedule is fixed from the start: a requested checkpoint does not move it.
        while (next_periodic <= now) next_periodic += o_.every;
        if (!g_gpu_lost) {
          Checkpoint("periodic");
          step_began = Clock::now();  // no step progressed while it wrote
        }
      }
      if (auto req = NewRequest(); req && !o_.ignore_requests) {
        Checkpoint("requested");
        Answer(*req);
        step_began = Clock::now();
      }
      std::this_thread::sleep_for(5ms);
    }
    Log({{"event", "exit"}, {"step", step_}});
    return 0;
  }

 private:
  // A rank of the job: the first of the `slots` slots no live process holds. A replacement
  // started while its predecessor is still stopping waits for that slot.
  bool TakeSlot() {
    while (!g_stop) {
      for (int k = 0; k < o_.slots; ++k) {
        const std::string lock = fmt::format("{}/slot-{}.lock", o_.dir, k);
        const int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
          std::fprintf(stderr, "gpuheal-workload train: %s: %s\n", lock.c_str(),
                       std::strerror(errno));
          return false;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
          slot_ = k;
          lock_fd_ = fd;  // held until the process ends
          return true;
        }
        close(fd);
      }
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  std::string SlotFile(const char* ext) const { return fmt::format("{}/slot-{}.{}", o_.dir, slot_, ext); }

  int64_t ReadCheckpoint() const {
    std::ifstream in(SlotFile("ckpt"));
    if (!in) return -1;
    const json j = json::parse(in, nullptr, false);
    return j.is_object() ? j.value("step", int64_t{-1}) : -1;
  }

  void Checkpoint(const char* why) {
    const auto began = Clock::now();
    std::this_thread::sleep_for(o_.checkpoint_cost);  // writing the model's state
    const std::string tmp = SlotFile("ckpt.tmp");
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << json{{"step", step_}, {"t_ms", WallMs()}}.dump() << "\n";
    }
    std::rename(tmp.c_str(), SlotFile("ckpt").c_str());
    Log({{"event", "checkpoint"},
         {"why", why},
         {"step", step_},
         {"took_ms",
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began).count()}});
  }

  // A checkpoint request not answered yet: the annotation's value in the downward API's file
  // (lines key="value").
  std::optional<std::string> NewRequest() {
    if (o_.podinfo.empty()) return std::nullopt;
    struct stat st {};
    if (stat(o_.podinfo.c_str(), &st) != 0) return std::nullopt;
    if (st.st_mtim.tv_sec == seen_mtime_.tv_sec && st.st_mtim.tv_nsec == seen_mtime_.tv_nsec &&
        st.st_size == seen_size_)
      return std::nullopt;
    seen_mtime_ = st.st_mtim;
    seen_size_ = st.st_size;
    std::ifstream in(o_.podinfo);
    std::string line;
    static const std::string key = "gpuheal.io/checkpoint-requested=";
    while (std::getline(in, line)) {
      if (!line.starts_with(key)) continue;
      std::string v = line.substr(key.size());
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      if (v.empty() || v == answered_) return std::nullopt;
      answered_ = v;
      return v;
    }
    return std::nullopt;
  }

  void Answer(const std::string& request) {
    if (o_.answer.empty()) return;
    const std::string tmp = o_.answer + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << request << "\n";
    }
    std::rename(tmp.c_str(), o_.answer.c_str());
  }

  void Log(json j) {
    j["t_ms"] = WallMs();
    j["pid"] = getpid();
    j["slot"] = slot_;
    if (const char* pod = std::getenv("POD_NAME")) j["pod"] = pod;
    const std::string line = j.dump() + "\n";
    std::ofstream(SlotFile("jsonl"), std::ios::app) << line;
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  }

  TrainOptions o_;
  int slot_ = -1, lock_fd_ = -1;
  int64_t step_ = 0;
  timespec seen_mtime_{};
  off_t seen_size_ = -1;
  std::string answered_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpuheal-workload: test workloads for gpuheal sim's process runtime"};
  app.require_subcommand(1);
  std::string listen, cost = "2ms";
  auto* serve = app.add_subcommand("serve", "an HTTP server that fails once its GPU is lost");
  serve->add_option("--listen", listen, "IP:PORT to listen on")->required();
  serve->add_option("--cost", cost, "each request's fixed time (default 2ms)");
  TrainOptions t;
  std::string step = "100ms", every = "10s", ckpt = "50ms";
  auto* train = app.add_subcommand("train", "a training loop that checkpoints when asked");
  train->add_option("--dir", t.dir, "the shared checkpoint directory")->required();
  train->add_option("--step", step, "one step's length (default 100ms)");
  train->add_option("--every", every, "the periodic checkpoint interval (default 10s)");
  train->add_option("--checkpoint-cost", ckpt, "how long a checkpoint takes (default 50ms)");
  train->add_option("--podinfo", t.podinfo, "the downward API's annotations file");
  train->add_option("--answer", t.answer, "written after a requested checkpoint");
  train->add_option("--slots", t.slots, "the job's ranks (default 1)")->check(CLI::Range(1, 4096));
  train->add_flag("--ignore-requests", t.ignore_requests,
                  "checkpoint on the periodic schedule only");
  std::string lost_exit = "0s";
  train->add_option("--lost-exit", lost_exit,
                    "exit 1 once the GPU has been lost this long (default 0s: never)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  InstallSignals();
  if (const char* lost = std::getenv("SIM_GPU_LOST"); lost && std::string(lost) == "1")
    g_gpu_lost = true;
  if (serve->parsed()) return Serve(listen, DurationFlag("--cost", cost));
  t.step = DurationFlag("--step", step);
  t.every = DurationFlag("--every", every);
  t.checkpoint_cost = DurationFlag("--checkpoint-cost", ckpt);
  t.lost_exit = DurationFlag("--lost-exit", lost_exit);
  if (t.step.count() <= 0 || t.every.count() <= 0) {
    std::fprintf(stderr, "gpuheal-workload train: --step and --every must be more than 0\n");
    return 2;
  }
  std::error_code ec;
  std::filesystem::create_directories(t.dir, ec);
  if (ec) {
    std::fprintf(stderr, "gpuheal-workload train: --dir %s: %s\n", t.dir.c_str(),
                 ec.message().c_str());
    return 2;
  }
  return Trainer(t).Run();
}
