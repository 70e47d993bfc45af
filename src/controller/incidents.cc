#include "controller/incidents.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "controller/node_fault.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/time.h"

namespace gpuheal::controller {
namespace {

using SysTime = std::chrono::system_clock::time_point;

// The node's gpuheal.io/incident-release time; an unreadable one is said once per reconcile and
// ignored (it releases nothing).
std::optional<SysTime> ReleaseTime(const kube::Node& n) {
  auto it = n.meta.annotations.find(std::string(keys::kIncidentRelease));
  if (it == n.meta.annotations.end()) return std::nullopt;
  auto t = kube::ParseTime(it->second);
  if (!t) {
    Log("warn", "ignoring an unreadable incident release: it must be an RFC 3339 UTC time",
        {{"node", n.meta.name},
         {"annotation", keys::kIncidentRelease},
         {"value", it->second.substr(0, 64)}});
  }
  return t;
}

}  // namespace

std::string Incident::Describe(const FailureDomains& policy) const {
  std::string names;
  for (size_t i = 0; i < nodes.size() && i < 8; ++i) names += (i ? ", " : "") + nodes[i];
  if (nodes.size() > 8) names += fmt::format(" (+{} more)", nodes.size() - 8);
  return fmt::format(
      "{} node(s) of {} faulted within {} s (at least {} make an incident): {}; node-level "
      "remediation held until the domain recovers or {} on its nodes releases them",
      nodes.size(), Domain(),
      std::chrono::duration_cast<std::chrono::seconds>(last - first).count(), policy.nodes, names,
      keys::kIncidentRelease);
}

std::vector<Incident> FindIncidents(const std::vector<kube::Node>& nodes,
                                    const FailureDomains& policy) {
  std::vector<Incident> out;
  if (policy.labels.empty()) return out;
  struct Domain {
    std::vector<std::pair<SysTime, std::string>> faults;  // since, node
  };
  for (const auto& label : policy.labels) {
    std::map<std::string, Domain> domains;
    for (const auto& n : nodes) {
      auto v = n.meta.labels.find(label);
      if (v == n.meta.labels.end() || v->second.empty()) continue;
      auto f = FaultOf(n, false);
      if (!f) continue;
      // Released by hand: this node's fault no longer counts (and the node is not held).
      if (auto released = ReleaseTime(n); released && f->since <= *released) continue;
      domains[v->second].faults.emplace_back(f->since, n.meta.name);
    }
    for (auto& [value, d] : domains) {
      if (static_cast<int>(d.faults.size()) < policy.nodes) continue;
      std::sort(d.faults.begin(), d.faults.end());
      // The widest burst: the most faults whose times lie within one window.
      size_t best_begin = 0, best_len = 0;
      for (size_t b = 0, e = 0; b < d.faults.size(); ++b) {
        e = std::max(e, b);
        while (e < d.faults.size() && d.faults[e].first - d.faults[b].first <= policy.window) ++e;
        if (e - b > best_len) {
          best_len = e - b;
          best_begin = b;
        }
      }
      if (static_cast<int>(best_len) < policy.nodes) continue;
      Incident inc;
      inc.label = label;
      inc.value = value;
      inc.first = d.faults[best_begin].first;
      inc.last = d.faults[best_begin + best_len - 1].first;
      for (const auto& f : d.faults) inc.nodes.push_back(f.second);
      std::sort(inc.nodes.begin(), inc.nodes.end());
      out.push_back(std::move(inc));
    }
  }
  std::sort(out.begin(), out.end(), [](const Incident& a, const Incident& b) {
    return std::tie(a.label, a.value) < std::tie(b.label, b.value);
  });
  return out;
}

std::optional<Incident> IncidentOf(const kube::Node& node, const std::vector<Incident>& incidents) {
  for (const auto& inc : incidents) {
    auto v = node.meta.labels.find(inc.label);
    if (v == node.meta.labels.end() || v->second != inc.value) continue;
    if (std::binary_search(inc.nodes.begin(), inc.nodes.end(), node.meta.name)) return inc;
  }
  return std::nullopt;
}

}  // namespace gpuheal::controller
