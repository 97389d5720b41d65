// LMCache golden replayer: case setup from the header, and the input readers.
#include "model/lmcache/address_manager.h"
#include "model/lmcache/dtype.h"
#include "sim/golden/lmcache_replay_state.h"
#include "sim/io/input_error.h"

namespace kvtwin::sim::golden::lmcache_replay {
namespace {

std::string config_field(std::string_view f) {
  return "config." + std::string(f);
}

int64_t cfg_i64(const OpFields& config, std::string_view f) {
  try {
    return config.i64(f);
  } catch (const InputError& e) {
    throw InputError(e.file(), e.line(), config_field(f), "expected an integer");
  }
}

// Compares a derived value with the model's; a mismatch is bad input for this model version.
void check_derived(const OpFields& derived, std::string_view field,
                   const std::string& expected_json, simdjson::dom::parser& parser) {
  auto e = derived.optional_element(field);
  if (!e) return;
  simdjson::dom::element mine = parser.parse(expected_json);
  if (!json_equal(*e, mine))
    derived.fail("derived." + std::string(field),
                 "the model derives " + expected_json + ", the header says " + json_text(*e));
}

}  // namespace

lm::LMCacheEngine& CaseState::engine(int rank) {
  auto it = engines.find(rank);
  KVTWIN_CHECK(it != engines.end()) << "no engine for rank " << rank;
  return *it->second;
}

namespace {

// Stage 1: the LMCache and adapter settings of `config`.
void read_config(const OpFields& c, CaseState* state) {
  lm::LMCacheEngineConfig& cfg = state->config;
  cfg.chunk_size = static_cast<int>(cfg_i64(c, "chunk_size"));
  if (cfg.chunk_size <= 0) c.fail("chunk_size", "must be positive");
  cfg.save_unfull_chunk = c.boolean("save_unfull_chunk");
  cfg.pre_caching_hash_algorithm = std::string(c.str("pre_caching_hash_algorithm"));
  if (cfg.pre_caching_hash_algorithm != "sha256_cbor")
    c.fail("pre_caching_hash_algorithm", "only sha256_cbor is replayable");
  cfg.python_hash_seed = std::string(c.str("python_hash_seed"));
  cfg.local_cpu = c.boolean("local_cpu");
  cfg.max_local_cpu_size_bytes = static_cast<uint64_t>(cfg_i64(c, "max_local_cpu_size_bytes"));
  if (cfg.max_local_cpu_size_bytes == 0) c.fail("max_local_cpu_size_bytes", "must be positive");
  cfg.local_disk = c.boolean("local_disk");
  cfg.max_local_disk_size_bytes = static_cast<uint64_t>(cfg_i64(c, "max_local_disk_size_bytes"));
  cfg.remote = c.has_value("remote");
  if (cfg.remote) {
    OpFields r = c.sub("remote");
    if (r.str("connector") != "redis") r.fail("remote.connector", "only redis is modelled");
    if (r.str("serde") != "naive") r.fail("remote.serde", "only naive serde is modelled");
  }
  auto policy = lm::cache_policy_from_name(c.str("cache_policy"));
  if (!policy) c.fail("cache_policy", "unknown policy");
  cfg.cache_policy = *policy;
  cfg.use_layerwise = c.boolean("use_layerwise");
  cfg.save_decode_cache = c.boolean("save_decode_cache");
  cfg.force_store_wait = c.boolean("force_store_wait");
  cfg.save_only_first_rank = c.boolean("save_only_first_rank");
  if (c.boolean("enable_async_loading"))
    c.fail("enable_async_loading", "async loading is not modelled");
  if (state->connector) {
    state->adapter.vllm_block_size = static_cast<int>(cfg_i64(c, "vllm_block_size"));
    state->adapter.discard_partial_chunks_extra = c.boolean("discard_partial_chunks_extra");
    state->adapter.skip_last_n_tokens = static_cast<int>(cfg_i64(c, "skip_last_n_tokens"));
    cfg.min_retrieve_tokens = static_cast<int>(cfg_i64(c, "min_retrieve_tokens"));
    if (c.has_value("priority_limit")) cfg.priority_limit = cfg_i64(c, "priority_limit");
    std::string_view role = c.str("kv_role");
    if (role != "kv_both") c.fail("kv_role", "only kv_both is modelled");
    state->adapter.force_skip_save = c.boolean("force_skip_save_env");
  }
}

// Stage 2: the geometry, and one engine per rank.
void make_engines(const OpFields& c, CaseState* state) {
  const lm::LMCacheEngineConfig& cfg = state->config;
  lm::LMCacheMetadata base;
  base.model_name = std::string(c.str("model_name"));
  base.world_size = static_cast<int>(cfg_i64(c, "world_size"));
  base.num_layers = static_cast<int>(cfg_i64(c, "num_layers"));
  base.num_kv_heads = static_cast<int>(cfg_i64(c, "num_kv_heads"));
  base.head_size = static_cast<int>(cfg_i64(c, "head_size"));
  auto dtype = lm::dtype_from_name(c.str("dtype"));
  if (!dtype) c.fail("dtype", "unknown dtype");
  base.kv_dtype = *dtype;
  base.use_mla = c.boolean("use_mla");
  base.chunk_size = cfg.chunk_size;
  for (simdjson::dom::element r : c.array("ranks")) {
    int rank = static_cast<int>(c.as_i64(r, "ranks"));
    if (rank < 0 || rank >= base.world_size) c.fail("ranks", "rank outside the world size");
    state->ranks.push_back(rank);
  }
  if (state->ranks.empty()) c.fail("ranks", "no rank");
  for (int rank : state->ranks) {
    lm::LMCacheMetadata m = base;
    m.worker_id = rank;
    state->rank_metadata.push_back(m);
    state->engines[rank] =
        std::make_unique<lm::LMCacheEngine>(cfg, m, state->shared, state->registry);
  }
}

// Stage 3: the header's derived values must agree with the model's geometry.
void check_derived_values(const OpFields& d, CaseState* state) {
  const lm::LMCacheEngineConfig& cfg = state->config;
  {
    simdjson::dom::parser p;
    lm::LMCacheEngine& e0 = state->engine(state->default_rank());
    const lm::LMCacheMetadata& m = e0.metadata();
    int64_t itemsize = lm::dtype_itemsize(m.kv_dtype);
    int64_t per_token = m.bytes_per_token();
    lm::AddressManager am(1);
    check_derived(d, "bytes_per_token", std::to_string(per_token), p);
    check_derived(d, "bytes_per_full_chunk", std::to_string(per_token * cfg.chunk_size), p);
    check_derived(d, "aligned_bytes_per_full_chunk",
                  std::to_string(am.compute_aligned_size(per_token * cfg.chunk_size)), p);
    check_derived(d, "align_bytes", std::to_string(lm::AddressManager::kAlignBytes), p);
    lm::Shape shape = cfg.use_layerwise ? m.layer_shape(cfg.chunk_size,
                                                        e0.fmt().value_or(lm::MemoryFormat::kKvT2D))
                                        : m.get_shape(cfg.chunk_size);
    std::string shape_json = "[";
    for (int i = 0; i < shape.rank; ++i)
      shape_json += (i ? "," : "") + std::to_string(shape.dims[i]);
    shape_json += "]";
    check_derived(d, "object_shape_full_chunk", shape_json, p);
    lm::MemoryFormat fmt = e0.fmt().value_or(lm::MemoryFormat::kKv2LTD);
    check_derived(d, "memory_format", "\"" + std::string(lm::memory_format_name(fmt)) + "\"", p);
    check_derived(d, "objects_per_chunk", std::to_string(cfg.use_layerwise ? m.num_layers : 1), p);
    int64_t obj_bytes = shape.numel() * itemsize;
    check_derived(d, "bytes_per_full_chunk_object", std::to_string(obj_bytes), p);
    check_derived(d, "aligned_bytes_per_full_chunk_object",
                  std::to_string(am.compute_aligned_size(obj_bytes)), p);
    check_derived(d, "cpu_pool_bytes", std::to_string(cfg.max_local_cpu_size_bytes), p);
    std::string backends = "[";
    bool first = true;
    for (const std::string& b : e0.storage_manager().backend_names()) {
      backends += (first ? "\"" : ",\"") + b + "\"";
      first = false;
    }
    check_derived(d, "backends", backends + "]", p);
    check_derived(d, "key_world_size", std::to_string(e0.token_database().key_world_size()), p);
    check_derived(d, "dtype_str", "\"" + std::string(lm::dtype_str(m.kv_dtype)) + "\"", p);
    check_derived(d, "none_hash", "\"" + e0.token_database().none_hash().hex() + "\"", p);
    std::string prefixes = "{";
    first = true;
    for (auto& [rank, engine] : state->engines) {
      prefixes += (first ? "\"" : ",\"") + std::to_string(rank) + "\":\"" +
                  engine->token_database().key_scope(nullptr)->prefix + "\"";
      first = false;
    }
    check_derived(d, "key_prefix", prefixes + "}", p);
  }
}

// Stage 4 (connector cases): the lookup client and the adapters.
void make_adapters(const OpFields& c, CaseState* state) {
  const lm::LMCacheEngineConfig& cfg = state->config;
  {
    std::vector<lm::LMCacheEngine*> engines;
    for (int rank : state->ranks) engines.push_back(&state->engine(rank));
    if (static_cast<int>(engines.size()) != state->rank_metadata.front().world_size)
      c.fail("ranks", "connector cases need ranks 0..world_size-1");
    state->lookup_client =
        std::make_unique<lm::LMCacheLookupClient>(cfg, state->rank_metadata.front(), engines);
    state->scheduler = std::make_unique<lm::LMCacheSchedulerAdapter>(cfg, state->adapter,
                                                                     state->lookup_client.get());
    for (int rank : state->ranks)
      state->workers[rank] =
          std::make_unique<lm::LMCacheWorkerAdapter>(&state->engine(rank), state->adapter);
  }
}

}  // namespace

void setup_case(const OpFields& header, CaseState* state) {
  std::string_view kind = header.str("kind");
  if (kind != "engine" && kind != "connector") header.fail("kind", "expected engine or connector");
  state->connector = kind == "connector";
  OpFields c = header.sub("config");
  read_config(c, state);
  make_engines(c, state);
  if (header.has("derived")) check_derived_values(header.sub("derived"), state);
  if (state->connector) make_adapters(c, state);
}

// ----------------------------------------------------------------------------- readers

std::vector<lm::TokenId> read_token_list(const OpFields& op, simdjson::dom::element e,
                                         std::string_view field) {
  simdjson::dom::array a;
  if (e.get_array().get(a) != simdjson::SUCCESS) op.fail(field, "expected an array of tokens");
  std::vector<lm::TokenId> out;
  out.reserve(a.size());
  for (simdjson::dom::element t : a) out.push_back(op.as_i64(t, field));
  return out;
}

std::vector<lm::TokenId> read_tokens(const OpFields& op, const CaseState& state) {
  if (op.has("tokens")) return read_token_list(op, op.element("tokens"), "tokens");
  if (!op.has("token_parts")) op.fail("tokens", "missing (tokens or token_parts)");
  std::vector<lm::TokenId> out;
  for (simdjson::dom::element part : op.array("token_parts")) {
    simdjson::dom::object obj;
    if (part.get_object().get(obj) != simdjson::SUCCESS) op.fail("token_parts", "expected objects");
    OpFields p(&op.file(), op.line(), obj);
    if (p.has("tokens")) {
      std::vector<lm::TokenId> t = read_token_list(op, p.element("tokens"), "token_parts.tokens");
      out.insert(out.end(), t.begin(), t.end());
      continue;
    }
    std::string name(p.str("seq"));
    auto it = state.seqs.find(name);
    if (it == state.seqs.end()) op.fail("token_parts.seq", "undefined sequence '" + name + "'");
    const std::vector<lm::TokenId>& seq = it->second;
    int64_t n = static_cast<int64_t>(seq.size());
    int64_t from = std::clamp<int64_t>(p.i64_or("from", 0), 0, n);
    int64_t len = p.has_value("len") ? p.i64("len") : n - from;
    int64_t to = std::clamp<int64_t>(from + std::max<int64_t>(len, 0), from, n);
    out.insert(out.end(), seq.begin() + from, seq.begin() + to);
  }
  return out;
}

std::optional<lm::RequestConfigs> read_request_configs(const OpFields& op, std::string_view field) {
  auto e = op.optional_element(field);
  if (!e || e->is_null()) return std::nullopt;
  simdjson::dom::object obj;
  if (e->get_object().get(obj) != simdjson::SUCCESS) op.fail(field, "expected an object");
  lm::RequestConfigs out;
  for (auto [k, v] : obj) {
    lm::ConfigValue cv;
    switch (v.type()) {
      case simdjson::dom::element_type::STRING:
        cv = lm::ConfigValue::str(std::string(v.get_string().value()));
        break;
      case simdjson::dom::element_type::BOOL:
        cv = lm::ConfigValue::boolean(v.get_bool().value());
        break;
      case simdjson::dom::element_type::INT64:
        cv = lm::ConfigValue::integer(v.get_int64().value());
        break;
      case simdjson::dom::element_type::NULL_VALUE:
        cv = {lm::ConfigValue::Kind::kNull, "None", false};
        break;
      default:
        cv = {lm::ConfigValue::Kind::kOther, simdjson::minify(v), true};
        break;
    }
    out.emplace_back(std::string(k), std::move(cv));
  }
  return out;
}

int op_rank(const OpFields& op, const CaseState& state) {
  if (!op.has_value("rank")) return state.default_rank();
  int rank = static_cast<int>(op.i64("rank"));
  if (state.engines.count(rank) == 0) op.fail("rank", "no such rank in this case");
  return rank;
}

}  // namespace kvtwin::sim::golden::lmcache_replay
