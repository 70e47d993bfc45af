// Public contracts (condition types, severities, actions, reason codes, the Xid table, CLI flags)
// are golden-tested: a change here is a change users see. Renaming breaks them; adding is a
// feature. To accept an intended addition, regenerate with `make golden` and review the diff.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/reasons.h"
#include "run_binary.h"
#include "slurm/reason.h"

namespace gpuheal {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string RunBin(const std::string& args) { return testing::RunGpuheal(args, false).out; }

const std::string kSrc = GPUHEAL_SOURCE_DIR;

TEST(Golden, ContractListingIsUnchanged) {
  EXPECT_EQ(reason::ContractListing() + slurm::ReasonContractListing(),
            ReadFile(kSrc + "/test/golden/contracts.txt"))
      << "public contract changed: if intended (an addition), run `make golden`";
}

TEST(Golden, CliFlagsAreUnchanged) {
  EXPECT_EQ(RunBin("explain flags"), ReadFile(kSrc + "/test/golden/flags.txt"))
      << "CLI flags changed: if intended (an addition), run `make golden`";
}

TEST(Golden, DocsListEveryReasonAndTheXidTable) {
  const std::string reasons = ReadFile(kSrc + "/docs/reasons.md");
  for (const auto& r : reason::FixedReasons()) {
    EXPECT_NE(reasons.find("`" + std::string(r.name) + "`"), std::string::npos) << r.name;
  }
  EXPECT_NE(reasons.find(RunBin("explain reasons")), std::string::npos)
      << "docs/reasons.md is out of date: run `make golden`";
  EXPECT_NE(ReadFile(kSrc + "/docs/xid.md").find(RunBin("explain xid --all --markdown")),
            std::string::npos)
      << "docs/xid.md is out of date: run `make golden`";
}

}  // namespace
}  // namespace gpuheal
