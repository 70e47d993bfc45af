#pragma once
// Applies a multi-document YAML manifest file to the API server (create only), as `kubectl
// create -f` would, through the product's own reader (kube/manifest.h); a test fails on any error.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/manifest.h"

namespace gpuheal::testing {

// Creates every object in `file`; returns the objects (as JSON) for the caller to inspect.
inline std::vector<nlohmann::json> ApplyManifest(kube::Client& c, const std::string& file) {
  auto objs = kube::ReadManifest(file);
  EXPECT_TRUE(objs.ok()) << (objs ? "" : objs.error().message);
  if (!objs) return {};
  for (const auto& obj : *objs) {
    auto path = kube::CollectionPath(obj);
    EXPECT_TRUE(path.ok()) << file << ": " << (path ? "" : path.error().message);
    if (!path) continue;
    auto r = c.Create(*path, obj);
    EXPECT_TRUE(r.ok() && r->status == 201)
        << file << ": " << obj["kind"] << " " << obj["metadata"]["name"] << ": "
        << (r ? r->Describe() : r.error().message);
  }
  return *objs;
}

// Creates the CRD deploy/crds/`file` unless the API server already serves `collection`, and
// waits until it does.
inline void EnsureCrd(kube::Client& c, const std::string& file, std::string_view collection) {
  auto served = [&] {
    auto r = c.Get(std::string(collection));
    return r && r->status == 200;
  };
  if (served()) return;
  ApplyManifest(c, std::string(GPUHEAL_SOURCE_DIR) + "/deploy/crds/" + file);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!served() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(served()) << collection << " is not served after creating " << file;
}

}  // namespace gpuheal::testing
