#pragma once
// Applies a multi-document YAML manifest file to the API server (create only), as `kubectl
// create -f` would, through the product's own reader (kube/manifest.h); a test fails on any error.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
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

}  // namespace gpuheal::testing
