#pragma once
// libcurl, opened with dlopen the first time an HTTP client is made rather than linked: libcurl
// brings a TLS stack (OpenSSL, GnuTLS through its LDAP and RTMP dependencies, Kerberos) whose
// load and initialisation cost a process several MB of resident memory. A command or an agent
// that makes no HTTP client (classify, a standalone agent: its CRI client speaks HTTP/2 through
// nghttp2) never loads it. The calls are libcurl's own, through pointers of the exact types of its
// ABI.

#include <curl/curl.h>

#include "core/result.h"

namespace gpuheal {

struct CurlLibrary {
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_perform)(CURL*);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  void (*easy_cleanup)(CURL*);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
};

// libcurl.so.4, loaded and initialised (curl_global_init) once, thread-safe. The error names the
// file and the package that provides it.
Result<const CurlLibrary*> LoadCurl();

// The library LoadCurl() returned; only valid after it succeeded (a handle exists).
const CurlLibrary& Curl();

}  // namespace gpuheal
