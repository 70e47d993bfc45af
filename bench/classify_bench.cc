// Parse + classify throughput on realistic kernel log text, per core (single thread).
// Baselines in the same run: touching every byte (the floor) and one RE2 search per line for the
// Xid pattern (what a regex-per-line monitor pays before it has classified anything).

#include <benchmark/benchmark.h>
#include <re2/re2.h>

#include <random>

#include "parse/classifier.h"
#include "parse/npd_rules.h"

namespace gpuheal {
namespace {

// Ordinary kernel lines in dmesg form, the bulk of a real node's log.
const std::vector<std::string>& NoiseLines() {
  static const std::vector<std::string> lines = [] {
    const char* templates[] = {
        "[ %d.%06d] usb 1-1.4: new high-speed USB device number %d using xhci_hcd",
        "[ %d.%06d] IPv6: ADDRCONF(NETDEV_CHANGE): cali%dab12: link becomes ready",
        "[ %d.%06d] EXT4-fs (nvme0n1p%d): mounted filesystem with ordered data mode. Quota mode: "
        "none.",
        "[ %d.%06d] audit: type=1400 audit(1700000000.%d:42): apparmor=\"STATUS\" "
        "operation=\"profile_load\"",
        "[ %d.%06d] docker0: port %d(veth1a2b3c4) entered forwarding state",
        "[ %d.%06d] nvidia-modeset: Allocated GPU:%d (GPU-5b8d6b3e-9c2d-8f1a) @ PCI:0000:3b:00.0",
        "[ %d.%06d] kauditd_printk_skb: %d callbacks suppressed",
        "[ %d.%06d] eth0: renamed from veth%dc0ffee",
        "[ %d.%06d] NFSD: Using nfsdcld client tracking operations. %d",
        "[ %d.%06d] systemd-journald[%d]: Received client request to flush runtime journal.",
    };
    std::vector<std::string> out;
    std::mt19937 rng(42);
    char buf[512];
    for (int i = 0; i < 4096; ++i) {
      snprintf(buf, sizeof buf, templates[i % 10], 1000 + i, static_cast<int>(rng() % 1000000),
               static_cast<int>(rng() % 64));
      out.emplace_back(buf);
    }
    return out;
  }();
  return lines;
}

const std::vector<std::string>& XidLines() {
  static const std::vector<std::string> lines = [] {
    std::vector<std::string> out;
    const int xids[] = {13, 31, 43, 45, 48, 63, 74, 79, 94, 95, 109, 119};
    char buf[512];
    for (int i = 0; i < 4096; ++i) {
      snprintf(buf, sizeof buf,
               "[ %d.123456] NVRM: Xid (PCI:0000:%02x:00): %d, pid=%d, name=python3, Ch 00000008, "
               "intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f_12000000",
               1000 + i, 0x18 + (i % 8) * 0x10, xids[i % 12], 1000 + i);
      out.emplace_back(buf);
    }
    return out;
  }();
  return lines;
}

double Bytes(const std::vector<std::string>& lines) {
  double b = 0;
  for (const auto& l : lines) b += static_cast<double>(l.size());
  return b / static_cast<double>(lines.size());
}

void RunClassifier(benchmark::State& state, const std::vector<std::string>& lines,
                   ClassifierOptions opts) {
  auto c = std::move(Classifier::Create(std::move(opts)).value());
  std::vector<Fault> out;
  size_t i = 0, n = 0, found = 0;
  for (auto _ : state) {
    out.clear();
    c->ClassifyLine(lines[i], ++n, out);
    found += out.size();
    benchmark::DoNotOptimize(out.data());
    if (++i == lines.size()) i = 0;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.SetBytesProcessed(
      static_cast<int64_t>(static_cast<double>(state.iterations()) * Bytes(lines)));
  state.counters["faults_per_line"] = static_cast<double>(found) / static_cast<double>(n);
}

void BM_Classify_NoMatch(benchmark::State& state) { RunClassifier(state, NoiseLines(), {}); }
void BM_Classify_Xid(benchmark::State& state) { RunClassifier(state, XidLines(), {}); }
void BM_Classify_Mixed_1pctXid(benchmark::State& state) {
  static const std::vector<std::string> mixed = [] {
    std::vector<std::string> out;
    for (int i = 0; i < 4000; ++i) out.push_back(NoiseLines()[static_cast<size_t>(i) % 4096]);
    for (int i = 0; i < 40; ++i)
      out[static_cast<size_t>(i) * 100] = XidLines()[static_cast<size_t>(i)];
    return out;
  }();
  RunClassifier(state, mixed, {});
}
void BM_Classify_NoMatch_WithNpdRules(benchmark::State& state) {
  ClassifierOptions o;
  o.npd_rules.push_back(std::move(
      LoadNpdConfig(std::string(GPUHEAL_SOURCE_DIR) + "/test/fixtures/npd/kernel-monitor.json")
          .value()));
  RunClassifier(state, NoiseLines(), std::move(o));
}

// Baseline: the cost of touching every byte of the line once.
void BM_Baseline_TouchBytes(benchmark::State& state) {
  const auto& lines = NoiseLines();
  size_t i = 0;
  for (auto _ : state) {
    unsigned sum = 0;
    for (char ch : lines[i]) sum += static_cast<unsigned char>(ch);
    benchmark::DoNotOptimize(sum);
    if (++i == lines.size()) i = 0;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// Baseline: one RE2 search per line for the Xid pattern alone (a regex-per-line monitor).
void RunRe2(benchmark::State& state, const std::vector<std::string>& lines) {
  static const RE2 re(R"(NVRM: Xid \(PCI:([0-9a-fA-F:.]+)[^)]*\): (\d+))");
  std::string pci;
  int xid = 0;
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(RE2::PartialMatch(lines[i], re, &pci, &xid));
    if (++i == lines.size()) i = 0;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
void BM_Baseline_Re2XidOnly_NoMatch(benchmark::State& state) { RunRe2(state, NoiseLines()); }
void BM_Baseline_Re2XidOnly_Xid(benchmark::State& state) { RunRe2(state, XidLines()); }

BENCHMARK(BM_Baseline_TouchBytes);
BENCHMARK(BM_Baseline_Re2XidOnly_NoMatch);
BENCHMARK(BM_Baseline_Re2XidOnly_Xid);
BENCHMARK(BM_Classify_NoMatch);
BENCHMARK(BM_Classify_Xid);
BENCHMARK(BM_Classify_Mixed_1pctXid);
BENCHMARK(BM_Classify_NoMatch_WithNpdRules);

}  // namespace
}  // namespace gpuheal

BENCHMARK_MAIN();
