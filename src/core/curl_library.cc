#include "core/curl_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "core/dl_symbol.h"

namespace gpuheal {
namespace {

constexpr const char* kSoname = "libcurl.so.4";

CurlLibrary g_lib{};
std::string g_error;
std::atomic<bool> g_loaded{false};

void Load() {
  auto opened = OpenLibrary(kSoname, RTLD_NOW | RTLD_LOCAL,
                            "the HTTP clients (the API server, a BMC's Redfish) need it; install "
                            "libcurl (Debian/Ubuntu: libcurl4, RHEL: libcurl) or put it on "
                            "LD_LIBRARY_PATH");
  if (!opened) {
    g_error = opened.error().message;
    return;
  }
  void* h = *opened;
  CURLcode (*global_init)(long) = nullptr;
  std::string missing;
  if (!ResolveSymbol(h, "curl_global_init", global_init, missing) ||
      !ResolveSymbol(h, "curl_easy_init", g_lib.easy_init, missing) ||
      !ResolveSymbol(h, "curl_easy_setopt", g_lib.easy_setopt, missing) ||
      !ResolveSymbol(h, "curl_easy_perform", g_lib.easy_perform, missing) ||
      !ResolveSymbol(h, "curl_easy_getinfo", g_lib.easy_getinfo, missing) ||
      !ResolveSymbol(h, "curl_easy_cleanup", g_lib.easy_cleanup, missing) ||
      !ResolveSymbol(h, "curl_easy_strerror", g_lib.easy_strerror, missing) ||
      !ResolveSymbol(h, "curl_slist_append", g_lib.slist_append, missing) ||
      !ResolveSymbol(h, "curl_slist_free_all", g_lib.slist_free_all, missing)) {
    g_error = fmt::format("{} has no {}: libcurl 7.77 or newer is needed", kSoname, missing);
    return;
  }
  if (const CURLcode rc = global_init(CURL_GLOBAL_DEFAULT); rc != CURLE_OK) {
    g_error = fmt::format("curl_global_init failed ({})", static_cast<int>(rc));
    return;
  }
  g_loaded.store(true, std::memory_order_release);
}

std::once_flag g_once;

}  // namespace

Result<const CurlLibrary*> LoadCurl() {
  std::call_once(g_once, Load);
  if (!g_loaded.load(std::memory_order_acquire)) return Error{g_error};
  return &g_lib;
}

const CurlLibrary& Curl() {
  if (!g_loaded.load(std::memory_order_acquire)) {
    std::fputs("gpuheal: libcurl used before it was loaded (a bug)\n", stderr);
    std::abort();
  }
  return g_lib;
}

}  // namespace gpuheal
