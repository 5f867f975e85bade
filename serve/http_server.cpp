// The only translation unit of the server that includes Beast (they compile slowly).
#include "serve/http_server.hpp"

#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "common/log.hpp"

namespace brigade::serve {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr size_t header_limit_bytes = 16 * 1024;
// Bytes a client may send while its answer is generated (a pipelined next request).
constexpr size_t pipelined_limit_bytes = 64 * 1024;
// How long, and for how many bytes, a connection closing after an error answer goes on
// discarding what its client sends (see session::linger_close).
constexpr int linger_seconds = 2;
constexpr size_t linger_max_bytes = size_t{64} << 20;

std::string_view sv(beast::string_view s) {
  return {s.data(), s.size()};
}

class session;

}  // namespace

struct http_server::state : std::enable_shared_from_this<http_server::state> {
  state(api_handler& h, const http_server_options& o)
      : handler(h),
        options(o),
        ioc(std::make_unique<net::io_context>()),
        acceptor(net::make_strand(*ioc)),
        backoff(acceptor->get_executor()) {}

  // Handlers still queued hold connections, whose destructors use the members below: destroy
  // the I/O objects first, then the io_context (and those handlers) while the rest is alive.
  ~state() {
    backoff.reset();
    acceptor.reset();
    ioc.reset();
  }

  void generation_started(int64_t id) {
    std::lock_guard<std::mutex> lock(mutex);
    active_ids.insert(id);
  }
  void generation_ended(int64_t id) {
    std::lock_guard<std::mutex> lock(mutex);
    active_ids.erase(id);
    changed.notify_all();
  }

  api_handler& handler;
  http_server_options options;
  std::mutex mutex;
  std::condition_variable changed;
  std::unordered_set<int64_t> active_ids;                         // Guarded by mutex.
  std::unordered_map<session*, std::weak_ptr<session>> sessions;  // Guarded by mutex.
  bool started = false;                                           // Guarded by mutex.
  bool stopped = false;                                           // Guarded by mutex.

  std::unique_ptr<net::io_context> ioc;
  std::optional<tcp::acceptor> acceptor;
  std::optional<net::steady_timer> backoff;  // Pauses accepting after an accept error.
  std::vector<std::thread> threads;
  uint16_t port = 0;
  std::atomic<int> connections{0};
  std::atomic<int> busy{0};  // Connections between reading a request and finishing its answer.
  std::atomic<int> threads_running{0};
};

namespace {

// One connection. Every handler runs on the connection's strand (the socket's executor).
class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket socket, http_server::state& st, bool reject)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        poll_timer_(socket_.get_executor()),
        st_(st),
        reject_(reject) {
    ++st_.connections;
  }
  ~session() {
    --st_.connections;
    std::lock_guard<std::mutex> lock(st_.mutex);
    st_.sessions.erase(this);
  }

  net::any_io_executor executor() { return socket_.get_executor(); }

  void start() {
    net::dispatch(executor(), [self = shared_from_this()] {
      if (!self->reject_) return self->do_read();
      api_error e;
      e.http_status = 503;
      e.type = "server_overloaded";
      e.message = "the server has too many open connections; retry later";
      self->keep_alive_ = false;
      self->close_after_ = true;
      self->busy_begin();
      self->write_whole(api_handler::error_reply(e));
    });
  }

  void close();
  void deliver_accepted(int64_t id);
  void deliver_tokens(int64_t id, const std::vector<int32_t>& tokens,
                      const std::vector<model::position_logprobs>& logprobs);
  void deliver_prompt_logprobs(int64_t id, const std::vector<model::position_logprobs>& logprobs);
  void deliver_cached(int64_t id, int cached_tokens);
  void deliver_finished(int64_t id, finish_reason reason, const generation_usage& usage);
  void deliver_error(int64_t id, const error& err);

 private:
  void do_read();
  void on_header(beast::error_code ec);
  void read_body();
  void on_read(beast::error_code ec);
  void on_read_error(beast::error_code ec);
  void handle_request();
  void start_generation(generation_start start);
  // Submits the choices not submitted yet that wait for `released` (-1: those that wait for
  // nothing); false (the answer refused or failed) when the service refuses one.
  bool submit_choices(int released);
  // The choice whose generation has this id, or -1 (an earlier answer's).
  int choice_of(int64_t id) const;
  // Tells the service to stop every choice still running.
  void cancel_choices();
  // The service refused the generation (at submit or through the sink): the refusal's status.
  void refuse(const error& err);
  void open_stream();
  void start_events(uint64_t since);
  void poll_events();
  void emit(const std::string& bytes);
  void write_whole(const http_reply& reply);
  void pump();
  void on_stream_written(beast::error_code ec);
  void response_done();
  void start_watch();
  void on_watch(beast::error_code ec, size_t n);
  void client_gone();
  void arm_timer(int seconds);
  void disarm_timer();
  void linger_close();
  void drain_then_close();
  void busy_begin() {
    if (!busy_) ++st_.busy;
    busy_ = true;
  }
  void busy_end() {
    if (busy_) {
      --st_.busy;
      std::lock_guard<std::mutex> lock(st_.mutex);
      st_.changed.notify_all();
    }
    busy_ = false;
  }

  tcp::socket socket_;
  net::steady_timer timer_;
  net::steady_timer poll_timer_;  // Event streams: when to look for new events.
  http_server::state& st_;
  bool reject_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<http::response<http::string_body>> whole_;
  std::optional<http::response<http::empty_body>> stream_head_;
  std::optional<http::response_serializer<http::empty_body>> stream_sr_;
  std::unique_ptr<generation_stream> gen_;
  std::vector<int64_t> gen_ids_;                 // Each choice's generation id.
  std::vector<generation_request> unsubmitted_;  // Each choice's, until it is submitted.
  std::vector<int> waits_for_;   // Per choice: the choice whose first output releases it, or -1.
  std::vector<char> submitted_;  // Per choice: it went to the service.
  size_t waiting_ = 0;           // Choices not submitted yet: none, and a token submits nothing.
  bool keep_alive_ = true;
  bool close_after_ = false;       // The request could not be read whole: answer, then close.
  bool head_request_ = false;      // HEAD: answer as GET would, without the body.
  uint64_t timer_generation_ = 0;  // Which arming of timer_ a firing belongs to.
  size_t drained_bytes_ = 0;       // Discarded while lingering before the close.
  std::array<char, 4096> drain_buf_{};
  bool closed_ = false;
  bool busy_ = false;
  bool answered_ = false;  // The generation's last bytes are queued.
  bool watching_ = false;
  bool resume_after_watch_ = false;
  bool writing_ = false;
  bool head_sent_ = false;
  bool accepted_ = false;  // The service admitted the generation (the stream may open).
  bool last_sent_ = false;
  bool chunked_ = true;
  bool events_ = false;  // This connection streams /v1/events until the client leaves.
  uint64_t events_since_ = 0;
  std::string pending_;  // Stream bytes not yet written, coalesced into one chunk.
  std::string writing_buf_;
};

// Carries the service's callbacks onto the connection's strand.
class session_sink final : public generation_sink {
 public:
  session_sink(std::shared_ptr<http_server::state> st, std::shared_ptr<session> s, int64_t id)
      : st_(std::move(st)), session_(std::move(s)), id_(id) {}

  void on_accepted() override {
    net::post(session_->executor(), [s = session_, id = id_] { s->deliver_accepted(id); });
  }
  void on_prompt_logprobs(const std::vector<model::position_logprobs>& logprobs) override {
    net::post(session_->executor(),
              [s = session_, id = id_, logprobs] { s->deliver_prompt_logprobs(id, logprobs); });
  }
  // The service calls on_logprobs right before the on_tokens they belong to.
  void on_logprobs(const std::vector<model::position_logprobs>& logprobs) override {
    logprobs_ = logprobs;
  }
  void on_tokens(const std::vector<int32_t>& tokens) override {
    net::post(session_->executor(),
              [s = session_, id = id_, tokens, logprobs = std::move(logprobs_)] {
                s->deliver_tokens(id, tokens, logprobs);
              });
    logprobs_.clear();
  }
  void on_cached(int cached_tokens) override {
    net::post(session_->executor(),
              [s = session_, id = id_, cached_tokens] { s->deliver_cached(id, cached_tokens); });
  }
  void on_finished(finish_reason reason, const generation_usage& usage) override {
    net::post(session_->executor(),
              [s = session_, id = id_, reason, usage] { s->deliver_finished(id, reason, usage); });
    st_->generation_ended(id_);
  }
  void on_error(const error& err) override {
    net::post(session_->executor(), [s = session_, id = id_, err] { s->deliver_error(id, err); });
    st_->generation_ended(id_);
  }

 private:
  // Declared first so that it is destroyed last: the session's socket needs the io_context.
  std::shared_ptr<http_server::state> st_;
  std::shared_ptr<session> session_;
  int64_t id_;
  std::vector<model::position_logprobs> logprobs_;
};

// A firing counts only for the arming it belongs to: a timer that expired just as it was
// cancelled or re-armed has its handler queued with success, and would otherwise drop a healthy
// connection.
void session::arm_timer(int seconds) {
  const uint64_t armed = ++timer_generation_;
  timer_.expires_after(std::chrono::seconds(seconds));
  timer_.async_wait([self = shared_from_this(), armed](beast::error_code ec) {
    if (ec || armed != self->timer_generation_) return;  // Cancelled or re-armed.
    log::debug("http", "connection timed out");
    self->client_gone();
  });
}

void session::disarm_timer() {
  ++timer_generation_;
  timer_.cancel();
}

void session::do_read() {
  if (closed_) return;
  parser_.emplace();
  parser_->header_limit(header_limit_bytes);
  parser_->body_limit(st_.options.max_body_bytes);
  arm_timer(st_.options.idle_timeout_s);
  http::async_read_header(
      socket_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void session::on_header(beast::error_code ec) {
  if (ec) return on_read_error(ec);
  const auto& req = parser_->get();
  if (!beast::iequals(req[http::field::expect], "100-continue")) return read_body();
  // curl sends large bodies only after "100 Continue"; answer it rather than make it wait.
  static const std::string continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
  net::async_write(socket_, net::buffer(continue_line),
                   [self = shared_from_this()](beast::error_code wec, size_t) {
                     if (wec) return self->close();
                     self->read_body();
                   });
}

void session::read_body() {
  http::async_read(
      socket_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
}

void session::on_read(beast::error_code ec) {
  disarm_timer();
  if (ec) return on_read_error(ec);
  handle_request();
}

void session::on_read_error(beast::error_code ec) {
  disarm_timer();
  if (ec == http::error::end_of_stream || ec == net::error::eof ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset ||
      ec == net::error::bad_descriptor || closed_) {
    return close();
  }
  api_error e;
  if (ec == http::error::body_limit) {
    e.http_status = 413;
    e.message =
        "the request body is larger than " + std::to_string(st_.options.max_body_bytes) + " bytes";
  } else if (ec == http::error::header_limit) {
    e.http_status = 431;
    e.message =
        "the request headers are larger than " + std::to_string(header_limit_bytes) + " bytes";
  } else {
    e.message = "malformed HTTP request: " + ec.message();
  }
  keep_alive_ = false;
  close_after_ = true;
  busy_begin();
  write_whole(api_handler::error_reply(e));
}

void session::handle_request() {
  busy_begin();
  const auto received = api_handler::clock::now();
  auto& req = parser_->get();
  keep_alive_ = req.keep_alive();
  head_request_ = req.method() == http::verb::head;
  http_request_view view;
  view.method = head_request_ ? std::string_view("GET") : sv(req.method_string());
  view.target = sv(req.target());
  view.authorization = sv(req[http::field::authorization]);
  view.body = req.body();
  auto outcome = st_.handler.handle(view, received);
  if (auto* reply = std::get_if<http_reply>(&outcome)) return write_whole(*reply);
  if (head_request_) {
    // Only GET routes get here (HEAD is asked as GET): the event stream's head, no stream.
    http_reply head;
    head.content_type = "text/event-stream";
    return write_whole(head);
  }
  if (auto* ev = std::get_if<event_stream_start>(&outcome)) return start_events(ev->since);
  start_generation(std::move(std::get<generation_start>(outcome)));
}

// The head of a server-sent event stream, for generations and /v1/events alike.
void session::open_stream() {
  stream_head_.emplace(http::status::ok, parser_->get().version());
  stream_head_->set(http::field::server, "brigade");
  stream_head_->set(http::field::content_type, "text/event-stream");
  stream_head_->set(http::field::cache_control, "no-cache");
  // HTTP/1.0 has no chunked encoding: there the stream is the raw body, ended by closing.
  chunked_ = parser_->get().version() >= 11;
  if (!chunked_) keep_alive_ = false;
  stream_head_->keep_alive(keep_alive_);
  stream_head_->chunked(chunked_);
  stream_sr_.emplace(*stream_head_);
  st_.handler.metrics().http_response(200);
}

// /v1/events: a stream that lasts until the client leaves; it does not count as busy, so a
// shutdown does not wait for it.
void session::start_events(uint64_t since) {
  busy_end();
  events_ = true;
  events_since_ = since;
  head_sent_ = last_sent_ = answered_ = false;
  open_stream();
  pending_ = ": brigade expert-balancing events\n\n" + st_.handler.next_events(events_since_);
  pump();
  start_watch();
  poll_events();
}

void session::poll_events() {
  poll_timer_.expires_after(std::chrono::milliseconds(200));
  poll_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->closed_) return;
    self->pending_ += self->st_.handler.next_events(self->events_since_);
    self->pump();
    self->poll_events();
  });
}

void session::start_generation(generation_start start) {
  gen_ = std::move(start.stream);
  gen_ids_.clear();
  for (const generation_request& r : start.requests)
    gen_ids_.push_back(r.id);
  unsubmitted_ = std::move(start.requests);
  waits_for_ = std::move(start.waits_for);
  waits_for_.resize(unsubmitted_.size(), -1);
  submitted_.assign(unsubmitted_.size(), 0);
  waiting_ = unsubmitted_.size();
  answered_ = false;
  head_sent_ = last_sent_ = false;
  pending_.clear();
  accepted_ = false;
  if (!submit_choices(-1)) return;
  // The stream opens once the service admits the request: a refusal still gets its own status.
  start_watch();
}

bool session::submit_choices(int released) {
  // Every token of every choice comes through here: once all are submitted, it costs nothing.
  if (waiting_ == 0) return true;
  for (size_t i = 0; i < unsubmitted_.size(); ++i) {
    if (submitted_[i] || waits_for_[i] != released) continue;
    generation_request request = std::move(unsubmitted_[i]);
    const int64_t id = request.id;
    st_.generation_started(id);
    auto sink = std::make_shared<session_sink>(st_.shared_from_this(), shared_from_this(), id);
    status submitted = st_.handler.service().submit(std::move(request), std::move(sink));
    submitted_[i] = 1;
    --waiting_;
    if (submitted) continue;
    st_.generation_ended(id);
    if (!accepted_) {
      refuse(submitted.err());
    } else {
      emit(gen_->on_error(submitted.err()));
      cancel_choices();
    }
    return false;
  }
  if (waiting_ == 0) unsubmitted_.clear();
  return true;
}

int session::choice_of(int64_t id) const {
  for (size_t i = 0; i < gen_ids_.size(); ++i) {
    if (gen_ids_[i] == id) return static_cast<int>(i);
  }
  return -1;
}

void session::cancel_choices() {
  for (size_t i = 0; i < submitted_.size() && i < gen_ids_.size(); ++i) {
    if (submitted_[i]) st_.handler.service().cancel(gen_ids_[i]);
  }
}

void session::refuse(const error& err) {
  // Choices already submitted are stopped; each one's sink ends it.
  cancel_choices();
  gen_.reset();
  unsubmitted_.clear();
  waiting_ = 0;
  write_whole(st_.handler.refused(err));
}

void session::deliver_accepted(int64_t id) {
  if (choice_of(id) < 0 || !gen_ || closed_ || accepted_) return;
  accepted_ = true;
  if (gen_->streaming()) {
    open_stream();
    pending_ = gen_->open();
    pump();
  }
}

void session::deliver_prompt_logprobs(int64_t id,
                                      const std::vector<model::position_logprobs>& logprobs) {
  const int choice = choice_of(id);
  if (choice < 0 || !gen_ || closed_) return;
  gen_->on_prompt_logprobs(choice, logprobs);
}

void session::deliver_tokens(int64_t id, const std::vector<int32_t>& tokens,
                             const std::vector<model::position_logprobs>& logprobs) {
  const int choice = choice_of(id);
  if (choice < 0 || !gen_ || closed_) return;
  deliver_accepted(id);  // output is acceptance, whether or not the service said so first
  // This choice's prompt is computed (and cached): the choices waiting for it may start.
  if (!submit_choices(choice)) return;
  const std::string bytes = gen_->on_tokens(choice, tokens, logprobs);
  if (gen_->choice_ended(choice)) st_.handler.service().cancel(id);
  emit(bytes);
}

void session::deliver_cached(int64_t id, int cached_tokens) {
  const int choice = choice_of(id);
  if (choice < 0 || !gen_ || closed_) return;
  gen_->on_cached(choice, cached_tokens);
}

void session::deliver_finished(int64_t id, finish_reason reason, const generation_usage& usage) {
  const int choice = choice_of(id);
  if (choice < 0 || !gen_ || closed_) return;
  deliver_accepted(id);
  // A choice that ends before its first token (an error on the first, say) still lets the
  // others start.
  if (!submit_choices(choice)) return;
  emit(gen_->on_finished(choice, reason, usage));
}

void session::deliver_error(int64_t id, const error& err) {
  const int choice = choice_of(id);
  if (choice < 0 || !gen_ || closed_) return;
  // The cancel of a choice that matched a stop string: it has already ended.
  if (gen_->choice_ended(choice)) return;
  if (!accepted_) return refuse(err);
  emit(gen_->on_error(err));
  cancel_choices();
}

// Sends what the generation produced; the first time it is complete, finishes the answer.
void session::emit(const std::string& bytes) {
  if (answered_) return;
  if (gen_->streaming()) {
    pending_ += bytes;
    answered_ = gen_->complete();
    return pump();
  }
  if (!gen_->complete()) return;
  answered_ = true;
  http_reply reply;
  reply.status = gen_->whole_status();
  reply.body = bytes;
  write_whole(reply);
}

void session::write_whole(const http_reply& reply) {
  if (closed_) return;
  const unsigned version = parser_ && parser_->is_header_done() ? parser_->get().version() : 11;
  whole_ = std::make_shared<http::response<http::string_body>>(
      static_cast<http::status>(reply.status), version);
  whole_->set(http::field::server, "brigade");
  whole_->set(http::field::content_type, reply.content_type);
  if (!reply.allow.empty()) whole_->set(http::field::allow, reply.allow);
  if (reply.www_authenticate) whole_->set(http::field::www_authenticate, "Bearer");
  whole_->keep_alive(keep_alive_ && !close_after_);
  whole_->body() = reply.body;
  whole_->prepare_payload();
  // A HEAD answer carries GET's Content-Length but no body: a body would be read as the start
  // of the next response.
  if (head_request_) whole_->body().clear();
  st_.handler.metrics().http_response(reply.status);
  arm_timer(st_.options.write_timeout_s);
  http::async_write(socket_, *whole_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->disarm_timer();
    if (ec) return self->client_gone();
    self->response_done();
  });
}

// Writes the stream's header, then its bytes as chunks, then the last chunk, one at a time.
void session::pump() {
  if (writing_ || closed_) return;
  auto done = [self = shared_from_this()](beast::error_code ec, size_t) {
    self->on_stream_written(ec);
  };
  if (!head_sent_) {
    writing_ = true;
    arm_timer(st_.options.write_timeout_s);
    return http::async_write_header(socket_, *stream_sr_, done);
  }
  if (!pending_.empty()) {
    writing_buf_.swap(pending_);
    pending_.clear();
    writing_ = true;
    arm_timer(st_.options.write_timeout_s);
    if (!chunked_) return net::async_write(socket_, net::buffer(writing_buf_), done);
    return net::async_write(socket_, http::make_chunk(net::buffer(writing_buf_)), done);
  }
  if (!answered_) return;
  if (!last_sent_ && chunked_) {
    last_sent_ = true;
    writing_ = true;
    arm_timer(st_.options.write_timeout_s);
    return net::async_write(socket_, http::make_chunk_last(), done);
  }
  response_done();
}

void session::on_stream_written(beast::error_code ec) {
  disarm_timer();
  writing_ = false;
  if (ec) return client_gone();
  head_sent_ = true;
  pump();
}

void session::response_done() {
  busy_end();
  gen_.reset();
  stream_sr_.reset();
  stream_head_.reset();
  whole_.reset();
  if (close_after_) return linger_close();
  if (!keep_alive_) return close();
  if (watching_) {
    // The watch read must end before the next request is read from the same buffer.
    resume_after_watch_ = true;
    beast::error_code ignored;
    socket_.cancel(ignored);
    return;
  }
  do_read();
}

// While an answer is generated, a read notices a client that hangs up.
void session::start_watch() {
  if (closed_ || buffer_.size() >= pipelined_limit_bytes) return;
  watching_ = true;
  socket_.async_read_some(
      buffer_.prepare(4096),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_watch(ec, n); });
}

void session::on_watch(beast::error_code ec, size_t n) {
  watching_ = false;
  if (resume_after_watch_) {
    resume_after_watch_ = false;
    if (!ec) buffer_.commit(n);
    return do_read();
  }
  if (ec == net::error::operation_aborted && closed_) return;
  // End of stream counts as the client gone, as in common servers and proxies: a closed socket
  // and a half-closed one read the same, and a client that closed must not keep a long
  // generation running (a half-closing client loses its answer; see docs/serve.md).
  if (ec) return client_gone();
  buffer_.commit(n);  // A pipelined request: keep it for the next read.
  if (gen_ || events_) start_watch();
}

void session::client_gone() {
  if (gen_ && !gen_->complete()) {
    gen_->client_gone();
    cancel_choices();
  }
  close();
}

// After an answer to a request that was not read whole (413, 431, 400, the 503 of a full
// server): closing a socket with unread bytes makes the kernel send a reset, which can reach the
// client before it has read the answer, and it then sees a broken connection rather than the
// status. So send FIN, discard what the client still sends for a little while, then close.
void session::linger_close() {
  if (closed_) return;
  busy_end();
  beast::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  drained_bytes_ = 0;
  arm_timer(linger_seconds);
  drain_then_close();
}

void session::drain_then_close() {
  socket_.async_read_some(net::buffer(drain_buf_),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->drained_bytes_ += n;
                            if (ec || self->closed_ || self->drained_bytes_ > linger_max_bytes)
                              return self->close();
                            self->drain_then_close();
                          });
}

void session::close() {
  if (closed_) return;
  closed_ = true;
  busy_end();
  disarm_timer();
  poll_timer_.cancel();
  beast::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

void do_accept(http_server::state& st) {
  st.acceptor->async_accept(
      net::make_strand(*st.ioc), [&st](beast::error_code ec, tcp::socket socket) {
        if (ec == net::error::operation_aborted || !st.acceptor->is_open()) return;
        if (ec) {
          // Usually out of file descriptors: wait a little instead of spinning.
          log::warn("http", "accept failed: " + ec.message());
          st.backoff->expires_after(std::chrono::milliseconds(50));
          st.backoff->async_wait([&st](beast::error_code) { do_accept(st); });
          return;
        }
        // Stream chunks are small writes: with Nagle's algorithm, each would wait for the ACK of
        // the
        // one before (up to the client's delayed-ACK time, ~40 ms), so tokens would arrive in
        // bursts.
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        const bool reject = st.connections.load() >= st.options.max_connections;
        auto s = std::make_shared<session>(std::move(socket), st, reject);
        {
          std::lock_guard<std::mutex> lock(st.mutex);
          st.sessions[s.get()] = s;
        }
        s->start();
        do_accept(st);
      });
}

}  // namespace

http_server::http_server(api_handler& handler, const http_server_options& options)
    : state_(std::make_shared<state>(handler, options)) {}

http_server::~http_server() {
  stop();
}

status http_server::start() {
  state& st = *state_;
  beast::error_code ec;
  const auto address = net::ip::make_address(st.options.host, ec);
  if (ec) return error(errc::invalid_argument, "'" + st.options.host + "' is not an IP address");
  const tcp::endpoint endpoint(address, st.options.port);
  const std::string where = st.options.host + ":" + std::to_string(st.options.port);
  st.acceptor->open(endpoint.protocol(), ec);
  if (!ec) st.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) st.acceptor->bind(endpoint, ec);
  if (!ec) st.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) return error(errc::io_error, "cannot listen on " + where + ": " + ec.message());
  st.port = st.acceptor->local_endpoint().port();
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    st.started = true;
  }
  do_accept(st);
  const int threads = std::max(1, st.options.io_threads);
  st.threads_running = threads;
  for (int i = 0; i < threads; ++i) {
    st.threads.emplace_back([&st] {
      st.ioc->run();
      --st.threads_running;
      st.changed.notify_all();
    });
  }
  return ok_status();
}

uint16_t http_server::port() const {
  return state_->port;
}

std::string http_server::url() const {
  return "http://" + state_->options.host + ":" + std::to_string(state_->port);
}

void http_server::stop_accepting() {
  auto st = state_;
  net::dispatch(st->acceptor->get_executor(), [st] {
    beast::error_code ignored;
    st->acceptor->close(ignored);
    st->backoff->cancel();
  });
}

int http_server::active_generations() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return static_cast<int>(state_->active_ids.size());
}

int http_server::open_connections() const {
  return state_->connections.load();
}

void http_server::stop() {
  state& st = *state_;
  std::vector<int64_t> active;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    if (st.stopped) return;
    st.stopped = true;
    if (!st.started) return;
    active.assign(st.active_ids.begin(), st.active_ids.end());
  }
  stop_accepting();
  for (int64_t id : active)
    st.handler.service().cancel(id);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(st.options.stop_timeout_s);
  std::unique_lock<std::mutex> lock(st.mutex);
  if (!st.changed.wait_until(lock, deadline, [&] { return st.active_ids.empty(); })) {
    log::error("http", std::to_string(st.active_ids.size()) +
                           " generations did not end in time; closing their connections");
  }
  // Let answers already complete reach their clients, then close every connection.
  st.changed.wait_until(
      lock, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(2)),
      [&] { return st.busy.load() == 0; });
  std::vector<std::shared_ptr<session>> open;
  for (auto& [ptr, weak] : st.sessions) {
    if (auto s = weak.lock()) open.push_back(std::move(s));
  }
  lock.unlock();
  // Without the lock: the last reference to a connection may be dropped here.
  for (auto& s : open)
    net::post(s->executor(), [s] { s->close(); });
  open.clear();
  lock.lock();
  st.changed.wait_until(lock, std::chrono::steady_clock::now() + std::chrono::seconds(2),
                        [&] { return st.threads_running.load() == 0; });
  lock.unlock();
  st.ioc->stop();
  for (auto& t : st.threads)
    t.join();
  st.threads.clear();
}

}  // namespace brigade::serve
