#pragma once
// A diagnostic bundle: a gzip'd tar whose first member is manifest.json (what each collector
// produced, how long it took, what failed, what was cut), then each collector's files under
// <collector>/. Bounded: the files together are at most `max_bytes` before compression; a file
// that would go past it is cut at the bound and says so in the manifest.
//
// libarchive writes the tar.gz and libcrypto computes its sha256, both opened with dlopen when
// the first bundle is built (as libcurl is), so an agent that never builds one never maps them.

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpuheal {

struct BundleFile {
  std::string path;  // inside the collector's directory: "kmsg.txt"
  std::string data;
  bool truncated = false;  // cut by the collector itself (its own bound), or by the bundle's cap
};

struct CollectorResult {
  std::string name;
  std::vector<BundleFile> files;
  std::chrono::milliseconds duration{0};
  std::string error;  // "" when it worked; a skipped collector says why ("not installed")
  bool skipped = false;
  bool timed_out = false;
  bool truncated() const;
  int64_t bytes() const;
};

struct BundleHeader {
  std::string node;
  std::string request;  // the NodeDiagnostic's name, or "" for `gpuheal bundle`
  std::string version;  // gpuheal's
  std::string created;  // RFC 3339
};

struct BundleInfo {
  std::string path;
  int64_t size = 0;  // of the tar.gz
  std::string sha256;
  nlohmann::json manifest;
  std::chrono::milliseconds build{0};  // writing and hashing, after the collectors
};

// Cuts files past `max_bytes` (in collector order) in place and marks them truncated.
void ApplySizeCap(std::vector<CollectorResult>& results, int64_t max_bytes);

// The manifest of `results` (after ApplySizeCap).
nlohmann::json BundleManifest(const BundleHeader& h, const std::vector<CollectorResult>& results,
                              int64_t max_bytes);

// Writes the bundle to `path` (through path + ".part", renamed when complete, mode 0600).
Result<BundleInfo> WriteBundle(const std::string& path, const BundleHeader& h,
                               std::vector<CollectorResult> results, int64_t max_bytes);

// The sha256 of a file, lowercase hex.
Result<std::string> Sha256File(const std::string& path);

// Reads a bundle back: each member's path and content (tests, `gpuheal bundle --list`).
Result<std::vector<std::pair<std::string, std::string>>> ReadBundle(const std::string& path);

}  // namespace gpuheal
