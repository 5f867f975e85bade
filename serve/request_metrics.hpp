// The request metrics of the OpenAI front end, under vLLM's names with the brigade_ prefix:
// time to first token, inter-token latency, time per output token, end-to-end latency, token
// counts and successes by finish reason. Measured where the client sees them: at the HTTP layer,
// whatever service generates behind it.
#pragma once

#include "common/metrics.hpp"
#include "serve/inference_service.hpp"

namespace brigade::serve {

class request_metrics {
 public:
  explicit request_metrics(metrics::registry& registry);

  void first_token(double ttft_s);
  void inter_token(double gap_s);
  /// A request that ended normally; `tpot_s` < 0 when it produced fewer than two tokens.
  void finished(double e2e_s, double tpot_s, const generation_usage& usage, const char* reason);
  /// A request that ended without an answer: "client_disconnected", "error" or "shutdown".
  void failed(const char* reason);
  void http_response(int status);

 private:
  metrics::histogram& ttft_;
  metrics::histogram& itl_;
  metrics::histogram& tpot_;
  metrics::histogram& e2e_;
  metrics::histogram& prompt_tokens_hist_;
  metrics::histogram& generation_tokens_hist_;
  metrics::counter& prompt_tokens_;
  metrics::counter& generation_tokens_;
  metrics::counter& cached_tokens_;
  metrics::family<metrics::counter>& success_;
  metrics::family<metrics::counter>& failure_;
  metrics::family<metrics::counter>& http_;
};

}  // namespace brigade::serve
