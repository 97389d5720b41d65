// LMCache golden replayer: connector-kind ops (golden README §5.4) — the vLLM adapter's scheduler
// side once, its worker side per rank.
#include "sim/golden/lmcache_replay_state.h"

namespace kvtwin::sim::golden::lmcache_replay {
namespace {

lm::VllmRequest& request(const OpFields& op, CaseState& state) {
  std::string id(op.str("req"));
  auto it = state.requests.find(id);
  if (it == state.requests.end()) op.fail("req", "unknown request '" + id + "'");
  return *it->second;
}

void write_load_spec(JsonWriter& w, const std::optional<lm::LoadSpec>& ls) {
  if (!ls) {
    w.null();
    return;
  }
  w.begin_array()
      .value(ls->vllm_cached_tokens)
      .value(ls->lmcache_cached_tokens)
      .value(ls->can_load)
      .end_array();
}

void write_configs(JsonWriter& w, const std::optional<lm::RequestConfigs>& configs) {
  if (!configs) {
    w.null();
    return;
  }
  w.begin_object();
  for (const auto& [k, v] : *configs) {
    w.key(k);
    switch (v.kind) {
      case lm::ConfigValue::Kind::kStr:
        w.value(v.text);
        break;
      case lm::ConfigValue::Kind::kBool:
        w.value(v.truthy);
        break;
      case lm::ConfigValue::Kind::kNull:
        w.null();
        break;
      default:
        w.raw(v.text);
        break;
    }
  }
  w.end_object();
}

std::string error_output(lm::PyError e, CaseState& state) {
  drain_events(state);
  JsonWriter w;
  w.begin_object().key("error").value(lm::py_error_name(e)).end_object();
  return w.take();
}

std::vector<int64_t> read_ids(const OpFields& op, simdjson::dom::element e, std::string_view f) {
  std::vector<int64_t> out;
  simdjson::dom::array a;
  if (e.get_array().get(a) != simdjson::SUCCESS) op.fail(f, "expected an array of block ids");
  for (simdjson::dom::element x : a) out.push_back(op.as_i64(x, f));
  return out;
}

std::string op_build_meta(const OpFields& op, CaseState& state) {
  lm::SchedulerOutput out;
  std::unordered_map<std::string, const lm::VllmRequest*> reqs;
  for (auto& [id, r] : state.requests) reqs[id] = r.get();
  if (op.has_value("finished")) {
    for (simdjson::dom::element f : op.array("finished"))
      out.finished_req_ids.emplace_back(op.as_str(f, "finished"));
  }
  auto entries = [&](std::string_view field, auto&& fn) {
    if (!op.has_value(field)) return;
    for (simdjson::dom::element e : op.array(field)) {
      simdjson::dom::object o;
      if (e.get_object().get(o) != simdjson::SUCCESS) op.fail(field, "expected objects");
      fn(OpFields(&op.file(), op.line(), o));
    }
  };
  entries("new", [&](const OpFields& n) {
    lm::NewRequestData d;
    d.req_id = std::string(n.str("req"));
    d.block_ids = read_ids(n, n.element("block_ids"), "new.block_ids");
    d.num_computed_tokens = n.i64("num_computed_tokens");
    out.num_scheduled_tokens[d.req_id] = n.i64("num_scheduled_tokens");
    auto it = state.requests.find(d.req_id);
    if (it == state.requests.end()) n.fail("new.req", "unknown request '" + d.req_id + "'");
    it->second->num_computed_tokens = d.num_computed_tokens;
    out.scheduled_new_reqs.push_back(std::move(d));
  });
  entries("cached", [&](const OpFields& c) {
    lm::CachedRequestData d;
    d.req_id = std::string(c.str("req"));
    if (c.has_value("new_block_ids"))
      d.new_block_ids = read_ids(c, c.element("new_block_ids"), "cached.new_block_ids");
    d.num_computed_tokens = c.i64("num_computed_tokens");
    d.resumed = c.boolean_or("resumed", false);
    out.num_scheduled_tokens[d.req_id] = c.i64("num_scheduled_tokens");
    auto it = state.requests.find(d.req_id);
    if (it == state.requests.end()) c.fail("cached.req", "unknown request '" + d.req_id + "'");
    it->second->num_computed_tokens = d.num_computed_tokens;
    out.scheduled_cached_reqs.push_back(std::move(d));
  });
  try {
    state.meta = state.scheduler->build_connector_meta(out, reqs);
  } catch (const lm::UpstreamError& e) {
    return error_output(e.kind(), state);
  }
  JsonWriter w;
  w.begin_object().key("requests").begin_array();
  for (const lm::ReqMeta& r : state.meta.requests) {
    w.begin_object().key("req").value(r.req_id);
    w.key("n_tokens").value(static_cast<int64_t>(r.token_ids.size()));
    w.key("is_last_prefill").value(r.is_last_prefill);
    w.key("save");
    if (r.save_spec) {
      w.begin_array()
          .value(r.save_spec->skip_leading_tokens)
          .value(r.save_spec->can_save)
          .end_array();
    } else {
      w.null();
    }
    w.key("load");
    write_load_spec(w, r.load_spec);
    w.key("slots").begin_array();
    for (size_t i = 0; i < r.num_slots();) {
      size_t j = i + 1;
      while (j < r.num_slots() && r.slot(j) == r.slot(j - 1) + 1) ++j;
      w.begin_array().value(r.slot(i)).value(static_cast<int64_t>(j - i)).end_array();
      i = j;
    }
    w.end_array().key("request_configs");
    write_configs(w, r.request_configs);
    w.end_object();
  }
  w.end_array().key("trackers").begin_array();
  for (const lm::RequestTracker& t : state.scheduler->request_trackers()) {
    w.begin_array()
        .value(t.req_id)
        .value(t.num_saved_tokens)
        .value(static_cast<int64_t>(t.token_ids.size()))
        .value(static_cast<int64_t>(t.allocated_block_ids.size()))
        .value(t.is_decode_phase)
        .end_array();
  }
  w.end_array().end_object();
  return w.take();
}

void write_calls(JsonWriter& w, const std::vector<lm::AdapterCall>& calls) {
  w.key("calls").begin_array();
  for (const lm::AdapterCall& c : calls) {
    w.begin_array();
    switch (c.kind) {
      case lm::AdapterCall::Kind::kRetrieve:
        w.value("retrieve").value(*c.req_id).value(c.num_tokens).value(c.num_masked);
        w.value(c.ret_tokens);
        break;
      case lm::AdapterCall::Kind::kStore:
        w.value("store").value(*c.req_id).value(c.num_tokens).value(c.num_masked);
        write_ranges(w, c.stored);
        break;
      case lm::AdapterCall::Kind::kRetrieveLayer:
        w.value("retrieve_layer");
        if (c.req_id) {
          w.value(*c.req_id);
        } else {
          w.null();
        }
        w.value(c.num_tokens).value(c.num_masked);
        break;
      case lm::AdapterCall::Kind::kStoreLayer:
        w.value("store_layer").value(*c.req_id).value(c.num_tokens).value(c.num_masked);
        break;
      case lm::AdapterCall::Kind::kUnpin:
        w.value("unpin").value(*c.req_id);
        write_pin_map(w, c.unpinned);
        break;
    }
    w.end_array();
  }
  w.end_array();
}

std::string op_worker_step(const OpFields& op, CaseState& state) {
  std::vector<int> ranks;
  if (op.has_value("ranks")) {
    for (simdjson::dom::element r : op.array("ranks")) {
      int rank = static_cast<int>(op.as_i64(r, "ranks"));
      if (state.workers.count(rank) == 0) op.fail("ranks", "no such rank");
      ranks.push_back(rank);
    }
  } else {
    ranks = state.ranks;
  }
  JsonWriter w;
  w.begin_object().key("ranks").begin_array();
  for (int rank : ranks) {
    lm::LMCacheWorkerAdapter& worker = *state.workers[rank];
    lm::ConnectorMetadata meta = state.meta;  // each rank works on its own copy
    lm::WorkerLog log;
    std::optional<std::pair<lm::PyError, std::string>> error;
    const char* stage = "start_load_kv";
    try {
      worker.start_load_kv(meta, &log);
      if (worker.engine().use_layerwise()) {
        for (int l = 0; l < worker.engine().num_layers(); ++l) {
          stage = "wait_for_layer_load";
          worker.wait_for_layer_load(&log);
          stage = "save_kv_layer";
          worker.save_kv_layer(meta, &log);
        }
      }
      stage = "wait_for_save";
      worker.wait_for_save(meta, &log);
    } catch (const lm::UpstreamError& e) {
      error = std::make_pair(e.kind(), std::string(stage));
    }
    std::vector<int64_t> invalid = worker.get_block_ids_with_load_errors();
    w.begin_array().value(rank).begin_object();
    if (error) {
      w.key("error").begin_array().value(lm::py_error_name(error->first)).value(error->second);
      w.end_array();
    }
    write_calls(w, log.calls);
    w.key("stored");
    write_ranges(w, log.stored);
    w.key("loaded").begin_array();
    bool any_bad = false;
    for (const lm::LoadedChunk& c : log.loaded) {
      w.begin_array().value(c.start).value(c.end).value(c.location).end_array();
      any_bad = any_bad || c.bad;
    }
    w.end_array();
    if (any_bad) {
      w.key("bad").begin_array();
      for (const lm::LoadedChunk& c : log.loaded) {
        if (c.bad) w.begin_array().value(c.start).value(c.end).end_array();
      }
      w.end_array();
    }
    w.key("invalid_block_ids").int_array(invalid);
    w.end_object().end_array();
  }
  w.end_array();
  if (any_removed(state)) {
    w.key("removed");
    write_removed(w, state, ranks.size() > 1);
  }
  write_writes(w, state);
  w.end_object();
  drain_events(state);
  return w.take();
}

}  // namespace

std::string connector_op(std::string_view name, const OpFields& op, CaseState& state) {
  JsonWriter w;
  if (name == "add_request") {
    auto r = std::make_unique<lm::VllmRequest>();
    r->request_id = std::string(op.str("req"));
    r->own_tokens(read_tokens(op, state));
    r->priority = op.i64_or("priority", 0);
    r->request_configs = read_request_configs(op, "request_configs");
    state.requests[r->request_id] = std::move(r);
    return std::string();
  }
  if (name == "append_tokens") {
    lm::VllmRequest& r = request(op, state);
    std::vector<lm::TokenId> t = read_token_list(op, op.element("tokens"), "tokens");
    r.append_tokens(t);
    return std::string();
  }
  if (name == "get_num_new_matched_tokens") {
    lm::VllmRequest& r = request(op, state);
    r.num_computed_tokens = op.i64("num_computed_tokens");
    lm::LMCacheSchedulerAdapter::MatchResult m =
        state.scheduler->get_num_new_matched_tokens(r, r.num_computed_tokens);
    w.begin_object().key("ret");
    if (m.ret) {
      w.value(*m.ret);
    } else {
      w.null();
    }
    w.key("load_spec");
    write_load_spec(w, state.scheduler->load_spec(r.request_id));
    w.key("rank_hits").begin_array();
    for (const auto& [rank, hit] : m.rank_hits) w.begin_array().value(rank).value(hit).end_array();
    w.end_array().end_object();
    drain_events(state);
    return w.take();
  }
  if (name == "update_state_after_alloc") {
    lm::VllmRequest& r = request(op, state);
    try {
      state.scheduler->update_state_after_alloc(r, op.i64("num_external_tokens"));
    } catch (const lm::UpstreamError& e) {
      return error_output(e.kind(), state);
    }
    w.begin_object().key("load_spec");
    write_load_spec(w, state.scheduler->load_spec(r.request_id));
    w.end_object();
    return w.take();
  }
  if (name == "build_meta") return op_build_meta(op, state);
  if (name == "worker_step") return op_worker_step(op, state);
  if (name == "request_finished") {
    request(op, state);
    w.begin_object().key("ret").begin_array().value(false).null().end_array().end_object();
    return w.take();
  }
  op.fail("op", "unknown connector op '" + std::string(name) + "'");
}

}  // namespace kvtwin::sim::golden::lmcache_replay
