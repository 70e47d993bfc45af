// NodeRepair status.steps: the kinds are the CRD's enum, and a record written by the release
// before steps existed (test/fixtures/noderepair-v0: records its controller wrote in this
// repository's repairer tests, captured as stored) is read once through MigrateActions.

#include "controller/steps.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "controller/record.h"
#include "kube/objects.h"

namespace gpuheal::controller {
namespace {

const std::string kSrc = GPUHEAL_SOURCE_DIR;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

kube::NodeRepair Fixture(const std::string& name) {
  const std::string path = kSrc + "/test/fixtures/noderepair-v0/" + name + ".json";
  auto r = kube::DecodeNodeRepair(ReadFile(path));
  EXPECT_TRUE(r) << path << ": " << (r ? "" : r.error().message);
  return r ? *r : kube::NodeRepair{};
}

// kind:rung:detail:uid of each step, in order.
std::vector<std::string> Summary(const kube::NodeRepair& r) {
  std::vector<std::string> out;
  for (const auto& s : r.steps) {
    std::string line = s.kind;
    if (s.rung) line += ":" + std::to_string(s.rung);
    if (!s.detail.empty()) line += " " + s.detail;
    if (!s.uid.empty()) line += " uid=" + s.uid;
    out.push_back(line);
  }
  return out;
}

TEST(Steps, TheKindsAreTheCrdsEnumInOrder) {
  std::string names;
  for (Step s : kAllSteps) {
    names += (names.empty() ? "" : ", ") + std::string(ToString(s));
    EXPECT_EQ(ParseStep(ToString(s)), s);
  }
  EXPECT_FALSE(ParseStep("cordoned"));
  for (const char* crd :
       {"/deploy/crds/noderepairs.yaml", "/deploy/helm/gpuheal/crds/noderepairs.yaml"}) {
    const std::string yaml = ReadFile(kSrc + crd);
    EXPECT_NE(yaml.find("enum: [" + names + "]"), std::string::npos)
        << crd << " lacks the step kinds: enum: [" << names << "]";
  }
}

// Each record as the release before wrote it, and the steps read from it.
TEST(Steps, RecordsOfTheReleaseBeforeAreMigratedFromTheirActions) {
  const std::map<std::string, std::vector<std::string>> want = {
      {"standby-promoted", {"StandbyPromoted s1", "RungStarted:1 standby"}},
      {"redfish-reset-sent", {"RungStarted:1 redfish", "BMCResetSent:1 PowerCycle"}},
      {"redfish-failed", {"RungStarted:1 redfish", "BMCResetSent:1 PowerCycle"}},
      {"exec-rung-failed", {"RungStarted:1 exec", "RungFailed:1 exec", "RungStarted:2 exec"}},
      {"exec-replaced", {"RungStarted:1 exec"}},
      {"nodeclaim-awaiting",
       {"ReplacementSource NodeClaim", "OwnerDeleted Karpenter NodeClaim nc-1",
        "AwaitingReplacement a uid=uid-12", "RungStarted:1 delete-node"}},
      {"machine-awaiting",
       {"ReplacementSource Machine capi cluster.x-k8s.io/deployment-name=md-gpu",
        "OwnerDeleted Cluster API Machine capi/m-7", "AwaitingReplacement a uid=uid-12",
        "RungStarted:1 delete-node"}},
      {"predictive-gpu-recovery", {"Cordoned 0000:3b:00", "GPURecoveryRequested 0000:3b:00"}},
      {"checkpoint-requested", {}},
  };
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(kSrc + "/test/fixtures/noderepair-v0")) {
    ++files;
    const std::string name = e.path().stem();
    auto it = want.find(name);
    ASSERT_NE(it, want.end()) << name << ": a fixture without expected steps";
    auto r = Fixture(name);
    EXPECT_TRUE(r.steps.empty()) << name << " was written before status.steps";
    EXPECT_EQ(MigrateActions(r), !it->second.empty()) << name;
    EXPECT_EQ(Summary(r), it->second) << name;
    EXPECT_FALSE(MigrateActions(r)) << name << ": migrated once";
  }
  EXPECT_EQ(files, want.size());
}

// The times: the action's own where it named one, else the repair's start.
TEST(Steps, MigratedStepsKeepTheActionsTimes) {
  auto r = Fixture("exec-rung-failed");
  ASSERT_TRUE(MigrateActions(r));
  ASSERT_EQ(r.steps.size(), 3u);
  EXPECT_EQ(r.steps[0].at, "2026-06-01T00:10:00.000000Z");
  EXPECT_EQ(r.steps[2].at, "2026-06-01T00:10:00.001000Z");
  auto a = Fixture("nodeclaim-awaiting");
  ASSERT_TRUE(MigrateActions(a));
  EXPECT_EQ(a.steps[0].at, "2026-06-01T00:00:05.000000Z") << "the repair's start";
  EXPECT_EQ(a.steps[2].at, "2026-06-01T00:10:05.000000Z") << "since, from the action";
  EXPECT_EQ(a.steps[3].at, "2026-06-01T00:10:05.000000Z") << "Remediating";
}

// The wording the release before wrote for the steps its unit tests do not reach (a DRA
// driver's DeviceTaintRules, a diagnostic bundle, a MachineHealthCheck that decides).
TEST(Steps, TheReleaseBeforesOtherWordsAreMigratedToo) {
  kube::NodeRepair r;
  r.phase = "Remediating";
  r.phase_times = {{"Detected", "2026-06-01T00:00:00.000000Z"}};
  r.actions = {
      "DeviceTaintRule n1-1780272000000-0000-3b-00: GPU 0000:3b:00.0 (gpu.example.com/n1/gpu-0) "
      "NoSchedule",
      "removed DeviceTaintRule(s) n1-1780272000000-0000-3b-00",
      "diagnostic n1-1780272000000 requested at 2026-06-01T00:00:01.000000Z",
      "diagnostic n1-1780272000000 done: not finished within 120 s (phase Running); remediating "
      "without it",
      "held: MachineHealthCheck capi/gpu-mhc selects this node's Machine and remediates it: the "
      "node stays quarantined and drained, gpuheal does not delete the Machine",
  };
  ASSERT_TRUE(MigrateActions(r));
  EXPECT_EQ(Summary(r), (std::vector<std::string>{
                            "DeviceTaintRuleCreated n1-1780272000000-0000-3b-00",
                            "DeviceTaintRulesRemoved",
                            "DiagnosticRequested n1-1780272000000",
                            "DiagnosticEnded TimedOut",
                            "HeldByMachineHealthCheck capi/gpu-mhc",
                        }));
  EXPECT_EQ(r.steps[2].at, "2026-06-01T00:00:01.000000Z");
}

// RepairRecord::Read migrates once and marks the record for writing; the rung's state is the
// steps'.
TEST(Steps, ARecordReadsItsRungFromItsSteps) {
  auto old = RepairRecord::Read(Fixture("redfish-reset-sent"));
  EXPECT_TRUE(old.dirty) << "migrated: written at the next status write";
  EXPECT_TRUE(old.RungStarted());
  EXPECT_EQ(old.RungSince(), kube::ParseTime("2026-06-01T00:10:00.000000Z"));
  EXPECT_TRUE(old.Done(Step::kBmcResetSent, 1));
  EXPECT_FALSE(old.Done(Step::kBmcResetSent, 2));
  auto again = RepairRecord::Read(old.cr);
  EXPECT_FALSE(again.dirty) << "a record with steps is read as it is";

  RepairRecord r;
  r.cr.rung = "exec";
  EXPECT_FALSE(r.RungStarted());
  const auto t = *kube::ParseTime("2026-06-01T01:00:00.000000Z");
  r.MarkRungStarted(t);
  r.MarkRungStarted(t + std::chrono::seconds(5));
  EXPECT_EQ(Summary(r.cr), std::vector<std::string>{"RungStarted:1 exec"}) << "once";
  EXPECT_EQ(r.new_steps, std::vector<Step>{Step::kRungStarted});
  EXPECT_EQ(r.RungSince(), t);
  r.cr.rung_index = 1;
  EXPECT_FALSE(r.RungStarted()) << "rung 2 has not started";
}

TEST(Steps, EveryTimeIsTheActionsOwnOrTheRepairsStart) {
  for (const auto& e : std::filesystem::directory_iterator(kSrc + "/test/fixtures/noderepair-v0")) {
    auto r = kube::DecodeNodeRepair(ReadFile(e.path()));
    ASSERT_TRUE(r) << e.path();
    MigrateActions(*r);
    for (const auto& s : r->steps) {
      EXPECT_TRUE(ParseStep(s.kind)) << e.path() << ": " << s.kind;
      EXPECT_TRUE(kube::ParseTime(s.at)) << e.path() << ": " << s.kind << " at '" << s.at << "'";
    }
  }
}

TEST(Steps, ARecordWithStepsIsNotMigrated) {
  kube::NodeRepair r;
  r.actions = {"promoted standby s9"};
  r.steps = {{"RungStarted", "2026-01-01T00:00:00.000000Z", 1, "exec", ""}};
  EXPECT_FALSE(MigrateActions(r));
  EXPECT_EQ(Summary(r), std::vector<std::string>{"RungStarted:1 exec"});
}

}  // namespace
}  // namespace gpuheal::controller
