#include "kube/kube_config.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>

#include "core/base64.h"
#include "core/file.h"

namespace gpuheal::kube {
namespace {

Result<std::string> ReadFile(const std::string& path, const std::string& what) {
  auto text = ReadWholeFile(path);
  if (!text) return Error{fmt::format("{}: cannot read {}", path, what)};
  return std::move(*text);
}

std::string Resolve(const std::string& base_dir, const std::string& p) {
  if (p.empty() || p[0] == '/') return p;
  return (std::filesystem::path(base_dir) / p).string();
}

// A PEM value from either FIELD-data (base64) or FIELD (a path relative to the kubeconfig).
Result<std::string> PemField(const YAML::Node& n, const std::string& field, const std::string& dir,
                             const std::string& where) {
  if (n[field + "-data"]) {
    return Base64Decode(n[field + "-data"].as<std::string>(), where + "." + field + "-data");
  }
  if (n[field]) return ReadFile(Resolve(dir, n[field].as<std::string>()), where + "." + field);
  return std::string();
}

const YAML::Node FindNamed(const YAML::Node& list, const std::string& name) {
  if (!list || !list.IsSequence()) return YAML::Node();
  for (const YAML::Node& item : list) {
    if (item["name"] && item["name"].as<std::string>() == name) return item;
  }
  return YAML::Node();
}

}  // namespace

std::shared_ptr<TokenSource> TokenSource::Static(std::string token) {
  auto t = std::make_shared<TokenSource>();
  t->token_ = std::move(token);
  return t;
}

std::shared_ptr<TokenSource> TokenSource::File(std::string path) {
  auto t = std::make_shared<TokenSource>();
  t->path_ = std::move(path);
  return t;
}

Result<std::string> TokenSource::Get() {
  std::lock_guard<std::mutex> lock(mu_);
  if (path_.empty()) return token_;
  struct stat st {};
  if (stat(path_.c_str(), &st) != 0) {
    if (!token_.empty()) return token_;  // briefly missing during an atomic swap: keep the last
    return Error{fmt::format("{}: cannot read service-account token", path_)};
  }
  const int64_t mtime =
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  if (mtime != mtime_ns_ || st.st_size != size_) {
    auto t = ReadFile(path_, "service-account token");
    if (!t) return t.error();
    std::string tok = *t;
    while (!tok.empty() && (tok.back() == '\n' || tok.back() == '\r' || tok.back() == ' '))
      tok.pop_back();
    token_ = tok;
    mtime_ns_ = mtime;
    size_ = st.st_size;
  }
  return token_;
}

Result<Config> ParseKubeconfig(const std::string& yaml, const std::string& source,
                               const std::string& context) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return Error{fmt::format("{}:{}: not valid YAML: {}", source, e.mark.line + 1, e.msg)};
  }
  try {
    if (!root.IsMap())
      return Error{fmt::format("{}: not a kubeconfig (expected a mapping)", source)};
    const std::string dir = std::filesystem::path(source).parent_path().string();
    std::string ctx_name = context;
    if (ctx_name.empty()) {
      if (!root["current-context"] || root["current-context"].as<std::string>().empty()) {
        return Error{fmt::format("{}: no current-context and no context given", source)};
      }
      ctx_name = root["current-context"].as<std::string>();
    }
    const YAML::Node ctx = FindNamed(root["contexts"], ctx_name);
    if (!ctx || !ctx["context"]) {
      return Error{fmt::format("{}: context \"{}\" not found in contexts", source, ctx_name)};
    }
    const std::string cluster_name =
        ctx["context"]["cluster"] ? ctx["context"]["cluster"].as<std::string>() : "";
    const std::string user_name =
        ctx["context"]["user"] ? ctx["context"]["user"].as<std::string>() : "";
    const YAML::Node cluster = FindNamed(root["clusters"], cluster_name);
    if (!cluster || !cluster["cluster"]) {
      return Error{fmt::format("{}: cluster \"{}\" (context {}) not found in clusters", source,
                               cluster_name, ctx_name)};
    }
    Config cfg;
    cfg.source = source;
    const YAML::Node c = cluster["cluster"];
    if (!c["server"])
      return Error{fmt::format("{}: clusters[{}].cluster.server is missing", source, cluster_name)};
    cfg.server = c["server"].as<std::string>();
    while (!cfg.server.empty() && cfg.server.back() == '/') cfg.server.pop_back();
    if (!cfg.server.starts_with("https://")) {
      return Error{
          fmt::format("{}: clusters[{}].cluster.server \"{}\" must be https:// (TLS is "
                      "required)",
                      source, cluster_name, cfg.server)};
    }
    if (c["insecure-skip-tls-verify"] && c["insecure-skip-tls-verify"].as<bool>()) {
      return Error{
          fmt::format("{}: clusters[{}] sets insecure-skip-tls-verify; gpuheal always "
                      "verifies TLS: give certificate-authority(-data) instead",
                      source, cluster_name)};
    }
    auto ca = PemField(c, "certificate-authority", dir,
                       fmt::format("clusters[{}].cluster", cluster_name));
    if (!ca) return Error{fmt::format("{}: {}", source, ca.error().message)};
    cfg.ca_pem = *ca;
    if (!user_name.empty()) {
      const YAML::Node user = FindNamed(root["users"], user_name);
      if (!user || !user["user"]) {
        return Error{fmt::format("{}: user \"{}\" (context {}) not found in users", source,
                                 user_name, ctx_name)};
      }
      const YAML::Node u = user["user"];
      const std::string where = fmt::format("users[{}].user", user_name);
      auto cert = PemField(u, "client-certificate", dir, where);
      if (!cert) return Error{fmt::format("{}: {}", source, cert.error().message)};
      auto key = PemField(u, "client-key", dir, where);
      if (!key) return Error{fmt::format("{}: {}", source, key.error().message)};
      cfg.client_cert_pem = *cert;
      cfg.client_key_pem = *key;
      if (cfg.client_cert_pem.empty() != cfg.client_key_pem.empty()) {
        return Error{
            fmt::format("{}: {} needs both client-certificate and client-key", source, where)};
      }
      if (u["token"]) cfg.token = TokenSource::Static(u["token"].as<std::string>());
      if (u["tokenFile"])
        cfg.token = TokenSource::File(Resolve(dir, u["tokenFile"].as<std::string>()));
      if (u["exec"] || u["auth-provider"]) {
        return Error{
            fmt::format("{}: {} uses exec/auth-provider credentials, which gpuheal does not "
                        "run; use a client certificate or token",
                        source, where)};
      }
    }
    return cfg;
  } catch (const YAML::Exception& e) {
    return Error{fmt::format("{}:{}: {}", source, e.mark.line + 1, e.msg)};
  }
}

Result<Config> LoadKubeconfig(const std::string& path, const std::string& context) {
  std::string p = path;
  if (p.empty()) {
    if (const char* env = std::getenv("KUBECONFIG"); env && *env) {
      p = env;
      p = p.substr(0, p.find(':'));  // the first file of a list
    } else if (const char* home = std::getenv("HOME")) {
      p = std::string(home) + "/.kube/config";
    }
  }
  auto text = ReadFile(p, "kubeconfig");
  if (!text) return Error{text.error().message + " (give --kubeconfig or set KUBECONFIG)"};
  return ParseKubeconfig(*text, p, context);
}

Result<Config> InClusterConfig(const std::string& token_path, const std::string& ca_path) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port) {
    return Error{
        "in-cluster config: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are not set "
        "(not running in a pod? give --kubeconfig)"};
  }
  Config cfg;
  cfg.source = "in-cluster";
  const std::string h = host;
  cfg.server =
      fmt::format("https://{}:{}", h.find(':') != std::string::npos ? "[" + h + "]" : h, port);
  auto ca = ReadFile(ca_path, "service-account CA");
  if (!ca) return ca.error();
  cfg.ca_pem = *ca;
  cfg.token = TokenSource::File(token_path);
  if (auto t = cfg.token->Get(); !t) return t.error();
  return cfg;
}

}  // namespace gpuheal::kube
