// The Redfish client's pure parts: endpoints, the decoders (fed the sushy-tools emulator's own
// answers, test/fixtures/redfish/), the reset type choice, and the redfish provider's policy.

#include "bmc/redfish.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "controller/policy.h"
#include "core/base64.h"

namespace gpuheal::bmc {
namespace {

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(GPUHEAL_SOURCE_DIR) + "/test/fixtures/redfish/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Redfish, EndpointsNameABmcAndOptionallyOneSystem) {
  auto e = ParseEndpoint("https://10.0.0.5");
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->base, "https://10.0.0.5");
  EXPECT_EQ(e->system, "");
  e = ParseEndpoint("https://bmc-17.example:8443/redfish/v1/");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->base, "https://bmc-17.example:8443");
  EXPECT_EQ(e->system, "");
  e = ParseEndpoint("http://127.0.0.1:8000/redfish/v1/Systems/System.Embedded.1/");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->system, "/redfish/v1/Systems/System.Embedded.1");
  for (const char* bad : {"10.0.0.5", "ftp://bmc", "https://", "https://user:pw@bmc",
                          "https://bmc/redfish/v1/Managers/1", "https://bmc/redfish/v1/Systems/1/x",
                          "https://bmc/other"}) {
    auto r = ParseEndpoint(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kUsage) << bad;
    EXPECT_NE(r.error().message.find("expected https://HOST"), std::string::npos)
        << r.error().message;
  }
}

TEST(Redfish, DecodesTheEmulatorsSystemCollectionAndErrors) {
  auto members = DecodeMembers(Fixture("sushy-systems.json"));
  ASSERT_TRUE(members) << members.error().message;
  ASSERT_EQ(members->size(), 1u);
  EXPECT_EQ(members->front(), "/redfish/v1/Systems/11111111-2222-3333-4444-555555555555");
  auto s = DecodeSystem(Fixture("sushy-system.json"));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->id, "11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(s->name, "node-a");
  EXPECT_EQ(s->power_state, "On");
  EXPECT_EQ(s->reset_target,
            "/redfish/v1/Systems/11111111-2222-3333-4444-555555555555/Actions/"
            "ComputerSystem.Reset");
  EXPECT_EQ(s->reset_types,
            (std::vector<std::string>{"On", "ForceOff", "GracefulShutdown", "GracefulRestart",
                                      "ForceRestart", "Nmi", "ForceOn"}));
  EXPECT_EQ(DecodeErrorMessage(Fixture("sushy-error-401.json")), "Incorrect username or password");
  EXPECT_EQ(DecodeErrorMessage(Fixture("sushy-error-501.json")),
            "Power state Nmi is not supported");
  EXPECT_EQ(DecodeErrorMessage("<html>502</html>"), "");
}

TEST(Redfish, ResetTypesFromActionInfoWhenTheActionDoesNotListThem) {
  auto s = DecodeSystem(Fixture("system-actioninfo.json"));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(s->reset_types.empty());
  EXPECT_EQ(s->action_info, "/redfish/v1/Systems/1/ResetActionInfo");
  auto types = DecodeActionInfoResetTypes(Fixture("actioninfo-reset.json"));
  ASSERT_TRUE(types) << types.error().message;
  EXPECT_EQ(*types, (std::vector<std::string>{"On", "ForceOff", "GracefulShutdown", "ForceRestart",
                                              "PowerCycle"}));
}

TEST(Redfish, ASystemWithoutAResetActionIsAnError) {
  for (const char* bad :
       {"{}", R"({"Actions": {}})",
        R"({"Actions": {"#ComputerSystem.Reset": {"target": "relative"}}})", "[1]", "not json"}) {
    EXPECT_FALSE(DecodeSystem(bad)) << bad;
  }
}

TEST(Redfish, TheFirstPreferredResetTypeTheBmcAllowsIsChosen) {
  SystemState s;
  s.reset_types = {"On", "ForceOff", "ForceRestart", "GracefulRestart"};
  EXPECT_EQ(*ChooseResetType(s, {"PowerCycle", "ForceRestart", "GracefulRestart"}), "ForceRestart");
  EXPECT_EQ(*ChooseResetType(s, {"GracefulRestart", "ForceRestart"}), "GracefulRestart");
  auto none = ChooseResetType(s, {"PowerCycle"});
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("it allows On, ForceOff, ForceRestart, GracefulRestart"),
            std::string::npos)
      << none.error().message;
  s.reset_types.clear();  // the BMC does not say: the first preference, the BMC decides
  EXPECT_EQ(*ChooseResetType(s, {"PowerCycle", "ForceRestart"}), "PowerCycle");
  EXPECT_TRUE(IsResetType("PowerCycle"));
  EXPECT_FALSE(IsResetType("Reboot"));
}

TEST(Redfish, PolicyDefaultsAndOverrides) {
  auto d = controller::ParsePolicy(
      "provider:\n  name: redfish\n  redfish: {endpoints_configmap: ops/bmc}\n", "p.yaml");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->provider, controller::Provider::kRedfish);
  EXPECT_EQ(d->redfish.credentials_secret, "gpuheal-system/gpuheal-bmc");
  EXPECT_EQ(d->redfish.reset_types,
            (std::vector<std::string>{"PowerCycle", "ForceRestart", "GracefulRestart"}));
  EXPECT_EQ(d->redfish.recovery_timeout, std::chrono::minutes(15));
  auto p = controller::ParsePolicy(R"(
provider:
  name: redfish
  redfish:
    credentials_secret: ops/bmc
    endpoints_configmap: ops/bmc-endpoints
    ca_file: /etc/gpuheal/bmc-ca.crt
    insecure_skip_verify: false
    reset_types: [GracefulRestart]
    request_timeout: 3s
    attempts: 5
    recovery_timeout: 20m
)",
                                   "p.yaml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->redfish.credentials_secret, "ops/bmc");
  EXPECT_EQ(p->redfish.endpoints_configmap, "ops/bmc-endpoints");
  EXPECT_EQ(p->redfish.ca_file, "/etc/gpuheal/bmc-ca.crt");
  EXPECT_EQ(p->redfish.reset_types, std::vector<std::string>{"GracefulRestart"});
  EXPECT_EQ(p->redfish.request_timeout, std::chrono::seconds(3));
  EXPECT_EQ(p->redfish.attempts, 5);
  EXPECT_EQ(p->redfish.recovery_timeout, std::chrono::minutes(20));
}

TEST(Redfish, CredentialsFromASecret) {
  auto c = CredentialsFromSecret(R"({"data": {"username": "YWRtaW4=", "password": "czNjcmV0"}})",
                                 "ops/bmc");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->username, "admin");
  EXPECT_EQ(c->password, "s3cret");
  auto missing = CredentialsFromSecret(R"({"data": {"username": "YWRtaW4="}})", "ops/bmc");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "Secret ops/bmc has no \"password\"");
  auto bad = CredentialsFromSecret(R"({"data": {"username": "*", "password": "eA=="}})", "ops/bmc");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "Secret ops/bmc username: not valid base64");
  EXPECT_FALSE(CredentialsFromSecret("not json", "ops/bmc"));
}

TEST(Base64, DecodesSecretValues) {
  EXPECT_EQ(*Base64Decode("YWRtaW4=", "x"), "admin");
  EXPECT_EQ(*Base64Decode("czNjcmV0", "x"), "s3cret");
  EXPECT_EQ(*Base64Decode("", "x"), "");
  auto bad = Base64Decode("a*b", "Secret s password");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "Secret s password: not valid base64");
}

}  // namespace
}  // namespace gpuheal::bmc
