// LMCache golden replayer: engine-kind ops (golden README §5.3).
#include "model/lmcache/layerwise_tasks.h"
#include "sim/golden/lmcache_replay_state.h"

namespace kvtwin::sim::golden::lmcache_replay {
namespace {

std::string error_output(lm::PyError e, CaseState& state) {
  drain_events(state);
  JsonWriter w;
  w.begin_object().key("error").value(lm::py_error_name(e)).end_object();
  return w.take();
}

void write_loaded(JsonWriter& w, const std::vector<lm::LoadedChunk>& loaded) {
  w.key("loaded").begin_array();
  for (const lm::LoadedChunk& c : loaded)
    w.begin_array().value(c.start).value(c.end).value(c.location).end_array();
  w.end_array();
}

void write_bad(JsonWriter& w, const std::vector<lm::LoadedChunk>& loaded) {
  bool any = false;
  for (const lm::LoadedChunk& c : loaded) any = any || c.bad;
  if (!any) return;
  w.key("bad").begin_array();
  for (const lm::LoadedChunk& c : loaded) {
    if (c.bad) w.begin_array().value(c.start).value(c.end).end_array();
  }
  w.end_array();
}

void write_gets(JsonWriter& w, const std::vector<lm::GetCall>& gets) {
  w.key("gets").begin_array();
  for (const lm::GetCall& g : gets) {
    w.begin_array().value(g.location).value(g.num_keys);
    if (g.layerwise) {
      w.value("layerwise");
    } else {
      w.value(g.leading_non_null).value(g.non_null);
    }
    w.end_array();
  }
  w.end_array();
}

std::optional<std::vector<std::string>> read_locations(const OpFields& op, std::string_view f) {
  if (!op.has_value(f)) return std::nullopt;
  std::vector<std::string> out;
  for (simdjson::dom::element e : op.array(f)) out.emplace_back(op.as_str(e, f));
  return out;
}

std::string op_store(const OpFields& op, CaseState& state) {
  lm::LMCacheEngine& e = state.engine(op_rank(op, state));
  std::vector<lm::TokenId> tokens = read_tokens(op, state);
  std::optional<lm::RequestConfigs> configs = read_request_configs(op, "request_configs");
  lm::StoreRequest req{lm::TokenInput::of_tokens(tokens), op.i64_or("mask_false", 0),
                       configs ? &*configs : nullptr};
  std::vector<lm::TokenRange> stored;
  int yields = -1;
  if (e.use_layerwise()) {
    auto task = e.store_layer(req);
    yields = 0;
    try {
      while (task->next()) {
        if (yields == 0) stored = task->stored();
        ++yields;
      }
    } catch (const lm::UpstreamError& err) {
      return error_output(err.kind(), state);
    }
  } else {
    lm::StoreResult r = e.store(req);
    if (r.error) return error_output(*r.error, state);
    stored = std::move(r.stored);
  }
  JsonWriter w;
  w.begin_object().key("stored");
  write_ranges(w, stored);
  if (yields >= 0) w.key("yields").value(yields);
  w.key("removed");
  write_removed(w, state, false);
  write_writes(w, state);
  w.end_object();
  return w.take();
}

std::string op_retrieve(const OpFields& op, CaseState& state) {
  lm::LMCacheEngine& e = state.engine(op_rank(op, state));
  std::vector<lm::TokenId> tokens = read_tokens(op, state);
  std::optional<lm::RequestConfigs> configs = read_request_configs(op, "request_configs");
  lm::RetrieveRequest req{tokens, op.i64_or("mask_false", 0), std::nullopt,
                          configs ? &*configs : nullptr};
  if (op.has_value("req_id")) req.req_id = std::string(op.str("req_id"));
  JsonWriter w;
  if (e.use_layerwise()) {
    auto task = e.retrieve_layer(req);
    int yields = 0;
    try {
      while (task->next()) ++yields;
    } catch (const lm::UpstreamError& err) {
      return error_output(err.kind(), state);
    }
    w.begin_object().key("first_yield").value(task->first_yield()).key("yields").value(yields);
    w.key("ret_tokens").value(task->ret_tokens()).key("ret_mask");
    write_ranges(w, task->ret_mask());
    write_loaded(w, task->loaded());
    write_gets(w, task->gets());
    write_bad(w, task->loaded());
  } else {
    lm::RetrieveResult r = e.retrieve(req);
    if (r.error) return error_output(*r.error, state);
    w.begin_object().key("ret_tokens").value(r.ret_tokens).key("ret_mask");
    write_ranges(w, r.ret_mask);
    write_loaded(w, r.loaded);
    write_gets(w, r.gets);
    write_bad(w, r.loaded);
  }
  w.key("removed");
  write_removed(w, state, false);
  write_writes(w, state);
  w.end_object();
  return w.take();
}

std::string op_lookup(const OpFields& op, CaseState& state) {
  lm::LMCacheEngine& e = state.engine(op_rank(op, state));
  std::vector<lm::TokenId> tokens = read_tokens(op, state);
  std::optional<lm::RequestConfigs> configs = read_request_configs(op, "request_configs");
  std::optional<std::vector<std::string>> search_range = read_locations(op, "search_range");
  lm::LookupRequest req;
  req.input = lm::TokenInput::of_tokens(tokens);
  req.search_range = search_range ? &*search_range : nullptr;
  if (op.has_value("lookup_id")) req.lookup_id = std::string(op.str("lookup_id"));
  req.pin = op.boolean_or("pin", false);
  req.request_configs = configs ? &*configs : nullptr;
  lm::LookupResult r = e.lookup(req);
  if (r.error) return error_output(*r.error, state);
  JsonWriter w;
  w.begin_object().key("hit_tokens").value(r.hit_tokens);
  if (req.lookup_id) {
    if (const lm::PinMap* pins = e.lookup_pins_of(*req.lookup_id)) {
      w.key("pins");
      write_pin_map(w, *pins);
    }
  }
  if (any_removed(state)) {
    w.key("removed");
    write_removed(w, state, false);
  }
  w.end_object();
  drain_events(state);
  return w.take();
}

std::string op_remove(const OpFields& op, CaseState& state, bool by_chunks) {
  lm::LMCacheEngine& e = state.engine(op_rank(op, state));
  std::vector<lm::TokenId> tokens = read_tokens(op, state);
  std::optional<lm::RequestConfigs> configs = read_request_configs(op, "request_configs");
  std::optional<std::vector<std::string>> locations = read_locations(op, "locations");
  const std::vector<std::string>* loc = locations ? &*locations : nullptr;
  int64_t count = 0;
  if (by_chunks) {
    std::vector<lm::ChunkInfo> infos = e.chunk_infos(tokens, configs ? &*configs : nullptr);
    try {
      for (simdjson::dom::element c : op.array("chunks")) {
        int64_t idx = op.as_i64(c, "chunks");
        if (idx < 0 || idx >= static_cast<int64_t>(infos.size()))
          op.fail("chunks", "chunk index outside the sequence");
        count += e.storage_manager().remove(infos[static_cast<size_t>(idx)].key, loc);
      }
    } catch (const lm::UpstreamError& err) {
      return error_output(err.kind(), state);
    }
  } else {
    lm::LMCacheEngine::ClearResult r =
        e.clear(std::span<const lm::TokenId>(tokens), loc, configs ? &*configs : nullptr);
    if (r.error) return error_output(*r.error, state);
    count = r.count;
  }
  JsonWriter w;
  w.begin_object().key("removed_count").value(count).key("removed");
  write_removed(w, state, false);
  w.end_object();
  drain_events(state);
  return w.take();
}

std::string op_clear(const OpFields& op, CaseState& state) {
  lm::LMCacheEngine& e = state.engine(op_rank(op, state));
  std::optional<std::vector<std::string>> locations = read_locations(op, "locations");
  lm::LMCacheEngine::ClearResult r =
      e.clear(std::nullopt, locations ? &*locations : nullptr, nullptr);
  if (r.error) return error_output(*r.error, state);
  JsonWriter w;
  w.begin_object().key("cleared_tokens").value(r.count).key("removed");
  write_removed(w, state, false);
  w.end_object();
  drain_events(state);
  return w.take();
}

}  // namespace

std::string engine_op(std::string_view name, const OpFields& op, CaseState& state) {
  if (name == "store") return op_store(op, state);
  if (name == "retrieve") return op_retrieve(op, state);
  if (name == "lookup") return op_lookup(op, state);
  if (name == "lookup_unpin") {
    lm::PinMap pins =
        state.engine(op_rank(op, state)).lookup_unpin(std::string(op.str("lookup_id")));
    JsonWriter w;
    w.begin_object().key("unpinned");
    write_pin_map(w, pins);
    w.end_object();
    return w.take();
  }
  if (name == "remove") return op_remove(op, state, false);
  if (name == "remove_chunks") return op_remove(op, state, true);
  if (name == "clear") return op_clear(op, state);
  if (name == "touch") {
    try {
      state.engine(op_rank(op, state)).storage_manager().touch_cache();
    } catch (const lm::UpstreamError& err) {
      return error_output(err.kind(), state);
    }
    return std::string();
  }
  if (name == "freeze") {
    state.engine(op_rank(op, state)).freeze(op.boolean("enabled"));
    return std::string();
  }
  op.fail("op", "unknown engine op '" + std::string(name) + "'");
}

}  // namespace kvtwin::sim::golden::lmcache_replay
