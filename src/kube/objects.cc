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

error_code Str(od::value v, std::string& out) {
  std::string_view sv;
  if (v.type() == od::json_type::null) {
    out.clear();
    return simdjson::SUCCESS;
  }
  auto e = v.get_string().get(sv);
  if (!e) out.assign(sv);
  return e;
}

error_code StrMap(od::value v, std::map<std::string, std::string>& out, std::string_view prefix) {
  od::object o;
  if (auto e = v.get_object().get(o)) return e;
  for (auto f : o) {
    std::string_view k;
    if (auto e = f.unescaped_key().get(k)) return e;
    if (!prefix.empty() && !k.starts_with(prefix)) continue;
    std::string val;
    if (auto e = Str(f.value(), val)) return e;
    out.emplace(std::string(k), std::move(val));
  }
  return simdjson::SUCCESS;
}

int64_t CountOf(od::value v) {
  std::string_view s;
  if (!v.get_string().get(s)) return ParseCount(s);
  return 0;
}

error_code Meta(od::value v, ObjectMeta& m) {
  od::object o;
  if (auto e = v.get_object().get(o)) return e;
  for (auto f : o) {
    std::string_view k;
    if (auto e = f.unescaped_key().get(k)) return e;
    error_code e = simdjson::SUCCESS;
    if (k == "name") e = Str(f.value(), m.name);
    else if (k == "namespace") e = Str(f.value(), m.namespace_);
    else if (k == "uid") e = Str(f.value(), m.uid);
    else if (k == "resourceVersion") e = Str(f.value(), m.resource_version);
    else if (k == "labels") e = StrMap(f.value(), m.labels, "");
    else if (k == "annotations") e = StrMap(f.value(), m.annotations, kOurPrefix);
    else if (k == "deletionTimestamp") m.deleting = f.value().type() != od::json_type::null;
    else if (k == "ownerReferences") {
      od::array refs;
      if ((e = f.value().get_array().get(refs))) return e;
      for (auto r : refs) {
        od::object ro;
        if ((e = r.get_object().get(ro))) return e;
        std::string kind;
        bool controller = false;
        for (auto rf : ro) {
          std::string_view rk;
          if ((e = rf.unescaped_key().get(rk))) return e;
          if (rk == "kind") e = Str(rf.value(), kind);
          else if (rk == "controller") e = rf.value().get_bool().get(controller);
          if (e) return e;
        }
        if (controller || m.controller_kind.empty()) m.controller_kind = kind;
      }
    }
    if (e) return e;
  }
  return simdjson::SUCCESS;
}

error_code NodeObj(od::object o, Node& n) {
  for (auto f : o) {
    std::string_view k;
    if (auto e = f.unescaped_key().get(k)) return e;
    if (k == "metadata") {
      if (auto e = Meta(f.value(), n.meta)) return e;
    } else if (k == "spec") {
      od::object spec;
      if (auto e = f.value().get_object().get(spec)) return e;
      for (auto sf : spec) {
        std::string_view sk;
        if (auto e = sf.unescaped_key().get(sk)) return e;
        if (sk == "unschedulable") {
          if (auto e = sf.value().get_bool().get(n.unschedulable)) return e;
        } else if (sk == "taints") {
          od::array arr;
          if (auto e = sf.value().get_array().get(arr)) return e;
          for (auto t : arr) {
            od::object to;
            if (auto e = t.get_object().get(to)) return e;
            Taint taint;
            for (auto tf : to) {
              std::string_view tk;
              if (auto e = tf.unescaped_key().get(tk)) return e;
              error_code e = simdjson::SUCCESS;
              if (tk == "key") e = Str(tf.value(), taint.key);
              else if (tk == "value") e = Str(tf.value(), taint.value);
              else if (tk == "effect") e = Str(tf.value(), taint.effect);
              if (e) return e;
            }
            n.taints.push_back(std::move(taint));
          }
        }
      }
    } else if (k == "status") {
      od::object st;
      if (auto e = f.value().get_object().get(st)) return e;
      for (auto sf : st) {
        std::string_view sk;
        if (auto e = sf.unescaped_key().get(sk)) return e;
        if (sk == "capacity") {
          od::object cap;
          if (auto e = sf.value().get_object().get(cap)) return e;
          for (auto cf : cap) {
            std::string_view ck;
            if (auto e = cf.unescaped_key().get(ck)) return e;
            if (ck == kGpu) n.gpu_capacity = CountOf(cf.value());
          }
        } else if (sk == "conditions") {
          od::array arr;
          if (auto e = sf.value().get_array().get(arr)) return e;
          for (auto c : arr) {
            od::object co;
            if (auto e = c.get_object().get(co)) return e;
            NodeCondition cond;
            for (auto cf : co) {
              std::string_view ck;
              if (auto e = cf.unescaped_key().get(ck)) return e;
              error_code e = simdjson::SUCCESS;
              if (ck == "type") e = Str(cf.value(), cond.type);
              else if (ck == "status") e = Str(cf.value(), cond.status);
              else if (ck == "reason") e = Str(cf.value(), cond.reason);
              else if (ck == "message") e = Str(cf.value(), cond.message);
              else if (ck == "lastTransitionTime") e = Str(cf.value(), cond.last_transition_time);
              if (e) return e;
            }
            n.conditions.push_back(std::move(cond));
          }
        }
      }
    }
  }
  return simdjson::SUCCESS;
}

int64_t ResourceGpus(od::value v) {
  // resources: {requests: {...}, limits: {...}}: requests win; extended resources must be equal.
  int64_t req = 0, lim = 0;
  od::object o;
  if (v.get_object().get(o)) return 0;
  for (auto f : o) {
    std::string_view k;
    if (f.unescaped_key().get(k)) return 0;
    if (k != "requests" && k != "limits") continue;
    od::object m;
    if (f.value().get_object().get(m)) continue;
    for (auto mf : m) {
      std::string_view mk;
      if (mf.unescaped_key().get(mk)) break;
      if (mk == kGpu) (k == "requests" ? req : lim) = CountOf(mf.value());
    }
  }
  return req ? req : lim;
}

error_code PodObj(od::object o, Pod& p) {
  for (auto f : o) {
    std::string_view k;
    if (auto e = f.unescaped_key().get(k)) return e;
    if (k == "metadata") {
      if (auto e = Meta(f.value(), p.meta)) return e;
    } else if (k == "spec") {
      od::object spec;
      if (auto e = f.value().get_object().get(spec)) return e;
      for (auto sf : spec) {
        std::string_view sk;
        if (auto e = sf.unescaped_key().get(sk)) return e;
        if (sk == "nodeName") {
          if (auto e = Str(sf.value(), p.node_name)) return e;
        } else if (sk == "containers") {
          od::array arr;
          if (auto e = sf.value().get_array().get(arr)) return e;
          for (auto c : arr) {
            od::object co;
            if (auto e = c.get_object().get(co)) return e;
            for (auto cf : co) {
              std::string_view ck;
              if (auto e = cf.unescaped_key().get(ck)) return e;
              if (ck == "resources") p.gpu_requests += ResourceGpus(cf.value());
            }
          }
        }
      }
    } else if (k == "status") {
      od::object st;
      if (auto e = f.value().get_object().get(st)) return e;
      for (auto sf : st) {
        std::string_view sk;
        if (auto e = sf.unescaped_key().get(sk)) return e;
        if (sk == "phase") {
          if (auto e = Str(sf.value(), p.phase)) return e;
        }
      }
    }
  }
  return simdjson::SUCCESS;
}

error_code Int(od::value v, int64_t& out) { return v.get_int64().get(out); }

error_code PdbObj(od::object o, PodDisruptionBudget& p) {
  for (auto f : o) {
    std::string_view k;
    if (auto e = f.unescaped_key().get(k)) return e;
    if (k == "metadata") {
      if (auto e = Meta(f.value(), p.meta)) return e;
    } else if (k == "status") {
      od::object st;
      if (auto e = f.value().get_object().get(st)) return e;
      for (auto sf : st) {
        std::string_view sk;
        if (auto e = sf.unescaped_key().get(sk)) return e;
        error_code e = simdjson::SUCCESS;
        if (sk == "disruptionsAllowed") e = Int(sf.value(), p.disruptions_allowed);
        else if (sk == "currentHealthy") e = Int(sf.value(), p.current_healthy);
        else if (sk == "desiredHealthy") e = Int(sf.value(), p.desired_healthy);
        if (e) return e;
      }
    }
  }
  return simdjson::SUCCESS;
}

error_code LeaseObj(od::object o, Lease& l) {
  for (auto f : o) {
    std::string_view k;
    if (auto e = f.unescaped_key().get(k)) return e;
    if (k == "metadata") {
      if (auto e = Meta(f.value(), l.meta)) return e;
    } else if (k == "spec") {
      od::object sp;
      if (auto e = f.value().get_object().get(sp)) return e;
      for (auto sf : sp) {
        std::string_view sk;
        if (auto e = sf.unescaped_key().get(sk)) return e;
        error_code e = simdjson::SUCCESS;
        if (sk == "holderIdentity") e = Str(sf.value(), l.holder);
        else if (sk == "leaseDurationSeconds") e = Int(sf.value(), l.lease_duration_seconds);
        else if (sk == "renewTime") e = Str(sf.value(), l.renew_time);
        else if (sk == "leaseTransitions") e = Int(sf.value(), l.transitions);
        if (e) return e;
      }
    }
  }
  return simdjson::SUCCESS;
}

template <typename T, error_code (*Obj)(od::object, T&)>
Result<T> DecodeOne(std::string_view json, std::string_view what) {
  simdjson::padded_string padded(json);
  od::document doc;
  if (auto e = t_parser.iterate(padded).get(doc)) return JsonError(what, e);
  od::object o;
  if (auto e = doc.get_object().get(o)) return JsonError(what, e);
  T out;
  if (auto e = Obj(o, out)) return JsonError(what, e);
  return out;
}

template <typename T, error_code (*Obj)(od::object, T&)>
Result<List<T>> DecodeListOf(std::string_view json, std::string_view what) {
  simdjson::padded_string padded(json);
  od::document doc;
  if (auto e = t_parser.iterate(padded).get(doc)) return JsonError(what, e);
  od::object o;
  if (auto e = doc.get_object().get(o)) return JsonError(what, e);
  List<T> list;
  for (auto f : o) {
    std::string_view k;
    if (auto e = f.unescaped_key().get(k)) return JsonError(what, e);
    if (k == "metadata") {
      od::object m;
      if (auto e = f.value().get_object().get(m)) return JsonError(what, e);
      for (auto mf : m) {
        std::string_view mk;
        if (auto e = mf.unescaped_key().get(mk)) return JsonError(what, e);
        error_code e = simdjson::SUCCESS;
        if (mk == "resourceVersion") e = Str(mf.value(), list.resource_version);
        else if (mk == "continue") e = Str(mf.value(), list.continue_token);
        if (e) return JsonError(what, e);
      }
    } else if (k == "items") {
      if (f.value().type() == od::json_type::null) continue;
      od::array arr;
      if (auto e = f.value().get_array().get(arr)) return JsonError(what, e);
      for (auto item : arr) {
        od::object io;
        if (auto e = item.get_object().get(io)) return JsonError(what, e);
        T t;
        if (auto e = Obj(io, t)) return JsonError(what, e);
        list.items.push_back(std::move(t));
      }
    }
  }
  return list;
}

error_code MetaOnlyObj(od::object o, ObjectMeta& m) {
  for (auto f : o) {
    std::string_view k;
    if (auto e = f.unescaped_key().get(k)) return e;
    if (k == "metadata") return Meta(f.value(), m);
  }
  return simdjson::SUCCESS;
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
Result<List<Node>> DecodeNodeList(std::string_view j) { return DecodeListOf<Node, NodeObj>(j, "NodeList"); }
Result<List<Pod>> DecodePodList(std::string_view j) { return DecodeListOf<Pod, PodObj>(j, "PodList"); }
Result<List<PodDisruptionBudget>> DecodePdbList(std::string_view j) {
  return DecodeListOf<PodDisruptionBudget, PdbObj>(j, "PodDisruptionBudgetList");
}
Result<List<Lease>> DecodeLeaseList(std::string_view j) {
  return DecodeListOf<Lease, LeaseObj>(j, "LeaseList");
}

Result<WatchEventRaw> DecodeWatchEvent(std::string_view line) {
  simdjson::padded_string padded(line);
  od::document doc;
  if (auto e = t_parser.iterate(padded).get(doc)) return JsonError("watch event", e);
  od::object o;
  if (auto e = doc.get_object().get(o)) return JsonError("watch event", e);
  WatchEventRaw ev;
  for (auto f : o) {
    std::string_view k;
    if (auto e = f.unescaped_key().get(k)) return JsonError("watch event", e);
    if (k == "type") {
      if (auto e = Str(f.value(), ev.type)) return JsonError("watch event type", e);
    } else if (k == "object") {
      od::object obj;
      if (auto e = f.value().get_object().get(obj)) return JsonError("watch event object", e);
      std::string_view raw;
      if (auto e = obj.raw_json().get(raw)) return JsonError("watch event object", e);
      ev.object.assign(raw);
    }
  }
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
  if (t_parser.iterate(padded).get(doc)) return s;
  od::object o;
  if (doc.get_object().get(o)) return s;
  for (auto f : o) {
    std::string_view k;
    if (f.unescaped_key().get(k)) return s;
    if (k == "code") {
      int64_t c = 0;
      if (!f.value().get_int64().get(c)) s.code = static_cast<long>(c);
    } else if (k == "reason") {
      if (Str(f.value(), s.reason)) return s;
    } else if (k == "message") {
      if (Str(f.value(), s.message)) return s;
    }
  }
  return s;
}

}  // namespace gpuheal::kube
