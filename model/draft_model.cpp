#include "model/draft_model.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "model/draft_settings.hpp"
#include "model/kv_layout.hpp"
#include "model/logit_statistics.hpp"
#include "model/tokenizer.hpp"
#include "model/transformer.hpp"

namespace brigade::model {
namespace {

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Both checkpoints' tokenizers, when both have one, must give every id the same token: a draft
// of another tokenizer proposes ids that mean other text to the target, and nothing it drafts
// would hold.
status check_same_tokenizer(const std::string& dir, const std::string& target_dir) {
  auto draft = tokenizer::load(dir);
  auto target = tokenizer::load(target_dir);
  if (!draft || !target) return ok_status();
  if (draft->size() != target->size()) {
    return error(errc::invalid_argument, "the draft model " + dir + " has a tokenizer of " +
                                             std::to_string(draft->size()) +
                                             " ids and the target " + target_dir + " one of " +
                                             std::to_string(target->size()) +
                                             ": a draft must share the target's tokenizer");
  }
  for (int32_t id = 0; id < target->size(); ++id) {
    const auto ours = draft->token_text(id);
    const auto theirs = target->token_text(id);
    if (ours == theirs) continue;
    return error(errc::invalid_argument,
                 "the draft model " + dir + " and the target " + target_dir +
                     " have different tokenizers: token " + std::to_string(id) + " is '" +
                     ours.value_or("") + "' in the draft and '" + theirs.value_or("") +
                     "' in the target; a draft must share the target's tokenizer");
  }
  return ok_status();
}

}  // namespace

result<std::shared_ptr<const loaded_model>> draft_model::load(const std::string& dir,
                                                              const model_config& target,
                                                              const std::string& target_dir,
                                                              gpu::backend& dev,
                                                              weight_format held) {
  if (!is_directory(dir)) {
    return error(errc::not_found, "the draft model directory " + dir + " does not exist");
  }
  auto config = load_config(dir);
  if (!config) return error(config.err().code, "draft model: " + config.err().message);
  if (config->is_moe()) {
    return error(errc::unsupported, "the draft model " + dir + " (" + config->model_type +
                                        ") is a mixture of experts; a draft must be a dense "
                                        "model (qwen3, qwen2, llama)");
  }
  if (config->vocab_size != target.vocab_size) {
    return error(errc::invalid_argument, "the draft model " + dir + " has a vocabulary of " +
                                             std::to_string(config->vocab_size) +
                                             " tokens and the target " + target_dir + " one of " +
                                             std::to_string(target.vocab_size) +
                                             ": a draft must share the target's tokenizer");
  }
  if (status same = check_same_tokenizer(dir, target_dir); !same) return same.err();
  auto settings = draft_settings::for_draft(dir);
  if (!settings) return error(settings.err().code, "draft model: " + settings.err().message);
  std::shared_ptr<gpu::backend> int8_dev;
  if (const char* env = std::getenv("BRIGADE_DRAFT_INT8"); env && std::string(env) == "0") {
    held = weight_format::as_stored;
  }
  if (held == weight_format::int8 && dev.host_pool() != nullptr) {
    int8_dev = gpu::make_int8_cpu_backend(dev.host_pool());
  }
  auto loaded = loaded_model::load(dir, int8_dev ? *int8_dev : dev, true);
  if (!loaded) return error(loaded.err().code, "draft model: " + loaded.err().message);
  loaded.value()->own_device = std::move(int8_dev);
  loaded.value()->attention_window = settings->attention_window;
  return std::shared_ptr<const loaded_model>(std::move(loaded.value()));
}

draft_model::draft_model(std::shared_ptr<const loaded_model> weights,
                         const draft_source_limits& limits,
                         std::shared_ptr<const confidence_head> head)
    : weights_(std::move(weights)),
      config_(windowed(weights_->config, limits.attention_window)),
      forward_(std::make_unique<transformer>(config_, weights_->forward->device(),
                                             weights_->forward->weights())),
      head_(std::move(head)),
      catch_up_tokens_(limits.catch_up_tokens),
      block_tokens_(limits.block_tokens),
      pool_((limits.kv_tokens + limits.block_tokens - 1) / limits.block_tokens),
      ws_(weights_->config, weights_->forward->device(), limits.max_step_tokens) {
  // A draft held in int8 keeps its keys and values in bf16 too: half the memory and reads, and
  // its drafts are approximate anyway. A draft held as stored stays exact.
  const bool approximate = weights_->own_device != nullptr;
  kv_ = weights_->forward->device().make_kv(
      kv_layout_for(weights_->config, pool_.capacity(), block_tokens_,
                    approximate ? gpu::dtype::bf16 : gpu::dtype::f32));
}

draft_model::~draft_model() = default;

int draft_model::attention_window_for(const speculation_options& options,
                                      const loaded_model& draft) {
  return options.draft_attention_window >= 0 ? options.draft_attention_window
                                             : draft.attention_window;
}

model_config draft_model::windowed(model_config draft, int attention_window) {
  if (attention_window > 0 &&
      (draft.sliding_window == 0 || attention_window < draft.sliding_window)) {
    draft.sliding_window = attention_window;
  }
  return draft;
}

int draft_model::stored_tokens(int64_t id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? 0 : it->second.stored;
}

bool draft_model::reserve(sequence& s, int positions) {
  const int needed = (positions + block_tokens_ - 1) / block_tokens_;
  const int more = needed - static_cast<int>(s.blocks.size());
  return more <= 0 || pool_.allocate(more, s.blocks);
}

void draft_model::propose(const std::vector<draft_sequence>& sequences,
                          std::vector<draft_proposal>& out) {
  out.assign(sequences.size(), {});
  in_step_.assign(sequences.size(), nullptr);
  confidence_.assign(sequences.size(), 1.0);
  // The sequences asking are those decoding with drafts this step: the batch a verified row's
  // cost depends on.
  if (head_) rule_ = head_->rule(static_cast<int>(sequences.size()));
  std::vector<int> limits(sequences.size(), 0);
  std::vector<feed> feeds;
  // What catching up may feed this step; a sequence that needs no more than a step's own tokens
  // (its last token, and drafts kept or tokens generated since) is never held back by it.
  constexpr int own_tokens = 8;
  int catch_up = catch_up_tokens_ > 0 ? catch_up_tokens_ : std::numeric_limits<int>::max();
  for (size_t i = 0; i < sequences.size(); ++i) {
    const draft_sequence& q = sequences[i];
    const int n = static_cast<int>(q.tokens->size());
    // Draft j follows position n - 1 + j; the last draft's own keys are never written.
    const int limit = std::min(q.limit, weights_->config.max_positions - n + 1);
    if (n == 0 || limit < 1) continue;
    sequence& s = seqs_[q.id];
    // The last token is always fed: its row gives draft 0.
    s.stored = std::min(s.stored, n - 1);
    s.fed_drafts = 0;
    if (!reserve(s, n + limit - 1)) continue;
    in_step_[i] = &s;
    const int need = n - s.stored;
    if (need > own_tokens) {
      const int take = std::min(need, catch_up);
      if (take <= 0) continue;
      catch_up -= take;
      if (take < need) {
        // Part of its context this step, and no drafts: plain decoding for it until it is in.
        feeds.push_back({i, q.tokens->data() + s.stored, take, s.stored, false});
        s.stored += take;
        continue;
      }
    }
    limits[i] = limit;
    feeds.push_back({i, q.tokens->data() + s.stored, need, s.stored});
    s.stored = n;
  }
  run(std::move(feeds), out);
  for (int j = 1;; ++j) {
    feeds.clear();
    for (size_t i = 0; i < sequences.size(); ++i) {
      if (limits[i] <= j || out[i].tokens.size() != static_cast<size_t>(j)) continue;
      if (head_ && confidence_[i] < rule_.continue_threshold) continue;
      const int n = static_cast<int>(sequences[i].tokens->size());
      feeds.push_back({i, &out[i].tokens[static_cast<size_t>(j) - 1], 1, n - 1 + j});
      in_step_[i]->fed_drafts = j;
    }
    if (feeds.empty()) break;
    run(std::move(feeds), out);
  }
}

void draft_model::prefilled(const std::vector<draft_context>& contexts) {
  in_step_.assign(contexts.size(), nullptr);
  std::vector<feed> feeds;
  for (size_t i = 0; i < contexts.size(); ++i) {
    const draft_context& c = contexts[i];
    const int length = std::min(c.length, static_cast<int>(c.tokens->size()));
    sequence& s = seqs_[c.id];
    s.stored = std::min(s.stored, length);
    if (length <= s.stored || !reserve(s, length)) continue;
    in_step_[i] = &s;
    feeds.push_back({i, c.tokens->data() + s.stored, length - s.stored, s.stored, false});
    s.stored = length;
  }
  std::vector<draft_proposal> none(contexts.size());
  run(std::move(feeds), none);
}

void draft_model::run(std::vector<feed> feeds, std::vector<draft_proposal>& out) {
  const size_t vocab = static_cast<size_t>(weights_->config.vocab_size);
  std::vector<std::pair<size_t, int>> chosen;  // slot, and the chosen token's position
  size_t next = 0;                             // the first feed not wholly fed yet
  while (next < feeds.size()) {
    batch_.clear();
    chosen.clear();
    int budget = ws_.max_tokens();
    while (next < feeds.size() && budget > 0) {
      feed& f = feeds[next];
      const int chunk = std::min(f.count, budget);
      const bool last = chunk == f.count;
      const sequence& s = *in_step_[f.slot];
      batch_.add_sequence(f.tokens, chunk, f.start, s.blocks.data(),
                          static_cast<int>(s.blocks.size()), last && f.drafts ? 1 : 0);
      f.tokens += chunk;
      f.count -= chunk;
      f.start += chunk;
      budget -= chunk;
      if (!last) break;
      if (f.drafts) chosen.emplace_back(f.slot, f.start);
      ++next;
    }
    run_step(*forward_, *weights_->experts, *kv_, ws_, batch_, logits_);
    for (size_t k = 0; k < chosen.size(); ++k)
      choose(logits_.data() + k * vocab, chosen[k].first, chosen[k].second, out);
  }
}

void draft_model::choose(const float* row, size_t slot, int position,
                         std::vector<draft_proposal>& out) {
  const logit_statistics stats = logit_statistics_of(row, weights_->config.vocab_size);
  draft_proposal& p = out[slot];
  draft_feature f;
  f.probability = stats.probability;
  f.entropy = stats.entropy;
  f.index = static_cast<int32_t>(p.tokens.size());
  f.position = position;
  ++p.computed;
  if (head_) {
    // A dropped draft ends the sequence's drafting: propose() feeds only sequences whose last
    // draft was kept here.
    confidence_[slot] *= head_->predict(f);
    if (confidence_[slot] < rule_.threshold) return;
  }
  p.tokens.push_back(stats.best);
  p.features.push_back(f);
}

void draft_model::accepted(int64_t id, int kept) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  sequence& s = it->second;
  s.stored += std::min(kept, s.fed_drafts);
  s.fed_drafts = 0;
}

void draft_model::release(int64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  pool_.release_all(it->second.blocks);
  seqs_.erase(it);
}

}  // namespace brigade::model
