// Where BMC credentials may go: the allow-list's rules, the endpoint check (plain http, CIDRs,
// host-name suffixes, a resolved name pinned to its allowed addresses), the endpoints ConfigMap's
// entries, the controller's resolution of a node's BMC (ConfigMap first, a Node's own annotation
// only when the policy names it), the policy's keys, and redirects that never leave the BMC.

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "bmc/endpoint_policy.h"
#include "bmc/redfish.h"
#include "controller/bmc_target.h"
#include "controller/policy.h"
#include "fakes/fake_api.h"
#include "kube/objects.h"

namespace gpuheal {
namespace {

using bmc::CheckEndpoint;
using bmc::EndpointRule;
using bmc::ParseEndpoint;
using bmc::ParseEndpointRules;
using nlohmann::json;

std::vector<EndpointRule> Rules(const std::vector<std::string>& text) {
  auto r = ParseEndpointRules(text);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : std::vector<EndpointRule>{};
}

bmc::Resolver FixedDns(std::vector<std::string> answer, int* asked = nullptr) {
  return [answer, asked](const std::string&) -> Result<std::vector<std::string>> {
    if (asked) ++*asked;
    return answer;
  };
}

TEST(BmcEndpointRules, CidrsAddressesAndSuffixesParseAndBadRulesSayWhatIsAccepted) {
  auto r = Rules({"10.20.0.0/16", "192.0.2.7", "fd00::/8", ".bmc.Example.com", "bmc-net"});
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[1].prefix, 32);
  EXPECT_EQ(r[3].kind, EndpointRule::Kind::kHostSuffix);
  EXPECT_EQ(r[3].suffix, "bmc.example.com");
  EXPECT_TRUE(bmc::AddressAllowed("10.20.255.1", r));
  EXPECT_FALSE(bmc::AddressAllowed("10.21.0.1", r));
  EXPECT_TRUE(bmc::AddressAllowed("192.0.2.7", r));
  EXPECT_FALSE(bmc::AddressAllowed("192.0.2.8", r));
  EXPECT_TRUE(bmc::AddressAllowed("fd12::1", r));
  EXPECT_FALSE(bmc::AddressAllowed("fe80::1", r));
  for (const std::string bad : {"10.0.0.0/33", "fd00::/129", "*.bmc.example.com", "10.0.0.0/x", "",
                                "bmc..example.com", "1.2.3", "https://bmc"}) {
    auto e = ParseEndpointRules({bad});
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.error().code, ErrorCode::kUsage) << bad;
    EXPECT_NE(e.error().message.find("\"" + bad + "\""), std::string::npos) << e.error().message;
  }
}

TEST(BmcEndpointCheck, PlainHttpIsRefusedUnlessAllowed) {
  auto e = ParseEndpoint("http://127.0.0.1:8000");
  ASSERT_TRUE(e.ok());
  auto refused = CheckEndpoint(*e, {}, false);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("plain http"), std::string::npos);
  EXPECT_NE(refused.error().message.find("allow_insecure_http"), std::string::npos);
  auto allowed = CheckEndpoint(*e, {}, true);
  ASSERT_TRUE(allowed.ok());
  EXPECT_TRUE(allowed->http) << "the caller logs it";
  EXPECT_FALSE(CheckEndpoint(*ParseEndpoint("https://127.0.0.1"), {}, false)->http);
}

TEST(BmcEndpointCheck, AddressesMustLieInACidr) {
  const auto rules = Rules({"10.20.0.0/16", "fd00::/8", "bmc.example.com"});
  EXPECT_TRUE(CheckEndpoint(*ParseEndpoint("https://10.20.3.4"), rules, false).ok());
  EXPECT_TRUE(CheckEndpoint(*ParseEndpoint("https://[fd00::12]:8443"), rules, false).ok());
  auto out = CheckEndpoint(*ParseEndpoint("https://203.0.113.9:443"), rules, false);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("203.0.113.9 is outside provider.redfish.allowed_endpoints "
                                     "(10.20.0.0/16, fd00::/8, bmc.example.com)"),
            std::string::npos)
      << out.error().message;
  EXPECT_FALSE(CheckEndpoint(*ParseEndpoint("https://[fe80::1]"), rules, false).ok());
}

TEST(BmcEndpointCheck, NamesMatchASuffixOrResolveIntoACidrAndArePinned) {
  const auto rules = Rules({"10.20.0.0/16", "bmc.example.com"});
  int asked = 0;
  // A name under a suffix: trusted by name, not resolved.
  auto by_name = CheckEndpoint(*ParseEndpoint("https://r7-n3.BMC.example.com."), rules, false,
                               FixedDns({"203.0.113.1"}, &asked));
  ASSERT_TRUE(by_name.ok()) << by_name.error().message;
  EXPECT_TRUE(by_name->resolve.empty());
  EXPECT_EQ(asked, 0);
  // A suffix matches whole labels only.
  EXPECT_FALSE(CheckEndpoint(*ParseEndpoint("https://evilbmc.example.com"),
                             Rules({"bmc.example.com"}), false, FixedDns({"10.20.0.1"}))
                   .ok());
  // Another name: resolved, connected only to the addresses inside the CIDRs.
  auto pinned = CheckEndpoint(*ParseEndpoint("https://bmc-7.lab:8443"), rules, false,
                              FixedDns({"203.0.113.1", "10.20.0.7", "10.20.0.8"}, &asked));
  ASSERT_TRUE(pinned.ok()) << pinned.error().message;
  ASSERT_EQ(pinned->resolve.size(), 1u);
  EXPECT_EQ(pinned->resolve[0], "bmc-7.lab:8443:10.20.0.7,10.20.0.8");
  EXPECT_EQ(asked, 1);
  auto v6 = CheckEndpoint(*ParseEndpoint("https://bmc-8.lab"), Rules({"fd00::/8"}), false,
                          FixedDns({"fd00::8"}));
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->resolve[0], "bmc-8.lab:443:[fd00::8]");
  // Resolving only outside: refused, naming what it resolved to.
  auto outside = CheckEndpoint(*ParseEndpoint("https://attacker.lab"), rules, false,
                               FixedDns({"203.0.113.1"}));
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.error().message.find("resolves to 203.0.113.1, outside"), std::string::npos)
      << outside.error().message;
  // Suffix rules only: a name outside them is refused without a DNS query.
  asked = 0;
  EXPECT_FALSE(CheckEndpoint(*ParseEndpoint("https://attacker.lab"), Rules({"bmc.example.com"}),
                             false, FixedDns({"10.20.0.1"}, &asked))
                   .ok());
  EXPECT_EQ(asked, 0);
}

TEST(BmcEntry, AnEndpointOrAMappingWithItsOwnSecret) {
  auto plain = controller::ParseBmcEntry("https://10.20.0.11", "ops", "entry n1");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->endpoint, "https://10.20.0.11");
  EXPECT_EQ(plain->credentials_secret, "");
  auto mapped = controller::ParseBmcEntry(
      "endpoint: https://10.20.0.12/redfish/v1/Systems/1\ncredentials_secret: bmc-rack-7\n", "ops",
      "entry n2");
  ASSERT_TRUE(mapped.ok()) << mapped.error().message;
  EXPECT_EQ(mapped->endpoint, "https://10.20.0.12/redfish/v1/Systems/1");
  EXPECT_EQ(mapped->credentials_secret, "ops/bmc-rack-7");
  auto other_ns =
      controller::ParseBmcEntry("{endpoint: https://b, credentials_secret: vault/b7}", "ops", "e");
  ASSERT_TRUE(other_ns.ok());
  EXPECT_EQ(other_ns->credentials_secret, "vault/b7");
  for (const std::string bad :
       {"{credentials_secret: x}", "{endpoint: https://b, user: root}",
        "{endpoint: https://b, credentials_secret: a/b/c}", "[a, b]", "{endpoint: [x]}"}) {
    auto e = controller::ParseBmcEntry(bad, "ops", "ConfigMap ops/bmc entry n3");
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_NE(e.error().message.find("ConfigMap ops/bmc entry n3"), std::string::npos)
        << e.error().message;
  }
}

class BmcTargetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Secret("gpuheal-system", "gpuheal-bmc", "fleet", "fleet-password");
    Secret("gpuheal-system", "bmc-rack-7", "rack7", "rack7-password");
    node_.meta.name = "n1";
    policy_.credentials_secret = "gpuheal-system/gpuheal-bmc";
    policy_.endpoints_configmap = "gpuheal-system/bmc-endpoints";
  }
  void Secret(const std::string& ns, const std::string& name, const std::string& user,
              const std::string& password) {
    api_.Put("/api/v1/namespaces/" + ns + "/secrets/" + name,
             {{"apiVersion", "v1"},
              {"kind", "Secret"},
              {"metadata", {{"name", name}, {"namespace", ns}}},
              {"data", {{"username", Base64(user)}, {"password", Base64(password)}}}});
  }
  static std::string Base64(const std::string& s) {
    static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    int val = 0, bits = -6;
    for (unsigned char c : s) {
      val = (val << 8) + c;
      bits += 8;
      while (bits >= 0) {
        out.push_back(t[(val >> bits) & 0x3F]);
        bits -= 6;
      }
    }
    if (bits > -6) out.push_back(t[((val << 8) >> (bits + 8)) & 0x3F]);
    while (out.size() % 4) out.push_back('=');
    return out;
  }
  void Endpoints(const json& data) {
    api_.Put("/api/v1/namespaces/gpuheal-system/configmaps/bmc-endpoints",
             {{"apiVersion", "v1"},
              {"kind", "ConfigMap"},
              {"metadata", {{"name", "bmc-endpoints"}, {"namespace", "gpuheal-system"}}},
              {"data", data}});
  }
  Result<controller::BmcTarget> Resolve() {
    return controller::ResolveBmcTarget(api_, policy_, node_, FixedDns({"10.20.0.99"}));
  }

  testing::FakeApi api_;
  controller::Policy::Redfish policy_;
  kube::Node node_;
};

TEST_F(BmcTargetTest, TheConfigMapIsTheSourceAndTheNodesOwnAnnotationIsIgnoredByDefault) {
  Endpoints({{"n1", "https://10.20.0.11"}});
  node_.meta.annotations["gpuheal.io/bmc-endpoint"] = "http://203.0.113.66";
  auto t = Resolve();
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->url, "https://10.20.0.11");
  EXPECT_EQ(t->credentials.username, "fleet");
  EXPECT_EQ(t->Describe(),
            "BMC https://10.20.0.11 from ConfigMap gpuheal-system/bmc-endpoints, credentials from "
            "Secret gpuheal-system/gpuheal-bmc");
  // No entry: the annotation still is not used, and the error says where to add the node.
  Endpoints({{"n2", "https://10.20.0.12"}});
  auto none = Resolve();
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("add its entry to ConfigMap gpuheal-system/bmc-endpoints"),
            std::string::npos)
      << none.error().message;
}

TEST_F(BmcTargetTest, AnEntryNamesItsOwnCredentials) {
  Endpoints({{"n1", "endpoint: https://10.20.0.11\ncredentials_secret: bmc-rack-7\n"}});
  auto t = Resolve();
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->credentials.username, "rack7");
  EXPECT_EQ(t->credentials.password, "rack7-password");
  EXPECT_EQ(t->secret, "gpuheal-system/bmc-rack-7");
}

TEST_F(BmcTargetTest, TheAnnotationWhenNamedIsCheckedAndNeverChoosesTheCredentials) {
  using Source = controller::Policy::Redfish::EndpointSource;
  policy_.endpoint_sources = {Source::kNodeAnnotation, Source::kConfigMap};
  policy_.allowed_endpoints = {"10.20.0.0/16"};
  policy_.allowed_endpoint_rules = Rules(policy_.allowed_endpoints);
  Endpoints({{"n1", "endpoint: https://10.20.0.11\ncredentials_secret: bmc-rack-7\n"}});
  node_.meta.annotations["gpuheal.io/bmc-endpoint"] = "https://10.20.0.40";
  auto t = Resolve();
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->url, "https://10.20.0.40");
  EXPECT_EQ(t->secret, "gpuheal-system/gpuheal-bmc") << "the policy's Secret, not the entry's";
  // Outside the allow-list: refused, and the Secret is not even read.
  node_.meta.annotations["gpuheal.io/bmc-endpoint"] = "https://203.0.113.66";
  const size_t secret_reads = api_.Count("GET", "/secrets/");
  auto refused = Resolve();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("outside provider.redfish.allowed_endpoints"),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("(from annotation gpuheal.io/bmc-endpoint)"),
            std::string::npos)
      << refused.error().message;
  EXPECT_EQ(api_.Count("GET", "/secrets/"), secret_reads);
}

TEST(RedfishPolicy, TheEndpointSourcesAllowListAndHttpKeys) {
  const std::string base =
      "provider:\n  name: redfish\n  redfish:\n    endpoints_configmap: ops/bmc\n";
  auto p = controller::ParsePolicy(base, "policy.yaml");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->redfish.endpoint_sources,
            std::vector{controller::Policy::Redfish::EndpointSource::kConfigMap});
  EXPECT_FALSE(p->redfish.allow_insecure_http);
  p = controller::ParsePolicy(base +
                                  "    endpoint_sources: [node-annotation, configmap]\n"
                                  "    allowed_endpoints: [10.20.0.0/16, bmc.example.com]\n"
                                  "    allow_insecure_http: true\n",
                              "policy.yaml");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->redfish.allowed_endpoint_rules.size(), 2u);
  EXPECT_TRUE(p->redfish.allow_insecure_http);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {base + "    endpoint_sources: [node-annotation]\n",
       "needs \"provider.redfish.allowed_endpoints\""},
      {base + "    endpoint_sources: [dns]\n", "unknown endpoint source \"dns\""},
      {base + "    endpoint_sources: [configmap, configmap]\n", "named twice"},
      {base + "    allowed_endpoints: [\"*.bmc\"]\n", "neither a CIDR"},
      {"provider:\n  name: redfish\n", "needs \"provider.redfish.endpoints_configmap\""},
  };
  for (const auto& [yaml, want] : bad) {
    auto e = controller::ParsePolicy(yaml, "policy.yaml");
    ASSERT_FALSE(e.ok()) << yaml;
    EXPECT_NE(e.error().message.find(want), std::string::npos) << e.error().message;
    EXPECT_NE(e.error().message.find("policy.yaml:"), std::string::npos) << e.error().message;
  }
}

// A BMC that redirects: within its own endpoint the client follows (307 keeps the method); to
// another host it does not, so neither the password nor a session token goes there.
class RedirectingBmc : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Get("/redfish/v1/Systems/by-name", [](const httplib::Request&, httplib::Response& res) {
      res.status = 307;
      res.set_header("Location", "/redfish/v1/Systems/1");
    });
    server_.Get("/redfish/v1/Systems/elsewhere",
                [this](const httplib::Request&, httplib::Response& res) {
                  res.status = 307;
                  res.set_header("Location", "http://127.0.0.2:" + std::to_string(other_port_) +
                                                 "/redfish/v1/Systems/1");
                });
    server_.Get("/redfish/v1/Systems/1", [](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("Authorization").empty()) {
        res.status = 401;
        return;
      }
      res.set_content(json{{"@odata.id", "/redfish/v1/Systems/1"},
                           {"Id", "1"},
                           {"PowerState", "On"},
                           {"Actions",
                            {{"#ComputerSystem.Reset",
                              {{"target", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"}}}}}}
                          .dump(),
                      "application/json");
    });
    other_.Get(R"(/.*)", [this](const httplib::Request&, httplib::Response& res) {
      ++other_requests_;
      res.status = 200;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    other_port_ = other_.bind_to_any_port("127.0.0.2");
    ASSERT_GT(port_, 0);
    ASSERT_GT(other_port_, 0);
    threads_.emplace_back([this] { server_.listen_after_bind(); });
    threads_.emplace_back([this] { other_.listen_after_bind(); });
    while (!server_.is_running() || !other_.is_running())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void TearDown() override {
    server_.stop();
    other_.stop();
    for (auto& t : threads_) t.join();
  }
  bmc::RedfishClient Client(const std::string& system) {
    bmc::ClientOptions o;
    o.attempts = 1;
    return bmc::RedfishClient(*ParseEndpoint("http://127.0.0.1:" + std::to_string(port_) +
                                             "/redfish/v1/Systems/" + system),
                              {"admin", "s3cret"}, o);
  }

  httplib::Server server_, other_;
  int port_ = 0, other_port_ = 0;
  std::atomic<int> other_requests_{0};
  std::vector<std::thread> threads_;
};

TEST_F(RedirectingBmc, ARedirectIsFollowedOnlyWithinTheEndpoint) {
  auto c = Client("by-name");
  auto s = c.System();
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->path, "/redfish/v1/Systems/1");
  auto away = Client("elsewhere");
  auto refused = away.System();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("not followed, it leaves the BMC's endpoint"),
            std::string::npos)
      << refused.error().message;
  EXPECT_EQ(other_requests_.load(), 0);
}

}  // namespace
}  // namespace gpuheal
