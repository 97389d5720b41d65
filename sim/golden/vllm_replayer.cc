#include "sim/golden/vllm_replayer.h"

#include <algorithm>
#include <numeric>

#include "sim/io/input_error.h"

namespace kvtwin::sim::golden {

namespace mv = model::vllm;

namespace {

// The fields of a group object that parse_spec does not read for its kind, sorted by key as
// "key=json;" — they still distinguish specs (the golden format: groups are in one attention
// group iff equal in every field but layer_names).
std::string other_spec_fields(const OpFields& g, mv::KVCacheSpecKind kind) {
  using K = mv::KVCacheSpecKind;
  std::vector<std::string_view> used = {"spec", "block_size", "layer_names"};
  if (kind == K::kMamba) {
    used.insert(used.end(), {"mamba_cache_mode", "num_speculative_blocks"});
  } else {
    used.insert(used.end(), {"num_kv_heads", "head_size", "dtype"});
  }
  if (kind == K::kSlidingWindow) used.push_back("sliding_window");
  if (kind == K::kChunkedLocalAttention) used.push_back("attention_chunk_size");
  if (kind == K::kSinkFullAttention) used.push_back("sink_len");
  std::vector<std::string> rest;
  for (auto [key, value] : g.object()) {
    if (std::find(used.begin(), used.end(), key) != used.end()) continue;
    rest.push_back(std::string(key) + "=" + json_text(value) + ";");
  }
  std::sort(rest.begin(), rest.end());
  std::string out;
  for (const auto& r : rest) out += r;
  return out;
}

// The torch dtype names (str(dtype) without "torch.") a KV cache spec can carry.
bool known_dtype(std::string_view dtype) {
  static constexpr std::string_view kDtypes[] = {
      "float16",     "bfloat16",        "float32",         "float64", "float8_e4m3fn",
      "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "uint8",   "int8"};
  return std::find(std::begin(kDtypes), std::end(kDtypes), dtype) != std::end(kDtypes);
}

mv::KVCacheSpec parse_spec(const OpFields& g) {
  mv::KVCacheSpec spec;
  std::string_view kind = g.str("spec");
  if (kind == "full") {
    spec.kind = mv::KVCacheSpecKind::kFullAttention;
  } else if (kind == "mla") {
    spec.kind = mv::KVCacheSpecKind::kMLAAttention;
  } else if (kind == "sliding_window") {
    spec.kind = mv::KVCacheSpecKind::kSlidingWindow;
  } else if (kind == "chunked_local") {
    spec.kind = mv::KVCacheSpecKind::kChunkedLocalAttention;
  } else if (kind == "mamba") {
    spec.kind = mv::KVCacheSpecKind::kMamba;
  } else if (kind == "cross_attention") {
    spec.kind = mv::KVCacheSpecKind::kCrossAttention;
  } else if (kind == "sink_full") {
    spec.kind = mv::KVCacheSpecKind::kSinkFullAttention;
  } else {
    g.fail("spec", "unknown KV cache spec '" + std::string(kind) + "'");
  }
  auto positive = [&](std::string_view field) {
    int64_t v = g.i64(field);
    if (v <= 0 || v > (int64_t{1} << 30)) g.fail(field, "must be a positive integer");
    return static_cast<int>(v);
  };
  spec.block_size = positive("block_size");
  spec.other_fields = other_spec_fields(g, spec.kind);
  if (spec.kind == mv::KVCacheSpecKind::kMamba) {
    auto mode = mv::mamba_cache_mode_from_name(g.str("mamba_cache_mode"));
    if (!mode) g.fail("mamba_cache_mode", "expected none, align or all");
    spec.mamba_cache_mode = *mode;
    spec.num_speculative_blocks = static_cast<int>(g.i64_or("num_speculative_blocks", 0));
    if (spec.num_speculative_blocks < 0) g.fail("num_speculative_blocks", "negative");
    return spec;
  }
  spec.num_kv_heads = positive("num_kv_heads");
  spec.head_size = positive("head_size");
  spec.dtype = std::string(g.str("dtype"));
  if (!known_dtype(spec.dtype))
    g.fail("dtype", "unknown dtype '" + spec.dtype +
                        "' (expected a torch dtype name such as bfloat16, float16, float32)");
  if (spec.kind == mv::KVCacheSpecKind::kSlidingWindow)
    spec.sliding_window = positive("sliding_window");
  if (spec.kind == mv::KVCacheSpecKind::kChunkedLocalAttention)
    spec.attention_chunk_size = positive("attention_chunk_size");
  if (spec.kind == mv::KVCacheSpecKind::kSinkFullAttention) {
    spec.sink_len = positive("sink_len");
    if (spec.sink_len % spec.block_size != 0) g.fail("sink_len", "not a multiple of block_size");
  }
  return spec;
}

}  // namespace

VllmReplayConfig parse_vllm_config(const OpFields& header) {
  OpFields c = header.sub("config");
  VllmReplayConfig out;
  mv::KVCacheManagerOptions& m = out.manager;
  // At most 2^24 blocks (the largest recorded case has 8192): the pool's per-block state is
  // ~150 bytes, so 2^28 blocks would need ~40 GB before the first op.
  int64_t num_gpu_blocks = c.i64("num_gpu_blocks");
  if (num_gpu_blocks < 1 || num_gpu_blocks > kMaxGoldenGpuBlocks)
    c.fail("num_gpu_blocks", std::to_string(num_gpu_blocks) + " is not in 1 .. 2^24 (16777216)");
  m.kv_cache_config.num_blocks = static_cast<int>(num_gpu_blocks);
  std::vector<std::pair<std::string, size_t>> layers;  // layer name, group
  for (simdjson::dom::element e : c.array("kv_cache_groups")) {
    simdjson::dom::object o;
    if (e.get_object().get(o) != simdjson::SUCCESS) c.fail("kv_cache_groups", "expected objects");
    OpFields g(&header.file(), header.line(), o);
    mv::KVCacheGroupSpec group;
    group.kv_cache_spec = parse_spec(g);
    // A layer belongs to one group: a group listed twice is a broken config.
    const size_t index = m.kv_cache_config.kv_cache_groups.size();
    for (simdjson::dom::element l : g.array("layer_names")) {
      std::string name(g.as_str(l, "layer_names"));
      for (const auto& [seen, at] : layers)
        if (seen == name)
          c.fail("kv_cache_groups", "layer '" + name + "' is in group " + std::to_string(at) +
                                        " and in group " + std::to_string(index));
      layers.emplace_back(std::move(name), index);
    }
    m.kv_cache_config.kv_cache_groups.push_back(std::move(group));
  }
  const auto& groups = m.kv_cache_config.kv_cache_groups;
  if (groups.empty() || groups.size() > static_cast<size_t>(mv::KVCacheBlocks::kMaxGroups))
    c.fail("kv_cache_groups", "expected 1 to 32 groups");
  m.max_model_len = c.i64("max_model_len");
  if (m.max_model_len < 1) c.fail("max_model_len", "must be positive");
  m.enable_caching = c.boolean("enable_caching");
  m.use_eagle = c.boolean("use_eagle");
  m.log_stats = c.boolean("log_stats");
  m.enable_kv_cache_events = c.boolean("enable_kv_cache_events");
  m.kv_events_use_int_block_hashes = c.boolean("kv_events_use_int_block_hashes");
  m.dcp_world_size = static_cast<int>(c.i64("dcp_world_size"));
  m.pcp_world_size = static_cast<int>(c.i64("pcp_world_size"));
  if (m.dcp_world_size < 1 || m.pcp_world_size < 1)
    c.fail("dcp_world_size", "context-parallel sizes must be positive");
  m.hash_block_size = static_cast<int>(c.i64("hash_block_size"));
  if (m.hash_block_size < 1) c.fail("hash_block_size", "must be positive");
  out.compute_block_hashes = c.boolean("compute_block_hashes");
  auto fn = mv::hash_fn_from_name(c.str("hash_fn"));
  if (!fn) c.fail("hash_fn", "unknown hash function '" + std::string(c.str("hash_fn")) + "'");
  out.hash_fn = *fn;
  out.python_hash_seed = std::string(c.str("python_hash_seed"));
  std::string_view level = header.str("expect_level");
  if (level != "full" && level != "compact")
    header.fail("expect_level", "expected \"full\" or \"compact\"");
  out.compact = level == "compact";
  // Constructor preconditions of the coordinators, checked here so that a bad header is an
  // input error rather than a failed model check.
  bool hybrid = m.enable_caching && groups.size() > 1;
  if (m.enable_caching && groups.size() == 1 &&
      m.hash_block_size != groups[0].kv_cache_spec.block_size * m.dcp_world_size * m.pcp_world_size)
    c.fail("hash_block_size", "must equal block_size x dcp x pcp with one group");
  int64_t alignment_tokens = groups[0].kv_cache_spec.block_size;
  if (hybrid) {
    if (m.dcp_world_size != 1 || m.pcp_world_size != 1)
      c.fail("dcp_world_size", "hybrid models do not support DCP/PCP");
    for (const auto& g : groups)
      if (g.kv_cache_spec.block_size % m.hash_block_size != 0)
        c.fail("hash_block_size", "every block size must be a multiple of it");
    // verify_and_split_kv_cache_groups: groups with equal specs form one attention group, and
    // HybridKVCacheCoordinator asserts there are at least two.
    std::vector<const mv::KVCacheSpec*> distinct;
    for (const auto& g : groups) {
      if (std::none_of(distinct.begin(), distinct.end(),
                       [&](const mv::KVCacheSpec* s) { return *s == g.kv_cache_spec; }))
        distinct.push_back(&g.kv_cache_spec);
      alignment_tokens = std::lcm(alignment_tokens, int64_t{g.kv_cache_spec.block_size});
    }
    if (distinct.size() < 2)
      c.fail("kv_cache_groups",
             "all " + std::to_string(groups.size()) +
                 " groups have the same spec: HybridKVCacheCoordinator requires at least two "
                 "attention groups");
  }
  // Assertions of the managers' find_longest_cache_hit (reached only with prefix caching).
  if (m.enable_caching) {
    using K = mv::KVCacheSpecKind;
    for (const auto& g : groups) {
      const mv::KVCacheSpec& s = g.kv_cache_spec;
      bool windowed =
          s.kind == K::kSlidingWindow || s.kind == K::kChunkedLocalAttention || s.kind == K::kMamba;
      if (windowed && (m.dcp_world_size != 1 || m.pcp_world_size != 1))
        c.fail("dcp_world_size",
               "DCP/PCP do not support sliding window, chunked local "
               "attention or mamba");
      if (s.kind == K::kChunkedLocalAttention) {
        if (m.use_eagle) c.fail("use_eagle", "EAGLE is not supported with chunked local attention");
        if (s.block_size != alignment_tokens)
          c.fail("kv_cache_groups",
                 "chunked local attention needs every group's block size "
                 "equal to its own");
      }
      if (s.kind == K::kSlidingWindow && m.use_eagle && s.block_size != alignment_tokens)
        c.fail("use_eagle", "EAGLE with sliding window needs every group's block size equal");
    }
  }
  return out;
}

VllmReplayer::VllmReplayer(const VllmReplayConfig& config, std::string path)
    : path_(std::move(path)),
      config_(config),
      manager_(config.manager),
      seqs_(&requests_, config.compute_block_hashes ? config.manager.hash_block_size : 0) {
  if (config.compute_block_hashes) {
    mv::BlockHash none = mv::none_hash(config.hash_fn, config.python_hash_seed);
    // No memo: repeated prefixes come with their hashes from seqs_, and on the perf op-log the
    // memo then hits 3% of the blocks while its fingerprint, index and ring writes cost more.
    hasher_ = std::make_unique<mv::RequestBlockHasher>(config.manager.hash_block_size,
                                                       mv::BlockHasher(config.hash_fn, none), 0);
  }
  const auto& groups = config.manager.kv_cache_config.kv_cache_groups;
  for (size_t g = 0; g < groups.size(); ++g)
    if (groups[g].kv_cache_spec.kind == mv::KVCacheSpecKind::kMamba &&
        groups[g].kv_cache_spec.mamba_cache_mode == mv::MambaCacheMode::kAlign)
      mamba_align_groups_.push_back(static_cast<int>(g));
}

void VllmReplayer::fail(const VllmOp& op, std::string_view field, const std::string& msg) const {
  throw InputError(path_, op.line, std::string(field), msg);
}

mv::Request& VllmReplayer::request(const VllmOp& op, const VllmOpArena& arena) {
  size_t i = static_cast<size_t>(op.req);
  if (i >= requests_.size() || !requests_[i])
    fail(op, "req", "unknown request '" + arena.request_name(static_cast<int32_t>(i)) + "'");
  return *requests_[i];
}

void VllmReplayer::add_request(const VllmOp& op, const VllmOpArena& arena) {
  size_t r = static_cast<size_t>(op.req);
  if (r >= requests_.size()) {
    requests_.resize(r + 1);
    pending_.resize(r + 1);
  }
  if (requests_[r])
    fail(op, "req", "request '" + arena.request_name(static_cast<int32_t>(r)) + "' already exists");
  if (r >= track_.size()) track_.resize(r + 1);
  // Resolve the parts first, so that the prompt is built with one allocation.
  size_t total = op.parts.size() == 0 ? op.tokens.size() : 0;
  for (uint32_t p = op.parts.begin; p < op.parts.end; ++p) {
    const PromptPart& part = arena.parts[p];
    if (part.seq < 0) {
      total += part.tokens.size();
      continue;
    }
    size_t s = static_cast<size_t>(part.seq);
    if (!seqs_.defined(s))
      fail(op, "prompt_parts",
           "unknown sequence '" + arena.seq_name(static_cast<int32_t>(s)) + "'");
    size_t size = seqs_.tokens(s).size();
    if (part.len > static_cast<int64_t>(size))
      fail(op, "prompt_parts",
           "len " + std::to_string(part.len) + " exceeds sequence '" +
               arena.seq_name(static_cast<int32_t>(s)) + "' of " + std::to_string(size));
    total += part.len < 0 ? size : static_cast<size_t>(part.len);
  }
  // Upstream's input processor rejects a prompt longer than max_model_len; past it the model's
  // slots (capped at max_model_len) would not cover the blocks it caches.
  if (static_cast<int64_t>(total) > config_.manager.max_model_len)
    fail(op, op.parts.size() > 0 ? "prompt_parts" : "prompt",
         "prompt of " + std::to_string(total) + " tokens is longer than config.max_model_len " +
             std::to_string(config_.manager.max_model_len));
  mv::RequestOptions options;
  options.max_tokens = op.n[0];
  options.skip_reading_prefix_cache = op.flag;
  if (op.extras >= 0) {
    const AddRequestExtras& x = arena.extras[static_cast<size_t>(op.extras)];
    options.cache_salt = x.cache_salt;
    options.lora_request = x.lora;
    options.mm_features = x.mm;
  }
  // A prompt that starts with a sequence: the known hashes of its blocks, and the sequence's own
  // vector to build on when the prompt holds all of it (and names it once).
  int32_t first = -1;
  size_t first_len = 0;
  std::vector<mv::TokenId> prompt;
  std::vector<mv::BlockHash> known;
  size_t capacity = mv::Request::token_capacity(total, op.n[0]);
  if (op.parts.size() > 0 && arena.parts[op.parts.begin].seq >= 0) {
    const PromptPart& part = arena.parts[op.parts.begin];
    first = part.seq;
    size_t size = seqs_.tokens(static_cast<size_t>(first)).size();
    first_len = part.len < 0 ? size : static_cast<size_t>(part.len);
    bool once = true;
    for (uint32_t p = op.parts.begin + 1; p < op.parts.end; ++p)
      once &= arena.parts[p].seq != first;
    if (once) {
      VllmSeqs::Taken taken = seqs_.take(static_cast<size_t>(first), first_len, options);
      prompt = std::move(taken.tokens);
      known = std::move(taken.hashes);
    }
    if (prompt.empty() && options.mm_features.empty()) {
      std::span<const mv::BlockHash> h =
          seqs_.known_hashes(static_cast<size_t>(first), first_len, options);
      // Room for every block of the prompt and of some decoding: no regrowth while hashing.
      if (!h.empty()) known.reserve(capacity / static_cast<size_t>(hasher_->block_size()) + 1);
      known.assign(h.begin(), h.end());
    }
  }
  const bool took = !prompt.empty();
  // At least the Request's own capacity, so that its constructor keeps this buffer, with
  // headroom for the next turns of a conversation that will move it along.
  if (prompt.capacity() < capacity) {
    std::vector<mv::TokenId> grown;
    grown.reserve(std::max(capacity, total + total / 2));
    grown.assign(prompt.begin(), prompt.end());
    prompt.swap(grown);
  }
  if (op.parts.size() == 0)
    prompt.assign(arena.tokens.begin() + op.tokens.begin, arena.tokens.begin() + op.tokens.end);
  for (uint32_t p = op.parts.begin + (took ? 1 : 0); p < op.parts.end; ++p) {
    const PromptPart& part = arena.parts[p];
    if (part.seq < 0) {
      prompt.insert(prompt.end(), arena.tokens.begin() + part.tokens.begin,
                    arena.tokens.begin() + part.tokens.end);
      continue;
    }
    std::span<const mv::TokenId> seq = seqs_.tokens(static_cast<size_t>(part.seq));
    size_t len = part.len < 0 ? seq.size() : static_cast<size_t>(part.len);
    prompt.insert(prompt.end(), seq.begin(), seq.begin() + static_cast<std::ptrdiff_t>(len));
  }
  std::string id = arena.request_name(static_cast<int32_t>(r));
  if (options.mm_features.empty()) {
    requests_[r] = std::make_unique<mv::Request>(
        std::move(id), std::move(prompt), std::move(options), hasher_.get(), std::move(known));
  } else {
    requests_[r] = std::make_unique<mv::Request>(std::move(id), std::move(prompt),
                                                 std::move(options), hasher_.get());
  }
  if (first >= 0) seqs_.prompt_built(static_cast<size_t>(first), first_len, r, took);
  pending_[r].reset();
  track_[r] = Track{};
  last_request_ = requests_[r].get();
  num_new_hashes_ = last_request_->block_hashes().size();
}

void VllmReplayer::allocate_slots(const VllmOp& op, const VllmOpArena& arena) {
  mv::Request& req = request(op, arena);
  std::optional<mv::KVCacheBlocks>& pending = pending_[static_cast<size_t>(op.req)];
  mv::AllocateSlotsArgs args;
  args.num_new_tokens = op.n[0];
  args.num_new_computed_tokens = op.n[1];
  args.num_lookahead_tokens = op.n[2];
  args.num_external_computed_tokens = op.n[3];
  args.num_encoder_tokens = op.n[4];
  args.delay_cache_blocks = op.flag;
  if (args.num_new_tokens == 0 && args.num_external_computed_tokens == 0)
    fail(op, "num_new_tokens", "must be > 0 when there are no external computed tokens");
  switch (op.new_computed_blocks) {
    case NewComputedBlocks::kNone:
      break;
    case NewComputedBlocks::kEmpty:
      args.new_computed_blocks = &manager_.empty_kv_cache_blocks();
      break;
    case NewComputedBlocks::kPending:
      if (!pending) fail(op, "new_computed_blocks", "no pending get_computed_blocks result");
      args.new_computed_blocks = &*pending;
      break;
  }
  check_allocate_slots(op, arena, req, args);
  // The result goes into allocated_'s storage, reused from call to call.
  if (!allocated_) allocated_.emplace();
  if (manager_.allocate_slots(req, args, &*allocated_)) {
    Track& t = track_[static_cast<size_t>(op.req)];
    const int64_t mml = config_.manager.max_model_len;
    int64_t computed = std::min(
        req.num_computed_tokens + args.num_new_computed_tokens + args.num_external_computed_tokens,
        mml);
    t.covered_tokens =
        std::max(t.covered_tokens,
                 std::min(computed + args.num_new_tokens + args.num_lookahead_tokens, mml));
  } else {
    allocated_.reset();
  }
  pending.reset();
}

// The preconditions of KVCacheManager::allocate_slots that an op-log can break (see the header).
void VllmReplayer::check_allocate_slots(const VllmOp& op, const VllmOpArena& arena,
                                        const mv::Request& req, const mv::AllocateSlotsArgs& args) {
  const Track& t = track_[static_cast<size_t>(op.req)];
  // Built only for a message: allocate_slots is the replay's hottest op.
  auto name = [&] { return "request '" + arena.request_name(op.req) + "'"; };
  const int64_t mml = config_.manager.max_model_len;
  const bool hits = args.new_computed_blocks != nullptr && !args.new_computed_blocks->all_empty();
  if (args.num_new_computed_tokens > 0) {
    if (op.new_computed_blocks != NewComputedBlocks::kPending)
      fail(op, "num_new_computed_tokens",
           std::to_string(args.num_new_computed_tokens) +
               " new computed tokens without new_computed_blocks \"pending\"");
    if (args.num_new_computed_tokens > t.pending_tokens)
      fail(op, "num_new_computed_tokens",
           std::to_string(args.num_new_computed_tokens) +
               " new computed tokens, but the pending get_computed_blocks of " + name() + " hit " +
               std::to_string(t.pending_tokens));
  }
  // Upstream asserts that a request with blocks gets no new prefix hits, and that a request
  // getting them holds no blocks yet.
  if (hits && t.covered_tokens > 0)
    fail(op, "new_computed_blocks",
         "prefix hits for " + name() + ", which already holds blocks for " +
             std::to_string(t.covered_tokens) + " tokens");
  if (args.num_external_computed_tokens > 0 && t.covered_tokens > 0)
    fail(op, "num_external_computed_tokens",
         "external computed tokens for " + name() + ", which already holds blocks for " +
             std::to_string(t.covered_tokens) + " tokens");
  if (req.num_computed_tokens + args.num_new_computed_tokens + args.num_external_computed_tokens >
      mml)
    fail(op,
         args.num_external_computed_tokens > 0 ? "num_external_computed_tokens"
                                               : "num_new_computed_tokens",
         "computed tokens of " + name() + " (" + std::to_string(req.num_computed_tokens) + " + " +
             std::to_string(args.num_new_computed_tokens) + " new + " +
             std::to_string(args.num_external_computed_tokens) +
             " external) exceed config.max_model_len " + std::to_string(mml));
  // Computed tokens without blocks under them: windowed managers would count skipped blocks
  // they never pad, and get_new_blocks would come up short.
  if (req.num_computed_tokens > t.covered_tokens)
    fail(op, "req",
         name() + " has " + std::to_string(req.num_computed_tokens) +
             " computed tokens, but its allocations cover " + std::to_string(t.covered_tokens) +
             " (set_computed or append_tokens ran ahead of allocate_slots)");
  // MambaManager (align): a running request's block table never shrinks (upstream asserts
  // num_required_blocks >= len(req_blocks)).
  if (mamba_align_groups_.empty() || t.covered_tokens == 0) return;
  int64_t main_model = std::min(req.num_computed_tokens + args.num_new_computed_tokens +
                                    args.num_external_computed_tokens,
                                mml) +
                       args.num_new_tokens;
  mv::KVCacheBlocks held = manager_.get_blocks(req.request_id());
  for (int g : mamba_align_groups_) {
    const mv::KVCacheSpec& spec = config_.manager.kv_cache_config.kv_cache_groups[g].kv_cache_spec;
    int64_t required =
        (main_model + spec.block_size - 1) / spec.block_size + spec.num_speculative_blocks;
    int64_t have = static_cast<int64_t>(held[g].size());
    if (required < have)
      fail(op, "num_new_tokens",
           name() + " (" + std::to_string(req.num_computed_tokens) + " computed + " +
               std::to_string(args.num_new_tokens) + " new tokens) needs " +
               std::to_string(required) + " blocks of mamba group " + std::to_string(g) +
               ", fewer than the " + std::to_string(have) + " it holds");
  }
}

void VllmReplayer::set_computed(const VllmOp& op, mv::Request& req, std::string_view field,
                                int64_t value) {
  if (value < 0) fail(op, field, "negative num_computed_tokens " + std::to_string(value));
  // A mamba "align" group keeps one state block per step: it cannot go back to fewer tokens.
  if (!mamba_align_groups_.empty() && value < req.num_computed_tokens)
    fail(op, field,
         std::to_string(value) + " is below the request's num_computed_tokens " +
             std::to_string(req.num_computed_tokens) +
             ": computed tokens cannot go backwards with a mamba \"align\" group");
  req.num_computed_tokens = value;
}

void VllmReplayer::free(const VllmOp& op, const VllmOpArena& arena) {
  mv::Request& req = request(op, arena);
  manager_.free(req);
  num_free_blocks_ = manager_.num_free_blocks();
  track_[static_cast<size_t>(op.req)] = Track{};
  if (op.reason == FreeReason::kPreempted) {
    req.num_computed_tokens = 0;
    ++req.num_preemptions;
    return;
  }
  seqs_.release(static_cast<size_t>(op.req), requests_[static_cast<size_t>(op.req)].get());
  requests_[static_cast<size_t>(op.req)].reset();
  pending_[static_cast<size_t>(op.req)].reset();
}

void VllmReplayer::execute(const VllmOp& op, const VllmOpArena& arena) {
  switch (op.kind) {
    case VllmOpKind::kAddRequest:
      add_request(op, arena);
      break;
    case VllmOpKind::kDefSeq:
      seqs_.define(static_cast<size_t>(op.seq),
                   {arena.tokens.data() + op.tokens.begin, op.tokens.size()});
      break;
    case VllmOpKind::kSaveSeq: {
      const mv::Request& req = request(op, arena);
      seqs_.save(static_cast<size_t>(op.seq), static_cast<size_t>(op.req));
      saved_len_ = req.num_tokens();
      break;
    }
    case VllmOpKind::kDropSeq:
      if (!seqs_.defined(static_cast<size_t>(op.seq)))
        fail(op, "name", "unknown sequence '" + arena.seq_name(op.seq) + "'");
      seqs_.drop(static_cast<size_t>(op.seq));
      break;
    case VllmOpKind::kAppendTokens: {
      mv::Request& req = request(op, arena);
      if (op.flag) set_computed(op, req, "num_computed_tokens", op.n[0]);
      if (req.num_tokens() + static_cast<int64_t>(op.tokens.size()) > config_.manager.max_model_len)
        fail(op, "tokens",
             "request '" + arena.request_name(op.req) + "' would hold " +
                 std::to_string(req.num_tokens() + static_cast<int64_t>(op.tokens.size())) +
                 " tokens, more than config.max_model_len " +
                 std::to_string(config_.manager.max_model_len));
      num_new_hashes_ =
          req.append_output_token_ids({arena.tokens.data() + op.tokens.begin, op.tokens.size()});
      last_request_ = &req;
      break;
    }
    case VllmOpKind::kSetComputed:
      set_computed(op, request(op, arena), "value", op.n[0]);
      break;
    case VllmOpKind::kGetComputedBlocks: {
      const mv::Request& req = request(op, arena);
      auto computed = manager_.get_computed_blocks(req);
      num_computed_tokens_ = computed.num_computed_tokens;
      pending_[static_cast<size_t>(op.req)] = std::move(computed.blocks);
      track_[static_cast<size_t>(op.req)].pending_tokens = computed.num_computed_tokens;
      break;
    }
    case VllmOpKind::kAllocateSlots:
      allocate_slots(op, arena);
      break;
    case VllmOpKind::kFree:
      free(op, arena);
      break;
    case VllmOpKind::kCacheBlocks: {
      const mv::Request& req = request(op, arena);
      const Track& t = track_[static_cast<size_t>(op.req)];
      if (op.n[0] < 0 || op.n[0] > req.num_tokens() || op.n[0] > t.covered_tokens)
        fail(op, "num_computed_tokens",
             std::to_string(op.n[0]) + " is not in 0 .. min(the request's " +
                 std::to_string(req.num_tokens()) + " tokens, the " +
                 std::to_string(t.covered_tokens) + " its allocations cover)");
      manager_.cache_blocks(req, op.n[0]);
      break;
    }
    case VllmOpKind::kRemoveSkippedBlocks:
      manager_.remove_skipped_blocks(arena.request_name(op.req), op.n[0]);
      num_free_blocks_ = manager_.num_free_blocks();
      break;
    case VllmOpKind::kEvictBlocks: {
      std::vector<mv::BlockId> ids;
      for (uint32_t i = op.tokens.begin; i < op.tokens.end; ++i) {
        int64_t b = arena.tokens[i];
        if (b < 0 || b >= manager_.block_pool().num_gpu_blocks())
          fail(op, "block_ids",
               "block id " + std::to_string(b) + " out of range [0, " +
                   std::to_string(manager_.block_pool().num_gpu_blocks()) + ")");
        ids.push_back(static_cast<mv::BlockId>(b));
      }
      manager_.evict_blocks(ids);
      break;
    }
    case VllmOpKind::kResetPrefixCache:
      reset_ok_ = manager_.reset_prefix_cache();
      break;
    case VllmOpKind::kNewStep:
      manager_.new_step_starts();
      break;
    case VllmOpKind::kTakeEvents:
      events_ = manager_.take_events();
      break;
    case VllmOpKind::kPrefixCacheStats:
      stats_ = manager_.make_prefix_cache_stats();
      break;
    case VllmOpKind::kGetNumCommonPrefixBlocks:
      // Not read-only: it creates the request's req_to_blocks entries (defaultdict).
      common_prefix_ = manager_.get_num_common_prefix_blocks(arena.request_name(op.req));
      break;
    case VllmOpKind::kGetBlockIds:
    case VllmOpKind::kUsage:
    case VllmOpKind::kFreeQueue:
    case VllmOpKind::kPoolState:
      break;  // read-only: evaluated while comparing
  }
}

}  // namespace kvtwin::sim::golden
