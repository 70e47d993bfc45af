// Failure domains: which faulty nodes make an infrastructure incident, from the Nodes alone.

#include "controller/incidents.h"

#include <gtest/gtest.h>

#include "core/keys.h"
#include "core/time.h"

namespace gpuheal::controller {
namespace {

using namespace std::chrono_literals;
using SysTime = std::chrono::system_clock::time_point;

const SysTime kT0 = *kube::ParseTime("2026-06-01T12:00:00Z");

kube::Node Node(const std::string& name, std::map<std::string, std::string> labels,
                std::optional<SysTime> fault = std::nullopt) {
  kube::Node n;
  n.meta.name = name;
  n.meta.labels = std::move(labels);
  n.gpu_capacity = 8;
  kube::NodeCondition c;
  c.type = "AcceleratedHardwareReady";
  c.status = fault ? "False" : "True";
  c.reason = fault ? "NvidiaXID79Error" : "GPUsHealthy";
  c.message = fault ? "[catastrophic/isolate] GPU 0000:3b:00: fell off the bus" : "";
  c.last_transition_time = kube::RfcTime(fault.value_or(kT0 - 24h));
  n.conditions.push_back(c);
  return n;
}

FailureDomains Racks(int nodes = 3, std::chrono::milliseconds window = 5min) {
  FailureDomains f;
  f.labels = {"example.com/rack"};
  f.nodes = nodes;
  f.window = window;
  return f;
}

TEST(Incidents, ThreeFaultsOfOneRackWithinTheWindowAreOneIncident) {
  std::vector<kube::Node> nodes = {
      Node("a1", {{"example.com/rack", "r1"}}, kT0),
      Node("a2", {{"example.com/rack", "r1"}}, kT0 + 40s),
      Node("a3", {{"example.com/rack", "r1"}}, kT0 + 4min),
      Node("a4", {{"example.com/rack", "r1"}}),  // healthy
      Node("b1", {{"example.com/rack", "r2"}}, kT0),
      Node("b2", {{"example.com/rack", "r2"}}, kT0),
      Node("c1", {}, kT0),  // no rack
  };
  const auto incidents = FindIncidents(nodes, Racks());
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_EQ(incidents[0].Domain(), "example.com/rack=r1");
  EXPECT_EQ(incidents[0].nodes, (std::vector<std::string>{"a1", "a2", "a3"}));
  EXPECT_EQ(incidents[0].last - incidents[0].first, 4min);
  EXPECT_TRUE(IncidentOf(nodes[0], incidents));
  EXPECT_FALSE(IncidentOf(nodes[3], incidents)) << "a healthy node of the rack holds nothing";
  EXPECT_FALSE(IncidentOf(nodes[4], incidents)) << "two faults of r2 are not enough";
  EXPECT_FALSE(IncidentOf(nodes[6], incidents));
  EXPECT_NE(incidents[0].Describe(Racks()).find("3 node(s) of example.com/rack=r1 faulted within "
                                                "240 s (at least 3 make an incident): a1, a2, a3"),
            std::string::npos)
      << incidents[0].Describe(Racks());
}

TEST(Incidents, FaultsFartherApartThanTheWindowAreNot) {
  std::vector<kube::Node> nodes = {
      Node("a1", {{"example.com/rack", "r1"}}, kT0),
      Node("a2", {{"example.com/rack", "r1"}}, kT0 + 6min),
      Node("a3", {{"example.com/rack", "r1"}}, kT0 + 12min),
  };
  EXPECT_TRUE(FindIncidents(nodes, Racks()).empty());
  // Two more within one window of the third make one; the rack's earlier faulty nodes are held
  // with them.
  nodes.push_back(Node("a4", {{"example.com/rack", "r1"}}, kT0 + 12min + 30s));
  nodes.push_back(Node("a5", {{"example.com/rack", "r1"}}, kT0 + 13min));
  auto incidents = FindIncidents(nodes, Racks());
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_EQ(incidents[0].nodes.size(), 5u);
  EXPECT_EQ(incidents[0].first, kT0 + 12min);
  EXPECT_EQ(incidents[0].last, kT0 + 13min);
}

TEST(Incidents, NoLabelsNoIncidentsAndGpuLevelFaultsDoNotCount) {
  std::vector<kube::Node> nodes;
  for (int i = 0; i < 4; ++i)
    nodes.push_back(Node("a" + std::to_string(i), {{"example.com/rack", "r1"}}, kT0));
  EXPECT_TRUE(FindIncidents(nodes, FailureDomains{}).empty()) << "failure_domains unset: off";
  EXPECT_EQ(FindIncidents(nodes, Racks(5)).size(), 0u) << "4 faults, 5 needed";
  // Critical faults of single GPUs (the agent's annotation) leave the nodes in service.
  std::vector<kube::Node> gpu_level;
  for (int i = 0; i < 4; ++i) {
    auto n = Node("g" + std::to_string(i), {{"example.com/rack", "r1"}});
    n.meta.annotations[std::string(keys::kGpuFaults)] =
        R"({"0000:3b:00.0":{"severity":"critical","reason":"NvidiaXID94Error","xid":94,)"
        R"("count":1,"since":"2026-06-01T12:00:00Z"}})";
    gpu_level.push_back(n);
  }
  EXPECT_TRUE(FindIncidents(gpu_level, Racks()).empty());
}

TEST(Incidents, AReleasedNodesFaultNoLongerCounts) {
  std::vector<kube::Node> nodes = {
      Node("a1", {{"example.com/rack", "r1"}}, kT0),
      Node("a2", {{"example.com/rack", "r1"}}, kT0),
      Node("a3", {{"example.com/rack", "r1"}}, kT0 + 10s),
      Node("a4", {{"example.com/rack", "r1"}}, kT0 + 20s),
  };
  ASSERT_EQ(FindIncidents(nodes, Racks()).size(), 1u);
  // The operator releases two nodes (kubectl annotate nodes -l ...): they are not held, and two
  // faults are left, fewer than an incident needs.
  for (int i : {0, 1})
    nodes[i].meta.annotations[std::string(keys::kIncidentRelease)] = kube::RfcTime(kT0 + 5s);
  nodes[2].meta.annotations[std::string(keys::kIncidentRelease)] = kube::RfcTime(kT0 + 5s);
  EXPECT_EQ(FindIncidents(nodes, Racks()).size(), 0u);
  // a3's release predates its fault: it counts. With a fifth fault the three form one again, and
  // the released nodes are not held.
  nodes.push_back(Node("a5", {{"example.com/rack", "r1"}}, kT0 + 30s));
  auto incidents = FindIncidents(nodes, Racks());
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_EQ(incidents[0].nodes, (std::vector<std::string>{"a3", "a4", "a5"}));
  EXPECT_FALSE(IncidentOf(nodes[0], incidents));
  // An unreadable release releases nothing.
  nodes[4].meta.annotations[std::string(keys::kIncidentRelease)] = "yesterday";
  EXPECT_EQ(FindIncidents(nodes, Racks()).size(), 1u);
}

TEST(Incidents, EachLabelIsADomainOfItsOwn) {
  FailureDomains f = Racks();
  f.labels = {"example.com/rack", "example.com/pdu"};
  std::vector<kube::Node> nodes;
  // Three racks on one PDU, one fault each: the PDU is the incident.
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(Node("n" + std::to_string(i),
                         {{"example.com/rack", "r" + std::to_string(i)}, {"example.com/pdu", "p1"}},
                         kT0 + std::chrono::seconds(i)));
  }
  const auto incidents = FindIncidents(nodes, f);
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_EQ(incidents[0].Domain(), "example.com/pdu=p1");
  for (const auto& n : nodes) EXPECT_TRUE(IncidentOf(n, incidents)) << n.meta.name;
}

}  // namespace
}  // namespace gpuheal::controller
