#pragma once
// Where and how to reach the API server: kubeconfig files (client certificates, bearer tokens,
// CA, inline *-data, current context) and in-cluster config (service-account token re-read when
// the kubelet rotates it, CA file, KUBERNETES_SERVICE_HOST/PORT). TLS verification is always on.

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "core/result.h"

namespace gpuheal::kube {

// A bearer token that may live in a file the kubelet rewrites (bound tokens rotate).
class TokenSource {
 public:
  static std::shared_ptr<TokenSource> Static(std::string token);
  static std::shared_ptr<TokenSource> File(std::string path);
  // The current token; re-reads the file when its modification time or size changed.
  Result<std::string> Get();

 private:
  std::mutex mu_;
  std::string token_;
  std::string path_;
  int64_t mtime_ns_ = -1;
  int64_t size_ = -1;
};

struct Config {
  std::string server;           // https://host:port
  std::string ca_pem;           // PEM of the CA bundle (from *-data or a file)
  std::string client_cert_pem;  // client certificate authentication
  std::string client_key_pem;
  std::shared_ptr<TokenSource> token;  // bearer authentication (may be null)
  std::string user_agent = "gpuheal";
  std::chrono::milliseconds timeout = std::chrono::seconds(30);
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(5);
  double qps = 50;  // client-side rate limit
  int burst = 100;
  std::string source;  // where it came from, for messages
};

// Loads `path` (or $KUBECONFIG, or ~/.kube/config when empty) using `context` (or the current one).
Result<Config> LoadKubeconfig(const std::string& path, const std::string& context = "");
Result<Config> ParseKubeconfig(const std::string& yaml, const std::string& source,
                               const std::string& context = "");

// In-cluster: KUBERNETES_SERVICE_HOST/PORT and the service account's token and CA files.
Result<Config> InClusterConfig(
    const std::string& token_path = "/var/run/secrets/kubernetes.io/serviceaccount/token",
    const std::string& ca_path = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt");

}  // namespace gpuheal::kube
