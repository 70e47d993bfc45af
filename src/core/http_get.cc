#include "core/http_get.h"

#include "core/curl_library.h"

namespace gpuheal {
namespace {

size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

}  // namespace

int HttpGetStatus(const std::string& url, std::chrono::milliseconds timeout,
                  const std::string& user_agent, bool connect_only) {
  if (!LoadCurl()) return 0;
  const CurlLibrary& c = Curl();
  CURL* h = c.easy_init();
  if (h == nullptr) return 0;
  c.easy_setopt(h, CURLOPT_URL, url.c_str());
  c.easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  c.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  c.easy_setopt(h, CURLOPT_USERAGENT, user_agent.c_str());
  c.easy_setopt(h, CURLOPT_WRITEFUNCTION, &Discard);
  c.easy_setopt(h, CURLOPT_PROXY, "");
  if (connect_only) c.easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
  long status = 0;
  if (c.easy_perform(h) == CURLE_OK) {
    if (connect_only) {
      status = 200;
    } else {
      c.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    }
  }
  c.easy_cleanup(h);
  return static_cast<int>(status);
}

}  // namespace gpuheal
