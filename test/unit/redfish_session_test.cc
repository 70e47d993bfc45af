// The Redfish client's session auth against a BMC double that speaks the DMTF session protocol
// (test/fakes/session_bmc.h).

#include <gtest/gtest.h>

#include "bmc/redfish.h"
#include "controller/policy.h"
#include "fakes/session_bmc.h"

namespace gpuheal::bmc {
namespace {

class SessionBmc : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_GT(bmc_.port(), 0); }

  RedfishClient Client(const std::string& password = "s3cret") {
    ClientOptions o;
    o.auth = Auth::kSession;
    o.timeout = std::chrono::seconds(5);
    o.backoff = std::chrono::milliseconds(10);
    return RedfishClient(*ParseEndpoint(bmc_.url()), {"admin", password}, o);
  }

  gpuheal::testing::SessionBmc bmc_;
};

TEST_F(SessionBmc, OneLoginCarriesEveryRequestAndTheClientLogsOut) {
  {
    auto c = Client();
    auto s = c.System();
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->power_state, "On");
    ASSERT_TRUE(c.Reset(*s, "PowerCycle").ok());
    auto after = c.System();
    ASSERT_TRUE(after) << after.error().message;
    EXPECT_EQ(after->power_state, "Off");
    EXPECT_EQ(bmc_.Sessions(), 1u);
  }
  EXPECT_EQ(bmc_.logins, 1) << "one session for the client's requests";
  EXPECT_EQ(bmc_.resets, 1);
  EXPECT_EQ(bmc_.logouts, 1) << "logged out when the client went";
  EXPECT_EQ(bmc_.Sessions(), 0u);
  EXPECT_EQ(bmc_.basic_seen, 0) << "the password travels only in the login's body";
}

// The BMC ended the session (its idle timeout, its own reboot): a 401 was not acted on, so the
// request goes again in a new session, once.
TEST_F(SessionBmc, AnEndedSessionIsOpenedAgainOnce) {
  auto c = Client();
  ASSERT_TRUE(c.System());
  bmc_.EndSessions();
  auto s = c.System();
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_TRUE(c.Reset(*s, "PowerCycle").ok());
  EXPECT_EQ(bmc_.logins, 2);
  EXPECT_EQ(bmc_.resets, 1);
}

TEST_F(SessionBmc, AWrongPasswordNamesTheUserAndSendsNothingElse) {
  auto c = Client("wrong");
  auto s = c.System();
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("Redfish session login: POST http://127.0.0.1:"),
            std::string::npos)
      << s.error().message;
  EXPECT_NE(s.error().message.find("HTTP 401: Invalid credentials"), std::string::npos)
      << s.error().message;
  EXPECT_NE(s.error().message.find("check the user \"admin\""), std::string::npos);
  EXPECT_EQ(bmc_.resets, 0);
  EXPECT_EQ(bmc_.Sessions(), 0u);
}

TEST_F(SessionBmc, ABmcWithoutSessionsSaysToUseBasicAuth) {
  bmc_.no_sessions = true;
  auto c = Client();
  auto s = c.System();
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("has no Links.Sessions"), std::string::npos)
      << s.error().message;
  EXPECT_NE(s.error().message.find("set provider.redfish.auth to basic"), std::string::npos)
      << s.error().message;
}

TEST(RedfishAuth, ThePolicyChoosesBasicOrSession) {
  auto d = controller::ParsePolicy(
      "provider: {name: redfish, redfish: {endpoints_configmap: ops/bmc}}\n", "p.yaml");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_FALSE(d->redfish.session_auth) << "basic unless the policy says session";
  auto s = controller::ParsePolicy(
      "provider: {name: redfish, redfish: {auth: session, endpoints_configmap: ops/bmc}}\n",
      "p.yaml");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(s->redfish.session_auth);
  auto bad =
      controller::ParsePolicy("provider: {name: redfish, redfish: {auth: token}}\n", "p.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("p.yaml:1:43: \"provider.redfish.auth\" must be basic"),
            std::string::npos)
      << bad.error().message;
}

}  // namespace
}  // namespace gpuheal::bmc
