#include "fakes/fake_api.h"

#include <fmt/format.h>

#include <algorithm>

namespace gpuheal::testing {
namespace {

using nlohmann::json;

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = s.find(sep, start);
    const std::string_view part =
        s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (!part.empty()) out.emplace_back(part);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

// What a path names: a collection, an object, or an object's subresource.
struct Target {
  enum class Kind { kCollection, kObject, kSubresource, kBad } kind = Kind::kBad;
  std::string object;       // the object's path (kObject, kSubresource)
  std::string subresource;  // "status", "eviction"
  std::string ns;           // the namespace in the path, if any
};

Target Parse(const std::string& path) {
  const auto segs = Split(path, '/');
  size_t prefix = 0;
  if (segs.size() >= 2 && segs[0] == "api") prefix = 2;
  if (segs.size() >= 3 && segs[0] == "apis") prefix = 3;
  if (prefix == 0 || segs.size() <= prefix) return {};
  std::vector<std::string> rest(segs.begin() + static_cast<long>(prefix), segs.end());
  std::string base;
  for (size_t i = 0; i < prefix; ++i) base += "/" + segs[i];
  Target t;
  size_t res = 0;  // index of the resource name in `rest`
  if (rest[0] == "namespaces" && rest.size() >= 3) {
    t.ns = rest[1];
    res = 2;
  }
  const size_t after = rest.size() - res;  // resource [name [subresource]]
  std::string obj = base;
  for (size_t i = 0; i < std::min<size_t>(rest.size(), res + 2); ++i) obj += "/" + rest[i];
  if (after == 1) {
    t.kind = Target::Kind::kCollection;
  } else if (after == 2) {
    t.kind = Target::Kind::kObject;
    t.object = obj;
  } else if (after == 3) {
    t.kind = Target::Kind::kSubresource;
    t.object = obj;
    t.subresource = rest.back();
  }
  return t;
}

// "/api/v1/namespaces/ns/pods/x" -> "/api/v1/pods/x": how a cluster-wide list sees it.
std::string ClusterForm(const std::string& path) {
  const auto segs = Split(path, '/');
  std::string out;
  for (size_t i = 0; i < segs.size(); ++i) {
    if (segs[i] == "namespaces" && i + 2 < segs.size()) {
      ++i;
      continue;
    }
    out += "/" + segs[i];
  }
  return out;
}

std::string QueryParam(const std::string& query, const std::string& key) {
  for (const auto& kv : Split(query, '&')) {
    if (kv.rfind(key + "=", 0) == 0) {
      std::string v = kv.substr(key.size() + 1), out;
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] == '%' && i + 2 < v.size()) {
          out.push_back(static_cast<char>(std::stoi(v.substr(i + 1, 2), nullptr, 16)));
          i += 2;
        } else {
          out.push_back(v[i]);
        }
      }
      return out;
    }
  }
  return "";
}

const json* Field(const json& j, std::initializer_list<const char*> path) {
  const json* cur = &j;
  for (const char* k : path) {
    if (!cur->is_object() || !cur->contains(k)) return nullptr;
    cur = &(*cur)[k];
  }
  return cur;
}

std::string Str(const json& j, std::initializer_list<const char*> path) {
  const json* f = Field(j, path);
  return f && f->is_string() ? f->get<std::string>() : "";
}

// labelSelector "a=b,c=d" and fieldSelector "spec.nodeName=x" / "metadata.name=x".
bool Selected(const json& obj, const std::string& labels, const std::string& fields) {
  for (const auto& term : Split(labels, ',')) {
    const auto eq = term.find('=');
    const std::string k = term.substr(0, eq);
    const std::string v = eq == std::string::npos ? "" : term.substr(eq + 1);
    const json* l = Field(obj, {"metadata", "labels"});
    if (!l || !l->contains(k)) return false;
    if (eq != std::string::npos && (*l)[k] != v) return false;
  }
  for (const auto& term : Split(fields, ',')) {
    const auto eq = term.find('=');
    if (eq == std::string::npos) continue;
    std::string p = term.substr(0, eq);
    std::replace(p.begin(), p.end(), '.', '/');
    const json::json_pointer field("/" + p);
    const std::string want = term.substr(eq + 1);
    const std::string have =
        obj.contains(field) && obj[field].is_string() ? obj[field].get<std::string>() : "";
    if (have != want) return false;
  }
  return true;
}

kube::Response StatusResponse(long code, const std::string& reason, const std::string& message) {
  json s = {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
            {"reason", reason}, {"message", message}, {"code", code}};
  return {code, s.dump()};
}

std::string ReasonFor(long code) {
  switch (code) {
    case 404:
      return "NotFound";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    default:
      return code >= 500 ? "InternalError" : "BadRequest";
  }
}

// Strategic merge as the API server applies it to what the product patches: RFC 7386 merge,
// except that `conditions` lists merge by their `type`.
void StrategicMerge(json& target, const json& patch) {
  if (!patch.is_object()) {
    target = patch;
    return;
  }
  if (!target.is_object()) target = json::object();
  for (const auto& [k, v] : patch.items()) {
    if (v.is_null()) {
      target.erase(k);
    } else if (k == "conditions" && v.is_array()) {
      json& have = target[k];
      if (!have.is_array()) have = json::array();
      for (const auto& c : v) {
        auto it = std::find_if(have.begin(), have.end(), [&](const json& h) {
          return h.value("type", "") == c.value("type", "");
        });
        if (it == have.end()) {
          have.push_back(c);
        } else {
          StrategicMerge(*it, c);
        }
      }
    } else if (v.is_object()) {
      StrategicMerge(target[k], v);
    } else {
      target[k] = v;
    }
  }
}

bool IsWrite(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

}  // namespace

// A null field decodes as absent on the API server, and is not in what it returns.
static void StripNulls(json& j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end();) {
      if (it->is_null()) {
        it = j.erase(it);
      } else {
        StripNulls(*it);
        ++it;
      }
    }
  } else if (j.is_array()) {
    for (auto& e : j) StripNulls(e);
  }
}

void FakeApi::Stamp(const std::string& path, json& obj, const char* change) {
  if (!obj.is_object()) obj = json::object();
  StripNulls(obj);
  auto& meta = obj["metadata"];
  if (!meta.contains("uid")) meta["uid"] = fmt::format("uid-{}", ++uid_);
  if (!meta.contains("creationTimestamp")) meta["creationTimestamp"] = "2026-01-01T00:00:00Z";
  meta["resourceVersion"] = std::to_string(++rv_);
  history_.push_back({change, path, obj, rv_});
}

void FakeApi::Put(const std::string& path, json obj) {
  std::lock_guard<std::mutex> lock(mu_);
  const Target t = Parse(path);
  if (!t.ns.empty()) obj["metadata"]["namespace"] = t.ns;
  obj["metadata"]["name"] = Split(path, '/').back();
  obj["metadata"].erase("resourceVersion");
  Stamp(path, obj, objects_.count(path) ? "MODIFIED" : "ADDED");
  objects_[path] = std::move(obj);
  ++generation_;
  changed_.notify_all();
}

std::optional<json> FakeApi::Object(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(path);
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::pair<std::string, json>> FakeApi::ListLocked(const std::string& coll,
                                                              const std::string& query) const {
  const std::string labels = QueryParam(query, "labelSelector");
  const std::string fields = QueryParam(query, "fieldSelector");
  std::vector<std::pair<std::string, json>> out;
  for (const auto& [p, obj] : objects_) {
    const bool direct =
        p.rfind(coll + "/", 0) == 0 && p.find('/', coll.size() + 1) == std::string::npos;
    const std::string cf = ClusterForm(p);
    const bool cluster_wide =
        cf.rfind(coll + "/", 0) == 0 && cf.find('/', coll.size() + 1) == std::string::npos;
    if ((direct || cluster_wide) && Selected(obj, labels, fields)) out.emplace_back(p, obj);
  }
  return out;
}

std::vector<json> FakeApi::List(const std::string& collection) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<json> out;
  for (auto& [p, obj] : ListLocked(collection, "")) out.push_back(std::move(obj));
  return out;
}

void FakeApi::Fail(std::string method, std::string path_part, long status, int times) {
  std::lock_guard<std::mutex> lock(mu_);
  rules_.push_back({std::move(method), std::move(path_part), status, times});
}

void FakeApi::Cut(int writes) {
  std::lock_guard<std::mutex> lock(mu_);
  cut_after_ = writes;
}

void FakeApi::Heal() {
  std::lock_guard<std::mutex> lock(mu_);
  cut_after_.reset();
}

void FakeApi::RefuseEvictions(std::string path_part, std::string budget) {
  std::lock_guard<std::mutex> lock(mu_);
  refuse_evictions_.emplace_back(std::move(path_part), std::move(budget));
}

void FakeApi::AllowEvictions() {
  std::lock_guard<std::mutex> lock(mu_);
  refuse_evictions_.clear();
}

void FakeApi::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  objects_.clear();
  rules_.clear();
  refuse_evictions_.clear();
  calls_.clear();
  history_.clear();
  writes_ = 0;
  cut_after_.reset();
}

std::vector<FakeApi::Call> FakeApi::Calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}

size_t FakeApi::Count(const std::string& method, const std::string& path_part) const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<size_t>(std::count_if(calls_.begin(), calls_.end(), [&](const Call& c) {
    return (method.empty() || c.method == method) && c.path.find(path_part) != std::string::npos;
  }));
}

size_t FakeApi::CountOk(const std::string& method, const std::string& path_part) const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<size_t>(std::count_if(calls_.begin(), calls_.end(), [&](const Call& c) {
    return (method.empty() || c.method == method) && c.path.find(path_part) != std::string::npos &&
           c.status >= 200 && c.status < 300;
  }));
}

size_t FakeApi::writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writes_;
}

Result<kube::Response> FakeApi::Request(const std::string& method, const std::string& path,
                                        const std::string& body, const std::string& content_type) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cut_after_ && *cut_after_ <= 0) {
    calls_.push_back({method, path, body, 0});
    return Error{"fake API: connection refused (cut)"};
  }
  for (auto it = rules_.begin(); it != rules_.end(); ++it) {
    if ((it->method.empty() || it->method == method) &&
        path.find(it->path_part) != std::string::npos) {
      const long status = it->status;
      if (--it->times <= 0) rules_.erase(it);
      calls_.push_back({method, path, body, status});
      return StatusResponse(status, ReasonFor(status), "injected by the test");
    }
  }
  kube::Response r = Serve(method, path, body, content_type);
  calls_.push_back({method, path, body, r.status});
  ++generation_;
  changed_.notify_all();
  if (IsWrite(method) && r.ok()) {
    ++writes_;
    if (cut_after_) --*cut_after_;
  }
  return r;
}

kube::Response FakeApi::Serve(const std::string& method, const std::string& full_path,
                              const std::string& body, const std::string& content_type) {
  const auto q = full_path.find('?');
  const std::string path = full_path.substr(0, q);
  const std::string query = q == std::string::npos ? "" : full_path.substr(q + 1);
  const Target t = Parse(path);
  json in;
  if (!body.empty()) {
    in = json::parse(body, nullptr, false);
    if (in.is_discarded()) return StatusResponse(400, "BadRequest", "the body is not JSON");
  }
  auto find = [&](const std::string& p) {
    auto it = objects_.find(p);
    return it == objects_.end() ? nullptr : &it->second;
  };
  switch (t.kind) {
    case Target::Kind::kBad:
      // A discovery document (GET /apis/GROUP) the test stored with Put.
      if (auto* doc = find(path); doc && method == "GET") return {200, doc->dump()};
      return StatusResponse(404, "NotFound", "no such path " + path);
    case Target::Kind::kCollection: {
      if (method == "GET") {
        json list = {{"kind", "List"},
                     {"apiVersion", "v1"},
                     {"metadata", {{"resourceVersion", std::to_string(rv_)}}},
                     {"items", json::array()}};
        for (auto& [p, obj] : ListLocked(path, query)) list["items"].push_back(std::move(obj));
        return {200, list.dump()};
      }
      if (method != "POST") return StatusResponse(405, "MethodNotAllowed", method);
      std::string name = Str(in, {"metadata", "name"});
      if (name.empty()) {
        const std::string gen = Str(in, {"metadata", "generateName"});
        if (gen.empty()) return StatusResponse(422, "Invalid", "metadata.name is required");
        name = fmt::format("{}{}", gen, uid_ + 1);
        in["metadata"]["name"] = name;
      }
      const std::string obj_path = path + "/" + name;
      if (find(obj_path))
        return StatusResponse(409, "AlreadyExists", fmt::format("\"{}\" already exists", name));
      if (!t.ns.empty()) in["metadata"]["namespace"] = t.ns;
      Stamp(obj_path, in, "ADDED");
      objects_[obj_path] = in;
      return {201, in.dump()};
    }
    case Target::Kind::kObject:
    case Target::Kind::kSubresource: {
      json* cur = find(t.object);
      const bool status_only = t.kind == Target::Kind::kSubresource && t.subresource == "status";
      if (t.kind == Target::Kind::kSubresource && t.subresource == "eviction") {
        if (method != "POST") return StatusResponse(405, "MethodNotAllowed", method);
        if (!cur) return StatusResponse(404, "NotFound", "pod not found");
        for (const auto& [part, budget] : refuse_evictions_) {
          if (t.object.find(part) == std::string::npos) continue;
          auto r = StatusResponse(429, "TooManyRequests",
                                  "Cannot evict pod as it would violate the pod's disruption "
                                  "budget.");
          if (!budget.empty()) {
            json s = json::parse(r.body);
            s["details"] = {{"causes",
                             {{{"reason", "DisruptionBudget"},
                               {"message", "The disruption budget " + budget +
                                               " needs 2 healthy pods and has 2 currently"}}}}};
            r.body = s.dump();
          }
          return r;
        }
        history_.push_back({"DELETED", t.object, *cur, ++rv_});
        objects_.erase(t.object);
        return {201, json{{"kind", "Status"}, {"status", "Success"}}.dump()};
      }
      if (!cur) return StatusResponse(404, "NotFound", t.object + " not found");
      if (method == "GET") return {200, cur->dump()};
      if (method == "DELETE") {
        const std::string uid = Str(in, {"preconditions", "uid"});
        const std::string rv = Str(in, {"preconditions", "resourceVersion"});
        if ((!uid.empty() && uid != Str(*cur, {"metadata", "uid"})) ||
            (!rv.empty() && rv != Str(*cur, {"metadata", "resourceVersion"})))
          return StatusResponse(409, "Conflict", "precondition failed");
        history_.push_back({"DELETED", t.object, *cur, ++rv_});
        json gone = *cur;
        objects_.erase(t.object);
        return {200, gone.dump()};
      }
      json next = *cur;
      if (method == "PUT") {
        const std::string rv = Str(in, {"metadata", "resourceVersion"});
        if (!rv.empty() && rv != Str(*cur, {"metadata", "resourceVersion"}))
          return StatusResponse(409, "Conflict",
                                "the object has been modified; please apply your changes to the "
                                "latest version and try again");
        next = in;
      } else if (method == "PATCH") {
        if (content_type == "application/json-patch+json") {
          try {
            next = cur->patch(in);
          } catch (const json::exception& e) {
            return StatusResponse(422, "Invalid", e.what());
          }
        } else {
          const std::string rv = Str(in, {"metadata", "resourceVersion"});
          if (!rv.empty() && rv != Str(*cur, {"metadata", "resourceVersion"}))
            return StatusResponse(409, "Conflict", "the object has been modified");
          if (content_type == "application/strategic-merge-patch+json") {
            StrategicMerge(next, in);
          } else {
            next.merge_patch(in);
          }
        }
      } else {
        return StatusResponse(405, "MethodNotAllowed", method);
      }
      // The status subresource changes status (and, as for nodes/status, metadata); the main
      // resource keeps the old status.
      if (status_only) {
        json kept = *cur;
        kept["status"] = next.contains("status") ? next["status"] : json::object();
        if (next.contains("metadata")) {
          kept["metadata"]["annotations"] = next["metadata"].value("annotations", json::object());
          kept["metadata"]["labels"] = next["metadata"].value("labels", json::object());
        }
        next = std::move(kept);
      } else if (cur->contains("status")) {
        next["status"] = (*cur)["status"];
      }
      next["metadata"]["uid"] = (*cur)["metadata"]["uid"];
      next["metadata"]["name"] = (*cur)["metadata"]["name"];
      next["metadata"]["creationTimestamp"] = (*cur)["metadata"]["creationTimestamp"];
      if (cur->contains("/metadata/namespace"_json_pointer))
        next["metadata"]["namespace"] = (*cur)["metadata"]["namespace"];
      Stamp(t.object, next, "MODIFIED");
      *cur = next;
      return {200, next.dump()};
    }
  }
  return StatusResponse(500, "InternalError", "unreachable");
}

Result<kube::Response> FakeApi::Watch(
    const std::string& collection_path, const std::string& resource_version,
    const std::function<bool(const kube::WatchEventRaw&)>& on_event, std::chrono::seconds timeout,
    const std::atomic<bool>* cancel) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string coll = collection_path.substr(0, collection_path.find('?'));
  uint64_t from = 0;
  bool blocking = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back({"WATCH", collection_path, "", 200});
    ++generation_;
    changed_.notify_all();
    from = resource_version.empty() ? 0 : std::stoull(resource_version);
    if (from && !history_.empty() && from + 1 < history_.front().rv)
      return StatusResponse(410, "Expired", "too old resource version");
    blocking = blocking_watches_;
  }
  while (true) {
    std::vector<kube::WatchEventRaw> events;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // A blocking watch waits for a change; the cancel flag has no notification of its own, so
      // it is looked at every 20 ms.
      while (blocking && rv_ <= from) {
        if ((cancel && cancel->load()) || std::chrono::steady_clock::now() >= deadline)
          return kube::Response{200, ""};
        changed_.wait_for(lock, std::chrono::milliseconds(20));
      }
      for (const auto& c : history_) {
        if (c.rv <= from) continue;
        const bool in =
            c.path.rfind(coll + "/", 0) == 0 || ClusterForm(c.path).rfind(coll + "/", 0) == 0;
        if (in) events.push_back({c.type, c.object.dump(), std::to_string(c.rv)});
      }
      from = rv_;
    }
    for (const auto& e : events) {
      if (!on_event(e)) return kube::Response{200, ""};
    }
    if (!blocking) return kube::Response{200, ""};
  }
}

void FakeApi::SetBlockingWatches(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  blocking_watches_ = on;
}

bool FakeApi::WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    uint64_t seen = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen = generation_;
    }
    if (done()) return true;
    std::unique_lock<std::mutex> lock(mu_);
    if (!changed_.wait_until(lock, deadline, [&] { return generation_ != seen; })) {
      lock.unlock();
      return done();
    }
  }
}

}  // namespace gpuheal::testing
