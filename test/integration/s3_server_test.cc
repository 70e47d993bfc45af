// The S3 test server (s3_server.h: moto's S3 backend behind tools/s3-server/s3_server.py) and its
// presigned URLs: the signing matches AWS's published example and botocore's presigner; a
// presigned PUT stores the bytes a presigned GET returns (a bundle-sized one too, sent as the agent
// sends it); a missing bucket or key is 404. And the server refuses a presigned URL as S3 does:
// expired or not yet valid 403 AccessDenied, a wrong signature (forged, another secret, another
// method) 403 SignatureDoesNotMatch, an unknown access key 403 InvalidAccessKeyId; it accepts the
// URLs botocore presigns.

#include "s3_server.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace gpuheal {
namespace {

using namespace std::chrono_literals;
using gpuheal::testing::S3Server;
namespace s3_detail = gpuheal::testing::s3_detail;

std::chrono::system_clock::time_point Utc(int y, unsigned mo, unsigned d, int h, int mi, int s) {
  return std::chrono::sys_days{std::chrono::year{y} / mo / d} + std::chrono::hours{h} +
         std::chrono::minutes{mi} + std::chrono::seconds{s};
}

// The example of AWS's "Authenticating Requests: Using Query Parameters (AWS Signature Version
// 4)": a GET of examplebucket/test.txt, valid 86400 s from 2013-05-24T00:00:00Z.
TEST(S3Presign, MatchesAwsDocumentationExample) {
  const s3_detail::Credentials creds{"AKIAIOSFODNN7EXAMPLE",
                                     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1"};
  EXPECT_EQ(s3_detail::PresignV4("GET", "https", "examplebucket.s3.amazonaws.com", "/test.txt",
                                 creds, 86400, Utc(2013, 5, 24, 0, 0, 0)),
            "https://examplebucket.s3.amazonaws.com/test.txt"
            "?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
            "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
            "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
}

// The presigned PUT and GET URLs botocore (from the server's virtualenv) makes for `bucket`/`key`
// at `endpoint`, path-style, valid 600 s, signed at 2026-01-02T03:04:05Z or (`now`) now.
// Empty, with the failure as a test failure, if the script fails.
std::vector<std::string> BotocorePresign(const std::string& endpoint, const std::string& bucket,
                                         const std::string& key, bool now) {
  const std::string exe = S3Server::ServerPath();
  if (exe.empty()) {
    ADD_FAILURE() << "no S3 server: run scripts/build-s3-server.sh";
    return {};
  }
  const std::string python = exe.substr(0, exe.rfind('/')) + "/python3";
  char tmpl[] = "/tmp/gpuheal-s3-presign-XXXXXX";
  if (!mkdtemp(tmpl)) {
    ADD_FAILURE() << "mkdtemp failed";
    return {};
  }
  const std::string dir = tmpl;
  std::ofstream(dir + "/presign.py") << R"(import datetime, sys
import botocore.auth, botocore.session
from botocore.config import Config
if sys.argv[3] == "fixed":
    botocore.auth.get_current_datetime = lambda *a, **k: datetime.datetime(2026, 1, 2, 3, 4, 5)
c = botocore.session.get_session().create_client(
    "s3", endpoint_url=sys.argv[1], region_name="us-east-1",
    aws_access_key_id="testing", aws_secret_access_key="testing",
    config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
for op in ("put_object", "get_object"):
    print(c.generate_presigned_url(op, Params={"Bucket": sys.argv[4], "Key": sys.argv[2]},
                                   ExpiresIn=600))
)";
  const std::string cmd = python + " " + dir + "/presign.py " + endpoint + " '" + key + "' " +
                          (now ? "now" : "fixed") + " " + bucket + " 2>&1";
  std::vector<std::string> lines;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) {
    ADD_FAILURE() << "popen failed: " << cmd;
    std::filesystem::remove_all(dir);
    return {};
  }
  char buf[4096];
  while (fgets(buf, sizeof buf, f)) {
    std::string line = buf;
    while (!line.empty() && line.back() == '\n') line.pop_back();
    lines.push_back(line);
  }
  const int rc = pclose(f);
  std::filesystem::remove_all(dir);
  if (rc != 0 || lines.size() != 2) {
    ADD_FAILURE() << cmd << " exited " << rc << (lines.empty() ? "" : ": " + lines.back());
    return {};
  }
  return lines;
}

const std::string kAwkwardKey = "node-1/bundle 2026-01-02+x~y=z&.tar.gz";  // needs encoding

// The same URLs as botocore presigns, for a key that needs encoding, at a fixed time: path-style,
// with the port in the signed host.
TEST(S3Presign, MatchesBotocore) {
  const std::string key = kAwkwardKey;
  const auto lines = BotocorePresign("http://127.0.0.1:9000", "bundles", key, false);
  ASSERT_EQ(lines.size(), 2u);
  const auto at = Utc(2026, 1, 2, 3, 4, 5);
  const s3_detail::Credentials creds;
  EXPECT_EQ(
      s3_detail::PresignV4("PUT", "http", "127.0.0.1:9000", "/bundles/" + key, creds, 600, at),
      lines[0]);
  EXPECT_EQ(
      s3_detail::PresignV4("GET", "http", "127.0.0.1:9000", "/bundles/" + key, creds, 600, at),
      lines[1]);
}

// One server for the suite (its start costs a second or two); each test its own bucket.
class S3ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto s = std::make_unique<S3Server>();
    const auto t0 = std::chrono::steady_clock::now();
    try {
      s->Start();
    } catch (const std::exception& e) {
      start_error_ = e.what();
      return;
    }
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    std::printf("S3 server at %s answered %lld ms after the start\n", s->endpoint().c_str(),
                static_cast<long long>(ms));
    server_ = std::move(s);
  }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override {
    if (!server_) GTEST_FAIL() << "S3 server did not start: " << start_error_;
  }
  S3Server& s3() { return *server_; }

  static std::unique_ptr<S3Server> server_;
  static std::string start_error_;
};
std::unique_ptr<S3Server> S3ServerTest::server_;
std::string S3ServerTest::start_error_;

std::string RandomBytes(size_t n) {
  std::mt19937 rng(42);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

TEST_F(S3ServerTest, PresignedPutThenGetRoundTrips) {
  s3().CreateBucket("bundles");
  const std::string key = "node-1/2026-01-02T03:04:05Z bundle.tar.gz";
  const std::string bytes = RandomBytes(3 << 20);  // binary, NULs included, past curl's 1 MiB
  EXPECT_EQ(S3Server::Put(s3().PresignPut("bundles", key, 300), bytes), 200);
  auto got = s3().GetObject("bundles", key);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->size(), bytes.size());
  EXPECT_TRUE(*got == bytes);
  EXPECT_EQ(s3().ListKeys("bundles"), std::vector<std::string>{key});
  // A second PUT to the same key replaces the object.
  EXPECT_EQ(S3Server::Put(s3().PresignPut("bundles", key, 300), "small"), 200);
  EXPECT_EQ(s3().GetObject("bundles", key), "small");
}

TEST_F(S3ServerTest, MissingBucketIs404NoSuchBucket) {
  const std::string body = "x";
  auto r = S3Server::Http("PUT", s3().PresignPut("no-such-bucket", "k", 300), &body);
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(s3_detail::XmlText(r.body, "Code"), "NoSuchBucket") << r.body;
  EXPECT_EQ(s3().GetObject("no-such-bucket", "k"), std::nullopt);
  EXPECT_THROW(s3().ListKeys("no-such-bucket"), std::runtime_error);
}

TEST_F(S3ServerTest, MissingKeyIs404NoSuchKey) {
  s3().CreateBucket("empty");
  auto r = S3Server::Http("GET", s3().PresignGet("empty", "absent", 300));
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(s3_detail::XmlText(r.body, "Code"), "NoSuchKey") << r.body;
  EXPECT_EQ(s3().GetObject("empty", "absent"), std::nullopt);
  EXPECT_TRUE(s3().ListKeys("empty").empty());
}

// An anonymous (unsigned) GET of a private object (moto checks that itself).
TEST_F(S3ServerTest, UnsignedGetOfPrivateObjectIs403) {
  s3().CreateBucket("private");
  ASSERT_EQ(S3Server::Put(s3().PresignPut("private", "k", 300), "secret"), 200);
  EXPECT_EQ(S3Server::Http("GET", s3().endpoint() + "/private/k").status, 403);
}

// The size of a bundle the agent uploads, sent as diag_upload.cc sends it: CURLOPT_UPLOAD with
// the length, Content-Type: application/gzip, no Expect: 100-continue. The exact bytes are stored.
TEST_F(S3ServerTest, BundleSizedGzipPutStoresTheExactBytes) {
  s3().CreateBucket("big");
  const std::string bytes = RandomBytes(20 << 20);
  const std::string key = "node-1/bundle.tar.gz";
  auto r = S3Server::Http("PUT", s3().PresignPut("big", key, 300), &bytes, 120000,
                          {"Content-Type: application/gzip", "Expect:"});
  EXPECT_EQ(r.status, 200) << r.body;
  auto got = s3().GetObject("big", key);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->size(), bytes.size());
  EXPECT_TRUE(*got == bytes);
}

// The URLs botocore presigns now (what a controller built on an AWS SDK hands out) are accepted.
TEST_F(S3ServerTest, AcceptsBotocoreUrls) {
  s3().CreateBucket("botocore");
  const auto urls = BotocorePresign(s3().endpoint(), "botocore", kAwkwardKey, true);
  ASSERT_EQ(urls.size(), 2u);
  EXPECT_EQ(S3Server::Put(urls[0], "from botocore"), 200);
  auto r = S3Server::Http("GET", urls[1]);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "from botocore");
}

// A URL whose 60 s ran out an hour ago: 403 AccessDenied "Request has expired", as S3 answers,
// for a PUT (nothing stored) and a GET.
TEST_F(S3ServerTest, ExpiredUrlIs403AccessDenied) {
  s3().CreateBucket("expired");
  const auto an_hour_ago = std::chrono::system_clock::now() - 1h;
  const std::string body = "late";
  auto r = S3Server::Http("PUT", s3().PresignPut("expired", "k", 60, an_hour_ago), &body);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(s3_detail::XmlText(r.body, "Code"), "AccessDenied") << r.body;
  EXPECT_EQ(s3_detail::XmlText(r.body, "Message"), "Request has expired") << r.body;
  EXPECT_EQ(s3().GetObject("expired", "k"), std::nullopt);
  ASSERT_EQ(S3Server::Put(s3().PresignPut("expired", "k", 300), "on time"), 200);
  r = S3Server::Http("GET", s3().PresignGet("expired", "k", 60, an_hour_ago));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(s3_detail::XmlText(r.body, "Code"), "AccessDenied") << r.body;
  EXPECT_EQ(s3().GetObject("expired", "k"), "on time");
}

// Refused while the client still sends a bundle-sized body: the agent must see the 403 (and not
// retry), not a connection reset.
TEST_F(S3ServerTest, ExpiredUrlRefusesABundleSizedPutWith403) {
  s3().CreateBucket("expired-big");
  const std::string bytes = RandomBytes(20 << 20);
  const auto an_hour_ago = std::chrono::system_clock::now() - 1h;
  auto r = S3Server::Http("PUT", s3().PresignPut("expired-big", "k", 60, an_hour_ago), &bytes,
                          120000, {"Content-Type: application/gzip", "Expect:"});
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(s3_detail::XmlText(r.body, "Code"), "AccessDenied") << r.body;
  EXPECT_EQ(s3().GetObject("expired-big", "k"), std::nullopt);
}

// Signed more than 15 minutes in the future: 403 AccessDenied "Request is not valid yet".
TEST_F(S3ServerTest, FutureDatedUrlIs403AccessDenied) {
  s3().CreateBucket("future");
  const auto in_an_hour = std::chrono::system_clock::now() + 1h;
  auto r = S3Server::Http("GET", s3().PresignGet("future", "k", 60, in_an_hour));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(s3_detail::XmlText(r.body, "Code"), "AccessDenied") << r.body;
  EXPECT_EQ(s3_detail::XmlText(r.body, "Message"), "Request is not valid yet") << r.body;
}

// A signature altered, or replaced: 403 SignatureDoesNotMatch, nothing stored.
TEST_F(S3ServerTest, ForgedSignatureIs403SignatureDoesNotMatch) {
  s3().CreateBucket("forged");
  std::string url = s3().PresignPut("forged", "k", 300);
  url.back() = url.back() == '0' ? '1' : '0';
  const std::string body = "forged";
  auto r = S3Server::Http("PUT", url, &body);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(s3_detail::XmlText(r.body, "Code"), "SignatureDoesNotMatch") << r.body;
  EXPECT_EQ(s3_detail::XmlText(r.body, "Message"),
            "The request signature we calculated does not match the signature you provided. "
            "Check your key and signing method.")
      << r.body;
  EXPECT_EQ(s3().GetObject("forged", "k"), std::nullopt);
  ASSERT_EQ(S3Server::Put(s3().PresignPut("forged", "k", 300), "real"), 200);
  std::string get = s3().PresignGet("forged", "k", 300);
  get = get.substr(0, get.find("&X-Amz-Signature=")) + "&X-Amz-Signature=00";
  r = S3Server::Http("GET", get);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(s3_detail::XmlText(r.body, "Code"), "SignatureDoesNotMatch") << r.body;
}

// Signed correctly, with a secret that is not the access key's: 403 SignatureDoesNotMatch.
TEST_F(S3ServerTest, WrongSecretIs403SignatureDoesNotMatch) {
  s3().CreateBucket("wrong-secret");
  const s3_detail::Credentials creds{"testing", "not-the-secret", "us-east-1"};
  const std::string url =
      s3_detail::PresignV4("PUT", "http", "127.0.0.1:" + std::to_string(s3().port()),
                           "/wrong-secret/k", creds, 300, std::chrono::system_clock::now());
  const std::string body = "x";
  auto r = S3Server::Http("PUT", url, &body);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(s3_detail::XmlText(r.body, "Code"), "SignatureDoesNotMatch") << r.body;
  EXPECT_EQ(s3().GetObject("wrong-secret", "k"), std::nullopt);
}

// The method is signed: a presigned PUT URL used for a GET is refused.
TEST_F(S3ServerTest, UrlUsedForAnotherMethodIs403SignatureDoesNotMatch) {
  s3().CreateBucket("method");
  ASSERT_EQ(S3Server::Put(s3().PresignPut("method", "k", 300), "v"), 200);
  auto r = S3Server::Http("GET", s3().PresignPut("method", "k", 300));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(s3_detail::XmlText(r.body, "Code"), "SignatureDoesNotMatch") << r.body;
}

TEST_F(S3ServerTest, UnknownAccessKeyIs403InvalidAccessKeyId) {
  s3().CreateBucket("unknown-key");
  const s3_detail::Credentials creds{"AKIDUNKNOWN", "testing", "us-east-1"};
  const std::string url =
      s3_detail::PresignV4("GET", "http", "127.0.0.1:" + std::to_string(s3().port()),
                           "/unknown-key/k", creds, 300, std::chrono::system_clock::now());
  auto r = S3Server::Http("GET", url);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(s3_detail::XmlText(r.body, "Code"), "InvalidAccessKeyId") << r.body;
}

TEST(S3ServerLifecycle, StopEndsTheServer) {
  S3Server s;
  s.Start();
  const std::string endpoint = s.endpoint();
  EXPECT_EQ(S3Server::Http("GET", endpoint + "/").status, 200);
  s.Stop();
  EXPECT_EQ(S3Server::Http("GET", endpoint + "/", nullptr, 2000).status, 0);
  s.Stop();  // again: nothing to do
}

}  // namespace
}  // namespace gpuheal

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
