// The Redfish client and `gpuheal bmc` against a real Redfish service (sushy-tools' emulator,
// bmc_emulator.h): discovery, power state, a reset the BMC carries out, a reset type it refuses,
// a wrong password, a BMC that is down, one that never answers, and TLS verified against a CA.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "bmc/redfish.h"
#include "bmc_emulator.h"
#include "run_binary.h"

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using gpuheal::testing::BmcEmulator;
using gpuheal::testing::RunGpuheal;
using nlohmann::json;

constexpr const char* kUuid = "8a5b2c1e-0000-4000-8000-00000000a001";

class BmcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuheal-bmc-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::ofstream(dir_ + "/password") << "s3cret\n";
    std::ofstream(dir_ + "/wrong") << "guess\n";
  }
  void TearDown() override {
    emulator_.reset();
    std::filesystem::remove_all(dir_);
  }
  BmcEmulator& Start(bool tls = false) {
    emulator_ = std::make_unique<BmcEmulator>(
        dir_, std::vector<BmcEmulator::System>{{kUuid, "gpu-node-1", "On"}}, "s3cret", tls);
    return *emulator_;
  }
  // The emulator speaks plain http unless started with TLS: allowed explicitly.
  std::string Creds(const std::string& file = "password") const {
    return fmt::format("--username admin --password-file {}/{} --allow-insecure-http", dir_, file);
  }
  bmc::RedfishClient Client(const std::string& url, const std::string& password = "s3cret",
                            bmc::ClientOptions o = {}) {
    return bmc::RedfishClient(*bmc::ParseEndpoint(url), {"admin", password}, o);
  }

  std::string dir_;
  std::unique_ptr<BmcEmulator> emulator_;
};

TEST_F(BmcTest, StatusDiscoversTheOnlySystemAndReadsItsPowerState) {
  auto& bmc = Start();
  auto r =
      RunGpuheal(fmt::format("bmc status --endpoint {} {} -o json", bmc.url(), Creds()), false);
  ASSERT_EQ(r.code, 0) << r.out;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["system"], fmt::format("/redfish/v1/Systems/{}", kUuid));
  EXPECT_EQ(j["name"], "gpu-node-1");
  EXPECT_EQ(j["powerState"], "On");
  const auto types = j["resetTypes"].get<std::vector<std::string>>();
  EXPECT_TRUE(std::find(types.begin(), types.end(), "ForceRestart") != types.end()) << r.out;
  // A system named by its Name: the BMC redirects to its Id, the credentials follow.
  r = RunGpuheal(
      fmt::format("bmc status --endpoint {}/redfish/v1/Systems/gpu-node-1 {}", bmc.url(), Creds()));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("POWER     On"), std::string::npos) << r.out;
}

TEST_F(BmcTest, AResetIsCarriedOutOnceAndThePowerGoesOffAndOnAgain) {
  auto& bmc = Start();
  auto client = Client(bmc.url());
  // The emulator applies the restart 1 to 11 s after the reset, counted from a whole second: now
  // and then the Off lasts only milliseconds and ends before the first look. A second reset is
  // then sent, one at a time, each carried out once.
  bool off = false, back = false;
  int resets = 0;
  while (resets < 2 && !off) {
    // PowerCycle first: this BMC does not offer it, so the next preference is sent.
    auto r = RunGpuheal(fmt::format("bmc reset --endpoint {} {}", bmc.url(), Creds()));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("ForceRestart accepted"), std::string::npos) << r.out;
    ++resets;
    EXPECT_EQ(bmc.Resets(), resets) << "each reset carried out once: " << bmc.Log();
    // Off at once, On again within 11 s.
    const auto deadline = std::chrono::steady_clock::now() + 12s;
    while (std::chrono::steady_clock::now() < deadline) {
      auto s = client.System();
      ASSERT_TRUE(s) << s.error().message;
      off |= s->power_state == "Off";
      if (off && s->power_state == "On") {
        back = true;
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
  }
  EXPECT_TRUE(off) << "the system went down";
  EXPECT_TRUE(back) << "and came back";
}

TEST_F(BmcTest, AResetTypeTheBmcRefusesIsReportedAndNotRetried) {
  auto& bmc = Start();
  // Not offered at all: refused before anything is sent.
  auto r = RunGpuheal(
      fmt::format("bmc reset --endpoint {} {} --reset-type PowerCycle", bmc.url(), Creds()));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("allows none of the configured reset types (PowerCycle)"), std::string::npos)
      << r.out;
  // Offered, refused by the BMC (501): its own message, one attempt.
  r = RunGpuheal(fmt::format("bmc reset --endpoint {} {} --reset-type Nmi", bmc.url(), Creds()));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("HTTP 501: Power state Nmi is not supported"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("attempt 1 of 3"), std::string::npos) << r.out;
  EXPECT_EQ(bmc.Resets(), 0);
  // Not a ResetType of the schema: a usage error.
  r = RunGpuheal(fmt::format("bmc reset --endpoint {} {} --reset-type Reboot", bmc.url(), Creds()));
  EXPECT_EQ(r.code, 2) << r.out;
}

TEST_F(BmcTest, AWrongPasswordIsNamedAndNotRetried) {
  auto& bmc = Start();
  auto r = RunGpuheal(fmt::format("bmc status --endpoint {} {}", bmc.url(), Creds("wrong")));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("HTTP 401"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("check the user \"admin\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("attempt 1 of 3"), std::string::npos) << r.out;
}

// The emulator has no SessionService: --auth session says so and what to use instead.
TEST_F(BmcTest, SessionAuthAgainstABmcWithoutSessionsSaysToUseBasic) {
  auto& bmc = Start();
  auto r =
      RunGpuheal(fmt::format("bmc status --auth session --endpoint {} {}", bmc.url(), Creds()));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("Redfish session login"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("set provider.redfish.auth to basic"), std::string::npos) << r.out;
  EXPECT_EQ(bmc.Resets(), 0);
}

TEST_F(BmcTest, ABmcThatIsDownIsRetriedWithBackoffThenReported) {
  auto& bmc = Start();
  const std::string url = bmc.url();
  bmc.Stop();
  bmc::ClientOptions o;
  o.attempts = 3;
  o.backoff = 200ms;
  auto client = Client(url, "s3cret", o);
  const auto t0 = std::chrono::steady_clock::now();
  auto s = client.System();
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("attempt 3 of 3"), std::string::npos) << s.error().message;
  EXPECT_EQ(client.attempts_log().size(), 3u);
  EXPECT_GE(took, 600ms) << "backoff 200 ms, then 400 ms";
  // A reset that cannot have reached the BMC is retried too.
  bmc::SystemState sys;
  sys.reset_target = "/redfish/v1/Systems/x/Actions/ComputerSystem.Reset";
  auto sent = client.Reset(sys, "ForceRestart");
  ASSERT_FALSE(sent);
  EXPECT_EQ(client.attempts_log().size(), 3u) << sent.error().message;
}

TEST_F(BmcTest, ABmcThatNeverAnswersTimesOutAndAResetIsNotSentTwice) {
  gpuheal::testing::SilentServer hung;
  bmc::ClientOptions o;
  o.timeout = 500ms;
  o.attempts = 2;
  o.backoff = 50ms;
  auto client = Client(hung.url(), "s3cret", o);
  auto s = client.System();
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("no answer within 500 ms"), std::string::npos)
      << s.error().message;
  EXPECT_EQ(client.attempts_log().size(), 2u) << "a read is retried";
  bmc::SystemState sys;
  sys.reset_target = "/redfish/v1/Systems/x/Actions/ComputerSystem.Reset";
  auto sent = client.Reset(sys, "ForceRestart");
  ASSERT_FALSE(sent);
  EXPECT_EQ(client.attempts_log().size(), 1u) << "a reset that may have arrived is not resent";
  EXPECT_NE(sent.error().message.find("may have acted on it"), std::string::npos)
      << sent.error().message;
  // The command line: exit 1 with the same words, within its --timeout.
  auto r = RunGpuheal(fmt::format("bmc status --endpoint {} {} --timeout 1", hung.url(), Creds()));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("no answer within 1000 ms"), std::string::npos) << r.out;
}

TEST_F(BmcTest, TlsIsVerifiedAgainstTheConfiguredCa) {
  auto& bmc = Start(true);
  auto r = RunGpuheal(
      fmt::format("bmc status --endpoint {} {} --ca-file {}", bmc.url(), Creds(), bmc.ca_file()));
  EXPECT_EQ(r.code, 0) << r.out;
  // Without the CA: refused, and the message says what to configure.
  r = RunGpuheal(fmt::format("bmc status --endpoint {} {}", bmc.url(), Creds()));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("TLS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ca_file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("attempt 1 of 3"), std::string::npos) << "not retried: " << r.out;
  // Insecure only when asked, with a warning.
  r = RunGpuheal(
      fmt::format("bmc status --endpoint {} {} --insecure-skip-verify", bmc.url(), Creds()));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("warning: the BMC's certificate is not verified"), std::string::npos)
      << r.out;
}

// Where the password may go: plain http only with --allow-insecure-http, and with
// --allowed-endpoint only inside it. A refused endpoint is a usage error and gets no request.
TEST_F(BmcTest, PlainHttpAndEndpointsOutsideTheAllowListAreRefusedBeforeAnyRequest) {
  gpuheal::testing::ConnectionCounter stand_in;
  const std::string creds = fmt::format("--username admin --password-file {}/password", dir_);
  auto r = RunGpuheal(fmt::format("bmc status --endpoint {} {}", stand_in.url("http"), creds));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("is plain http"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--allow-insecure-http"), std::string::npos) << r.out;
  r =
      RunGpuheal(fmt::format("bmc reset --endpoint {} {} --allowed-endpoint 127.0.0.2/32 "
                             "--allowed-endpoint bmc.example.com",
                             stand_in.url("https"), creds));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("outside provider.redfish.allowed_endpoints (127.0.0.2/32, "
                       "bmc.example.com)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(stand_in.connections(), 0);
  // Inside the allow-list, with http allowed: the BMC answers.
  auto& bmc = Start();
  r = RunGpuheal(fmt::format("bmc status --endpoint {} {} --allowed-endpoint 127.0.0.0/8",
                             bmc.url(), Creds()));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("warning: plain http"), std::string::npos) << r.out;
}

TEST_F(BmcTest, UsageErrorsExitTwo) {
  for (const std::string args :
       {"bmc status", "bmc status --endpoint ftp://bmc --username a --password-file /dev/null",
        "bmc status --endpoint https://bmc/redfish/v1/Managers/1 --username a --password-file x",
        "bmc status --endpoint https://bmc --username a",
        "bmc status node-1 --endpoint https://bmc --username a --password-file x"}) {
    auto r = RunGpuheal(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
  }
}

}  // namespace
}  // namespace gpuheal

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
