// Diagnostic bundles (docs/diagnostics.md): the size cap, the manifest, the tar.gz written and read
// back, the Redactor, collector selection and deadlines, the PCIe collector on a sysfs tree, the
// config and policy keys, and the NodeDiagnostic decoder.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "agent/config.h"
#include "agent/diag_bundle.h"
#include "agent/diag_collectors.h"
#include "agent/diag_upload.h"
#include "controller/policy.h"
#include "kube/objects.h"

namespace gpuheal {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gpuheal-diag-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

CollectorResult Result(const std::string& name, std::vector<BundleFile> files) {
  CollectorResult r;
  r.name = name;
  r.files = std::move(files);
  return r;
}

TEST(DiagBundle, TheCapCutsFilesInCollectorOrderAndSaysSo) {
  std::vector<CollectorResult> rs = {Result("a", {{"one", std::string(60, 'x')}}),
                                     Result("b", {{"two", std::string(60, 'y')}}),
                                     Result("c", {{"three", std::string(10, 'z')}})};
  ApplySizeCap(rs, 100);
  EXPECT_EQ(rs[0].files[0].data.size(), 60u);
  EXPECT_FALSE(rs[0].truncated());
  EXPECT_EQ(rs[1].files[0].data.size(), 40u);
  EXPECT_TRUE(rs[1].truncated());
  EXPECT_EQ(rs[2].files[0].data.size(), 0u);
  EXPECT_TRUE(rs[2].truncated());
  const auto m = BundleManifest({"node-1", "req", "0.1.0", "now"}, rs, 100);
  EXPECT_EQ(m["bytes"], 100);
  EXPECT_EQ(m["collectors"][1]["truncated"], true);
  EXPECT_EQ(m["files"][1]["file"], "b/two");
  EXPECT_EQ(m["files"][1]["size"], 40);
}

TEST(DiagBundle, WrittenAsTarGzWithTheManifestFirstAndReadBack) {
  TempDir dir;
  std::vector<CollectorResult> rs = {Result("kernel", {{"dmesg.txt", "line one\nline two\n"}}),
                                     Result("system", {{"meminfo", "MemTotal: 1 kB\n"}})};
  rs[1].error = "cannot read /proc/modules";
  rs[1].duration = 12ms;
  const std::string path = dir.path() + "/b.tar.gz";
  auto info = WriteBundle(path, {"node-1", "req-1", "0.1.0", "t"}, rs, 1 << 20);
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_FALSE(fs::exists(path + ".part"));
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "a bundle is readable by root only";
  EXPECT_EQ(info->size, static_cast<int64_t>(fs::file_size(path)));
  auto sum = Sha256File(path);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(info->sha256, *sum);
  EXPECT_EQ(info->sha256.size(), 64u);
  auto members = ReadBundle(path);
  ASSERT_TRUE(members.ok()) << members.error().message;
  ASSERT_EQ(members->size(), 3u);
  EXPECT_EQ((*members)[0].first, "manifest.json");
  EXPECT_EQ((*members)[1].first, "kernel/dmesg.txt");
  EXPECT_EQ((*members)[1].second, "line one\nline two\n");
  const auto m = nlohmann::json::parse((*members)[0].second);
  EXPECT_EQ(m["node"], "node-1");
  EXPECT_EQ(m["collectors"][1]["error"], "cannot read /proc/modules");
  EXPECT_EQ(m["collectors"][1]["duration_ms"], 12);
}

TEST(DiagBundle, AnUnwritablePathIsAnErrorAndLeavesNothing) {
  auto info = WriteBundle("/nonexistent-dir/b.tar.gz", {}, {}, 100);
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.error().message.find("/nonexistent-dir/b.tar.gz.part"), std::string::npos)
      << info.error().message;
}

TEST(DiagRedactor, SecretsNeverSurvive) {
  setenv("GPUHEAL_UNIT_SECRET_TOKEN", "env-secret-123456", 1);
  const Redactor r({"literal-secret-abc", "short"});
  unsetenv("GPUHEAL_UNIT_SECRET_TOKEN");
  const std::string in =
      "a literal-secret-abc b env-secret-123456 c\n"
      "Authorization: Bearer abcdefghijklmnop\n"
      "token: tok-value password=hunter22 \"client-key-data\": \"LS0tLS1\"\n"
      "https://s3/b/k?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKIA/x&X-Amz-Signature=f00d&x=1\n"
      "jwt eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJlc2ln\n"
      "short stays\n";
  const std::string out = r.Apply(in);
  for (const char* gone :
       {"literal-secret-abc", "env-secret-123456", "abcdefghijklmnop", "tok-value", "hunter22",
        "LS0tLS1", "f00d", "AKIA/x", "eyJzdWIiOiJzeXN0ZW0ifQ"}) {
    EXPECT_EQ(out.find(gone), std::string::npos) << gone << " in:\n" << out;
  }
  EXPECT_NE(out.find("Bearer <redacted>"), std::string::npos) << out;
  EXPECT_NE(out.find("X-Amz-Signature=<redacted>&x=1"), std::string::npos) << out;
  EXPECT_NE(out.find("short stays"), std::string::npos) << "values under 6 characters are kept";
}

TEST(DiagRedactor, TheEnvironmentKeepsNamesNotValues) {
  setenv("GPUHEAL_UNIT_PLAIN", "plain-value-42", 1);
  setenv("NODE_NAME", "gpu-node-7", 1);
  const std::string env = RedactedEnvironment();
  unsetenv("GPUHEAL_UNIT_PLAIN");
  EXPECT_NE(env.find("GPUHEAL_UNIT_PLAIN=<redacted>\n"), std::string::npos) << env;
  EXPECT_EQ(env.find("plain-value-42"), std::string::npos);
  EXPECT_NE(env.find("NODE_NAME=gpu-node-7\n"), std::string::npos) << env;
}

TEST(DiagCollectors, SelectionIncludesExcludesAndRefusesUnknownNames) {
  auto all = SelectCollectors({}, {});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, CollectorNames());
  EXPECT_EQ(all->size(), 9u);
  auto two = SelectCollectors({"system", "kernel"}, {});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (std::vector<std::string>{"kernel", "system"})) << "bundle order, not request";
  auto less = SelectCollectors({}, {"nvidia-smi", "dcgm"});
  ASSERT_TRUE(less.ok());
  EXPECT_EQ(less->size(), 7u);
  auto bad = SelectCollectors({"kernel", "tea-leaves"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("unknown collector \"tea-leaves\" (known: kernel, "),
            std::string::npos)
      << bad.error().message;
}

TEST(DiagCollectors, ALateCollectorIsCutAtItsDeadline) {
  TempDir dir;
  const std::string slow = dir.path() + "/nvidia-smi";
  std::ofstream(slow) << "#!/bin/sh\necho partial\nsleep 30\n";
  fs::permissions(slow, fs::perms::owner_all);
  CollectContext ctx;
  ctx.nvidia_smi = slow;
  ctx.timeout = 500ms;
  ctx.kmsg_path = dir.path() + "/no-kmsg";
  const auto started = std::chrono::steady_clock::now();
  auto rs = RunCollectors(ctx, {"nvidia-smi", "kernel"});
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3s);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].name, "nvidia-smi");
  EXPECT_NE(rs[0].error.find("did not finish before the deadline"), std::string::npos)
      << rs[0].error;
  ASSERT_EQ(rs[0].files.size(), 1u);
  EXPECT_NE(rs[0].files[0].data.find("partial"), std::string::npos);
  EXPECT_NE(rs[1].error.find("cannot open " + ctx.kmsg_path), std::string::npos) << rs[1].error;
}

TEST(DiagCollectors, PcieRecordsNvidiaDevicesTheirBridgesLinksAndAer) {
  TempDir dir;
  const std::string root = dir.path() + "/pci0000:00";
  const std::string bridge = root + "/0000:00:01.0", gpu = bridge + "/0000:01:00.0";
  fs::create_directories(gpu);
  auto put = [](const std::string& d, const std::string& f, const std::string& v) {
    std::ofstream(d + "/" + f) << v << "\n";
  };
  put(gpu, "vendor", "0x10de");
  put(gpu, "class", "0x030200");
  put(gpu, "current_link_width", "8");
  put(gpu, "max_link_width", "16");
  put(gpu, "current_link_speed", "16.0 GT/s PCIe");
  std::ofstream(gpu + "/aer_dev_correctable") << "RxErr 3\nBadTLP 0\nTOTAL_ERR_COR 3\n";
  put(bridge, "vendor", "0x8086");
  put(bridge, "class", "0x060400");
  const std::string devices = dir.path() + "/devices";
  fs::create_directories(devices);
  fs::create_directory_symlink(gpu, devices + "/0000:01:00.0");
  fs::create_directory_symlink(bridge, devices + "/0000:00:01.0");
  CollectContext ctx;
  ctx.sys_pci_devices = devices;
  auto r = RunCollector(ctx, "pcie");
  ASSERT_EQ(r.files.size(), 1u) << r.error;
  const auto j = nlohmann::json::parse(r.files[0].data);
  EXPECT_EQ(j["nvidia_devices"], 1);
  ASSERT_EQ(j["devices"].size(), 2u) << j.dump(2);
  const auto& b = j["devices"][0];
  const auto& g = j["devices"][1];
  EXPECT_EQ(b["address"], "0000:00:01.0");
  EXPECT_EQ(b["role"], "bridge");
  EXPECT_EQ(g["role"], "gpu");
  EXPECT_EQ(g["current_link_width"], "8");
  EXPECT_EQ(g["max_link_width"], "16");
  EXPECT_EQ(g["aer_dev_correctable"]["RxErr"], 3);
  EXPECT_EQ(g["aer_dev_correctable"]["TOTAL_ERR_COR"], 3);
  EXPECT_EQ(g["upstream"], nlohmann::json::array({"0000:00:01.0"}));
}

TEST(DiagCollectors, PreviousBootCopiesPstoreAndFindsItsPanic) {
  TempDir dir;
  const std::string pstore = dir.path() + "/pstore";
  fs::create_directories(pstore);
  std::ofstream(pstore + "/dmesg-ramoops-0")
      << "<6>[ 100.000000] systemd: started\n"
         "<0>[ 101.000000] Kernel panic - not syncing: Fatal exception in interrupt\n"
         "<0>[ 101.000001] CPU: 3 PID: 0 Comm: swapper/3\n";
  CollectContext ctx;
  ctx.previous_boot.pstore = pstore;
  ctx.previous_boot.journal = dir.path() + "/no-journal";
  auto r = RunCollector(ctx, "previous-boot");
  ASSERT_EQ(r.files.size(), 2u) << r.error;
  EXPECT_EQ(r.files[0].path, "summary.json");
  EXPECT_EQ(r.files[1].path, "pstore/dmesg-ramoops-0");
  EXPECT_NE(r.files[1].data.find("Fatal exception"), std::string::npos);
  const auto j = nlohmann::json::parse(r.files[0].data);
  EXPECT_EQ(j["crash"]["kind"], "KernelPanic") << j.dump(2);
  EXPECT_EQ(j["pstore_files"], nlohmann::json::array({"dmesg-ramoops-0"}));
  EXPECT_EQ(j["journal_error"], "no persistent journal directory");
}

TEST(DiagCollectors, SkippedCollectorsSayWhy) {
  CollectContext ctx;
  ctx.nvidia.nvml = NvidiaConfig::Use::kOff;
  ctx.nvidia_smi = "no-such-nvidia-smi-binary";
  auto nvml = RunCollector(ctx, "nvml");
  EXPECT_TRUE(nvml.skipped);
  EXPECT_EQ(nvml.error, "nvidia.nvml is off");
  auto dcgm = RunCollector(ctx, "dcgm");
  EXPECT_TRUE(dcgm.skipped);
  auto smi = RunCollector(ctx, "nvidia-smi");
  EXPECT_TRUE(smi.skipped);
  EXPECT_EQ(smi.error, "no-such-nvidia-smi-binary is not on PATH");
}

TEST(DiagUpload, TheUrlLosesItsQueryAndAnUnreachableServerIsRetriedThenFails) {
  EXPECT_EQ(UrlWithoutQuery("https://h/b/k?X-Amz-Signature=x#f"), "https://h/b/k");
  EXPECT_EQ(UrlWithoutQuery("http://h/b/k"), "http://h/b/k");
  TempDir dir;
  const std::string file = dir.path() + "/b.tar.gz";
  std::ofstream(file) << "bytes";
  UploadOptions o;
  o.attempts = 2;
  o.backoff = 10ms;
  o.timeout = 2s;
  const auto r = UploadFile(file, "http://127.0.0.1:1/b/k?X-Amz-Signature=secret", o);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.attempts, 2);
  EXPECT_NE(r.message.find("upload to http://127.0.0.1:1/b/k failed"), std::string::npos)
      << r.message;
  EXPECT_EQ(r.message.find("secret"), std::string::npos);
}

TEST(DiagConfig, KeysAndErrors) {
  auto c = ParseAgentConfig(
      "diagnostics:\n  retention: 2m\n  max_size_mb: 5\n  collector_timeout: 3s\n"
      "  upload_attempts: 4\n  nvidia_smi: \"\"\n  dir: /var/tmp/b\n",
      "agent.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->diagnostics.retention, 2min);
  EXPECT_EQ(c->diagnostics.max_bytes, 5 * 1024 * 1024);
  EXPECT_EQ(c->diagnostics.collector_timeout, 3s);
  EXPECT_EQ(c->diagnostics.upload_attempts, 4);
  EXPECT_EQ(c->diagnostics.nvidia_smi, "");
  EXPECT_EQ(c->diagnostics.dir, "/var/tmp/b");
  auto bad = ParseAgentConfig("diagnostics:\n  max_size: 5\n", "agent.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("agent.yaml:2:3"), std::string::npos) << bad.error().message;
  auto zero = ParseAgentConfig("diagnostics:\n  upload_attempts: 0\n", "agent.yaml");
  EXPECT_FALSE(zero.ok());
}

TEST(DiagPolicy, TheUploadTemplateIsCheckedAndFilledIn) {
  auto p = controller::ParsePolicy(
      "diagnostics:\n  upload_url_template: https://b.example.com/{node}/{repair}-{time}.tar.gz\n"
      "  timeout: 15s\n",
      "policy.yaml");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->diagnostics_timeout, 15s);
  EXPECT_EQ(p->DiagnosticsUrl("n1", "n1-77", "20261204T000000Z"),
            "https://b.example.com/n1/n1-77-20261204T000000Z.tar.gz");
  auto bad = controller::ParsePolicy("diagnostics:\n  upload_url_template: s3://bucket/x\n",
                                     "policy.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("policy.yaml:2:24"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("must be an http:// or https:// URL"), std::string::npos);
}

TEST(DiagObjects, ANodeDiagnosticDecodes) {
  auto d = kube::DecodeNodeDiagnostic(
      R"({"metadata":{"name":"n1-x"},"spec":{"nodeName":"n1","upload":{"url":"https://h/k?s=1"},)"
      R"("include":["kernel"],"exclude":["dcgm"],"repair":"n1-77"},"status":{"phase":"Succeeded",)"
      R"("bundle":{"size":42,"sha256":"ab","location":"https://h/k","nodePath":"/v/b"},)"
      R"("durationMs":900,"collectors":[{"name":"kernel","bytes":1}]}})");
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->node_name, "n1");
  EXPECT_EQ(d->upload_url, "https://h/k?s=1");
  EXPECT_EQ(d->include, std::vector<std::string>{"kernel"});
  EXPECT_EQ(d->exclude, std::vector<std::string>{"dcgm"});
  EXPECT_EQ(d->repair, "n1-77");
  EXPECT_EQ(d->phase, "Succeeded");
  EXPECT_EQ(d->bundle_size, 42);
  EXPECT_EQ(d->bundle_location, "https://h/k");
  EXPECT_EQ(d->bundle_node_path, "/v/b");
  EXPECT_EQ(d->duration_ms, 900);
  EXPECT_EQ(d->collectors, std::vector<std::string>{"kernel"});
  EXPECT_FALSE(kube::DecodeNodeDiagnostic(R"({"spec":{"include":"kernel"}})").ok());
}

}  // namespace
}  // namespace gpuheal
