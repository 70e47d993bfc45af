#include "kube/client.h"

#include <fmt/format.h>

#include <thread>

#include "kube/backoff.h"

namespace gpuheal::kube {

RateLimiter::RateLimiter(double qps, int burst)
    : qps_(qps), bucket_(qps, burst, std::chrono::steady_clock::now()) {}

void RateLimiter::Wait() {
  if (qps_ <= 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (bucket_.TryTake(now)) return;
    const auto wait = bucket_.Wait(now);
    lock.unlock();
    std::this_thread::sleep_for(wait);
    lock.lock();
  }
}

Result<std::unique_ptr<Client>> Client::Create(Config cfg, RetryPolicy retry) {
  if (cfg.server.empty()) return Error{"kubernetes client: no server in config"};
  std::unique_ptr<Client> c(new Client(std::move(cfg), retry));
  auto conn = HttpConnection::Create(c->cfg_);
  if (!conn) return conn.error();
  c->Give(std::move(*conn));
  return c;
}

Client::Client(Config cfg, RetryPolicy retry)
    : cfg_(std::move(cfg)),
      retry_(retry),
      limiter_(cfg_.qps, cfg_.burst),
      rng_(std::random_device{}()) {}

std::unique_ptr<HttpConnection> Client::Take() {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!pool_.empty()) {
      auto c = std::move(pool_.back());
      pool_.pop_back();
      return c;
    }
  }
  auto c = HttpConnection::Create(cfg_);
  return c ? std::move(*c) : nullptr;
}

void Client::Give(std::unique_ptr<HttpConnection> c) {
  if (!c) return;
  std::lock_guard<std::mutex> lock(pool_mu_);
  // As many idle connections as requests were in flight at once, up to 64: the controller's
  // workers and eviction pool (8 + 32 by default) each keep theirs instead of a TLS handshake per
  // request above the cap.
  if (pool_.size() < 64) pool_.push_back(std::move(c));
}

std::chrono::milliseconds Client::Backoff(int attempt, const std::string& retry_after) {
  if (!retry_after.empty()) {
    const long secs = std::strtol(retry_after.c_str(), nullptr, 10);
    // The server knows best how long to wait; capped so a bogus value cannot stall us for hours.
    if (secs > 0)
      return std::min<std::chrono::milliseconds>(std::chrono::seconds(secs),
                                                 std::chrono::seconds(60));
  }
  std::lock_guard<std::mutex> lock(rng_mu_);
  return JitteredBackoff(retry_.initial_backoff, retry_.max_backoff, attempt, rng_);
}

Result<Response> Client::Request(const std::string& method, const std::string& path,
                                 const std::string& body, const std::string& content_type) {
  Error last{"no attempt"};
  for (int attempt = 0; attempt < retry_.max_attempts; ++attempt) {
    limiter_.Wait();
    auto conn = Take();
    if (!conn) return Error{"kubernetes client: cannot create a connection"};
    auto r = conn->Do(HttpRequest{method, path, body, content_type});
    if (!r) {
      last = r.error();  // transport failure: the connection may be broken; drop it
      std::this_thread::sleep_for(Backoff(attempt, ""));
      continue;
    }
    Give(std::move(conn));
    const long s = r->status;
    const bool retryable = s == 429 || s == 500 || s == 502 || s == 503 || s == 504;
    // An eviction refused by a PodDisruptionBudget is a 429 the caller must see.
    const bool eviction = path.ends_with("/eviction");
    if (!retryable || (eviction && s == 429) || attempt + 1 == retry_.max_attempts) {
      return Response{s, std::move(r->body)};
    }
    std::this_thread::sleep_for(Backoff(attempt, r->retry_after));
  }
  return last;
}

Result<Response> Client::Watch(const std::string& collection_path,
                               const std::string& resource_version,
                               const std::function<bool(const WatchEventRaw&)>& on_event,
                               std::chrono::seconds timeout, const std::atomic<bool>* cancel) {
  limiter_.Wait();
  auto conn = HttpConnection::Create(cfg_);  // a stream holds its connection for its lifetime
  if (!conn) return conn.error();
  const char sep = collection_path.find('?') == std::string::npos ? '?' : '&';
  std::string path = collection_path + sep + "watch=1&allowWatchBookmarks=true&timeoutSeconds=" +
                     std::to_string(timeout.count());
  if (!resource_version.empty()) path += "&resourceVersion=" + UrlEncode(resource_version);
  std::string pending;
  Error decode_error{""};
  bool stop = false;
  auto r = (*conn)->Stream(
      HttpRequest{"GET", path, "", "application/json"},
      [&](std::string_view chunk) {
        pending.append(chunk);
        size_t nl;
        while ((nl = pending.find('\n')) != std::string::npos) {
          std::string_view line(pending.data(), nl);
          if (!line.empty()) {
            auto ev = DecodeWatchEvent(line);
            if (!ev) {
              decode_error = ev.error();
              return false;
            }
            if (!on_event(*ev)) {
              stop = true;
              return false;
            }
          }
          pending.erase(0, nl + 1);
        }
        return true;
      },
      timeout + std::chrono::seconds(5), cancel);
  if (!decode_error.message.empty())
    return Error{"watch " + collection_path + ": " + decode_error.message};
  if (!r) return r.error();
  // A stream cut mid-line leaves a partial event behind: it is dropped, and the caller resumes
  // from the last resourceVersion it saw.
  return Response{r->status, std::move(r->body)};
}

}  // namespace gpuheal::kube
