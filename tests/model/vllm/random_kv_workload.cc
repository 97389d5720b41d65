#include "tests/model/vllm/random_kv_workload.h"

#include <algorithm>

namespace kvtwin::model::vllm::testing {
namespace {

KVCacheSpec attention(KVCacheSpecKind kind, int block_size) {
  KVCacheSpec s;
  s.kind = kind;
  s.block_size = block_size;
  s.num_kv_heads = 8;
  s.head_size = 128;
  s.dtype = "bfloat16";
  return s;
}

KVCacheSpec mamba(int block_size, MambaCacheMode mode, int spec_blocks) {
  KVCacheSpec s;
  s.kind = KVCacheSpecKind::kMamba;
  s.block_size = block_size;
  s.mamba_cache_mode = mode;
  s.num_speculative_blocks = spec_blocks;
  return s;
}

void add_group(KVCacheManagerOptions* o, const KVCacheSpec& spec) {
  o->kv_cache_config.kv_cache_groups.push_back({{"layer"}, spec});
}

}  // namespace

rc::Gen<RandomConfig> gen_config(bool full_attention_with_caching) {
  return rc::gen::exec([full_attention_with_caching] {
    RandomConfig c;
    KVCacheManagerOptions& o = c.options;
    const int bs = *rc::gen::element(2, 4, 8);
    const int layout = full_attention_with_caching ? pick(0, 3) : pick(0, 15);
    bool caching = full_attention_with_caching || *rc::gen::arbitrary<bool>();
    bool eagle_ok = false;
    o.max_model_len = 24 * bs;
    o.hash_block_size = bs;
    switch (layout) {
      case 0:
        add_group(&o, attention(KVCacheSpecKind::kFullAttention, bs));
        c.label = "full";
        c.full_attention_only = true;
        eagle_ok = true;
        break;
      case 1:  // MLA with decode context parallelism
        add_group(&o, attention(KVCacheSpecKind::kMLAAttention, bs));
        o.dcp_world_size = 2;
        o.hash_block_size = 2 * bs;
        c.label = "mla_dcp2";
        c.full_attention_only = true;
        break;
      case 2:
        add_group(&o, attention(KVCacheSpecKind::kFullAttention, bs));
        o.dcp_world_size = 2;
        o.pcp_world_size = 2;
        o.hash_block_size = 4 * bs;
        c.label = "full_dcp2_pcp2";
        c.full_attention_only = true;
        break;
      case 3: {
        KVCacheSpec s = attention(KVCacheSpecKind::kSlidingWindow, bs);
        s.sliding_window = pick(2, 5 * bs);
        add_group(&o, s);
        c.label = "sliding_window";
        eagle_ok = true;
        break;
      }
      case 4: {
        KVCacheSpec s = attention(KVCacheSpecKind::kChunkedLocalAttention, bs);
        s.attention_chunk_size = bs * pick(1, 4);
        add_group(&o, s);
        c.label = "chunked_local";
        break;
      }
      case 5: {
        KVCacheSpec s = attention(KVCacheSpecKind::kSinkFullAttention, bs);
        s.sink_len = bs * pick(1, 3);
        add_group(&o, s);
        c.label = "sink_full";
        break;
      }
      case 6:  // Mamba-only: one state block as large as the model length, no caching
        add_group(&o, mamba(static_cast<int>(o.max_model_len), MambaCacheMode::kNone, pick(0, 2)));
        o.hash_block_size = static_cast<int>(o.max_model_len);
        caching = false;
        c.label = "mamba_none";
        break;
      case 7:  // encoder-decoder
        add_group(&o, attention(KVCacheSpecKind::kFullAttention, bs));
        add_group(&o, attention(KVCacheSpecKind::kCrossAttention, bs));
        caching = false;
        c.label = "cross_attention";
        break;
      case 8: {
        add_group(&o, attention(KVCacheSpecKind::kFullAttention, bs));
        KVCacheSpec s = attention(KVCacheSpecKind::kSlidingWindow, bs);
        s.sliding_window = pick(2, 4 * bs);
        add_group(&o, s);
        if (*rc::gen::arbitrary<bool>()) add_group(&o, s);
        c.label = "hybrid_full_sw";
        eagle_ok = true;
        break;
      }
      case 9: {
        add_group(&o, attention(KVCacheSpecKind::kFullAttention, bs));
        KVCacheSpec s = attention(KVCacheSpecKind::kChunkedLocalAttention, bs);
        s.attention_chunk_size = bs * pick(1, 4);
        add_group(&o, s);
        c.label = "hybrid_full_chunked_local";
        break;
      }
      case 10:
        add_group(&o, attention(KVCacheSpecKind::kFullAttention, bs));
        add_group(&o, mamba(bs, MambaCacheMode::kAlign, pick(0, 3)));
        c.label = "hybrid_full_mamba_align";
        eagle_ok = true;
        break;
      case 11:
        add_group(&o, attention(KVCacheSpecKind::kFullAttention, bs));
        add_group(&o, mamba(bs, MambaCacheMode::kAll, 0));
        c.label = "hybrid_full_mamba_all";
        break;
      case 12: {
        KVCacheSpec a = attention(KVCacheSpecKind::kSlidingWindow, bs);
        a.sliding_window = pick(2, 3 * bs);
        KVCacheSpec b = a;
        b.sliding_window = a.sliding_window + pick(1, 4 * bs);
        add_group(&o, a);
        add_group(&o, b);
        c.label = "hybrid_sw_sw";
        eagle_ok = true;
        break;
      }
      case 13: {
        add_group(&o, attention(KVCacheSpecKind::kFullAttention, bs));
        KVCacheSpec s = attention(KVCacheSpecKind::kSlidingWindow, 2 * bs);
        s.sliding_window = pick(2, 6 * bs);
        add_group(&o, s);
        c.label = "hybrid_different_block_sizes";
        break;
      }
      default: {  // full + sliding window + mamba align
        add_group(&o, attention(KVCacheSpecKind::kFullAttention, bs));
        KVCacheSpec s = attention(KVCacheSpecKind::kSlidingWindow, bs);
        s.sliding_window = pick(2, 4 * bs);
        add_group(&o, s);
        add_group(&o, mamba(bs, MambaCacheMode::kAlign, 0));
        c.label = "hybrid_full_sw_mamba_align";
        break;
      }
    }
    o.enable_caching = caching;
    o.use_eagle = eagle_ok && *rc::gen::arbitrary<bool>();
    o.log_stats = *rc::gen::arbitrary<bool>();
    o.enable_kv_cache_events = *rc::gen::arbitrary<bool>();
    o.kv_events_use_int_block_hashes = *rc::gen::arbitrary<bool>();
    o.record_hash_events = *rc::gen::arbitrary<bool>();
    o.kv_cache_config.num_blocks = pick(6, 64);
    c.label += std::string(caching ? "" : "_nocache") + (o.use_eagle ? "_eagle" : "");
    return c;
  });
}

RandomScheduler::RandomScheduler(const RandomConfig& config) : config_(config) {
  const KVCacheManagerOptions& o = config.options;
  block_size_ = o.hash_block_size;
  if (o.enable_caching) {
    hasher_ = std::make_unique<RequestBlockHasher>(
        o.hash_block_size, BlockHasher(HashFn::kSha256Cbor, none_hash(HashFn::kSha256Cbor, "0")),
        1u << 20);
  }
  manager_ = std::make_unique<KVCacheManager>(o);
  const int64_t unit = o.kv_cache_config.kv_cache_groups[0].kv_cache_spec.block_size;
  for (int b = 0; b < 3; ++b) {
    std::vector<TokenId> base;
    int64_t n = pick<int64_t>(unit, 5 * unit);
    for (int64_t i = 0; i < n; ++i) base.push_back(pick(0, 6));
    bases_.push_back(std::move(base));
  }
}

std::vector<TokenId> RandomScheduler::random_prompt() {
  const auto& base = bases_[pick<size_t>(0, bases_.size())];
  // Half of the prompts start with a whole shared prefix, so that prefix hits are common.
  size_t cut = *rc::gen::arbitrary<bool>() ? base.size() : pick<size_t>(0, base.size() + 1);
  std::vector<TokenId> p(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(cut));
  int64_t extra = pick<int64_t>(p.empty() ? 1 : 0, 3 * block_size_);
  for (int64_t i = 0; i < extra; ++i) p.push_back(pick(0, 6));
  int64_t cap = config_.options.max_model_len / 2;
  if (static_cast<int64_t>(p.size()) > cap) p.resize(static_cast<size_t>(cap));
  return p;
}

void RandomScheduler::add_request() {
  std::vector<TokenId> prompt = random_prompt();
  RequestOptions opts;
  opts.max_tokens = pick<int64_t>(1, 3 * block_size_);
  int extra = pick(0, 8);
  if (extra == 1) opts.cache_salt = "salt";
  if (extra == 2) opts.lora_request = LoRARequest{"lora", 3};
  if (extra == 3 && prompt.size() > 2) opts.mm_features = {{"img", 1, 2}};
  if (extra == 4) opts.skip_reading_prefix_cache = true;
  SimRequest r;
  r.prompt_len = static_cast<int64_t>(prompt.size());
  r.max_tokens = opts.max_tokens;
  r.request = std::make_unique<Request>("r" + std::to_string(next_id_++), std::move(prompt),
                                        std::move(opts), hasher_.get());
  requests_.push_back(std::move(r));
}

void RandomScheduler::preempt(SimRequest& r) {
  if (before_free) before_free(r);
  manager_->free(*r.request);
  if (after_free) after_free(r);
  r.request->num_computed_tokens = 0;
  ++r.request->num_preemptions;
  r.running = false;
  r.encoder_done = false;
}

void RandomScheduler::finish(size_t index) {
  SimRequest& r = requests_[index];
  if (before_free) before_free(r);
  manager_->free(*r.request);
  if (after_free) after_free(r);
  requests_.erase(requests_.begin() + static_cast<std::ptrdiff_t>(index));
}

// One scheduling decision for r: a prefill chunk (with prefix hits when it starts) or a decode
// step, then the model "runs": num_computed_tokens advances and sampled tokens are appended.
void RandomScheduler::schedule(SimRequest& r) {
  Request& req = *r.request;
  AllocateSlotsArgs args;
  KVCacheManager::ComputedBlocks hits;
  int64_t computed = req.num_computed_tokens;
  if (!r.running) {
    hits = manager_->get_computed_blocks(req);
    if (on_hit) on_hit(req, hits);
    stats_.hit_tokens += hits.num_computed_tokens;
    args.num_new_computed_tokens = hits.num_computed_tokens;
    args.new_computed_blocks = &hits.blocks;
    computed += hits.num_computed_tokens;
    if (!r.encoder_done && config_.label.rfind("cross_attention", 0) == 0)
      args.num_encoder_tokens = pick<int64_t>(1, 4 * block_size_);
  }
  int64_t remaining = req.num_tokens() - computed;
  if (remaining <= 0) return;  // nothing to compute (cannot happen: hits stop at n - 1)
  args.num_new_tokens = pick<int64_t>(1, remaining + 1);
  if (config_.options.use_eagle) args.num_lookahead_tokens = pick(0, 3);
  args.delay_cache_blocks = pick(0, 10) == 0;
  std::optional<KVCacheBlocks> blocks = manager_->allocate_slots(req, args);
  if (!blocks) {
    ++stats_.failed_allocations;
    if (r.running) {
      ++stats_.preemptions;
      preempt(r);
    }
    return;
  }
  ++stats_.allocations;
  r.running = true;
  r.encoder_done = true;
  req.num_computed_tokens = computed + args.num_new_tokens;
  if (args.delay_cache_blocks) manager_->cache_blocks(req, req.num_computed_tokens);
  // All tokens computed: the model samples the next token (or the request ends).
  if (req.num_computed_tokens == req.num_tokens()) {
    if (req.num_output_tokens() < r.max_tokens &&
        req.num_tokens() < config_.options.max_model_len - 4) {
      TokenId t = pick(0, 6);
      req.append_output_token_ids({&t, 1});
    }
  }
}

std::string RandomScheduler::step() {
  int choice = *rc::gen::weightedElement<int>(
      {{8, 0}, {24, 1}, {4, 2}, {2, 3}, {2, 4}, {1, 5}, {2, 6}, {2, 7}, {2, 8}});
  switch (choice) {
    case 0:
      if (requests_.size() < 6) add_request();
      return "add_request";
    case 1: {
      if (requests_.empty()) return "idle";
      size_t i = pick<size_t>(0, requests_.size());
      SimRequest& r = requests_[i];
      if (r.running && r.request->num_computed_tokens >= r.request->num_tokens()) {
        finish(i);  // no more tokens to generate
        return "finish";
      }
      schedule(r);
      return "schedule";
    }
    case 2:
      if (requests_.empty()) return "idle";
      finish(pick<size_t>(0, requests_.size()));
      return "free";
    case 3:
      manager_->new_step_starts();
      return "new_step";
    case 4: {
      if (!config_.options.enable_caching) return "idle";
      std::vector<BlockId> ids;
      int n = pick(0, 3);
      for (int i = 0; i < n; ++i)
        ids.push_back(pick(0, config_.options.kv_cache_config.num_blocks));
      manager_->evict_blocks(ids);
      return "evict_blocks";
    }
    case 5:
      manager_->reset_prefix_cache();
      return "reset_prefix_cache";
    case 6: {
      if (requests_.empty()) return "idle";
      const SimRequest& r = requests_[pick<size_t>(0, requests_.size())];
      manager_->get_num_common_prefix_blocks(r.request->request_id());
      return "get_num_common_prefix_blocks";
    }
    case 7: {
      if (requests_.empty()) return "idle";
      const SimRequest& r = requests_[pick<size_t>(0, requests_.size())];
      if (r.running)
        manager_->remove_skipped_blocks(r.request->request_id(), r.request->num_computed_tokens);
      return "remove_skipped_blocks";
    }
    default:
      manager_->take_events();
      manager_->take_hash_events(&hash_events_);
      manager_->make_prefix_cache_stats();
      return "take_events";
  }
}

}  // namespace kvtwin::model::vllm::testing
