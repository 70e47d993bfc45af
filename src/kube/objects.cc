#include "kube/objects.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <charconv>

namespace gpuheal::kube {
namespace {

using simdjson::error_code;
namespace od = simdjson::ondemand;

constexpr std::string_view kGpu = "nvidia.com/gpu";
constexpr std::string_view kOurPrefix = "gpuheal.io/";

thread_local od::parser t_parser;

Error JsonError(std::string_view what, error_code e) {
  return Error{fmt::format("decoding {}: {}", what, simdjson::error_message(e))};
}

// Calls fn(key, value) for each field of an object; stops at the first error.
template <typename Fn>
error_code Fields(od::object o, Fn&& fn) {
  for (auto f : o) {
    std::string_view k;
    od::value v;
    if (auto e = f.unescaped_key().get(k)) return e;
    if (auto e = f.value().get(v)) return e;
    if (auto e = fn(k, v)) return e;
  }
  return simdjson::SUCCESS;
}
template <typename Fn>
error_code Fields(od::value v, Fn&& fn) {
  od::object o;
  if (auto e = v.get_object().get(o)) return e;
  return Fields(o, std::forward<Fn>(fn));
}
// Calls fn(value) for each element of an array.
template <typename Fn>
error_code Items(od::value v, Fn&& fn) {
  od::array arr;
  if (auto e = v.get_array().get(arr)) return e;
  for (auto item : arr) {
    od::value iv;
    if (auto e = item.get(iv)) return e;
    if (auto e = fn(iv)) return e;
  }
  return simdjson::SUCCESS;
}

constexpr error_code kOk = simdjson::SUCCESS;

// Parses `padded` with this thread's parser and opens its top-level object.
error_code Root(simdjson::padded_string& padded, od::document& doc, od::object& o) {
  if (auto e = t_parser.iterate(padded).get(doc)) return e;
  return doc.get_object().get(o);
}

error_code Str(od::value v, std::string& out) {
  if (v.type() == od::json_type::null) {
    out.clear();
    return kOk;
  }
  std::string_view sv;
  auto e = v.get_string().get(sv);
  if (!e) out.assign(sv);
  return e;
}

error_code Int(od::value v, int64_t& out) { return v.get_int64().get(out); }

// The annotations gpuheal reads: its own (and its simulator's, sim.gpuheal.io/), the Cluster API
// Machine that owns a Node, and Karpenter's opt-out of disruption.
bool KeptAnnotation(std::string_view k) {
  return k.starts_with(kOurPrefix) || k.starts_with("sim.gpuheal.io/") ||
         k == kCapiMachineAnnotation || k == kCapiNamespaceAnnotation ||
         k == kKarpenterDoNotDisrupt;
}

error_code StrMap(od::value v, std::map<std::string, std::string>& out,
                  bool (*keep)(std::string_view) = nullptr) {
  return Fields(v, [&](std::string_view k, od::value val) {
    if (keep && !keep(k)) return kOk;
    std::string s;
    auto e = Str(val, s);
    if (!e) out.emplace(std::string(k), std::move(s));
    return e;
  });
}

int64_t CountOf(od::value v) {
  std::string_view s;
  if (!v.get_string().get(s)) return ParseCount(s);
  return 0;
}

error_code Meta(od::value v, ObjectMeta& m) {
  return Fields(v, [&](std::string_view k, od::value val) -> error_code {
    if (k == "name") return Str(val, m.name);
    if (k == "namespace") return Str(val, m.namespace_);
    if (k == "uid") return Str(val, m.uid);
    if (k == "resourceVersion") return Str(val, m.resource_version);
    if (k == "creationTimestamp") return Str(val, m.creation_timestamp);
    if (k == "labels") return StrMap(val, m.labels);
    if (k == "annotations") return StrMap(val, m.annotations, KeptAnnotation);
    if (k == "deletionGracePeriodSeconds") {
      int64_t g = -1;
      if (!val.get_int64().get(g)) m.deletion_grace_seconds = g;
      return kOk;
    }
    if (k == "deletionTimestamp") {
      m.deleting = val.type() != od::json_type::null;
      return kOk;
    }
    if (k == "ownerReferences") {
      return Items(val, [&](od::value ref) {
        std::string kind;
        bool controller = false;
        auto e = Fields(ref, [&](std::string_view rk, od::value rv) -> error_code {
          if (rk == "kind") return Str(rv, kind);
          if (rk == "controller") return rv.get_bool().get(controller);
          return kOk;
        });
        if (!e && (controller || m.controller_kind.empty())) m.controller_kind = kind;
        return e;
      });
    }
    return kOk;
  });
}

error_code NodeObj(od::object o, Node& n) {
  return Fields(o, [&](std::string_view k, od::value v) -> error_code {
    if (k == "metadata") return Meta(v, n.meta);
    if (k == "spec") {
      return Fields(v, [&](std::string_view sk, od::value sv) -> error_code {
        if (sk == "unschedulable") return sv.get_bool().get(n.unschedulable);
        if (sk == "providerID") return Str(sv, n.provider_id);
        if (sk != "taints") return kOk;
        return Items(sv, [&](od::value t) {
          Taint taint;
          auto e = Fields(t, [&](std::string_view tk, od::value tv) -> error_code {
            if (tk == "key") return Str(tv, taint.key);
            if (tk == "value") return Str(tv, taint.value);
            if (tk == "effect") return Str(tv, taint.effect);
            if (tk == "timeAdded") return Str(tv, taint.time_added);
            return kOk;
          });
          if (!e) n.taints.push_back(std::move(taint));
          return e;
        });
      });
    }
    if (k == "status") {
      return Fields(v, [&](std::string_view sk, od::value sv) -> error_code {
        if (sk == "capacity") {
          return Fields(sv, [&](std::string_view ck, od::value cv) {
            if (ck == kGpu) n.gpu_capacity = CountOf(cv);
            return kOk;
          });
        }
        if (sk != "conditions") return kOk;
        return Items(sv, [&](od::value c) {
          NodeCondition cond;
          auto e = Fields(c, [&](std::string_view ck, od::value cv) -> error_code {
            if (ck == "type") return Str(cv, cond.type);
            if (ck == "status") return Str(cv, cond.status);
            if (ck == "reason") return Str(cv, cond.reason);
            if (ck == "message") return Str(cv, cond.message);
            if (ck == "lastTransitionTime") return Str(cv, cond.last_transition_time);
            return kOk;
          });
          if (!e) n.conditions.push_back(std::move(cond));
          return e;
        });
      });
    }
    return kOk;
  });
}

// resources: {requests: {...}, limits: {...}}: requests win; for extended resources they are equal.
int64_t ResourceGpus(od::value v) {
  int64_t req = 0, lim = 0;
  auto e = Fields(v, [&](std::string_view k, od::value m) -> error_code {
    if (k != "requests" && k != "limits") return kOk;
    return Fields(m, [&](std::string_view mk, od::value q) {
      if (mk == kGpu) (k == "requests" ? req : lim) = CountOf(q);
      return kOk;
    });
  });
  if (e) return 0;
  return req ? req : lim;
}

error_code PodObj(od::object o, Pod& p) {
  return Fields(o, [&](std::string_view k, od::value v) -> error_code {
    if (k == "metadata") return Meta(v, p.meta);
    if (k == "spec") {
      return Fields(v, [&](std::string_view sk, od::value sv) -> error_code {
        if (sk == "nodeName") return Str(sv, p.node_name);
        if (sk != "containers") return kOk;
        return Items(sv, [&](od::value c) {
          return Fields(c, [&](std::string_view ck, od::value cv) {
            if (ck == "resources") p.gpu_requests += ResourceGpus(cv);
            return kOk;
          });
        });
      });
    }
    if (k == "status") {
      return Fields(v, [&](std::string_view sk, od::value sv) -> error_code {
        return sk == "phase" ? Str(sv, p.phase) : kOk;
      });
    }
    return kOk;
  });
}

error_code PdbObj(od::object o, PodDisruptionBudget& p) {
  return Fields(o, [&](std::string_view k, od::value v) -> error_code {
    if (k == "metadata") return Meta(v, p.meta);
    if (k == "spec") {
      return Fields(v, [&](std::string_view sk, od::value sv) -> error_code {
        if (sk != "selector") return kOk;
        od::json_type t;
        if (auto e = sv.type().get(t)) return e;
        if (t != od::json_type::object) return kOk;  // null: selects nothing
        od::object so;
        std::string_view raw;
        if (auto e = sv.get_object().get(so)) return e;
        if (auto e = so.raw_json().get(raw)) return e;
        p.selector = std::string(raw);
        return kOk;
      });
    }
    if (k != "status") return kOk;
    return Fields(v, [&](std::string_view sk, od::value sv) -> error_code {
      if (sk == "disruptionsAllowed") return Int(sv, p.disruptions_allowed);
      if (sk == "currentHealthy") return Int(sv, p.current_healthy);
      if (sk == "desiredHealthy") return Int(sv, p.desired_healthy);
      return kOk;
    });
  });
}

error_code LeaseObj(od::object o, Lease& l) {
  return Fields(o, [&](std::string_view k, od::value v) -> error_code {
    if (k == "metadata") return Meta(v, l.meta);
    if (k != "spec") return kOk;
    return Fields(v, [&](std::string_view sk, od::value sv) -> error_code {
      if (sk == "holderIdentity") return Str(sv, l.holder);
      if (sk == "leaseDurationSeconds") return Int(sv, l.lease_duration_seconds);
      if (sk == "renewTime") return Str(sv, l.renew_time);
      if (sk == "leaseTransitions") return Int(sv, l.transitions);
      return kOk;
    });
  });
}

error_code NodeRepairObj(od::object o, NodeRepair& r) {
  return Fields(o, [&](std::string_view k, od::value v) -> error_code {
    if (k == "metadata") return Meta(v, r.meta);
    if (k == "spec") {
      return Fields(v, [&](std::string_view sk, od::value sv) -> error_code {
        if (sk == "node") return Str(sv, r.node);
        if (sk != "trigger") return kOk;
        return Fields(sv, [&](std::string_view tk, od::value tv) -> error_code {
          if (tk == "condition") return Str(tv, r.condition);
          if (tk == "reason") return Str(tv, r.reason);
          if (tk == "severity") return Str(tv, r.severity);
          return kOk;
        });
      });
    }
    if (k == "status") {
      return Fields(v, [&](std::string_view sk, od::value sv) -> error_code {
        if (sk == "phase") return Str(sv, r.phase);
        if (sk == "message") return Str(sv, r.message);
        if (sk == "phases") return StrMap(sv, r.phase_times);
        if (sk == "attempts") return Int(sv, r.attempts);
        if (sk == "rung") return Str(sv, r.rung);
        if (sk == "rungIndex") return Int(sv, r.rung_index);
        if (sk == "replacement") return Str(sv, r.replacement);
        if (sk == "incident") return Str(sv, r.incident);
        if (sk == "gate") return Str(sv, r.gate);
        if (sk == "rungAttempt") return Int(sv, r.rung_attempt);
        if (sk == "steps") {
          return Items(sv, [&](od::value iv) {
            RepairStep step;
            auto e = Fields(iv, [&](std::string_view fk, od::value fv) -> error_code {
              if (fk == "kind") return Str(fv, step.kind);
              if (fk == "at") return Str(fv, step.at);
              if (fk == "rung") return Int(fv, step.rung);
              if (fk == "detail") return Str(fv, step.detail);
              if (fk == "uid") return Str(fv, step.uid);
              return kOk;
            });
            if (!e) r.steps.push_back(std::move(step));
            return e;
          });
        }
        if (sk == "evictedPods" || sk == "actions") {
          auto& out = sk == "actions" ? r.actions : r.evicted_pods;
          return Items(sv, [&](od::value pv) {
            std::string p;
            auto e = Str(pv, p);
            if (!e) out.push_back(std::move(p));
            return e;
          });
        }
        return kOk;
      });
    }
    return kOk;
  });
}

error_code StrList(od::value v, std::vector<std::string>& out) {
  return Items(v, [&](od::value iv) {
    std::string item;
    auto e = Str(iv, item);
    if (!e) out.push_back(std::move(item));
    return e;
  });
}

error_code NodeDiagnosticObj(od::object o, NodeDiagnostic& d) {
  return Fields(o, [&](std::string_view k, od::value v) -> error_code {
    if (k == "metadata") return Meta(v, d.meta);
    if (k == "spec") {
      return Fields(v, [&](std::string_view sk, od::value sv) -> error_code {
        if (sk == "nodeName") return Str(sv, d.node_name);
        if (sk == "repair") return Str(sv, d.repair);
        if (sk == "include") return StrList(sv, d.include);
        if (sk == "exclude") return StrList(sv, d.exclude);
        if (sk != "upload") return kOk;
        return Fields(sv, [&](std::string_view uk, od::value uv) -> error_code {
          return uk == "url" ? Str(uv, d.upload_url) : kOk;
        });
      });
    }
    if (k != "status") return kOk;
    return Fields(v, [&](std::string_view sk, od::value sv) -> error_code {
      if (sk == "phase") return Str(sv, d.phase);
      if (sk == "message") return Str(sv, d.message);
      if (sk == "startTime") return Str(sv, d.start_time);
      if (sk == "completionTime") return Str(sv, d.completion_time);
      if (sk == "durationMs") return Int(sv, d.duration_ms);
      if (sk == "bundle") {
        return Fields(sv, [&](std::string_view bk, od::value bv) -> error_code {
          if (bk == "size") return Int(bv, d.bundle_size);
          if (bk == "sha256") return Str(bv, d.bundle_sha256);
          if (bk == "location") return Str(bv, d.bundle_location);
          if (bk == "nodePath") return Str(bv, d.bundle_node_path);
          return kOk;
        });
      }
      if (sk != "collectors") return kOk;
      return Items(sv, [&](od::value cv) {
        return Fields(cv, [&](std::string_view ck, od::value cvv) -> error_code {
          if (ck != "name") return kOk;
          std::string name;
          auto e = Str(cvv, name);
          if (!e) d.collectors.push_back(std::move(name));
          return e;
        });
      });
    });
  });
}

template <typename T, error_code (*Obj)(od::object, T&)>
Result<T> DecodeOne(std::string_view json, std::string_view what) {
  simdjson::padded_string padded(json);
  od::document doc;
  od::object o;
  if (auto e = Root(padded, doc, o)) return JsonError(what, e);
  T out;
  if (auto e = Obj(o, out)) return JsonError(what, e);
  return out;
}

template <typename T, error_code (*Obj)(od::object, T&)>
Result<List<T>> DecodeListOf(std::string_view json, std::string_view what) {
  simdjson::padded_string padded(json);
  od::document doc;
  od::object o;
  if (auto e = Root(padded, doc, o)) return JsonError(what, e);
  List<T> list;
  auto e = Fields(o, [&](std::string_view k, od::value v) -> error_code {
    if (k == "metadata") {
      return Fields(v, [&](std::string_view mk, od::value mv) -> error_code {
        if (mk == "resourceVersion") return Str(mv, list.resource_version);
        if (mk == "continue") return Str(mv, list.continue_token);
        return kOk;
      });
    }
    if (k != "items" || v.type() == od::json_type::null) return kOk;
    return Items(v, [&](od::value item) {
      od::object io;
      T t;
      if (auto ie = item.get_object().get(io)) return ie;
      auto ie = Obj(io, t);
      if (!ie) list.items.push_back(std::move(t));
      return ie;
    });
  });
  if (e) return JsonError(what, e);
  return list;
}

error_code MetaOnlyObj(od::object o, ObjectMeta& m) {
  return Fields(
      o, [&](std::string_view k, od::value v) { return k == "metadata" ? Meta(v, m) : kOk; });
}

}  // namespace

int64_t ParseCount(std::string_view q) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(q.data(), q.data() + q.size(), v);
  if (ec != std::errc()) return 0;
  std::string_view suffix(p, static_cast<size_t>(q.data() + q.size() - p));
  if (suffix.empty()) return v;
  if (suffix == "k") return v * 1000;
  return v;  // other suffixes never appear on countable extended resources
}

Result<Node> DecodeNode(std::string_view j) { return DecodeOne<Node, NodeObj>(j, "Node"); }
Result<Pod> DecodePod(std::string_view j) { return DecodeOne<Pod, PodObj>(j, "Pod"); }
Result<PodDisruptionBudget> DecodePdb(std::string_view j) {
  return DecodeOne<PodDisruptionBudget, PdbObj>(j, "PodDisruptionBudget");
}
Result<Lease> DecodeLease(std::string_view j) { return DecodeOne<Lease, LeaseObj>(j, "Lease"); }
Result<ObjectMeta> DecodeMeta(std::string_view j) {
  return DecodeOne<ObjectMeta, MetaOnlyObj>(j, "object metadata");
}
Result<NodeRepair> DecodeNodeRepair(std::string_view j) {
  return DecodeOne<NodeRepair, NodeRepairObj>(j, "NodeRepair");
}
Result<List<NodeRepair>> DecodeNodeRepairList(std::string_view j) {
  return DecodeListOf<NodeRepair, NodeRepairObj>(j, "NodeRepairList");
}
Result<NodeDiagnostic> DecodeNodeDiagnostic(std::string_view j) {
  return DecodeOne<NodeDiagnostic, NodeDiagnosticObj>(j, "NodeDiagnostic");
}
Result<List<NodeDiagnostic>> DecodeNodeDiagnosticList(std::string_view j) {
  return DecodeListOf<NodeDiagnostic, NodeDiagnosticObj>(j, "NodeDiagnosticList");
}
Result<List<Node>> DecodeNodeList(std::string_view j) {
  return DecodeListOf<Node, NodeObj>(j, "NodeList");
}
Result<List<Pod>> DecodePodList(std::string_view j) {
  return DecodeListOf<Pod, PodObj>(j, "PodList");
}
Result<List<PodDisruptionBudget>> DecodePdbList(std::string_view j) {
  return DecodeListOf<PodDisruptionBudget, PdbObj>(j, "PodDisruptionBudgetList");
}
Result<List<Lease>> DecodeLeaseList(std::string_view j) {
  return DecodeListOf<Lease, LeaseObj>(j, "LeaseList");
}

Result<WatchEventRaw> DecodeWatchEvent(std::string_view line) {
  simdjson::padded_string padded(line);
  od::document doc;
  od::object o;
  WatchEventRaw ev;
  auto e = Root(padded, doc, o);
  if (!e) {
    e = Fields(o, [&](std::string_view k, od::value v) -> error_code {
      if (k == "type") return Str(v, ev.type);
      if (k != "object") return kOk;
      od::object obj;
      std::string_view raw;
      if (auto oe = v.get_object().get(obj)) return oe;
      if (auto oe = obj.raw_json().get(raw)) return oe;
      ev.object.assign(raw);
      return kOk;
    });
  }
  if (e) return JsonError("watch event", e);
  if (ev.type.empty()) return Error{"decoding watch event: no \"type\""};
  if (ev.type == "ERROR") {
    ev.error_code = DecodeStatus(ev.object).code;
  } else if (!ev.object.empty()) {
    auto meta = DecodeMeta(ev.object);
    if (!meta) return meta.error();
    ev.resource_version = meta->resource_version;
  }
  return ev;
}

ApiStatus DecodeStatus(std::string_view json) {
  ApiStatus s;
  simdjson::padded_string padded(json);
  od::document doc;
  od::object o;
  if (Root(padded, doc, o)) return s;
  // A partly decoded Status is still worth its message: errors just end the walk.
  (void)Fields(o, [&](std::string_view k, od::value v) -> error_code {
    if (k == "code") {
      int64_t c = 0;
      auto e = Int(v, c);
      if (!e) s.code = static_cast<long>(c);
      return e;
    }
    if (k == "reason") return Str(v, s.reason);
    if (k == "message") return Str(v, s.message);
    if (k != "details") return kOk;
    return Fields(v, [&](std::string_view dk, od::value dv) -> error_code {
      if (dk == "retryAfterSeconds") return Int(dv, s.retry_after_seconds);
      if (dk != "causes") return kOk;
      return Items(dv, [&](od::value cv) -> error_code {
        StatusCause c;
        auto e = Fields(cv, [&](std::string_view ck, od::value v2) -> error_code {
          if (ck == "reason") return Str(v2, c.type);  // StatusCause's type is "reason" on the wire
          if (ck == "message") return Str(v2, c.message);
          return kOk;
        });
        s.causes.push_back(std::move(c));
        return e;
      });
    });
  });
  return s;
}

}  // namespace gpuheal::kube
