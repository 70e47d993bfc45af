#pragma once
// A local control plane (scripts/control-plane.sh) owned by a C++ object: started in a fresh
// directory, stopped and removed by the destructor, whatever path the owner leaves by. Used by
// the integration tests' GoogleTest environment and by the Kubernetes benchmarks.

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace gpuheal::testing {

class LocalControlPlane {
 public:
  // nullptr when it did not come up; `log` then holds the script's output.
  // `extra`: more flags for `up`, e.g. "--with-node".
  static std::unique_ptr<LocalControlPlane> Up(bool with_controllers,
                                               const std::vector<std::string>& apiserver_args,
                                               std::string* log, const std::string& extra = "") {
    char tmpl[] = "/tmp/gpuheal-it-XXXXXX";
    std::unique_ptr<LocalControlPlane> cp(new LocalControlPlane(mkdtemp(tmpl)));
    std::string cmd = "bash " + Script() + " up --dir " + cp->dir_ +
                      (with_controllers ? " --with-controllers" : "") +
                      (extra.empty() ? "" : " " + extra);
    for (const auto& a : apiserver_args) cmd += " '--apiserver-arg=" + a + "'";
    cmd += " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::array<char, 4096> buf;
    std::string out;
    while (fgets(buf.data(), buf.size(), p)) out += buf.data();
    const int rc = pclose(p);
    const size_t at = out.rfind("KUBECONFIG=");
    if (rc != 0 || at == std::string::npos) {
      if (log) *log = out;
      return nullptr;  // the destructor cleans up whatever was started
    }
    cp->out_ = out;
    cp->kubeconfig_ = out.substr(at + 11);
    cp->kubeconfig_.erase(cp->kubeconfig_.find_last_not_of('\n') + 1);
    std::ifstream(cp->dir_ + "/etcd.url") >> cp->etcd_url_;
    return cp;
  }
  ~LocalControlPlane() {
    [[maybe_unused]] int rc =
        std::system(("bash " + Script() + " down --dir " + dir_ + " >/dev/null 2>&1").c_str());
  }
  LocalControlPlane(const LocalControlPlane&) = delete;
  LocalControlPlane& operator=(const LocalControlPlane&) = delete;

  const std::string& dir() const { return dir_; }
  const std::string& kubeconfig() const { return kubeconfig_; }
  const std::string& etcd_url() const { return etcd_url_; }  // http://127.0.0.1:PORT
  // The value of the last "KEY=value" line `up` printed ("NODE", "HELM"...), "" when none.
  std::string Printed(const std::string& key) const {
    const size_t at = out_.rfind("\n" + key + "=");
    if (at == std::string::npos) return "";
    const size_t from = at + key.size() + 2;
    return out_.substr(from, out_.find('\n', from) - from);
  }

 private:
  explicit LocalControlPlane(std::string dir) : dir_(std::move(dir)) {}
  static std::string Script() {
    return std::string(GPUHEAL_SOURCE_DIR) + "/scripts/control-plane.sh";
  }
  std::string dir_, kubeconfig_, etcd_url_, out_;
};

}  // namespace gpuheal::testing
