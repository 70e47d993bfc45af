// The client against a tiny local HTTP server that misbehaves the ways a broken proxy, a
// half-dead API server or a cut connection do: malformed JSON, truncated watch streams, garbage
// event lines, endless 5xx, 429 with Retry-After. Clear errors, bounded retries, no crash.

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <thread>

#include "kube/client.h"
#include "kube/informer.h"

namespace gpuheal::kube {
namespace {

class BadServer : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
  }
  void Serve() {
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void TearDown() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::unique_ptr<Client> NewClient(RetryPolicy retry = {3, std::chrono::milliseconds(10),
                                                         std::chrono::milliseconds(50)}) {
    Config cfg;
    cfg.server = "http://127.0.0.1:" + std::to_string(port_);
    cfg.timeout = std::chrono::seconds(5);
    auto c = Client::Create(std::move(cfg), retry);
    EXPECT_TRUE(c.ok());
    return std::move(*c);
  }
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

constexpr const char* kNode =
    R"({"kind":"Node","metadata":{"name":"n1","uid":"u1","resourceVersion":"5"}})";

TEST_F(BadServer, MalformedJsonIsAClearDecodeError) {
  server_.Get("/api/v1/nodes/n1", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"kind":"Node","metadata":{"name":"n1",)", "application/json");
  });
  server_.Get("/api/v1/nodes", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        R"({"kind":"NodeList","metadata":{"resourceVersion":"5"},"items":[{"metadata":)",
        "application/json");
  });
  Serve();
  auto c = NewClient();
  auto r = c->Get(NodePath("n1"));
  ASSERT_TRUE(r.ok());
  auto n = DecodeNode(r->body);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.error().message.find("decoding Node"), std::string::npos) << n.error().message;
  auto list = c->ListAll<Node>(NodePath(), DecodeNodeList);
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.error().message.find("NodeList"), std::string::npos) << list.error().message;
}

TEST_F(BadServer, TruncatedWatchStreamDeliversWholeEventsOnly) {
  server_.Get("/api/v1/nodes", [](const httplib::Request&, httplib::Response& res) {
    // Not a compressible type, so this server does not gzip the stream (the API server does not
    // compress watches either; a cut gzip stream would also lose what the inflater buffered).
    res.set_chunked_content_provider(
        "application/octet-stream", [](size_t offset, httplib::DataSink& sink) {
          if (offset == 0) {
            const std::string whole = std::string(R"({"type":"ADDED","object":)") + kNode + "}\n";
            sink.write(whole.data(), whole.size());
            const std::string cut = R"({"type":"MODIFIED","object":{"kind":"No)";
            sink.write(cut.data(), cut.size());
            return true;
          }
          return false;  // the connection drops mid-event
        });
  });
  Serve();
  auto c = NewClient();
  std::vector<std::string> seen;
  auto r = c->Watch(
      NodePath(), "1",
      [&](const WatchEventRaw& ev) {
        seen.push_back(ev.type);
        return true;
      },
      std::chrono::seconds(5));
  // Either the cut is reported as a transport error or the stream simply ends; the partial
  // event is never delivered.
  if (!r.ok()) {
    EXPECT_NE(r.error().message.find("/api/v1/nodes"), std::string::npos) << r.error().message;
  }
  EXPECT_EQ(seen, std::vector<std::string>{"ADDED"});
}

TEST_F(BadServer, GarbageWatchLineIsAnErrorNamingTheWatch) {
  server_.Get("/api/v1/nodes", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("this is not json\n", "application/json");
  });
  Serve();
  auto c = NewClient();
  auto r = c->Watch(
      NodePath(), "1", [](const WatchEventRaw&) { return true; }, std::chrono::seconds(5));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("watch /api/v1/nodes"), std::string::npos) << r.error().message;
}

TEST_F(BadServer, InformerSurvivesBrokenWatchesAndReconnectsWithBackoff) {
  std::atomic<int> watches{0};
  server_.Get("/api/v1/nodes", [&](const httplib::Request& req, httplib::Response& res) {
    if (!req.has_param("watch")) {
      res.set_content(R"({"kind":"NodeList","metadata":{"resourceVersion":"5"},"items":[)" +
                          std::string(kNode) + "]}",
                      "application/json");
      return;
    }
    // Every watch: one garbage line, or a cut stream, alternately.
    if (watches++ % 2 == 0) {
      res.set_content("{\"type\":\n", "application/json");
    } else {
      res.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink& sink) {
        sink.write("{\"ty", 4);
        return false;
      });
    }
  });
  Serve();
  auto c = NewClient();
  InformerOptions opts;
  opts.initial_backoff = std::chrono::milliseconds(20);
  opts.max_backoff = std::chrono::milliseconds(200);
  Informer<Node> inf(*c, NodePath(), DecodeNodeList, DecodeNode, opts);
  inf.Start();
  ASSERT_TRUE(inf.WaitForSynced(std::chrono::seconds(5)));
  EXPECT_EQ(inf.Size(), 1u);
  const auto t0 = std::chrono::steady_clock::now();
  while (watches < 6 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  inf.Stop();
  EXPECT_GE(watches.load(), 6);
  EXPECT_GE(inf.Stats().failures, 3u);
  EXPECT_FALSE(inf.Stats().last_error.empty());
  EXPECT_EQ(inf.Size(), 1u) << "the store keeps what it had";
  // Backoff grows: 6 attempts at 20, 40, 80, 160, 200 ms (halved at worst by jitter) take time.
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150));
}

TEST_F(BadServer, EndlessServerErrorsAreRetriedABoundedNumberOfTimes) {
  std::atomic<int> calls{0};
  server_.Get("/api/v1/nodes/n1", [&](const httplib::Request&, httplib::Response& res) {
    ++calls;
    res.status = 503;
    res.set_content(
        R"({"kind":"Status","status":"Failure","message":"etcd is down","reason":"ServiceUnavailable","code":503})",
        "application/json");
  });
  Serve();
  auto c = NewClient();
  auto r = c->Get(NodePath("n1"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(r->Describe(), "503 ServiceUnavailable: etcd is down");
}

TEST_F(BadServer, TooManyRequestsHonoursRetryAfter) {
  std::atomic<int> calls{0};
  server_.Get("/api/v1/nodes/n1", [&](const httplib::Request&, httplib::Response& res) {
    if (calls++ == 0) {
      res.status = 429;
      res.set_header("Retry-After", "1");
      res.set_content(R"({"kind":"Status","code":429})", "application/json");
      return;
    }
    res.set_content(kNode, "application/json");
  });
  Serve();
  auto c = NewClient();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c->Get(NodePath("n1"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(calls.load(), 2);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(950));
}

TEST(BadServerNone, NobodyListeningIsATransportErrorNamingTheUrl) {
  Config cfg;
  cfg.server = "http://127.0.0.1:1";  // nothing listens on port 1
  auto c = Client::Create(
      std::move(cfg), RetryPolicy{2, std::chrono::milliseconds(10), std::chrono::milliseconds(20)});
  ASSERT_TRUE(c.ok());
  auto r = (*c)->Get(NodePath("n1"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("GET http://127.0.0.1:1/api/v1/nodes/n1"), std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace gpuheal::kube
