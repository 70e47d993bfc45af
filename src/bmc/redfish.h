#pragma once
// A DMTF Redfish client for one BMC: the ComputerSystem's power state and the reset action that
// power-cycles a node out of band. libcurl; one easy handle per request (a repair makes a handful).
//
// Endpoints: https://bmc[:port] (the service's only ComputerSystem is found under
// /redfish/v1/Systems) or https://bmc[:port]/redfish/v1/Systems/<id> (a BMC that manages several).
// Reads are retried with backoff on timeouts, connection failures and 5xx; a reset is retried
// only when it cannot have reached the BMC (no connection) or the BMC said so (503): a reset
// that timed out may have happened, and is never sent twice. Redirects are followed only on the
// endpoint's own scheme, host and port: the credentials (or the session's token) never leave it.

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpuheal::bmc {

// Every ResetType of the Redfish schema (Resource.ResetType); a policy may name only these.
inline constexpr std::string_view kResetTypes[] = {
    "On",    "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart",
    "Nmi",   "ForceOn",  "PushPowerButton",  "PowerCycle",      "Suspend",
    "Pause", "Resume",   "FullPowerCycle"};
bool IsResetType(std::string_view t);

struct Credentials {
  std::string username, password;
};

// How the client proves who it is: HTTP basic on every request, or a Redfish session (a POST to
// the SessionService's Sessions collection with the user and password, then its X-Auth-Token on
// every request; logged out when the client goes, logged in again once when the BMC ends it).
enum class Auth { kBasic, kSession };

struct ClientOptions {
  Auth auth = Auth::kBasic;
  std::string ca_file;    // PEM bundle that signs the BMC's certificate; empty: the system's
  bool insecure = false;  // no certificate verification (the caller warns)
  std::chrono::milliseconds timeout{10000};  // per request
  int attempts = 3;                          // per request, transient failures only
  std::chrono::milliseconds backoff{500};    // before the second attempt, doubled after
  // Where the BMC's host name connects ("host:port:addr[,addr]", libcurl's CURLOPT_RESOLVE): the
  // addresses an allow-list check resolved and accepted (bmc/endpoint_policy.h); empty: DNS.
  std::vector<std::string> resolve;
};

struct Endpoint {
  std::string base;    // scheme://host[:port]
  std::string system;  // /redfish/v1/Systems/<id>, or empty: discover it
};
// Parses an endpoint (see above). Errors say what is accepted.
Result<Endpoint> ParseEndpoint(std::string_view url);

struct SystemState {
  std::string path;  // /redfish/v1/Systems/<id>
  std::string id, name;
  std::string power_state;               // On, Off, PoweringOn, PoweringOff, Paused or ""
  std::vector<std::string> reset_types;  // the BMC's AllowableValues; empty: it does not say
  std::string reset_target;              // the action's URI
  std::string action_info;               // @Redfish.ActionInfo, when it lists the values there
};

// The decoders, public for the fuzz target and the unit tests.
Result<SystemState> DecodeSystem(std::string_view json);
Result<std::vector<std::string>> DecodeMembers(std::string_view json);  // a collection's @odata.ids
Result<std::vector<std::string>> DecodeActionInfoResetTypes(std::string_view json);
// The message of a Redfish error body ({"error": {"message", "@Message.ExtendedInfo"}}); "" if
// none.
std::string DecodeErrorMessage(std::string_view json);

// The username and password of a Kubernetes Secret (its JSON as the API serves it, the values
// base64 in `data`); `name` (NAMESPACE/NAME) is for the errors.
Result<Credentials> CredentialsFromSecret(std::string_view secret_json, const std::string& name);

// The first of `preference` that the system allows; when the BMC lists none, the first
// preference (the BMC decides). Error when the BMC lists values and none is preferred.
Result<std::string> ChooseResetType(const SystemState& s,
                                    const std::vector<std::string>& preference);

class RedfishClient {
 public:
  RedfishClient(Endpoint endpoint, Credentials credentials, ClientOptions options);
  ~RedfishClient();  // a session's logout (DELETE), best effort
  RedfishClient(const RedfishClient&) = delete;
  RedfishClient& operator=(const RedfishClient&) = delete;

  // Discovers the system when the endpoint names none; reads its state.
  Result<SystemState> System();
  // Sends ComputerSystem.Reset with `reset_type` to the system read by System().
  Status Reset(const SystemState& s, const std::string& reset_type);

  // What each failed attempt of the last call said (for the repair record), oldest first.
  const std::vector<std::string>& attempts_log() const { return log_; }
  // Auth::kSession: the BMC answered the last session login with 401 or 403 (the credentials no
  // longer open a session), not merely failed to answer.
  bool login_refused() const { return login_refused_; }
  // The attempts of each later request (transient failures only).
  void set_attempts(int attempts) { options_.attempts = attempts; }
  std::string Describe() const;  // the endpoint, for messages

 private:
  struct Reply {
    long status = 0;
    std::string body;
    std::string token, location;  // the X-Auth-Token and Location headers, when present
  };
  Result<Reply> Call(const std::string& method, const std::string& path, const std::string& body,
                     bool idempotent);
  Result<Reply> Once(const std::string& method, const std::string& path, const std::string& body,
                     bool idempotent, bool authenticate);
  Status Login();
  Result<Reply> Get(const std::string& path);

  Endpoint endpoint_;
  Credentials credentials_;
  ClientOptions options_;
  std::vector<std::string> log_;
  std::string token_, session_;  // the session's X-Auth-Token and its URI (Auth::kSession)
  long last_status_ = 0;         // the HTTP status of the last answer; 0: none
  bool login_refused_ = false;
};

}  // namespace gpuheal::bmc
