// The binary's exit codes and error messages: usage and config errors exit 2 with a message
// that says what, where and how to fix.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "run_binary.h"

namespace gpuheal {
namespace {

using Run = testing::RunResult;

Run Exec(const std::string& args) { return testing::RunGpuheal(args); }

// Removed when the test process exits: CI machines run the suite many times.
struct TempFiles {
  std::vector<std::string> paths;
  ~TempFiles() {
    for (const auto& p : paths) std::remove(p.c_str());
  }
};

std::string TempFile(const std::string& content) {
  static TempFiles files;
  char tmpl[] = "/tmp/gpuheal-cli-XXXXXX";
  const int fd = mkstemp(tmpl);
  close(fd);
  std::ofstream(tmpl) << content;
  files.paths.push_back(tmpl);
  return tmpl;
}

TEST(Cli, ExplainXid) {
  auto r = Exec("explain xid 79 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["severity"], "catastrophic");
  EXPECT_EQ(j["nvidia_bucket"], "RESTART_BM");
  EXPECT_EQ(j["reason"], "NvidiaXID79Error");
}

// explain shows how an Xid can be raised and what it follows (docs/xid.md).
TEST(Cli, ExplainXidShowsItsEscalationAndConsequenceRules) {
  auto app = Exec("explain xid 31");
  ASSERT_EQ(app.code, 0) << app.out;
  EXPECT_NE(app.out.find("never by repeats of one program"), std::string::npos) << app.out;
  auto x45 = nlohmann::json::parse(Exec("explain xid 45 --json").out);
  EXPECT_NE(x45["consequence"].get<std::string>().find("Not Solo"), std::string::npos);
  auto all = Exec("explain xid --all");
  // The first line says which catalog revision and driver branches the table covers.
  const std::string first = all.out.substr(0, all.out.find('\n'));
  EXPECT_EQ(first.rfind("catalog: NVIDIA's Xid catalog", 0), 0u) << first;
  EXPECT_NE(first.find("R565 to R575"), std::string::npos) << first;
  EXPECT_NE(first.find("R580"), std::string::npos) << first;
  EXPECT_NE(first.find("173 and 185"), std::string::npos) << first;
}

TEST(Cli, ExplainNvlink5AndSxid) {
  auto x149 = Exec("explain xid 149");
  ASSERT_EQ(x149.code, 0) << x149.out;
  EXPECT_NE(x149.out.find("NETIR_LINK_EVT/NETIR_LINK_DOWN v1 ------100110"), std::string::npos)
      << x149.out;
  auto s = nlohmann::json::parse(Exec("explain sxid 23001 --json").out);
  EXPECT_EQ(s["nvidia_class"], "always fatal");
  EXPECT_EQ(s["severity"], "catastrophic");
  EXPECT_EQ(s["reason"], "NvidiaSXID23001Error");
  auto all = nlohmann::json::parse(Exec("explain sxid --all --json").out);
  EXPECT_GT(all.size(), 80u);
  auto unknown = Exec("explain sxid 5");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.out.find("not in NVIDIA's SXid tables"), std::string::npos) << unknown.out;
}

// A node's kernel log as it comes: boot noise, benign driver lines, user-space crashes and
// faults in five layouts (dmesg, dmesg -T, dmesg --time-format iso, journalctl -k and bare).
// Every fault is found with the right Xid (or SXid) and PCI, nothing benign is reported, and each
// decision is the one NVIDIA's bucket, decode row or SXid table gives (the expect file says why).
TEST(Cli, ClassifyAMixedRealWorldCorpus) {
  const std::string dir = std::string(GPUHEAL_SOURCE_DIR) + "/test/fixtures/real-world/";
  auto r = Exec("classify " + dir + "mixed-node.log");
  ASSERT_EQ(r.code, 0) << r.out;
  std::vector<nlohmann::json> got;
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);) {
    if (!l.empty()) got.push_back(nlohmann::json::parse(l));
  }
  std::vector<nlohmann::json> want;
  std::ifstream in(dir + "mixed-node.expect.jsonl");
  for (std::string l; std::getline(in, l);) {
    if (!l.empty()) want.push_back(nlohmann::json::parse(l));
  }
  ASSERT_EQ(got.size(), want.size()) << r.out;
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& g = got[i];
    const auto& w = want[i];
    for (const char* key :
         {"line", "kind", "xid", "sxid", "pci", "severity", "action", "consequence_of"}) {
      if (w.contains(key)) {
        EXPECT_EQ(g.value(key, nlohmann::json()), w[key]) << key << ": " << g.dump();
      }
    }
    // NVIDIA's word for it: the decode row or SXid table where the line has one, else the bucket.
    const std::string nvidia = w["nvidia"];
    if (g.contains("decode")) {
      EXPECT_NE(g["decode"].get<std::string>().find(nvidia), std::string::npos) << g.dump();
    } else {
      auto bucket = nlohmann::json::parse(
          Exec("explain xid " + std::to_string(g["xid"].get<int>()) + " --json").out);
      EXPECT_EQ(bucket["nvidia_bucket"], nvidia) << g.dump();
    }
  }
}

TEST(Cli, ExplainUnknownXidIsAUsageError) {
  auto r = Exec("explain xid 999");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("not in the catalog"), std::string::npos) << r.out;
}

// The flag takes the policy's endpoint_sources names (controller::ParseEndpointSource).
TEST(Cli, BmcAnUnknownEndpointSourceIsAUsageError) {
  auto r = Exec("bmc status node-1 --endpoint-source dns");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--endpoint-source dns: configmap or node-annotation"), std::string::npos)
      << r.out;
}

TEST(Cli, TheSlurmBackendsUsageErrors) {
  auto r = Exec("agent --standalone --slurm");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("two backends"), std::string::npos) << r.out;
  r = Exec("agent --slurm --kubeconfig /nonexistent");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("drop --slurm"), std::string::npos) << r.out;
  // A slurm.conf that is not there: exit 2 before libslurm (which would end the process) reads it.
  const std::string cfg = TempFile("slurm: {conf: /nonexistent/slurm.conf}\n");
  r = Exec("agent --slurm --listen '' --state-dir /tmp --config " + cfg);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/slurm.conf"), std::string::npos) << r.out;
  r = Exec("agent --slurm --config " + TempFile("slurm: {checkpoint_window: soon}\n"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("slurm.checkpoint_window"), std::string::npos) << r.out;
  r = Exec("drill --backend slurm --scenario pdb");
  EXPECT_EQ(r.code, 2) << r.out;
  r = Exec("drill --scenario transient");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--backend slurm"), std::string::npos) << r.out;
}

TEST(Cli, ClassifyStdinAndFiles) {
  auto r = Exec("classify < " +
                TempFile("[ 1.0] NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=a, DBE\nnoise\n"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["line"], 1);
  EXPECT_EQ(j["xid"], 48);
  const std::string a = TempFile("noise\nNVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n");
  auto two = Exec("classify " + a + " " + a);
  ASSERT_EQ(two.code, 0);
  EXPECT_EQ(std::count(two.out.begin(), two.out.end(), '\n'), 2);
  EXPECT_NE(two.out.find("\"file\""), std::string::npos);
  EXPECT_NE(two.out.find("\"line\":2"), std::string::npos);
  // A journal copy that kept only the syslog tag is the same kernel line.
  auto tagged = Exec("classify < " +
                     TempFile("kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off "
                              "the bus.\n"));
  ASSERT_EQ(tagged.code, 0) << tagged.out;
  auto t = nlohmann::json::parse(tagged.out);
  EXPECT_EQ(t["xid"], 79) << tagged.out;
  EXPECT_EQ(t["trusted"], true) << tagged.out;
}

// A directory opens as a file on Linux and reads as nothing: it used to exit 0 with no output.
TEST(Cli, ClassifyADirectoryIsAUsageError) {
  auto r = Exec("classify /tmp");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("gpuheal classify: /tmp: is a directory"), std::string::npos) << r.out;
}

// One 100 MB line used to cost 535 MB: now its first 64 KiB are classified (a fault there is
// found, marked truncated), the rest is skipped, and the next line keeps its number.
TEST(Cli, ClassifyCutsAnOverlongLineAndStaysSmall) {
  // The binary's own footprint first (a sanitizer build maps and poisons far more of it than a
  // release one, and more as the program grows): the line may add at most 64 MB to it.
  ASSERT_EQ(testing::RunShell(GPUHEAL_BIN " --version >/dev/null 2>&1").code, 0);
  rusage base{};
  getrusage(RUSAGE_CHILDREN, &base);
  auto r = testing::RunShell(
      "{ printf 'NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=a, DBE '; head -c 100000000 /dev/zero "
      "| tr '\\0' x; "
      "printf '\\nNVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\\n'; } | " GPUHEAL_BIN
      " classify 2>&1");
  ASSERT_EQ(r.code, 0) << r.out.substr(0, 500);
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  // The largest child so far: the line's classify, unless it stayed below the baseline.
  EXPECT_LT(ru.ru_maxrss - base.ru_maxrss, 64 * 1024)
      << "KiB at peak over the binary's own " << base.ru_maxrss << " KiB";
  EXPECT_NE(r.out.find("gpuheal classify: -:1: line longer than 64 KiB; classified its first 64 "
                       "KiB, skipped the rest"),
            std::string::npos)
      << r.out.substr(0, 500);
  EXPECT_NE(r.out.find("\"xid\":48"), std::string::npos);
  EXPECT_NE(r.out.find("\"truncated\":true"), std::string::npos);
  EXPECT_NE(r.out.find("\"line\":2,\"kind\":\"gpu_fallen_off_bus\""), std::string::npos)
      << r.out.substr(r.out.size() - 500);
  EXPECT_LT(r.out.size(), 200u * 1024);
}

// A command line that starts with a subcommand registers that subcommand alone (src/cli/main.cc):
// each one's help still lists every flag the contract (`explain flags`, all registered) gives it,
// and the top-level help still names every subcommand.
TEST(Cli, EachSubcommandAloneHasItsWholeContract) {
  const auto all = Exec("explain flags");
  ASSERT_EQ(all.code, 0);
  std::map<std::string, std::vector<std::string>> flags;  // subcommand -> its own --flags
  std::istringstream lines(all.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string gpuheal, sub, flag;
    words >> gpuheal >> sub >> flag;
    if (sub.rfind("--", 0) == 0) continue;  // the top level's own
    if (flag.rfind("--", 0) == 0 && flag != "--help") flags[sub].push_back(flag);
    if (!flag.empty()) flags[sub];
  }
  const auto top = Exec("--help");
  ASSERT_EQ(top.code, 0);
  ASSERT_GE(flags.size(), 14u) << all.out;
  for (const auto& [sub, names] : flags) {
    EXPECT_NE(top.out.find("\n  " + sub + " "), std::string::npos) << sub << "\n" << top.out;
    const auto help = Exec(sub + " --help");
    EXPECT_EQ(help.code, 0) << sub;
    for (const std::string& f : names) {
      EXPECT_NE(help.out.find(f), std::string::npos) << sub << " " << f << "\n" << help.out;
    }
  }
  EXPECT_EQ(Exec("agent --no-such-flag").code, 2);
  EXPECT_EQ(Exec("agent controller").code, 2);
}

TEST(Cli, UsageAndConfigErrorsExitTwo) {
  EXPECT_EQ(Exec("classify /nonexistent/file.log").code, 2);
  EXPECT_EQ(Exec("--no-such-flag").code, 2);
  EXPECT_EQ(Exec("").code, 2);
  EXPECT_EQ(Exec("inject --pci not-a-bus-id --kmsg /dev/null").code, 2);
  EXPECT_EQ(Exec("inject --xid 0").code, 2);
  EXPECT_EQ(Exec("agent").code, 2);
  auto bad = Exec("agent --standalone --config " + TempFile("kmsg: /dev/kmsg\nbogus: 1\n"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find(":2:1: unknown key \"bogus\""), std::string::npos) << bad.out;
  auto listen = Exec("agent --standalone --config " + TempFile("kmsg: /dev/kmsg\nlisten: 9464\n"));
  EXPECT_EQ(listen.code, 2);
  EXPECT_NE(listen.out.find(":2:9: \"listen\": listen address \"9464\" must be host:port"),
            std::string::npos)
      << listen.out;
  auto listen_flag = Exec("agent --standalone --listen 127.0.0.1:http");
  EXPECT_EQ(listen_flag.code, 2);
  EXPECT_NE(listen_flag.out.find("--listen: listen address \"127.0.0.1:http\": port must be"),
            std::string::npos)
      << listen_flag.out;
  auto npd = Exec("classify --npd-rules " + TempFile("{\"rules\": 5}") + " /dev/null");
  EXPECT_EQ(npd.code, 2);
  EXPECT_NE(npd.out.find("\"rules\" must be an array"), std::string::npos) << npd.out;
  auto kmsg = Exec(
      "agent --standalone --listen '' --state-dir /tmp/gpuheal-cli-state "
      "--kmsg /nonexistent/kmsg");
  EXPECT_EQ(kmsg.code, 2);
  EXPECT_NE(kmsg.out.find("cannot open kernel log"), std::string::npos) << kmsg.out;
  auto file = Exec("agent --standalone --listen '' --state-dir /tmp/gpuheal-cli-state --kmsg " +
                   TempFile("x"));
  EXPECT_EQ(file.code, 2);
  EXPECT_NE(file.out.find("use `gpuheal classify` for log files"), std::string::npos) << file.out;
  // --nvml-library never switches on what the config switched off.
  auto nvml = Exec("agent --standalone --listen '' --nvml-library /opt/nvml.so --config " +
                   TempFile("nvidia:\n  nvml: false\n"));
  EXPECT_EQ(nvml.code, 2);
  EXPECT_NE(nvml.out.find("contradicts nvidia.nvml: false"), std::string::npos) << nvml.out;
}

TEST(Cli, InjectWritesTheDriverFormat) {
  // A FIFO stands in for /dev/kmsg here; the kernel tests use the real device.
  const std::string fifo = std::filesystem::temp_directory_path() / "gpuheal-inject-fifo";
  std::filesystem::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const int rd = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  auto r = Exec("inject --xid 79 --pci 0000:3B:00.0 --kmsg " + fifo);
  ASSERT_EQ(r.code, 0) << r.out;
  char buf[4096];
  const ssize_t n = read(rd, buf, sizeof buf);
  close(rd);
  std::filesystem::remove(fifo);
  ASSERT_GT(n, 0);
  const std::string got(buf, static_cast<size_t>(n));
  EXPECT_NE(got.find("<4>NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has "
                     "fallen off the bus.\n"),
            std::string::npos)
      << got;
  EXPECT_NE(got.find("<4>NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n"),
            std::string::npos);
}

// Diagnostic commands (docs/diagnostics.md): usage errors exit 2 before anything is created;
// `gpuheal bundle` writes this host's bundle; `make install`'s kubectl-gpuheal answers as the
// plugin.
TEST(Cli, DiagnoseBundleAndRepairsUsageErrors) {
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"diagnose", "node is required"},
      {"diagnose n1 --timeout soon", "--timeout soon: not a duration"},
      {"diagnose n1 --include kernel,tea-leaves", "unknown collector \"tea-leaves\""},
      {"diagnose n1 --upload-url s3://bucket/key", "must be an http:// or https:// URL"},
      {"diagnose n1 --kubeconfig /nonexistent/kubeconfig", "/nonexistent/kubeconfig"},
      {"bundle --exclude nope", "unknown collector \"nope\""},
      {"bundle --collector-timeout 0s", "--collector-timeout 0s: not a duration"},
      {"bundle --config " + TempFile("diagnostics:\n  max_size_mb: 0\n"), ":2:"},
      {"repairs -o yaml", "yaml"},
      {"repairs --kubeconfig /nonexistent/kubeconfig", "/nonexistent/kubeconfig"},
  };
  for (const auto& c : cases) {
    auto r = Exec(c.args);
    EXPECT_EQ(r.code, 2) << c.args << ": " << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << ": " << r.out;
  }
}

TEST(Cli, BundleWritesThisHostsBundle) {
  char tmpl[] = "/tmp/gpuheal-cli-bundle-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string out = dir + "/b.tar.gz";
  auto r = Exec("bundle --include system,agent,pcie -f " + out);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(out + ": "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("system"), std::string::npos) << r.out;
  auto list = testing::RunShell("tar -tzf " + out + " 2>&1");
  EXPECT_EQ(list.code, 0) << list.out;
  EXPECT_EQ(list.out.rfind("manifest.json\n", 0), 0u) << list.out;
  EXPECT_NE(list.out.find("system/meminfo"), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find("kernel/"), std::string::npos) << "not included: " << list.out;
  std::filesystem::remove_all(dir);
}

TEST(Cli, InstallPutsTheKubectlPluginBesideTheBinary) {
  char tmpl[] = "/tmp/gpuheal-cli-install-XXXXXX";
  const std::string prefix = mkdtemp(tmpl);
  const std::string build = std::filesystem::path(GPUHEAL_BIN).parent_path().string();
  auto inst = testing::RunShell("cmake --install " + build + " --prefix " + prefix + " 2>&1");
  ASSERT_EQ(inst.code, 0) << inst.out;
  EXPECT_TRUE(std::filesystem::is_symlink(prefix + "/bin/kubectl-gpuheal"));
  auto help = testing::RunShell(prefix + "/bin/kubectl-gpuheal --help 2>&1");
  EXPECT_EQ(help.code, 0) << help.out;
  EXPECT_NE(help.out.find("Usage: kubectl gpuheal"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("diagnose"), std::string::npos) << help.out;
  auto xid = testing::RunShell(prefix + "/bin/kubectl-gpuheal explain xid 48 --json 2>&1");
  EXPECT_EQ(xid.code, 0) << xid.out;
  EXPECT_NE(xid.out.find("NvidiaXID48Error"), std::string::npos) << xid.out;
  std::filesystem::remove_all(prefix);
}

}  // namespace
}  // namespace gpuheal
