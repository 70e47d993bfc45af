#pragma once
// Helpers shared by the integration tests: an admin client for the test's control plane,
// object builders, and waiting for a condition.

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "control_plane_env.h"
#include "kube/client.h"
#include "kube/objects.h"

namespace gpuheal::testing {

inline std::unique_ptr<kube::Client> AdminClient() {
  auto cfg = kube::LoadKubeconfig(ControlPlaneEnv::kubeconfig());
  EXPECT_TRUE(cfg.ok()) << cfg.error().message;
  cfg->qps = 500;
  cfg->burst = 1000;
  auto c = kube::Client::Create(std::move(*cfg));
  EXPECT_TRUE(c.ok());
  return std::move(*c);
}

// Writes a kubeconfig for the test control plane that authenticates with `token` only (a
// ServiceAccount's), so a binary runs with nothing but that account's RBAC.
inline void WriteTokenKubeconfig(const std::string& path, const std::string& server,
                                 const std::string& token) {
  std::ofstream(path)
      << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " << server
      << "\n    certificate-authority: " << ControlPlaneEnv::dir()
      << "/pki/ca.crt\nusers:\n- name: u\n  user:\n"
      << "    token: " << token
      << "\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n";
}

inline nlohmann::json NodeJson(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"gpuheal.io/pool", "test"}}}}}};
}

inline nlohmann::json PodJson(const std::string& ns, const std::string& name,
                              const std::string& node,
                              const nlohmann::json& labels = nlohmann::json::object()) {
  nlohmann::json pod = {{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}},
                        {"spec",
                         {{"containers", {{{"name", "main"}, {"image", "registry.invalid/app:1"}}}},
                          {"terminationGracePeriodSeconds", 0}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

// Polls `cond` every 20 ms until it holds or `timeout` passes.
inline bool Eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

// The Node's condition `type`, when the API server has one.
inline std::optional<kube::NodeCondition> NodeConditionOf(kube::Client& client,
                                                          const std::string& node,
                                                          const std::string& type) {
  auto r = client.Get(kube::NodePath(node));
  if (!r || !r->ok()) return std::nullopt;
  auto n = kube::DecodeNode(r->body);
  if (!n) return std::nullopt;
  for (const auto& c : n->conditions) {
    if (c.type == type) return c;
  }
  return std::nullopt;
}

// The Node's Events (namespace default) with `reason`.
inline std::vector<nlohmann::json> NodeEvents(kube::Client& client, const std::string& node,
                                              const std::string& reason) {
  auto r =
      client.Get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D" + node);
  std::vector<nlohmann::json> out;
  if (!r || !r->ok()) return out;
  const nlohmann::json list = nlohmann::json::parse(r->body, nullptr, false);
  if (!list.is_object()) return out;
  for (const auto& ev : list.value("items", nlohmann::json::array())) {
    if (ev.value("reason", "") == reason) out.push_back(ev);
  }
  return out;
}

// The sum of the counts of the Node's Events with `reason`.
inline int NodeEventCount(kube::Client& client, const std::string& node,
                          const std::string& reason) {
  int n = 0;
  for (const auto& ev : NodeEvents(client, node, reason)) n += ev.value("count", 1);
  return n;
}

}  // namespace gpuheal::testing
