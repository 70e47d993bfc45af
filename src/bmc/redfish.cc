#include "bmc/redfish.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/base64.h"
#include "core/curl_library.h"

namespace gpuheal::bmc {
namespace {

constexpr std::string_view kSystems = "/redfish/v1/Systems";
constexpr size_t kMaxBody = 4 << 20;

std::string Clip(std::string_view s, size_t n = 256) {
  return std::string(s.substr(0, std::min(n, s.size())));
}

Result<simdjson::dom::object> Object(simdjson::dom::parser& parser, std::string_view json,
                                     std::string_view what) {
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err) {
    return Error{fmt::format("the BMC's {} is not JSON ({})", what, simdjson::error_message(err))};
  }
  simdjson::dom::object obj;
  if (doc.get_object().get(obj)) return Error{fmt::format("the BMC's {} is not an object", what)};
  return obj;
}

// The response headers a session needs (names are case-insensitive).
struct SessionHeaders {
  std::string token, location;
};

size_t HeaderCb(char* data, size_t size, size_t n, void* user) {
  auto* h = static_cast<SessionHeaders*>(user);
  std::string_view line(data, size * n);
  const auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
      value.remove_suffix(1);
    if (name == "x-auth-token") h->token = value;
    if (name == "location") h->location = value;
  }
  return size * n;
}

constexpr std::string_view kSessions = "/redfish/v1/SessionService/Sessions";

size_t WriteCb(char* data, size_t size, size_t n, void* user) {
  auto* body = static_cast<std::string*>(user);
  if (body->size() + size * n > kMaxBody) return 0;  // fails the transfer: CURLE_WRITE_ERROR
  body->append(data, size * n);
  return size * n;
}

}  // namespace

bool IsResetType(std::string_view t) {
  return std::find(std::begin(kResetTypes), std::end(kResetTypes), t) != std::end(kResetTypes);
}

Result<Endpoint> ParseEndpoint(std::string_view url) {
  const std::string shape =
      "expected https://HOST[:PORT] or https://HOST[:PORT]/redfish/v1/Systems/ID";
  Endpoint e;
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) {
    return Error{fmt::format("BMC endpoint \"{}\" has no scheme; {}", Clip(url), shape),
                 ErrorCode::kUsage};
  }
  const std::string_view scheme = url.substr(0, scheme_end);
  if (scheme != "https" && scheme != "http") {
    return Error{
        fmt::format("BMC endpoint \"{}\": scheme must be https (or http); {}", Clip(url), shape),
        ErrorCode::kUsage};
  }
  const size_t host_start = scheme_end + 3;
  size_t path_start = url.find('/', host_start);
  if (path_start == std::string_view::npos) path_start = url.size();
  const std::string_view host = url.substr(host_start, path_start - host_start);
  if (host.empty() || host.find_first_of(" @?#") != std::string_view::npos) {
    return Error{fmt::format("BMC endpoint \"{}\": bad host \"{}\" (credentials come from the "
                             "Secret, not the URL); {}",
                             Clip(url), Clip(host), shape),
                 ErrorCode::kUsage};
  }
  e.base = std::string(url.substr(0, path_start));
  std::string_view path = url.substr(path_start);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.empty() || path == "/redfish/v1" || path == kSystems) return e;
  const std::string prefix = std::string(kSystems) + "/";
  if (path.starts_with(prefix) && path.size() > prefix.size() &&
      path.substr(prefix.size()).find_first_of("/?# ") == std::string_view::npos) {
    e.system = std::string(path);
    return e;
  }
  return Error{fmt::format("BMC endpoint \"{}\": path \"{}\" is not a ComputerSystem; {}",
                           Clip(url), Clip(path), shape),
               ErrorCode::kUsage};
}

Result<SystemState> DecodeSystem(std::string_view json) {
  simdjson::dom::parser parser;
  GPUHEAL_TRY(obj, Object(parser, json, "ComputerSystem"));
  SystemState s;
  std::string_view v;
  if (!obj["@odata.id"].get_string().get(v)) s.path = Clip(v, 512);
  if (!obj["Id"].get_string().get(v)) s.id = Clip(v);
  if (!obj["Name"].get_string().get(v)) s.name = Clip(v);
  if (!obj["PowerState"].get_string().get(v)) s.power_state = Clip(v, 32);
  simdjson::dom::object reset;
  if (obj.at_pointer("/Actions/#ComputerSystem.Reset").get_object().get(reset)) {
    return Error{"the ComputerSystem has no #ComputerSystem.Reset action"};
  }
  if (reset["target"].get_string().get(v) || !v.starts_with("/")) {
    return Error{"the ComputerSystem's #ComputerSystem.Reset action has no target path"};
  }
  s.reset_target = Clip(v, 512);
  simdjson::dom::array allowed;
  if (!reset["ResetType@Redfish.AllowableValues"].get_array().get(allowed)) {
    for (simdjson::dom::element t : allowed) {
      if (!t.get_string().get(v) && s.reset_types.size() < 32) s.reset_types.push_back(Clip(v, 32));
    }
  }
  if (!reset["@Redfish.ActionInfo"].get_string().get(v) && v.starts_with("/"))
    s.action_info = Clip(v, 512);
  return s;
}

Result<std::vector<std::string>> DecodeMembers(std::string_view json) {
  simdjson::dom::parser parser;
  GPUHEAL_TRY(obj, Object(parser, json, "Systems collection"));
  simdjson::dom::array members;
  if (obj["Members"].get_array().get(members))
    return Error{"the BMC's Systems collection has no Members list"};
  std::vector<std::string> out;
  for (simdjson::dom::element m : members) {
    std::string_view id;
    if (!m["@odata.id"].get_string().get(id) && id.starts_with("/") && out.size() < 64)
      out.push_back(Clip(id, 512));
  }
  return out;
}

Result<std::vector<std::string>> DecodeActionInfoResetTypes(std::string_view json) {
  simdjson::dom::parser parser;
  GPUHEAL_TRY(obj, Object(parser, json, "ActionInfo"));
  simdjson::dom::array params;
  if (obj["Parameters"].get_array().get(params))
    return Error{"the BMC's ActionInfo has no Parameters list"};
  std::vector<std::string> out;
  for (simdjson::dom::element p : params) {
    std::string_view name;
    if (p["Name"].get_string().get(name) || name != "ResetType") continue;
    simdjson::dom::array values;
    if (p["AllowableValues"].get_array().get(values)) continue;
    for (simdjson::dom::element t : values) {
      std::string_view v;
      if (!t.get_string().get(v) && out.size() < 32) out.push_back(Clip(v, 32));
    }
  }
  return out;
}

std::string DecodeErrorMessage(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json.data(), json.size()).get(doc)) return "";
  simdjson::dom::object err;
  if (doc["error"].get_object().get(err)) return "";
  std::string out;
  std::string_view v;
  if (!err["message"].get_string().get(v)) out = Clip(v, 512);
  simdjson::dom::array info;
  if (!err["@Message.ExtendedInfo"].get_array().get(info)) {
    for (simdjson::dom::element m : info) {
      if (m["Message"].get_string().get(v) || v.empty()) continue;
      if (out.find(v) != std::string::npos) continue;
      out += (out.empty() ? "" : "; ") + Clip(v, 512);
      if (out.size() > 1024) break;
    }
  }
  return out;
}

Result<Credentials> CredentialsFromSecret(std::string_view secret_json, const std::string& name) {
  const auto secret = nlohmann::json::parse(secret_json, nullptr, false);
  Credentials out;
  for (const char* key : {"username", "password"}) {
    if (!secret.is_object() || !secret.contains("data") || !secret["data"].is_object() ||
        !secret["data"].contains(key) || !secret["data"][key].is_string()) {
      return Error{fmt::format("Secret {} has no \"{}\"", name, key)};
    }
    auto value = Base64Decode(secret["data"][key].get<std::string>(),
                              fmt::format("Secret {} {}", name, key));
    if (!value) return value.error();
    (std::string_view(key) == "username" ? out.username : out.password) = std::move(*value);
  }
  return out;
}

Result<std::string> ChooseResetType(const SystemState& s,
                                    const std::vector<std::string>& preference) {
  if (preference.empty()) return Error{"no reset type is configured"};
  if (s.reset_types.empty()) return preference.front();
  for (const auto& p : preference) {
    if (std::find(s.reset_types.begin(), s.reset_types.end(), p) != s.reset_types.end()) return p;
  }
  std::string offered, wanted;
  for (const auto& t : s.reset_types) offered += (offered.empty() ? "" : ", ") + t;
  for (const auto& t : preference) wanted += (wanted.empty() ? "" : ", ") + t;
  return Error{fmt::format(
      "the BMC allows none of the configured reset types ({}); it allows {}: configure one of "
      "them (provider.redfish.reset_types, --reset-type)",
      wanted, offered)};
}

RedfishClient::RedfishClient(Endpoint endpoint, Credentials credentials, ClientOptions options)
    : endpoint_(std::move(endpoint)),
      credentials_(std::move(credentials)),
      options_(std::move(options)) {}

RedfishClient::~RedfishClient() {
  if (session_.empty()) return;
  // Logged out, so that sessions do not pile up until the BMC's limit; briefly: the caller is
  // done with the BMC.
  options_.attempts = 1;
  options_.timeout = std::min<std::chrono::milliseconds>(options_.timeout, std::chrono::seconds(2));
  (void)Once("DELETE", session_, "", true, true);
}

std::string RedfishClient::Describe() const { return endpoint_.base + endpoint_.system; }

Status RedfishClient::Login() {
  const std::string body = nlohmann::json{
      {"UserName", credentials_.username},
      {"Password",
       credentials_.password}}.dump();
  // The Sessions collection, from the service root (readable without credentials): its
  // Links.Sessions, else the well-known URI when the root cannot be read.
  std::string sessions(kSessions);
  if (auto root = Once("GET", "/redfish/v1/", "", true, false); root) {
    const auto j = nlohmann::json::parse(root->body, nullptr, false);
    const nlohmann::json* link = nullptr;
    if (j.is_object() && j.contains("Links") && j["Links"].is_object() &&
        j["Links"].contains("Sessions") && j["Links"]["Sessions"].is_object())
      link = &j["Links"]["Sessions"];
    if (!link || !link->contains("@odata.id") || !(*link)["@odata.id"].is_string()) {
      return Error{fmt::format(
          "Redfish session login to {}: the BMC offers no Redfish sessions (its service root "
          "/redfish/v1 has no Links.Sessions): set provider.redfish.auth to basic",
          endpoint_.base)};
    }
    sessions = (*link)["@odata.id"].get<std::string>();
  }
  log_.clear();
  auto reply = Once("POST", sessions, body, true, false);
  if (!reply) {
    login_refused_ = last_status_ == 401 || last_status_ == 403;
    std::string why = reply.error().message;
    if (why.find("HTTP 404") != std::string::npos || why.find("HTTP 405") != std::string::npos)
      why += "; the BMC offers no Redfish sessions: set provider.redfish.auth to basic";
    return Error{"Redfish session login: " + why};
  }
  if (reply->token.empty())
    return Error{
        fmt::format("Redfish session login to {}: the BMC answered {} without an "
                    "X-Auth-Token",
                    endpoint_.base, reply->status)};
  login_refused_ = false;
  token_ = reply->token;
  // Location: the session's URI, absolute or a path; kept as a path on this BMC.
  session_ = reply->location;
  if (!session_.starts_with("/")) {
    const auto at = session_.find("/redfish/");
    session_ = at == std::string::npos ? "" : session_.substr(at);
  }
  return Status::Ok();
}

Result<RedfishClient::Reply> RedfishClient::Call(const std::string& method, const std::string& path,
                                                 const std::string& body, bool idempotent) {
  if (options_.auth != Auth::kSession) return Once(method, path, body, idempotent, true);
  if (token_.empty()) GPUHEAL_CHECK(Login());
  auto reply = Once(method, path, body, idempotent, true);
  if (!reply && last_status_ == 401) {
    // The BMC ended the session (its idle timeout, its own restart): a 401 was not acted on, so
    // the request goes again, once, in a new session.
    token_.clear();
    session_.clear();
    GPUHEAL_CHECK(Login());
    reply = Once(method, path, body, idempotent, true);
  }
  return reply;
}

Result<RedfishClient::Reply> RedfishClient::Once(const std::string& method, const std::string& path,
                                                 const std::string& body, bool idempotent,
                                                 bool authenticate) {
  std::string url = endpoint_.base + path;
  const int attempts = std::max(1, options_.attempts);
  auto backoff = options_.backoff;
  std::string last;
  last_status_ = 0;
  int redirects = 0;
  bool redirected = false;
  for (int i = 1; i <= attempts; ++i) {
    if (i > 1 && !redirected) {
      std::this_thread::sleep_for(backoff);
      backoff *= 2;
    }
    redirected = false;
    auto lib = LoadCurl();
    if (!lib) return lib.error();
    const CurlLibrary& curl = **lib;
    std::unique_ptr<CURL, void (*)(CURL*)> h(curl.easy_init(), curl.easy_cleanup);
    if (!h) return Error{"libcurl: cannot create a handle"};
    Reply reply;
    curl_slist* headers = nullptr;
    headers = curl.slist_append(headers, "Accept: application/json");
    headers = curl.slist_append(headers, "OData-Version: 4.0");
    if (!body.empty()) headers = curl.slist_append(headers, "Content-Type: application/json");
    const bool session = options_.auth == Auth::kSession;
    const std::string token_header = "X-Auth-Token: " + token_;
    if (authenticate && session) headers = curl.slist_append(headers, token_header.c_str());
    std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_guard(headers, curl.slist_free_all);
    CURL* c = h.get();
    curl.easy_setopt(c, CURLOPT_URL, url.c_str());
    curl.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    // Redirects are followed below, on this endpoint only: libcurl would send a custom header
    // (a session's X-Auth-Token) on to any host a redirect names.
    curl.easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_slist* pins = nullptr;
    for (const auto& r : options_.resolve) pins = curl.slist_append(pins, r.c_str());
    std::unique_ptr<curl_slist, void (*)(curl_slist*)> pins_guard(pins, curl.slist_free_all);
    if (pins) curl.easy_setopt(c, CURLOPT_RESOLVE, pins);
    if (authenticate && !session) {
      curl.easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
      curl.easy_setopt(c, CURLOPT_USERNAME, credentials_.username.c_str());
      curl.easy_setopt(c, CURLOPT_PASSWORD, credentials_.password.c_str());
    }
    SessionHeaders got;
    curl.easy_setopt(c, CURLOPT_HEADERFUNCTION, HeaderCb);
    curl.easy_setopt(c, CURLOPT_HEADERDATA, &got);
    curl.easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout.count()));
    curl.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::min<int64_t>(options_.timeout.count(), 5000)));
    curl.easy_setopt(c, CURLOPT_USERAGENT, "gpuheal/" GPUHEAL_VERSION);
    curl.easy_setopt(c, CURLOPT_SSL_VERIFYPEER, options_.insecure ? 0L : 1L);
    curl.easy_setopt(c, CURLOPT_SSL_VERIFYHOST, options_.insecure ? 0L : 2L);
    if (!options_.ca_file.empty()) curl.easy_setopt(c, CURLOPT_CAINFO, options_.ca_file.c_str());
    curl.easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl.easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    if (!body.empty() || method == "POST") {
      curl.easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
      curl.easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    }
    curl.easy_setopt(c, CURLOPT_WRITEFUNCTION, WriteCb);
    curl.easy_setopt(c, CURLOPT_WRITEDATA, &reply.body);
    const CURLcode rc = curl.easy_perform(c);
    const std::string where = fmt::format("{} {} (attempt {} of {})", method, url, i, attempts);
    if (rc != CURLE_OK) {
      // Only a request that cannot have reached the BMC is safe to send again when it acts.
      const bool not_sent = rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
                            rc == CURLE_COULDNT_RESOLVE_PROXY;
      const bool tls = rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CONNECT_ERROR ||
                       rc == CURLE_SSL_CACERT_BADFILE;
      last = rc == CURLE_OPERATION_TIMEDOUT
                 ? fmt::format("{}: no answer within {} ms", where, options_.timeout.count())
             : tls ? fmt::format(
                         "{}: TLS: {} (set provider.redfish.ca_file to the CA that signs "
                         "the BMC's certificate)",
                         where, curl.easy_strerror(rc))
                   : fmt::format("{}: {}", where, curl.easy_strerror(rc));
      log_.push_back(last);
      if (tls) break;
      if (!idempotent && !not_sent) {
        return Error{last + "; not sent again: the BMC may have acted on it"};
      }
      continue;
    }
    curl.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply.status);
    last_status_ = reply.status;
    reply.token = std::move(got.token);
    reply.location = std::move(got.location);
    if (reply.status >= 200 && reply.status < 300) return reply;
    if (reply.status >= 300 && reply.status < 400 && !reply.location.empty()) {
      // A system named by its Name instead of its Id answers with a redirect (307 keeps the
      // method and body): followed when it stays on this endpoint, without using an attempt.
      std::string next = reply.location;
      if (next.starts_with(endpoint_.base + "/")) next = next.substr(endpoint_.base.size());
      const bool keeps_method = reply.status == 307 || reply.status == 308 || method == "GET";
      if (!next.starts_with("/") || next.starts_with("//")) {
        return Error{
            fmt::format("{}: HTTP {} to {}: not followed, it leaves the BMC's endpoint "
                        "{} (the credentials stay with it)",
                        where, reply.status, Clip(reply.location), endpoint_.base)};
      }
      if (!keeps_method || ++redirects > 3) {
        return Error{fmt::format(
            "{}: HTTP {} to {}: not followed ({})", where, reply.status, Clip(reply.location),
            keeps_method ? "more than 3 redirects" : "it would change the method")};
      }
      url = endpoint_.base + next;
      redirected = true;
      --i;
      continue;
    }
    const std::string detail = DecodeErrorMessage(reply.body);
    last = fmt::format("{}: HTTP {}{}", where, reply.status, detail.empty() ? "" : ": " + detail);
    if (reply.status == 401 || reply.status == 403) {
      last += fmt::format(" (check the user \"{}\" and its password)", credentials_.username);
    }
    log_.push_back(last);
    const bool transient = reply.status == 503 || reply.status == 429 ||
                           (idempotent && reply.status >= 500 && reply.status != 501);
    if (!transient) break;
  }
  return Error{last};
}

Result<RedfishClient::Reply> RedfishClient::Get(const std::string& path) {
  return Call("GET", path, "", true);
}

Result<SystemState> RedfishClient::System() {
  log_.clear();
  std::string path = endpoint_.system;
  if (path.empty()) {
    GPUHEAL_TRY(list, Get(std::string(kSystems)));
    GPUHEAL_TRY(members, DecodeMembers(list.body));
    if (members.size() != 1) {
      return Error{
          fmt::format("{} manages {} ComputerSystems: name one in the endpoint "
                      "(https://HOST/redfish/v1/Systems/ID)",
                      endpoint_.base, members.size())};
    }
    path = members.front();
  }
  GPUHEAL_TRY(reply, Get(path));
  auto state = DecodeSystem(reply.body);
  if (!state) return Error{fmt::format("{}{}: {}", endpoint_.base, path, state.error().message)};
  if (state->path.empty()) state->path = path;
  if (state->reset_types.empty() && !state->action_info.empty()) {
    GPUHEAL_TRY(info, Get(state->action_info));
    GPUHEAL_TRY(types, DecodeActionInfoResetTypes(info.body));
    state->reset_types = std::move(types);
  }
  return state;
}

Status RedfishClient::Reset(const SystemState& s, const std::string& reset_type) {
  log_.clear();
  const std::string body = nlohmann::json{{"ResetType", reset_type}}.dump();
  auto reply = Call("POST", s.reset_target, body, false);
  if (!reply) return reply.error();
  return Status::Ok();
}

}  // namespace gpuheal::bmc
