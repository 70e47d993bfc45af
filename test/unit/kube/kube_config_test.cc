#include "kube/kube_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpuheal::kube {
namespace {

// base64 of "CA-PEM", "CERT-PEM", "KEY-PEM"
constexpr const char* kKubeconfig = R"(apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster:
    server: https://127.0.0.1:6443/
    certificate-authority-data: Q0EtUEVN
- name: c2
  cluster:
    server: https://10.0.0.1:443
    certificate-authority: ca.crt
users:
- name: admin
  user:
    client-certificate-data: Q0VSVC1QRU0=
    client-key-data: S0VZLVBFTQ==
- name: robot
  user:
    token: s3cr3t
contexts:
- name: one
  context: {cluster: c1, user: admin}
- name: two
  context: {cluster: c2, user: robot}
current-context: one
)";

TEST(Kubeconfig, CurrentContextWithInlineData) {
  auto c = ParseKubeconfig(kKubeconfig, "/tmp/kc");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->server, "https://127.0.0.1:6443");
  EXPECT_EQ(c->ca_pem, "CA-PEM");
  EXPECT_EQ(c->client_cert_pem, "CERT-PEM");
  EXPECT_EQ(c->client_key_pem, "KEY-PEM");
  EXPECT_EQ(c->token, nullptr);
}

TEST(Kubeconfig, NamedContextWithFileAndToken) {
  char tmpl[] = "/tmp/gpuheal-kc-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/ca.crt") << "FILE-CA";
  auto c = ParseKubeconfig(kKubeconfig, dir + "/config", "two");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->ca_pem, "FILE-CA");  // relative to the kubeconfig's directory
  ASSERT_NE(c->token, nullptr);
  EXPECT_EQ(*c->token->Get(), "s3cr3t");
  std::filesystem::remove_all(dir);
}

TEST(Kubeconfig, ErrorsNameTheFileAndField) {
  auto missing = ParseKubeconfig(kKubeconfig, "/tmp/kc", "three");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("context \"three\" not found"), std::string::npos);
  auto http = ParseKubeconfig(
      "clusters: [{name: c, cluster: {server: 'http://x'}}]\ncontexts: [{name: a, context: "
      "{cluster: c}}]\ncurrent-context: a\n",
      "/tmp/kc");
  ASSERT_FALSE(http.ok());
  EXPECT_NE(http.error().message.find("must be https://"), std::string::npos);
  auto insecure = ParseKubeconfig(
      "clusters: [{name: c, cluster: {server: 'https://x', insecure-skip-tls-verify: true}}]\n"
      "contexts: [{name: a, context: {cluster: c}}]\ncurrent-context: a\n",
      "/tmp/kc");
  ASSERT_FALSE(insecure.ok());
  EXPECT_NE(insecure.error().message.find("always verifies TLS"), std::string::npos);
  EXPECT_FALSE(ParseKubeconfig("[", "/tmp/kc").ok());
  EXPECT_FALSE(ParseKubeconfig("a: b\n", "/tmp/kc").ok());
  auto nofile = LoadKubeconfig("/nonexistent/kubeconfig");
  ASSERT_FALSE(nofile.ok());
  EXPECT_NE(nofile.error().message.find("/nonexistent/kubeconfig"), std::string::npos);
}

TEST(TokenSource, RereadsTheFileWhenItChanges) {
  char tmpl[] = "/tmp/gpuheal-token-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string path = dir + "/token";
  std::ofstream(path) << "first\n";
  auto t = TokenSource::File(path);
  EXPECT_EQ(*t->Get(), "first");
  // The kubelet swaps the file atomically (rename); a different size or mtime is a new token.
  std::ofstream(dir + "/token.new") << "second-token\n";
  std::filesystem::rename(dir + "/token.new", path);
  EXPECT_EQ(*t->Get(), "second-token");
  std::filesystem::remove_all(dir);
}

TEST(InCluster, NeedsTheServiceEnvironment) {
  unsetenv("KUBERNETES_SERVICE_HOST");
  auto c = InClusterConfig();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("KUBERNETES_SERVICE_HOST"), std::string::npos);
}

}  // namespace
}  // namespace gpuheal::kube
