#include "agent/diag_bundle.h"

#include <archive.h>
#include <archive_entry.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>

#include "core/dl_symbol.h"

namespace gpuheal {
namespace {

// libarchive's entry points, typed from <archive.h>.
struct ArchiveLib {
  decltype(&archive_write_new) write_new;
  decltype(&archive_write_add_filter_gzip) add_filter_gzip;
  decltype(&archive_write_set_format_pax_restricted) set_format_pax;
  decltype(&archive_write_open_filename) open_filename;
  decltype(&archive_write_header) write_header;
  decltype(&archive_write_data) write_data;
  decltype(&archive_write_close) write_close;
  decltype(&archive_write_free) write_free;
  decltype(&archive_entry_new) entry_new;
  decltype(&archive_entry_free) entry_free;
  decltype(&archive_entry_set_pathname) entry_set_pathname;
  decltype(&archive_entry_set_size) entry_set_size;
  decltype(&archive_entry_set_filetype) entry_set_filetype;
  decltype(&archive_entry_set_perm) entry_set_perm;
  decltype(&archive_entry_set_mtime) entry_set_mtime;
  decltype(&archive_entry_pathname) entry_pathname;
  decltype(&archive_error_string) error_string;
  decltype(&archive_read_new) read_new;
  decltype(&archive_read_support_filter_gzip) read_support_gzip;
  decltype(&archive_read_support_format_tar) read_support_tar;
  decltype(&archive_read_open_filename) read_open_filename;
  decltype(&archive_read_next_header) read_next_header;
  decltype(&archive_read_data) read_data;
  decltype(&archive_read_free) read_free;
};

struct CryptoLib {
  decltype(&EVP_MD_CTX_new) ctx_new;
  decltype(&EVP_MD_CTX_free) ctx_free;
  decltype(&EVP_DigestInit_ex) init;
  decltype(&EVP_DigestUpdate) update;
  decltype(&EVP_DigestFinal_ex) final;
  decltype(&EVP_sha256) sha256;
};

Result<void*> Open(const char* file, const char* package) {
  return OpenLibrary(
      file, RTLD_NOW | RTLD_LOCAL,
      fmt::format("the diagnostic bundle needs it; install {} (Debian/Ubuntu)", package));
}

Result<const ArchiveLib*> LoadArchive() {
  static std::once_flag once;
  static ArchiveLib lib;
  static std::string error;
  std::call_once(once, [] {
    auto h = Open("libarchive.so.13", "libarchive13");
    if (!h) {
      error = h.error().message;
      return;
    }
    std::string missing;
    void* d = *h;
    const bool ok =
        ResolveSymbol(d, "archive_write_new", lib.write_new, missing) &&
        ResolveSymbol(d, "archive_write_add_filter_gzip", lib.add_filter_gzip, missing) &&
        ResolveSymbol(d, "archive_write_set_format_pax_restricted", lib.set_format_pax, missing) &&
        ResolveSymbol(d, "archive_write_open_filename", lib.open_filename, missing) &&
        ResolveSymbol(d, "archive_write_header", lib.write_header, missing) &&
        ResolveSymbol(d, "archive_write_data", lib.write_data, missing) &&
        ResolveSymbol(d, "archive_write_close", lib.write_close, missing) &&
        ResolveSymbol(d, "archive_write_free", lib.write_free, missing) &&
        ResolveSymbol(d, "archive_entry_new", lib.entry_new, missing) &&
        ResolveSymbol(d, "archive_entry_free", lib.entry_free, missing) &&
        ResolveSymbol(d, "archive_entry_set_pathname", lib.entry_set_pathname, missing) &&
        ResolveSymbol(d, "archive_entry_set_size", lib.entry_set_size, missing) &&
        ResolveSymbol(d, "archive_entry_set_filetype", lib.entry_set_filetype, missing) &&
        ResolveSymbol(d, "archive_entry_set_perm", lib.entry_set_perm, missing) &&
        ResolveSymbol(d, "archive_entry_set_mtime", lib.entry_set_mtime, missing) &&
        ResolveSymbol(d, "archive_entry_pathname", lib.entry_pathname, missing) &&
        ResolveSymbol(d, "archive_error_string", lib.error_string, missing) &&
        ResolveSymbol(d, "archive_read_new", lib.read_new, missing) &&
        ResolveSymbol(d, "archive_read_support_filter_gzip", lib.read_support_gzip, missing) &&
        ResolveSymbol(d, "archive_read_support_format_tar", lib.read_support_tar, missing) &&
        ResolveSymbol(d, "archive_read_open_filename", lib.read_open_filename, missing) &&
        ResolveSymbol(d, "archive_read_next_header", lib.read_next_header, missing) &&
        ResolveSymbol(d, "archive_read_data", lib.read_data, missing) &&
        ResolveSymbol(d, "archive_read_free", lib.read_free, missing);
    if (!ok) error = "libarchive.so.13 has no " + missing + ": libarchive 3.0 or newer is needed";
  });
  if (!error.empty()) return Error{error};
  return &lib;
}

Result<const CryptoLib*> LoadCrypto() {
  static std::once_flag once;
  static CryptoLib lib;
  static std::string error;
  std::call_once(once, [] {
    auto h = Open("libcrypto.so.3", "libssl3");
    if (!h) {
      error = h.error().message;
      return;
    }
    std::string missing;
    void* d = *h;
    const bool ok = ResolveSymbol(d, "EVP_MD_CTX_new", lib.ctx_new, missing) &&
                    ResolveSymbol(d, "EVP_MD_CTX_free", lib.ctx_free, missing) &&
                    ResolveSymbol(d, "EVP_DigestInit_ex", lib.init, missing) &&
                    ResolveSymbol(d, "EVP_DigestUpdate", lib.update, missing) &&
                    ResolveSymbol(d, "EVP_DigestFinal_ex", lib.final, missing) &&
                    ResolveSymbol(d, "EVP_sha256", lib.sha256, missing);
    if (!ok) error = "libcrypto.so.3 has no " + missing + ": OpenSSL 3 is needed";
  });
  if (!error.empty()) return Error{error};
  return &lib;
}

std::string Member(const CollectorResult& c, const BundleFile& f) { return c.name + "/" + f.path; }

}  // namespace

bool CollectorResult::truncated() const {
  return std::any_of(files.begin(), files.end(), [](const BundleFile& f) { return f.truncated; });
}

int64_t CollectorResult::bytes() const {
  int64_t n = 0;
  for (const auto& f : files) n += static_cast<int64_t>(f.data.size());
  return n;
}

void ApplySizeCap(std::vector<CollectorResult>& results, int64_t max_bytes) {
  int64_t left = std::max<int64_t>(0, max_bytes);
  for (auto& c : results) {
    for (auto& f : c.files) {
      const auto size = static_cast<int64_t>(f.data.size());
      if (size > left) {
        f.data.resize(static_cast<size_t>(left));
        f.truncated = true;
      }
      left -= static_cast<int64_t>(f.data.size());
    }
  }
}

nlohmann::json BundleManifest(const BundleHeader& h, const std::vector<CollectorResult>& results,
                              int64_t max_bytes) {
  nlohmann::json collectors = nlohmann::json::array();
  nlohmann::json files = nlohmann::json::array();
  int64_t total = 0;
  for (const auto& c : results) {
    nlohmann::json cf = nlohmann::json::array();
    for (const auto& f : c.files) {
      nlohmann::json entry = {{"collector", c.name},
                              {"file", Member(c, f)},
                              {"size", f.data.size()},
                              {"truncated", f.truncated}};
      cf.push_back(Member(c, f));
      files.push_back(std::move(entry));
      total += static_cast<int64_t>(f.data.size());
    }
    collectors.push_back({{"name", c.name},
                          {"files", std::move(cf)},
                          {"bytes", c.bytes()},
                          {"duration_ms", c.duration.count()},
                          {"error", c.error},
                          {"skipped", c.skipped},
                          {"timed_out", c.timed_out},
                          {"truncated", c.truncated()}});
  }
  return {{"format", "gpuheal-bundle/v1"},
          {"node", h.node},
          {"request", h.request},
          {"gpuheal_version", h.version},
          {"created", h.created},
          {"max_bytes", max_bytes},
          {"bytes", total},
          {"collectors", std::move(collectors)},
          {"files", std::move(files)}};
}

Result<BundleInfo> WriteBundle(const std::string& path, const BundleHeader& h,
                               std::vector<CollectorResult> results, int64_t max_bytes) {
  const auto started = std::chrono::steady_clock::now();
  auto lib = LoadArchive();
  if (!lib) return lib.error();
  const ArchiveLib& a = **lib;
  ApplySizeCap(results, max_bytes);
  BundleInfo info;
  info.path = path;
  info.manifest = BundleManifest(h, results, max_bytes);
  const std::string part = path + ".part";
  std::unique_ptr<archive, decltype(a.write_free)> w(a.write_new(), a.write_free);
  if (!w) return Error{"archive_write_new failed"};
  auto fail = [&](const std::string& what) {
    Error e{fmt::format("writing {}: {}: {}", part, what,
                        a.error_string(w.get()) ? a.error_string(w.get()) : "unknown error")};
    w.reset();
    std::remove(part.c_str());
    return e;
  };
  if (a.add_filter_gzip(w.get()) != ARCHIVE_OK) return fail("gzip");
  if (a.set_format_pax(w.get()) != ARCHIVE_OK) return fail("tar format");
  const mode_t old_mask = umask(077);
  const int opened = a.open_filename(w.get(), part.c_str());
  umask(old_mask);
  if (opened != ARCHIVE_OK) return fail("open");
  const time_t now = std::time(nullptr);
  auto add = [&](const std::string& member, const std::string& data) -> bool {
    std::unique_ptr<archive_entry, decltype(a.entry_free)> e(a.entry_new(), a.entry_free);
    a.entry_set_pathname(e.get(), member.c_str());
    a.entry_set_size(e.get(), static_cast<la_int64_t>(data.size()));
    a.entry_set_filetype(e.get(), AE_IFREG);
    a.entry_set_perm(e.get(), 0600);
    a.entry_set_mtime(e.get(), now, 0);
    if (a.write_header(w.get(), e.get()) != ARCHIVE_OK) return false;
    size_t done = 0;
    while (done < data.size()) {
      const la_ssize_t n = a.write_data(w.get(), data.data() + done, data.size() - done);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  };
  if (!add("manifest.json", info.manifest.dump(2) + "\n")) return fail("manifest.json");
  for (const auto& c : results) {
    for (const auto& f : c.files) {
      if (!add(Member(c, f), f.data)) return fail(Member(c, f));
    }
  }
  if (a.write_close(w.get()) != ARCHIVE_OK) return fail("close");
  w.reset();
  std::error_code ec;
  std::filesystem::rename(part, path, ec);
  if (ec) {
    std::remove(part.c_str());
    return Error{fmt::format("renaming {} to {}: {}", part, path, ec.message())};
  }
  info.size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  auto sum = Sha256File(path);
  if (!sum) return sum.error();
  info.sha256 = *sum;
  info.build = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  return info;
}

Result<std::string> Sha256File(const std::string& path) {
  auto lib = LoadCrypto();
  if (!lib) return lib.error();
  const CryptoLib& c = **lib;
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"cannot read " + path};
  std::unique_ptr<EVP_MD_CTX, decltype(c.ctx_free)> ctx(c.ctx_new(), c.ctx_free);
  if (!ctx || c.init(ctx.get(), c.sha256(), nullptr) != 1) return Error{"sha256: init failed"};
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0 && c.update(ctx.get(), buf.data(), static_cast<size_t>(in.gcount())) != 1)
      return Error{"sha256: update failed"};
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (c.final(ctx.get(), md, &len) != 1) return Error{"sha256: final failed"};
  std::string hex;
  for (unsigned i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

Result<std::vector<std::pair<std::string, std::string>>> ReadBundle(const std::string& path) {
  auto lib = LoadArchive();
  if (!lib) return lib.error();
  const ArchiveLib& a = **lib;
  std::unique_ptr<archive, decltype(a.read_free)> r(a.read_new(), a.read_free);
  a.read_support_gzip(r.get());
  a.read_support_tar(r.get());
  if (a.read_open_filename(r.get(), path.c_str(), 1 << 16) != ARCHIVE_OK)
    return Error{fmt::format("{}: {}", path, a.error_string(r.get()))};
  std::vector<std::pair<std::string, std::string>> out;
  archive_entry* e = nullptr;
  int rc;
  while ((rc = a.read_next_header(r.get(), &e)) == ARCHIVE_OK) {
    std::string data;
    char buf[1 << 16];
    la_ssize_t n;
    while ((n = a.read_data(r.get(), buf, sizeof buf)) > 0)
      data.append(buf, static_cast<size_t>(n));
    if (n < 0) return Error{fmt::format("{}: {}", path, a.error_string(r.get()))};
    out.emplace_back(a.entry_pathname(e), std::move(data));
  }
  if (rc != ARCHIVE_EOF) return Error{fmt::format("{}: {}", path, a.error_string(r.get()))};
  return out;
}

}  // namespace gpuheal
