#include "serve/inference_service.hpp"

namespace brigade::serve {

const char* openai_finish_reason(finish_reason r) {
  // OpenAI has no separate reason for a full context: it is a length limit too.
  return r == finish_reason::stop_token ? "stop" : "length";
}

}  // namespace brigade::serve
