#include "serve/request_metrics.hpp"

#include <string>

namespace brigade::serve {

request_metrics::request_metrics(metrics::registry& r)
    : ttft_(r.add_histogram("brigade_time_to_first_token_seconds",
                            "Time from receiving a request to its first token.",
                            metrics::latency_buckets_s())
                .get()),
      itl_(r.add_histogram("brigade_inter_token_latency_seconds",
                           "Time between two consecutive tokens of a request.",
                           metrics::token_latency_buckets_s())
               .get()),
      tpot_(r.add_histogram("brigade_time_per_output_token_seconds",
                            "Mean time per output token after the first, per request.",
                            metrics::token_latency_buckets_s())
                .get()),
      e2e_(r.add_histogram("brigade_e2e_request_latency_seconds",
                           "Time from receiving a request to its last token.",
                           metrics::latency_buckets_s())
               .get()),
      prompt_tokens_hist_(r.add_histogram("brigade_request_prompt_tokens",
                                          "Prompt tokens per finished request.",
                                          metrics::token_count_buckets(1 << 20))
                              .get()),
      generation_tokens_hist_(r.add_histogram("brigade_request_generation_tokens",
                                              "Generated tokens per finished request.",
                                              metrics::token_count_buckets(1 << 20))
                                  .get()),
      prompt_tokens_(
          r.add_counter("brigade_prompt_tokens_total", "Prompt tokens of finished requests.")
              .get()),
      generation_tokens_(r.add_counter("brigade_generation_tokens_total",
                                       "Tokens generated for finished requests.")
                             .get()),
      cached_tokens_(r.add_counter("brigade_prompt_tokens_cached_total",
                                   "Prompt tokens served from the prefix cache.")
                         .get()),
      success_(r.add_counter("brigade_request_success_total",
                             "Requests that finished, by finish reason.", {"finished_reason"})),
      failure_(r.add_counter("brigade_request_failure_total",
                             "Admitted requests that ended without an answer, by reason.",
                             {"reason"})),
      http_(r.add_counter("brigade_http_requests_total", "HTTP responses by status code.",
                          {"code"})) {}

void request_metrics::first_token(double ttft_s) {
  ttft_.observe(ttft_s);
}

void request_metrics::inter_token(double gap_s) {
  itl_.observe(gap_s);
}

void request_metrics::finished(double e2e_s, double tpot_s, const generation_usage& usage,
                               const char* reason) {
  e2e_.observe(e2e_s);
  if (tpot_s >= 0) tpot_.observe(tpot_s);
  prompt_tokens_hist_.observe(usage.prompt_tokens);
  generation_tokens_hist_.observe(usage.completion_tokens);
  prompt_tokens_.inc(usage.prompt_tokens);
  generation_tokens_.inc(usage.completion_tokens);
  cached_tokens_.inc(usage.cached_tokens);
  success_.with({reason}).inc();
}

void request_metrics::failed(const char* reason) {
  failure_.with({reason}).inc();
}

void request_metrics::http_response(int status) {
  http_.with({std::to_string(status)}).inc();
}

}  // namespace brigade::serve
