#pragma once
// Delivers a diagnostic bundle: one HTTP PUT of the file to a URL (an S3 presigned URL works
// unchanged: the request carries no header the signature would need), over libcurl with TLS
// verification on. Transport errors, 5xx and 429 are retried with backoff; any other answer is
// final. The outcome names the URL without its query, so a signature never reaches a log, a
// status or an Event.

#include <atomic>
#include <chrono>
#include <string>

namespace gpuheal {

struct UploadOptions {
  std::chrono::milliseconds timeout{60000};  // each attempt
  int attempts = 3;
  std::chrono::milliseconds backoff{1000};    // doubled after each failed attempt
  const std::atomic<bool>* cancel = nullptr;  // true: the attempt in flight ends, none follows
};

struct UploadResult {
  bool ok = false;
  long status = 0;      // the last HTTP status, 0 when no answer came
  int attempts = 0;     // made
  std::string message;  // "uploaded 1234 bytes to ..." or what failed, for the request's status
};

// "https://host/bucket/key" from "https://host/bucket/key?X-Amz-Signature=...".
std::string UrlWithoutQuery(const std::string& url);

UploadResult UploadFile(const std::string& path, const std::string& url, const UploadOptions& o);

}  // namespace gpuheal
