// API keys bound to cache salts, admin keys and the loopback rule: the manifest's fields, the
// salt each request gets, and who may call /v1/admin/*, through a real server.
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "config/manifest.hpp"
#include "serve/admin_access.hpp"
#include "serve/auth.hpp"
#include "serve_fixture.hpp"

using namespace brigade;
using namespace brigade::serve;
using namespace brigade::serve::testing;

namespace {

std::string manifest_error(const std::string& serve_section) {
  auto m = config::parse_manifest("model: m\nserve: " + serve_section, "m.yaml");
  REQUIRE_FALSE(m.ok());
  return m.err().message;
}

const char* const completion = R"({"model": "tiny", "prompt": "Hi", "max_tokens": 2})";

header_list bearer(const std::string& key) {
  return {{"Authorization", "Bearer " + key}};
}

// POSTs a body to an admin route that no service accepts ({} names no actor): 400 means the
// request passed the gate, 401 or 403 that the gate refused it.
http_response admin_call(http_client& client, const std::string& key = "") {
  auto r =
      client.request("POST", "/v1/admin/kill", "{}", key.empty() ? header_list{} : bearer(key));
  REQUIRE(r.ok());
  return *r;
}

std::string error_code(const http_response& r) {
  const auto j = parse_json(r.body);
  return j["error"]["code"].is_string() ? j["error"]["code"].get<std::string>() : "";
}

}  // namespace

TEST_CASE("serve.api_keys takes plain keys and keys bound to a cache salt", "[serve][keys]") {
  auto m = config::parse_manifest(R"(
model: m
serve:
  api_keys:
    - plain
    - {key: tenant-a-key, cache_salt: tenant-a}
    - key: unsalted
  admin_keys: [root]
  admin_without_key: true
)",
                                  "m.yaml");
  if (!m.ok()) FAIL(m.err().message);
  CHECK(m->api_keys ==
        std::vector<api_key>{{"plain", ""}, {"tenant-a-key", "tenant-a"}, {"unsalted", ""}});
  CHECK(m->admin_keys == std::vector<std::string>{"root"});
  CHECK(m->admin_without_key);
  auto plain = config::parse_manifest("model: m\nserve: {api_keys: [a, b]}", "m.yaml");
  REQUIRE(plain.ok());
  CHECK(plain->api_keys == std::vector<api_key>{{"a", ""}, {"b", ""}});
  CHECK(plain->admin_keys.empty());
  CHECK_FALSE(plain->admin_without_key);
}

TEST_CASE("bad key entries are refused naming the field", "[serve][keys]") {
  using Catch::Contains;
  CHECK_THAT(manifest_error("{api_keys: key}"), Contains("'serve.api_keys'"));
  CHECK_THAT(manifest_error("{api_keys: [a, [b]]}"),
             Contains("'serve.api_keys[1]'") && Contains("mapping {key, cache_salt}"));
  CHECK_THAT(manifest_error("{api_keys: [a, '']}"), Contains("'serve.api_keys[1]'"));
  CHECK_THAT(manifest_error("{api_keys: [{cache_salt: s}]}"),
             Contains("'serve.api_keys[0].key'") && Contains("missing"));
  CHECK_THAT(manifest_error("{api_keys: [{key: k, salt: s}]}"),
             Contains("'serve.api_keys[0].salt'") && Contains("not a known field"));
  CHECK_THAT(manifest_error("{api_keys: [{key: k, cache_salt: [s]}]}"),
             Contains("'serve.api_keys[0].cache_salt'"));
  CHECK_THAT(manifest_error("{api_keys: [{key: k, cache_salt: " + std::string(257, 's') + "}]}"),
             Contains("'serve.api_keys[0].cache_salt'") && Contains("256"));
  CHECK_THAT(manifest_error("{api_keys: [a, {key: a, cache_salt: s}]}"),
             Contains("'serve.api_keys[1]'") && Contains("serve.api_keys[0]"));
  CHECK_THAT(manifest_error("{api_keys: [a], admin_keys: [b, a]}"),
             Contains("'serve.admin_keys[1]'") && Contains("serve.api_keys[0]"));
  CHECK_THAT(manifest_error("{admin_keys: [b, b]}"), Contains("'serve.admin_keys[1]'"));
  CHECK_THAT(manifest_error("{admin_keys: b}"), Contains("'serve.admin_keys'"));
  CHECK_THAT(manifest_error("{admin_without_key: maybe}"),
             Contains("'serve.admin_without_key'") && Contains("true or false"));
  // A key is a secret: errors name the entry, never the key.
  CHECK_THAT(manifest_error("{api_keys: [sk-secret, sk-secret]}"), !Contains("sk-secret"));
}

TEST_CASE("the effective cache salt is one-to-one on (bound salt, client salt)", "[serve][keys]") {
  CHECK(effective_cache_salt("", "") == "");
  CHECK(effective_cache_salt("tenant-a", "") == "8:tenant-a|");
  CHECK(effective_cache_salt("", "tenant-a") == "0:|tenant-a");
  CHECK(effective_cache_salt("tenant-a", "x") == "8:tenant-a|x");
  // Salts made to collide under a plain concatenation, or to look like an encoded pair.
  const std::vector<std::string> salts = {
      "",     "a",     "b",   "a|",  "|a", ":",           "1:a",      "1:a|",
      "0:|a", "1:a|b", "a|b", "10:", "ab", "8:tenant-a|", "tenant-a", "é"};
  std::set<std::string> seen;
  for (const auto& bound : salts) {
    for (const auto& client : salts) {
      INFO("bound '" << bound << "', client '" << client << "'");
      CHECK(seen.insert(effective_cache_salt(bound, client)).second);
    }
  }
  CHECK(seen.size() == salts.size() * salts.size());
}

TEST_CASE("a cache salt has 1 to 256 characters, counted in UTF-8", "[serve][keys]") {
  CHECK_FALSE(valid_cache_salt(""));
  CHECK(valid_cache_salt("a"));
  CHECK(valid_cache_salt(std::string(256, 'a')));
  CHECK_FALSE(valid_cache_salt(std::string(257, 'a')));
  std::string accents;
  for (int i = 0; i < 256; ++i)
    accents += "é";  // Two bytes each.
  CHECK(valid_cache_salt(accents));
  CHECK_FALSE(valid_cache_salt(accents + "é"));
}

TEST_CASE("the admin rule: admin keys, else API keys, else loopback or the opt-in",
          "[serve][keys]") {
  for (const char* host : {"127.0.0.1", "0.0.0.0", "10.1.2.3"}) {
    for (bool opt_in : {false, true}) {
      INFO("host " << host << ", opt-in " << opt_in);
      CHECK(admin_access_for(true, true, host, opt_in) == admin_access::admin_keys);
      CHECK(admin_access_for(true, false, host, opt_in) == admin_access::admin_keys);
      CHECK(admin_access_for(false, true, host, opt_in) == admin_access::api_keys);
    }
  }
  CHECK(admin_access_for(false, false, "127.0.0.1", false) == admin_access::open_loopback);
  CHECK(admin_access_for(false, false, "127.0.0.1", true) == admin_access::open_loopback);
  CHECK(admin_access_for(false, false, "0.0.0.0", false) == admin_access::refused_no_keys);
  CHECK(admin_access_for(false, false, "0.0.0.0", true) == admin_access::open_by_opt_in);
  CHECK(admin_access_for(false, false, "::", false) == admin_access::refused_no_keys);

  for (const char* host : {"127.0.0.1", "127.8.9.10", "localhost", "::1", "[::1]",
                           "::ffff:127.0.0.1", "0:0:0:0:0:0:0:1"}) {
    INFO(host);
    CHECK(is_loopback_host(host));
  }
  for (const char* host :
       {"0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "126.255.255.255", "192.168.1.1",
        "::ffff:10.0.0.1", "::2", "127.0.0.1.example.com", "localhost.example.com", "", "[::]"}) {
    INFO(host);
    CHECK_FALSE(is_loopback_host(host));
  }
  // The start line of `brigade serve` says which case applies.
  CHECK_THAT(describe(admin_access::refused_no_keys), Catch::Contains("refused"));
  CHECK_THAT(describe(admin_access::open_loopback), Catch::Contains("loopback"));
  CHECK_THAT(describe(admin_access::open_by_opt_in), Catch::Contains("admin_without_key"));
  CHECK_THAT(describe(admin_access::api_keys), Catch::Contains("any API key"));
  CHECK_THAT(describe(admin_access::admin_keys), Catch::Contains("admin keys"));
}

TEST_CASE("each request gets the salt of its key and its cache_salt, every choice alike",
          "[serve][keys]") {
  server_options o;
  o.api_keys = {{"key-a", "tenant-a"}, {"key-b", "tenant-b"}, {"key-plain", ""}};
  o.admin_keys = {"root"};
  test_server server(o);
  auto client = server.client();
  struct salted {
    const char* key;
    const char* salt_field;  // nullptr: no cache_salt in the body.
    std::string expected;
  };
  const std::vector<salted> cases = {
      {"key-a", nullptr, "8:tenant-a|"},        {"key-a", "x", "8:tenant-a|x"},
      {"key-b", nullptr, "8:tenant-b|"},        {"key-plain", nullptr, ""},
      {"key-plain", "tenant-a", "0:|tenant-a"}, {"root", "y", "0:|y"},
  };
  size_t seen = 0;
  for (const auto& c : cases) {
    INFO("key " << c.key << ", cache_salt " << (c.salt_field ? c.salt_field : "(none)"));
    nlohmann::json body = {{"model", "tiny"}, {"prompt", "Hi"}, {"max_tokens", 2}};
    if (c.salt_field) body["cache_salt"] = c.salt_field;
    auto r = client->request("POST", "/v1/completions", body.dump(), bearer(c.key));
    REQUIRE(r.ok());
    REQUIRE(r->status == 200);
    const auto salts = server.recorder->submitted_salts();
    REQUIRE(salts.size() == seen + 1);
    CHECK(salts.back() == c.expected);
    seen = salts.size();
  }
  // The three choices of one chat request share the namespace.
  auto r = client->request("POST", "/v1/chat/completions",
                           R"({"model": "tiny", "n": 3, "max_tokens": 2, "cache_salt": "z",
                               "messages": [{"role": "user", "content": "Hi"}]})",
                           bearer("key-b"));
  REQUIRE(r.ok());
  REQUIRE(r->status == 200);
  const auto salts = server.recorder->submitted_salts();
  REQUIRE(salts.size() == seen + 3);
  for (size_t i = seen; i < salts.size(); ++i)
    CHECK(salts[i] == "8:tenant-b|z");
}

TEST_CASE("without keys the client's cache_salt alone names the namespace", "[serve][keys]") {
  test_server server;
  auto client = server.client();
  std::string accents;
  for (int i = 0; i < 256; ++i)
    accents += "é";
  for (const std::string& salt : {std::string("shared"), accents}) {
    const nlohmann::json body = {
        {"model", "tiny"}, {"prompt", "Hi"}, {"max_tokens", 2}, {"cache_salt", salt}};
    auto r = client->request("POST", "/v1/completions", body.dump());
    REQUIRE(r.ok());
    REQUIRE(r->status == 200);
    CHECK(server.recorder->submitted_salts().back() == effective_cache_salt("", salt));
  }
}

TEST_CASE("with admin keys, only they open the admin routes, and both kinds open the others",
          "[serve][keys]") {
  server_options o;
  o.api_keys = {{"key-a", "tenant-a"}};
  o.admin_keys = {"root"};
  test_server server(o);
  REQUIRE(server.handler->admin() == admin_access::admin_keys);
  auto client = server.client();

  CHECK(admin_call(*client, "root").status == 400);  // Past the gate: {} names no actor.
  const http_response api = admin_call(*client, "key-a");
  CHECK(api.status == 403);
  CHECK(error_code(api) == "admin_key_required");
  CHECK_THAT(api.body, Catch::Contains("admin key"));
  const http_response none = admin_call(*client);
  CHECK(none.status == 401);
  CHECK(none.header("WWW-Authenticate") == "Bearer");
  CHECK(admin_call(*client, "wrong").status == 401);
  // Every admin route follows the rule, /v1/admin/faults included.
  for (const char* path : {"/v1/admin/replan", "/v1/admin/faults"}) {
    INFO(path);
    auto r = client->request("POST", path, "{}", bearer("key-a"));
    REQUIRE(r.ok());
    CHECK(r->status == 403);
    auto ok = client->request("POST", path, "{}", bearer("root"));
    REQUIRE(ok.ok());
    CHECK(ok->status == 400);
  }

  for (const char* key : {"key-a", "root"}) {
    INFO("key " << key);
    auto r = client->request("POST", "/v1/completions", completion, bearer(key));
    REQUIRE(r.ok());
    CHECK(r->status == 200);
  }
  auto anonymous = client->request("POST", "/v1/completions", completion);
  REQUIRE(anonymous.ok());
  CHECK(anonymous->status == 401);
}

TEST_CASE("admin keys without API keys leave the ordinary routes open", "[serve][keys]") {
  server_options o;
  o.admin_keys = {"root"};
  test_server server(o);
  auto client = server.client();
  auto r = client->request("POST", "/v1/completions", completion);
  REQUIRE(r.ok());
  CHECK(r->status == 200);
  CHECK(admin_call(*client).status == 401);
  CHECK(admin_call(*client, "root").status == 400);
}

TEST_CASE("without admin keys, any API key opens the admin routes, on any address",
          "[serve][keys]") {
  for (const char* host : {"127.0.0.1", "0.0.0.0"}) {
    INFO("listening on " << host);
    server_options o;
    o.host = host;
    o.api_keys = {{"key-a", "tenant-a"}};
    test_server server(o);
    REQUIRE(server.handler->admin() == admin_access::api_keys);
    auto client = server.client();
    CHECK(admin_call(*client, "key-a").status == 400);
    CHECK(admin_call(*client).status == 401);
    CHECK(admin_call(*client, "other").status == 401);
  }
}

TEST_CASE(
    "without any key, admin routes open on loopback and are refused elsewhere unless "
    "the manifest opts in",
    "[serve][keys]") {
  struct where {
    const char* host;
    bool opt_in;
    admin_access access;
    int status;
  };
  for (const where& w : {where{"127.0.0.1", false, admin_access::open_loopback, 400},
                         where{"0.0.0.0", false, admin_access::refused_no_keys, 403},
                         where{"0.0.0.0", true, admin_access::open_by_opt_in, 400}}) {
    INFO("listening on " << w.host << ", admin_without_key " << w.opt_in);
    server_options o;
    o.host = w.host;
    o.admin_without_key = w.opt_in;
    test_server server(o);
    REQUIRE(server.handler->admin() == w.access);
    auto client = server.client();
    for (const char* path : {"/v1/admin/kill", "/v1/admin/replan", "/v1/admin/faults"}) {
      INFO(path);
      auto r = client->request("POST", path, "{}");
      REQUIRE(r.ok());
      CHECK(r->status == w.status);
      if (w.status == 403) {
        CHECK(error_code(*r) == "admin_key_required");
        CHECK_THAT(r->body, Catch::Contains("admin_keys") && Catch::Contains("admin_without_key"));
      }
    }
    // The ordinary routes stay open whatever the admin rule.
    auto ok = client->request("POST", "/v1/completions", completion);
    REQUIRE(ok.ok());
    CHECK(ok->status == 200);
  }
}
