#include "serve/api_handler.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "common/log.hpp"
#include "serve/dashboard_page.hpp"
#include "serve/openai_request.hpp"
#include "serve/openai_response.hpp"

namespace brigade::serve {
namespace {

constexpr std::string_view models_path = "/v1/models";

std::string_view path_of(std::string_view target) {
  const size_t q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
}

http_reply not_found(std::string_view path) {
  api_error e;
  e.http_status = 404;
  e.type = "not_found_error";
  e.message =
      "no route " + std::string(path) +
      "; brigade serves /v1/completions, /v1/chat/completions, /v1/models, /v1/actors, "
      "/v1/experts, /v1/status, /v1/events, /v1/admin/kill, /v1/admin/replan, /v1/admin/faults, "
      "/tokenize, /detokenize, /health, /ready, /metrics and /dashboard";
  return api_handler::error_reply(e);
}

http_reply method_not_allowed(std::string_view method, std::string_view path, const char* allow) {
  api_error e;
  e.http_status = 405;
  e.message = std::string(method) + " is not allowed on " + std::string(path) + "; use " + allow;
  http_reply r = api_handler::error_reply(e);
  r.allow = allow;
  return r;
}

// A 401 asking for a key, with WWW-Authenticate: Bearer.
http_reply unauthorized(std::string message) {
  api_error e;
  e.http_status = 401;
  e.message = std::move(message);
  e.code = "invalid_api_key";
  http_reply r = api_handler::error_reply(e);
  r.www_authenticate = true;
  return r;
}

http_reply forbidden(std::string message, std::string code) {
  api_error e;
  e.http_status = 403;
  e.type = "permission_error";
  e.message = std::move(message);
  e.code = std::move(code);
  return api_handler::error_reply(e);
}

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

int64_t unix_now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

api_handler::api_handler(inference_service& service, const model::tokenizer& tok,
                         const api_handler_options& options)
    : service_(service),
      tok_(tok),
      auth_(options.api_keys),
      admin_auth_(unbound_keys(options.admin_keys)),
      admin_access_(admin_access_for(admin_auth_.enabled(), auth_.enabled(), options.listen_host,
                                     options.admin_without_key)),
      eos_ids_(options.eos_ids),
      chat_(options.chat),
      seed_base_(std::random_device{}()),
      request_metrics_(registry_) {}

http_reply api_handler::error_reply(const api_error& e) {
  http_reply r;
  r.status = e.http_status;
  r.body = error_body(e);
  return r;
}

http_reply api_handler::refused(const error& err) {
  return error_reply(from_service_error(err));
}

// The value of `name` in the query of `target` ("/v1/events?since=4"), or "".
std::string_view query_value(std::string_view target, std::string_view name) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return {};
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) return eq == std::string_view::npos ? "" : pair.substr(eq + 1);
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return {};
}

api_handler::outcome api_handler::handle(const http_request_view& req, clock::time_point received) {
  try {
    return route(req, received);
  } catch (const std::exception& e) {
    // A fault while answering one request (a bug, memory running out) must not end the server
    // and every other request with it: this request gets a 500 saying what happened.
    const std::string what = std::string(req.method) + " " + std::string(path_of(req.target));
    log::error("http", "answering " + what + " failed: " + e.what());
    api_error err;
    err.http_status = 500;
    err.type = "internal_server_error";
    err.message =
        "brigade failed while answering " + what + ": " + e.what() +
        ". The server goes on serving; please report this with the request that caused it";
    return error_reply(err);
  }
}

api_handler::outcome api_handler::route(const http_request_view& req, clock::time_point received) {
  const std::string_view path = path_of(req.target);
  std::string bound_salt;
  if (auto refusal = refuse_caller(req, path, bound_salt)) return *refusal;
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (req.method != "POST") return method_not_allowed(req.method, path, "POST");
    return start_generation(path == "/v1/completions" ? api_kind::completion : api_kind::chat,
                            req.body, bound_salt, received);
  }
  if (path == "/tokenize" || path == "/detokenize") {
    if (req.method != "POST") return method_not_allowed(req.method, path, "POST");
    return path == "/tokenize" ? tokenize(req.body) : detokenize(req.body);
  }
  if (path == "/v1/admin/kill") {
    if (req.method != "POST") return method_not_allowed(req.method, path, "POST");
    return admin_kill(req.body);
  }
  if (path == "/v1/admin/replan") {
    if (req.method != "POST") return method_not_allowed(req.method, path, "POST");
    return admin_replan(req.body);
  }
  if (path == "/v1/admin/faults") {
    if (req.method != "POST") return method_not_allowed(req.method, path, "POST");
    return admin_faults(req.body);
  }
  if (path == "/v1/events") {
    if (req.method != "GET") return method_not_allowed(req.method, path, "GET");
    event_stream_start start;
    const std::string since(query_value(req.target, "since"));
    if (!since.empty()) {
      char* end = nullptr;
      start.since = std::strtoull(since.c_str(), &end, 10);
      if (*end != '\0') {
        api_error e;
        e.message = "'since' must be an event sequence number, got '" + since + "'";
        e.param = "since";
        return error_reply(e);
      }
    }
    return start;
  }
  http_reply r = get_route(path);
  if (r.status != 404 && req.method != "GET") return method_not_allowed(req.method, path, "GET");
  return r;
}

// The answer that refuses the caller of `path`, if any. Otherwise `bound_salt` is the cache salt
// bound to the caller's API key ("" for none, an admin key, or a server without API keys).
std::optional<http_reply> api_handler::refuse_caller(const http_request_view& req,
                                                     std::string_view path,
                                                     std::string& bound_salt) const {
  if (path.rfind("/v1/admin/", 0) == 0) return refuse_admin(req.authorization);
  const bool is_api = path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize";
  if (!is_api || !auth_.enabled()) return std::nullopt;
  const api_key* key = auth_.match(req.authorization);
  const bool admin = admin_auth_.match(req.authorization) != nullptr;
  if (key) bound_salt = key->cache_salt;
  if (key || admin) return std::nullopt;
  return unauthorized(req.authorization.empty()
                          ? "this server needs an API key: send the header Authorization: Bearer "
                            "<key>"
                          : "the API key is not valid");
}

// The one rule of every /v1/admin/ route (serve/admin_access.hpp).
std::optional<http_reply> api_handler::refuse_admin(std::string_view authorization) const {
  switch (admin_access_) {
    case admin_access::open_loopback:
    case admin_access::open_by_opt_in:
      return std::nullopt;
    case admin_access::refused_no_keys:
      return forbidden(
          "the admin routes are refused: this server listens beyond loopback and has no key. "
          "Set admin keys (serve.admin_keys or --admin-key), or open them to anyone who can "
          "reach the server with serve.admin_without_key: true",
          "admin_key_required");
    case admin_access::api_keys:
      if (auth_.match(authorization)) return std::nullopt;
      return unauthorized(authorization.empty() ? "the admin routes need a key: send the header "
                                                  "Authorization: Bearer <key>"
                                                : "the API key is not valid");
    case admin_access::admin_keys:
      break;
  }
  if (admin_auth_.match(authorization)) return std::nullopt;
  if (auth_.match(authorization)) {
    return forbidden(
        "the admin routes need an admin key (serve.admin_keys or --admin-key); an API key "
        "does not open them",
        "admin_key_required");
  }
  return unauthorized(authorization.empty() ? "the admin routes need an admin key: send the header "
                                              "Authorization: Bearer <admin key>"
                                            : "the admin key is not valid");
}

http_reply api_handler::admin_kill(std::string_view body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  api_error e;
  if (j.is_discarded() || !j.is_object() || !j.contains("actor") || !j["actor"].is_string()) {
    e.message = "the body must be a JSON object {\"actor\": \"NAME\"} naming a live actor";
    e.param = "actor";
    return error_reply(e);
  }
  status killed = service_.kill_actor(j["actor"].get<std::string>());
  if (!killed) {
    e.http_status = killed.err().code == errc::not_found ? 404 : 400;
    e.message = killed.err().message;
    e.param = "actor";
    return error_reply(e);
  }
  http_reply r;
  r.body = nlohmann::json{{"killed", j["actor"]}}.dump();
  return r;
}

http_reply api_handler::admin_faults(std::string_view body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  api_error e;
  static const std::set<std::string> kinds = {"drop",      "delay",     "duplicate",
                                              "reorder",   "sever",     "partition",
                                              "disk_slow", "disk_full", "clear"};
  auto bad = [&](const std::string& param, const std::string& what) {
    e.param = param;
    e.message = what;
    return error_reply(e);
  };
  if (j.is_discarded() || !j.is_object()) {
    return bad("",
               "the body must be a JSON object such as {\"node\": \"n2\", \"kind\": "
               "\"drop\", \"rate\": 0.1, \"for_ms\": 5000}");
  }
  fault_request f;
  if (!j.contains("node") || !j["node"].is_string())
    return bad("node", "\"node\" must name a node");
  f.node = j["node"].get<std::string>();
  if (!j.contains("kind") || !j["kind"].is_string() || !kinds.count(j["kind"].get<std::string>())) {
    return bad("kind",
               "\"kind\" must be one of drop, delay, duplicate, reorder, sever, partition, "
               "disk_slow, disk_full, clear");
  }
  f.kind = j["kind"].get<std::string>();
  if (j.contains("peer")) {
    if (!j["peer"].is_string()) return bad("peer", "\"peer\" must name a node, or be \"*\"");
    f.peer = j["peer"].get<std::string>();
  }
  if (j.contains("rate")) {
    if (!j["rate"].is_number() || !(j["rate"].get<double>() > 0 && j["rate"].get<double>() <= 1)) {
      return bad("rate", "\"rate\" must be a share in (0, 1]");
    }
    f.rate = j["rate"].get<double>();
  }
  for (const char* key : {"ms", "for_ms", "seed"}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_number_unsigned() || j[key].get<uint64_t>() > 86400000ULL) {
      return bad(key,
                 std::string("\"") + key + "\" must be a non-negative integer (at most a day)");
    }
  }
  f.ms = j.value("ms", int64_t{0});
  f.for_ms = j.value("for_ms", int64_t{0});
  f.seed = j.value("seed", uint64_t{1});
  if ((f.kind == "delay" || f.kind == "reorder" || f.kind == "disk_slow") && f.ms == 0) {
    return bad("ms", "\"" + f.kind + "\" needs \"ms\" > 0");
  }
  status set = service_.inject_fault(f);
  if (!set) {
    e.message = set.err().message;
    return error_reply(e);
  }
  http_reply r;
  r.body = nlohmann::json{{"fault", f.kind}, {"node", f.node}, {"for_ms", f.for_ms}}.dump();
  return r;
}

http_reply api_handler::admin_replan(std::string_view body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  api_error e;
  if (j.is_discarded() || !j.is_object() || !j.contains("seed") ||
      !j["seed"].is_number_unsigned()) {
    e.message =
        "the body must be a JSON object {\"seed\": N} with N a non-negative integer "
        "(the same seed gives the same random layout)";
    e.param = "seed";
    return error_reply(e);
  }
  if (j.contains("kill") && !j["kill"].is_string()) {
    e.message =
        "\"kill\" must name a live actor to kill as the migration starts, e.g. "
        "\"expert_shard-2\"";
    e.param = "kill";
    return error_reply(e);
  }
  const std::string kill = j.value("kill", std::string());
  status started = service_.replan_randomly(j["seed"].get<uint64_t>(), kill);
  if (!started) {
    const errc code = started.err().code;
    e.http_status = code == errc::unsupported ? 400 : code == errc::not_found ? 404 : 409;
    e.message = started.err().message;
    if (code == errc::not_found) e.param = "kill";
    return error_reply(e);
  }
  http_reply r;
  r.status = 202;
  nlohmann::json answer{{"replan", "started"}, {"seed", j["seed"]}};
  if (!kill.empty()) answer["killed"] = kill;
  r.body = answer.dump();
  return r;
}

// Runs on an I/O thread outside handle()'s try: nothing here may throw, whatever the service
// returns (an event of the wrong shape is skipped; text that is not UTF-8 is replaced).
std::string api_handler::next_events(uint64_t& since) noexcept {
  try {
    const auto events = nlohmann::json::parse(service_.events_json(since), nullptr, false);
    std::string out;
    if (!events.is_array()) return out;
    for (const auto& ev : events) {
      if (!ev.is_object()) continue;
      const auto kind = ev.find("kind");
      const auto seq = ev.find("seq");
      // A line break in the name would end the SSE field early.
      const bool named =
          kind != ev.end() && kind->is_string() &&
          kind->get_ref<const std::string&>().find_first_of("\r\n") == std::string::npos;
      out += "event: " + (named ? kind->get<std::string>() : std::string("event")) +
             "\ndata: " + ev.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
             "\n\n";
      if (seq != ev.end() && seq->is_number_unsigned()) {
        since = std::max<uint64_t>(since, seq->get<uint64_t>());
      }
    }
    return out;
  } catch (const std::exception& e) {
    log::warn("http", std::string("could not read the service's events: ") + e.what());
    return {};
  }
}

http_reply api_handler::get_route(std::string_view path) {
  http_reply r;
  if (path == "/health") {
    r.body = R"({"status":"ok"})";
  } else if (path == "/ready") {
    const bool ready = service_.ready();
    r.status = ready ? 200 : 503;
    r.body = ready ? R"({"status":"ready"})" : R"({"status":"starting"})";
  } else if (path == "/metrics") {
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics_text();
  } else if (path == "/dashboard") {
    r.content_type = "text/html; charset=utf-8";
    r.body = std::string(dashboard_html());
  } else if (path == models_path) {
    r.body = models_response(service_.info());
  } else if (path.rfind(std::string(models_path) + "/", 0) == 0) {
    const service_info info = service_.info();
    if (path.substr(models_path.size() + 1) != info.model_name) return not_found(path);
    r.body = model_response(info);
  } else if (path == "/v1/actors") {
    r.body = service_.actors_json();
  } else if (path == "/v1/status") {
    r.body = service_.status_json();
  } else if (path == "/v1/experts") {
    r.body = service_.experts_json();
  } else {
    return not_found(path);
  }
  return r;
}

api_handler::outcome api_handler::start_generation(api_kind kind, std::string_view body,
                                                   std::string_view bound_salt,
                                                   clock::time_point received) {
  const int64_t id = next_id_++;
  const request_context ctx = context_for(id);
  parse_outcome parsed = parse_request(kind, body, ctx);
  if (auto* e = std::get_if<api_error>(&parsed)) return error_reply(*e);
  parsed_request& p = std::get<parsed_request>(parsed);
  // Every choice below copies p.generation, so the n choices share one namespace.
  p.generation.cache_salt = effective_cache_salt(bound_salt, p.cache_salt);
  response_meta meta;
  meta.kind = kind;
  meta.id = (kind == api_kind::chat ? "chatcmpl-" : "cmpl-") + std::to_string(id);
  meta.created_unix_s = unix_now_s();
  meta.model = ctx.info.model_name;
  meta.include_usage = p.include_usage;
  generation_start start;
  start.stream = std::make_unique<generation_stream>(p, meta, tok_, request_metrics_, received);
  const bool staggered = p.best_of > 1 && ctx.info.prefix_cache;
  const size_t total = p.prompts.size() * static_cast<size_t>(p.best_of);
  const int64_t more = total > 1 ? next_id_.fetch_add(static_cast<int64_t>(total) - 1) : 0;
  for (size_t prompt = 0; prompt < p.prompts.size(); ++prompt) {
    const size_t first = prompt * static_cast<size_t>(p.best_of);
    for (int i = 0; i < p.best_of; ++i) {
      const size_t k = first + static_cast<size_t>(i);
      generation_request g = p.generation;
      g.prompt = p.prompts[prompt];
      g.id = k == 0 ? id : more + static_cast<int64_t>(k) - 1;
      g.sampling.seed = choice_seed(p.generation.sampling.seed, i);
      int waits_for = -1;
      // Staggered choices find the prompt in the cache; the first one delivers its logprobs.
      if (staggered && i > 0) {
        g.prompt_logprobs = -1;
        g.same_prompt_as = start.requests[first].id;
        waits_for = static_cast<int>(first);
      }
      start.requests.push_back(std::move(g));
      start.waits_for.push_back(waits_for);
    }
  }
  return start;
}

request_context api_handler::context_for(int64_t id) const {
  request_context ctx;
  ctx.info = service_.info();
  ctx.tok = &tok_;
  ctx.chat =
      chat_ ? *chat_ : model::default_chat_style(model::chat_format_for(ctx.info.model_type));
  ctx.eos_ids = eos_ids_;
  ctx.default_seed = splitmix(seed_base_ ^ static_cast<uint64_t>(id));
  return ctx;
}

http_reply api_handler::tokenize(std::string_view body) const {
  const request_context ctx = context_for(0);
  ids_outcome parsed = parse_tokenize(body, ctx);
  if (auto* e = std::get_if<api_error>(&parsed)) return error_reply(*e);
  const auto& ids = std::get<std::vector<int32_t>>(parsed);
  http_reply r;
  r.body =
      nlohmann::json{
          {"tokens", ids}, {"count", ids.size()}, {"max_model_len", ctx.info.context_tokens}}
          .dump();
  return r;
}

http_reply api_handler::detokenize(std::string_view body) const {
  ids_outcome parsed = parse_detokenize(body, context_for(0));
  if (auto* e = std::get_if<api_error>(&parsed)) return error_reply(*e);
  http_reply r;
  r.body = nlohmann::json{{"prompt", tok_.decode(std::get<std::vector<int32_t>>(parsed))}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

std::string api_handler::metrics_text() {
  // One scrape at a time: collect_metrics turns the service's totals into counter increments.
  std::lock_guard<std::mutex> lock(scrape_mutex_);
  service_.collect_metrics(registry_);
  return registry_.prometheus_text();
}

}  // namespace brigade::serve
