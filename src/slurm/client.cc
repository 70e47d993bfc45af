#include "slurm/client.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <signal.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <mutex>

#include "core/dl_symbol.h"

namespace gpuheal::slurm {

const char* const kLibslurmSoname = "libslurm.so.38";

namespace {

// The entry points used, typed from libslurm's own header (never linked: resolved by dlsym).
struct Libslurm {
  decltype(&::slurm_init) init = nullptr;
  decltype(&::slurm_get_errno) get_errno = nullptr;
  decltype(&::slurm_strerror) strerror = nullptr;
  decltype(&::slurm_load_node_single) load_node_single = nullptr;
  decltype(&::slurm_free_node_info_msg) free_node_info_msg = nullptr;
  decltype(&::slurm_init_update_node_msg) init_update_node_msg = nullptr;
  decltype(&::slurm_update_node) update_node = nullptr;
  decltype(&::slurm_load_jobs) load_jobs = nullptr;
  decltype(&::slurm_load_job) load_job = nullptr;
  decltype(&::slurm_free_job_info_msg) free_job_info_msg = nullptr;
  decltype(&::slurm_kill_job2) kill_job2 = nullptr;
  decltype(&::slurm_requeue) requeue = nullptr;
  decltype(&::slurm_init_job_desc_msg) init_job_desc_msg = nullptr;
  decltype(&::slurm_submit_batch_job) submit_batch_job = nullptr;
  decltype(&::slurm_free_submit_response_response_msg) free_submit_response = nullptr;
  decltype(&::slurm_hostlist_create) hostlist_create = nullptr;
  decltype(&::slurm_hostlist_find) hostlist_find = nullptr;
  decltype(&::slurm_hostlist_destroy) hostlist_destroy = nullptr;
  // Exported by libslurm, declared only in Slurm's internal headers.
  char* (*node_state_string)(uint32_t) = nullptr;
  char* (*job_state_string)(uint32_t) = nullptr;
};

// libslurm reads its configuration once per process.
std::mutex g_mu;
bool g_initialised = false;
std::string g_conf;

class LibslurmApi final : public Api {
 public:
  explicit LibslurmApi(Libslurm lib) : lib_(lib) {}

  Result<NodeInfo> GetNode(const std::string& node) override {
    node_info_msg_t* msg = nullptr;
    std::string name = node;
    if (lib_.load_node_single(&msg, name.data(), SHOW_ALL) != SLURM_SUCCESS) {
      return Error{fmt::format("slurmctld: reading node {}: {}", node, LastError())};
    }
    if (msg == nullptr || msg->record_count == 0 || msg->node_array[0].name == nullptr) {
      if (msg) lib_.free_node_info_msg(msg);
      return Error{
          fmt::format("slurmctld knows no node {} (NodeName in slurm.conf; the agent's "
                      "slurm.node_name)",
                      node)};
    }
    const node_info_t& n = msg->node_array[0];
    NodeInfo out;
    out.name = n.name;
    if (const char* s = lib_.node_state_string ? lib_.node_state_string(n.node_state) : nullptr)
      out.state = s;
    out.drain = (n.node_state & NODE_STATE_DRAIN) != 0;
    out.down = (n.node_state & NODE_STATE_BASE) == NODE_STATE_DOWN;
    if (n.reason) out.reason = n.reason;
    lib_.free_node_info_msg(msg);
    return out;
  }

  Status Drain(const std::string& node, const std::string& reason) override {
    return Update(node, NODE_STATE_DRAIN, reason, "draining");
  }
  Status Resume(const std::string& node) override {
    return Update(node, NODE_RESUME, "", "resuming");
  }

  Result<std::vector<JobInfo>> JobsOn(const std::string& node) override {
    job_info_msg_t* msg = nullptr;
    if (lib_.load_jobs(0, &msg, SHOW_ALL) != SLURM_SUCCESS) {
      return Error{fmt::format("slurmctld: listing jobs: {}", LastError())};
    }
    std::vector<JobInfo> out;
    for (uint32_t i = 0; msg && i < msg->record_count; ++i) {
      const slurm_job_info_t& j = msg->job_array[i];
      if (j.nodes == nullptr || *j.nodes == '\0') continue;
      const uint32_t base = j.job_state & JOB_STATE_BASE;
      if (base != JOB_RUNNING && base != JOB_SUSPENDED && !(j.job_state & JOB_COMPLETING)) continue;
      hostlist_t hl = lib_.hostlist_create(j.nodes);
      const bool on = hl != nullptr && lib_.hostlist_find(hl, node.c_str()) >= 0;
      if (hl) lib_.hostlist_destroy(hl);
      if (on) out.push_back(ToJob(j));
    }
    if (msg) lib_.free_job_info_msg(msg);
    return out;
  }

  Result<JobInfo> GetJob(uint32_t id) override {
    job_info_msg_t* msg = nullptr;
    if (lib_.load_job(&msg, id, SHOW_ALL) != SLURM_SUCCESS) {
      return Error{fmt::format("slurmctld: reading job {}: {}", id, LastError())};
    }
    if (msg == nullptr || msg->record_count == 0) {
      if (msg) lib_.free_job_info_msg(msg);
      return Error{fmt::format("slurmctld knows no job {}", id)};
    }
    JobInfo j = ToJob(msg->job_array[0]);
    lib_.free_job_info_msg(msg);
    return j;
  }

  Status SignalBatch(uint32_t job, int signal) override {
    const std::string id = std::to_string(job);
    if (lib_.kill_job2(id.c_str(), static_cast<uint16_t>(signal), KILL_JOB_BATCH, nullptr) !=
        SLURM_SUCCESS) {
      return Error{
          fmt::format("slurmctld: signal {} to job {}'s batch step: {}", signal, job, LastError())};
    }
    return Status::Ok();
  }

  Status Requeue(uint32_t job) override {
    if (lib_.requeue(job, 0) != SLURM_SUCCESS) {
      return Error{fmt::format("slurmctld: requeueing job {}: {}", job, LastError())};
    }
    return Status::Ok();
  }

  Result<uint32_t> SubmitBatch(const std::string& name, const std::string& script,
                               const std::string& work_dir, int gpus, bool requeue) override {
    job_desc_msg_t desc;
    lib_.init_job_desc_msg(&desc);
    std::string n = name, sc = script, wd = work_dir, out = "/dev/null",
                tres = fmt::format("gres:gpu:{}", gpus), path = "PATH=/usr/local/bin:/usr/bin:/bin";
    char* env[] = {path.data(), nullptr};
    desc.name = n.data();
    desc.script = sc.data();
    desc.work_dir = wd.data();
    desc.std_out = out.data();
    desc.std_err = out.data();
    if (gpus > 0) desc.tres_per_node = tres.data();
    desc.environment = env;
    desc.env_size = 1;
    desc.min_nodes = 1;
    desc.user_id = getuid();
    desc.group_id = getgid();
    desc.requeue = requeue ? 1 : 0;
    submit_response_msg_t* resp = nullptr;
    if (lib_.submit_batch_job(&desc, &resp) != SLURM_SUCCESS || resp == nullptr) {
      if (resp) lib_.free_submit_response(resp);
      return Error{fmt::format("slurmctld: submitting batch job {}: {}", name, LastError())};
    }
    const uint32_t id = resp->job_id;
    lib_.free_submit_response(resp);
    return id;
  }

  Status Cancel(uint32_t job) override {
    const std::string id = std::to_string(job);
    if (lib_.kill_job2(id.c_str(), SIGKILL, 0, nullptr) != SLURM_SUCCESS) {
      return Error{fmt::format("slurmctld: cancelling job {}: {}", job, LastError())};
    }
    return Status::Ok();
  }

 private:
  Status Update(const std::string& node, uint32_t state, const std::string& reason,
                const char* what) {
    update_node_msg_t msg;
    lib_.init_update_node_msg(&msg);
    std::string names = node, why = reason;
    msg.node_names = names.data();
    msg.node_state = state;
    if (!why.empty()) {
      msg.reason = why.data();
      msg.reason_uid = static_cast<uint32_t>(getuid());
    }
    if (lib_.update_node(&msg) != SLURM_SUCCESS) {
      const int e = lib_.get_errno();
      std::string hint;
      if (e == ESLURM_USER_ID_MISSING || e == ESLURM_ACCESS_DENIED)
        hint = " (updating a node needs SlurmUser or root, or an operator's AdminLevel)";
      return Error{fmt::format("slurmctld: {} node {}: {}{}", what, node, LastError(), hint)};
    }
    return Status::Ok();
  }

  JobInfo ToJob(const slurm_job_info_t& j) const {
    JobInfo out;
    out.id = j.job_id;
    if (j.name) out.name = j.name;
    if (const char* s = lib_.job_state_string ? lib_.job_state_string(j.job_state) : nullptr)
      out.state = s;
    out.running = (j.job_state & JOB_STATE_BASE) == JOB_RUNNING;
    out.batch = j.batch_flag != 0;
    out.requeue = j.requeue != 0;
    out.restarts = j.restart_cnt;
    if (j.nodes) out.nodes = j.nodes;
    return out;
  }

  std::string LastError() const {
    const int e = lib_.get_errno();
    const char* s = lib_.strerror(e);
    return fmt::format("{} (slurm errno {})", s ? s : "unknown error", e);
  }

  Libslurm lib_;
};

}  // namespace

Result<std::unique_ptr<Api>> OpenLibslurm(const std::string& library,
                                          const std::string& slurm_conf) {
  const std::string so = library.empty() ? kLibslurmSoname : library;
  // RTLD_GLOBAL: the plugins libslurm loads in turn (auth/munge, hash/k12) take slurm_conf and
  // the logging functions from it, as from a program linked with it.
  auto opened = OpenLibrary(so, RTLD_NOW | RTLD_GLOBAL,
                            "the Slurm backend speaks to slurmctld through libslurm of Slurm "
                            "22.05; install it (Debian/Ubuntu: libslurm38) or name it with "
                            "slurm.library");
  if (!opened) return opened.error();
  void* h = *opened;
  Libslurm lib;
  std::string missing;
  if (!ResolveSymbol(h, "slurm_init", lib.init, missing) ||
      !ResolveSymbol(h, "slurm_get_errno", lib.get_errno, missing) ||
      !ResolveSymbol(h, "slurm_strerror", lib.strerror, missing) ||
      !ResolveSymbol(h, "slurm_load_node_single", lib.load_node_single, missing) ||
      !ResolveSymbol(h, "slurm_free_node_info_msg", lib.free_node_info_msg, missing) ||
      !ResolveSymbol(h, "slurm_init_update_node_msg", lib.init_update_node_msg, missing) ||
      !ResolveSymbol(h, "slurm_update_node", lib.update_node, missing) ||
      !ResolveSymbol(h, "slurm_load_jobs", lib.load_jobs, missing) ||
      !ResolveSymbol(h, "slurm_load_job", lib.load_job, missing) ||
      !ResolveSymbol(h, "slurm_free_job_info_msg", lib.free_job_info_msg, missing) ||
      !ResolveSymbol(h, "slurm_kill_job2", lib.kill_job2, missing) ||
      !ResolveSymbol(h, "slurm_requeue", lib.requeue, missing) ||
      !ResolveSymbol(h, "slurm_init_job_desc_msg", lib.init_job_desc_msg, missing) ||
      !ResolveSymbol(h, "slurm_submit_batch_job", lib.submit_batch_job, missing) ||
      !ResolveSymbol(h, "slurm_free_submit_response_response_msg", lib.free_submit_response,
                     missing) ||
      !ResolveSymbol(h, "slurm_hostlist_create", lib.hostlist_create, missing) ||
      !ResolveSymbol(h, "slurm_hostlist_find", lib.hostlist_find, missing) ||
      !ResolveSymbol(h, "slurm_hostlist_destroy", lib.hostlist_destroy, missing)) {
    return Error{fmt::format("{} has no {}: it is not the libslurm of Slurm 22.05", so, missing)};
  }
  std::string ignored;
  ResolveSymbol(h, "slurm_node_state_string", lib.node_state_string, ignored);
  ResolveSymbol(h, "slurm_job_state_string", lib.job_state_string, ignored);
  {
    std::lock_guard lock(g_mu);
    if (!g_initialised) {
      if (!slurm_conf.empty() && access(slurm_conf.c_str(), R_OK) != 0) {
        return Error{
            fmt::format("slurm.conf {}: {}; name slurm.conf with slurm.conf or $SLURM_CONF",
                        slurm_conf, std::strerror(errno)),
            ErrorCode::kUsage};
      }
      // slurm_init() ends the process when slurm.conf is missing or bad: check first.
      if (slurm_conf.empty()) {
        const char* env = std::getenv("SLURM_CONF");
        const std::string def = env && *env ? env : "/etc/slurm/slurm.conf";
        if (access(def.c_str(), R_OK) != 0) {
          return Error{fmt::format("slurm.conf {}: {}; name it with slurm.conf in the agent's "
                                   "config or $SLURM_CONF",
                                   def, std::strerror(errno)),
                       ErrorCode::kUsage};
        }
      }
      lib.init(slurm_conf.empty() ? nullptr : slurm_conf.c_str());
      g_initialised = true;
      g_conf = slurm_conf;
    } else if (g_conf != slurm_conf) {
      return Error{fmt::format("libslurm is already initialised with {} in this process",
                               g_conf.empty() ? "the default slurm.conf" : g_conf)};
    }
  }
  return std::unique_ptr<Api>(std::make_unique<LibslurmApi>(lib));
}

int ParseSignal(const std::string& name) {
  if (name.empty()) return -1;
  if (std::isdigit(static_cast<unsigned char>(name[0]))) {
    int n = 0;
    for (char c : name) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
      n = n * 10 + (c - '0');
      if (n > 64) return -1;
    }
    return n >= 1 ? n : -1;
  }
  std::string up;
  for (char c : name) up += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (up.starts_with("SIG")) up = up.substr(3);
  static const std::pair<const char*, int> kSignals[] = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
      {"TERM", SIGTERM}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"CONT", SIGCONT},
      {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"ALRM", SIGALRM}, {"URG", SIGURG},
  };
  for (const auto& [n, s] : kSignals)
    if (up == n) return s;
  return -1;
}

}  // namespace gpuheal::slurm
