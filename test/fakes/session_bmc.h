#pragma once
// A BMC double that speaks the DMTF Redfish session protocol (DSP0266 "Session management"), for
// the tests of the client's session auth and of the redfish rung's sessions: a POST of UserName
// and Password to the SessionService's Sessions collection answers 201 with X-Auth-Token and
// Location; every other request needs that token (HTTP basic is refused, as on BMCs that disable
// it); DELETE of the Location logs out. One ComputerSystem, /redfish/v1/Systems/1, whose reset
// turns its power Off. The sushy-tools emulator the integration tests run has no SessionService,
// hence this double.

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace gpuheal::testing {

class SessionBmc {
 public:
  SessionBmc() {
    using nlohmann::json;
    server_.Get("/redfish/v1/", [this](const httplib::Request& req, httplib::Response& res) {
      Seen(req);
      json root = {{"@odata.id", "/redfish/v1/"},
                   {"RedfishVersion", "1.15.0"},
                   {"Systems", {{"@odata.id", "/redfish/v1/Systems"}}}};
      if (!no_sessions) {
        root["SessionService"] = {{"@odata.id", "/redfish/v1/SessionService"}};
        root["Links"] = {{"Sessions", {{"@odata.id", "/redfish/v1/SessionService/Sessions"}}}};
      }
      res.set_content(root.dump(), "application/json");
    });
    server_.Post("/redfish/v1/SessionService/Sessions",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   Seen(req);
                   if (no_sessions) {
                     res.status = 405;
                     return;
                   }
                   const json body = json::parse(req.body, nullptr, false);
                   std::lock_guard<std::mutex> lock(mu_);
                   if (!body.is_object() || body.value("UserName", "") != "admin" ||
                       body.value("Password", "") != password_) {
                     res.status = 401;
                     res.set_content(Error("Base.1.8.NoValidSession", "Invalid credentials"),
                                     "application/json");
                     return;
                   }
                   const std::string id = std::to_string(++logins);
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
                         ++logouts;
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
          ++system_reads;
          std::lock_guard<std::mutex> lock(mu_);
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
                   ++resets;
                   std::lock_guard<std::mutex> lock(mu_);
                   power_ = "Off";
                   res.status = 204;
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (port_ > 0 && !server_.is_running())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~SessionBmc() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  SessionBmc(const SessionBmc&) = delete;
  SessionBmc& operator=(const SessionBmc&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Open sessions.
  size_t Sessions() {
    std::lock_guard<std::mutex> lock(mu_);
    return sessions_.size();
  }
  // The BMC ends every session (its idle timeout, its own restart).
  void EndSessions() {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_.clear();
  }
  // An operator rotates the BMC's password: a login with the old one is refused.
  void SetPassword(const std::string& p) {
    std::lock_guard<std::mutex> lock(mu_);
    password_ = p;
  }
  void SetPower(const std::string& p) {
    std::lock_guard<std::mutex> lock(mu_);
    power_ = p;
  }

  std::atomic<int> logins{0}, logouts{0}, resets{0}, system_reads{0}, basic_seen{0};
  std::atomic<bool> no_sessions{false};

 private:
  static std::string Error(const std::string& id, const std::string& message) {
    return nlohmann::json{{"error", {{"code", id}, {"message", message}}}}.dump();
  }
  void Seen(const httplib::Request& req) {
    if (req.has_header("Authorization")) ++basic_seen;
  }
  bool Authorized(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    if (sessions_.count(req.get_header_value("X-Auth-Token"))) return true;
    res.status = 401;
    res.set_content(Error("Base.1.8.NoValidSession", "There is no valid session"),
                    "application/json");
    return false;
  }

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::map<std::string, std::string> sessions_;  // token -> session id
  std::string password_ = "s3cret";
  std::string power_ = "On";
};

}  // namespace gpuheal::testing
