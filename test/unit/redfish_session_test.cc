// The Redfish client's session auth against a BMC double that speaks the DMTF session protocol
// (DSP0266 "Session management"): a POST of UserName and Password to the SessionService's
// Sessions collection answers 201 with X-Auth-Token and Location; every other request needs that
// token (HTTP basic is refused, as on BMCs that disable it); DELETE of the Location logs out. The
// sushy-tools emulator the integration tests run has no SessionService, hence this double.

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "bmc/redfish.h"
#include "controller/policy.h"

namespace gpuheal::bmc {
namespace {

using nlohmann::json;

class SessionBmc : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Get("/redfish/v1/", [this](const httplib::Request& req, httplib::Response& res) {
      Seen(req);
      json root = {{"@odata.id", "/redfish/v1/"},
                   {"RedfishVersion", "1.15.0"},
                   {"Systems", {{"@odata.id", "/redfish/v1/Systems"}}}};
      if (!no_sessions_) {
        root["SessionService"] = {{"@odata.id", "/redfish/v1/SessionService"}};
        root["Links"] = {{"Sessions", {{"@odata.id", "/redfish/v1/SessionService/Sessions"}}}};
      }
      res.set_content(root.dump(), "application/json");
    });
    server_.Post("/redfish/v1/SessionService/Sessions",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   Seen(req);
                   if (no_sessions_) {
                     res.status = 405;
                     return;
                   }
                   const json body = json::parse(req.body, nullptr, false);
                   if (!body.is_object() || body.value("UserName", "") != "admin" ||
                       body.value("Password", "") != "s3cret") {
                     res.status = 401;
                     res.set_content(Error("Base.1.8.NoValidSession", "Invalid credentials"),
                                     "application/json");
                     return;
                   }
                   std::lock_guard<std::mutex> lock(mu_);
                   const std::string id = std::to_string(++logins_);
                   const std::string token = "token-" + id;
                   sessions_[token] = id;
                   res.status = 201;
                   res.set_header("X-Auth-Token", token);
                   res.set_header("Location", "/redfish/v1/SessionService/Sessions/" + id);
                   res.set_content(json{{"@odata.id", "/redfish/v1/SessionService/Sessions/" + id},
                                        {"Id", id},
                                        {"UserName", "admin"}}
                                       .dump(),
                                   "application/json");
                 });
    server_.Delete(R"(/redfish/v1/SessionService/Sessions/(\d+))",
                   [this](const httplib::Request& req, httplib::Response& res) {
                     Seen(req);
                     if (!Authorized(req, res)) return;
                     std::lock_guard<std::mutex> lock(mu_);
                     for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
                       if (it->second == req.matches[1]) {
                         sessions_.erase(it);
                         ++logouts_;
                         break;
                       }
                     }
                     res.status = 204;
                   });
    server_.Get("/redfish/v1/Systems", [this](const httplib::Request& req, httplib::Response& res) {
      Seen(req);
      if (!Authorized(req, res)) return;
      res.set_content(R"({"Members": [{"@odata.id": "/redfish/v1/Systems/1"}]})",
                      "application/json");
    });
    server_.Get(
        "/redfish/v1/Systems/1", [this](const httplib::Request& req, httplib::Response& res) {
          Seen(req);
          if (!Authorized(req, res)) return;
          res.set_content(
              json{{"@odata.id", "/redfish/v1/Systems/1"},
                   {"Id", "1"},
                   {"Name", "gpu-node-7"},
                   {"PowerState", power_},
                   {"Actions",
                    {{"#ComputerSystem.Reset",
                      {{"target", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"},
                       {"ResetType@Redfish.AllowableValues", {"On", "ForceOff", "PowerCycle"}}}}}}}
                  .dump(),
              "application/json");
        });
    server_.Post("/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   Seen(req);
                   if (!Authorized(req, res)) return;
                   ++resets_;
                   power_ = "Off";
                   res.status = 204;
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void TearDown() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  static std::string Error(const std::string& id, const std::string& message) {
    return json{{"error", {{"code", id}, {"message", message}}}}.dump();
  }
  void Seen(const httplib::Request& req) {
    if (req.has_header("Authorization")) ++basic_seen_;
  }
  bool Authorized(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    if (sessions_.count(req.get_header_value("X-Auth-Token"))) return true;
    res.status = 401;
    res.set_content(Error("Base.1.8.NoValidSession", "There is no valid session"),
                    "application/json");
    return false;
  }
  size_t Sessions() {
    std::lock_guard<std::mutex> lock(mu_);
    return sessions_.size();
  }

  RedfishClient Client(const std::string& password = "s3cret") {
    ClientOptions o;
    o.auth = Auth::kSession;
    o.timeout = std::chrono::seconds(5);
    o.backoff = std::chrono::milliseconds(10);
    return RedfishClient(*ParseEndpoint("http://127.0.0.1:" + std::to_string(port_)),
                         {"admin", password}, o);
  }

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::map<std::string, std::string> sessions_;  // token -> session id
  std::atomic<int> logins_{0}, logouts_{0}, resets_{0}, basic_seen_{0};
  std::atomic<bool> no_sessions_{false};
  std::string power_ = "On";
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
    EXPECT_EQ(Sessions(), 1u);
  }
  EXPECT_EQ(logins_, 1) << "one session for the client's requests";
  EXPECT_EQ(resets_, 1);
  EXPECT_EQ(logouts_, 1) << "logged out when the client went";
  EXPECT_EQ(Sessions(), 0u);
  EXPECT_EQ(basic_seen_, 0) << "the password travels only in the login's body";
}

// The BMC ended the session (its idle timeout, its own reboot): a 401 was not acted on, so the
// request goes again in a new session, once.
TEST_F(SessionBmc, AnEndedSessionIsOpenedAgainOnce) {
  auto c = Client();
  ASSERT_TRUE(c.System());
  {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_.clear();
  }
  auto s = c.System();
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_TRUE(c.Reset(*s, "PowerCycle").ok());
  EXPECT_EQ(logins_, 2);
  EXPECT_EQ(resets_, 1);
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
  EXPECT_EQ(resets_, 0);
  EXPECT_EQ(Sessions(), 0u);
}

TEST_F(SessionBmc, ABmcWithoutSessionsSaysToUseBasicAuth) {
  no_sessions_ = true;
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
