#include "kvcache/block_payload.hpp"

namespace brigade::kvcache {

result<payload_ptr> block_payload::make(model_fingerprint model, block_hash hash,
                                        std::vector<std::uint8_t> bytes) {
  if (bytes.size() != model.block_bytes()) {
    return error(errc::invalid_argument,
                 "KV block payload of " + std::to_string(bytes.size()) + " bytes does not match " +
                     model.text() + ", whose blocks are " + std::to_string(model.block_bytes()) +
                     " bytes: copy every layer's keys and values of one block");
  }
  return payload_ptr(new block_payload(std::move(model), hash, std::move(bytes)));
}

}  // namespace brigade::kvcache
