// VllmReplayer's comparison half: actual outputs as JSON, the fast checks of frequent ops, and
// the report of the first difference.
#include <algorithm>
#include <cstdio>

#include "model/vllm/sink_full_attention_manager.h"
#include "sim/golden/vllm_replayer.h"
#include "sim/io/input_error.h"

namespace kvtwin::sim::golden {

namespace mv = model::vllm;
using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

namespace {

// ------------------------------------------------------------------ first difference

bool is_container(element_type t) {
  return t == element_type::ARRAY || t == element_type::OBJECT;
}

// Depth-first walk in the order of `expected`; fills *out with the first difference.
bool find_difference(element expected, element actual, const std::string& path, VllmMismatch* out) {
  element_type te = expected.type(), ta = actual.type();
  if (te == element_type::ARRAY && ta == element_type::ARRAY) {
    array x = expected, y = actual;
    auto it = y.begin();
    size_t i = 0;
    for (element e : x) {
      if (it == y.end()) {
        *out = {path + "[" + std::to_string(i) + "]", json_text(e),
                "(absent: actual has " + std::to_string(y.size()) + " elements)"};
        return true;
      }
      if (find_difference(e, *it, path + "[" + std::to_string(i) + "]", out)) return true;
      ++it;
      ++i;
    }
    if (it != y.end()) {
      *out = {path + "[" + std::to_string(i) + "]",
              "(absent: expected has " + std::to_string(x.size()) + " elements)", json_text(*it)};
      return true;
    }
    return false;
  }
  if (te == element_type::OBJECT && ta == element_type::OBJECT) {
    object x = expected, y = actual;
    for (auto [k, v] : x) {
      element other;
      if (y[k].get(other) != simdjson::SUCCESS) {
        *out = {path + "." + std::string(k), json_text(v), "(absent)"};
        return true;
      }
      if (find_difference(v, other, path + "." + std::string(k), out)) return true;
    }
    for (auto [k, v] : y) {
      if (x[k].error() != simdjson::SUCCESS) {
        *out = {path + "." + std::string(k), "(absent)", json_text(v)};
        return true;
      }
    }
    return false;
  }
  if (is_container(te) || is_container(ta) || !json_equal(expected, actual)) {
    *out = {path, json_text(expected), json_text(actual)};
    return true;
  }
  return false;
}

// ------------------------------------------------------------------ fast checks

bool ints_equal(element e, std::span<const mv::BlockId> ids) {
  array a;
  if (e.get_array().get(a) != simdjson::SUCCESS || a.size() != ids.size()) return false;
  size_t i = 0;
  for (element x : a) {
    int64_t v;
    if (x.get_int64().get(v) != simdjson::SUCCESS || v != ids[i++]) return false;
  }
  return true;
}

bool groups_equal(element e, const mv::KVCacheBlocks& blocks) {
  array a;
  if (e.get_array().get(a) != simdjson::SUCCESS ||
      a.size() != static_cast<size_t>(blocks.num_groups()))
    return false;
  int g = 0;
  for (element x : a)
    if (!ints_equal(x, blocks[g++])) return false;
  return true;
}

// Parsed groups (ranges of data.groups) against the blocks of each KV-cache group.
bool groups_equal(IndexRange groups, const VllmExpectArena& data, const mv::KVCacheBlocks& blocks) {
  if (groups.size() != static_cast<uint32_t>(blocks.num_groups())) return false;
  for (uint32_t g = 0; g < groups.size(); ++g) {
    IndexRange r = data.groups[groups.begin + g];
    std::span<const mv::BlockId> ids = blocks[static_cast<int>(g)];
    if (r.size() != ids.size()) return false;
    for (uint32_t j = 0; j < r.size(); ++j)
      if (data.ids[r.begin + j] != ids[j]) return false;
  }
  return true;
}

bool int_field_equal(object o, std::string_view key, int64_t v) {
  int64_t x;
  return o[key].get_int64().get(x) == simdjson::SUCCESS && x == v;
}

bool hex_equal(std::string_view s, const mv::BlockHash& h) {
  char buf[2 * mv::BlockHash::kMaxSize];
  static constexpr char kHex[] = "0123456789abcdef";
  if (s.size() != 2 * h.size()) return false;
  for (size_t i = 0; i < h.size(); ++i) {
    buf[2 * i] = kHex[h.data()[i] >> 4];
    buf[2 * i + 1] = kHex[h.data()[i] & 15];
  }
  return s == std::string_view(buf, s.size());
}

bool hex_equal(element e, const mv::BlockHash& h) {
  std::string_view s;
  return e.get_string().get(s) == simdjson::SUCCESS && hex_equal(s, h);
}

// The last n hashes of the request against a full list or a compact {"n", "last"}.
bool hashes_equal(element e, const mv::Request& req, size_t n) {
  const auto& hashes = req.block_hashes();
  object o;
  if (e.get_object().get(o) == simdjson::SUCCESS) {
    if (!int_field_equal(o, "n", static_cast<int64_t>(n))) return false;
    if (n == 0) return o.size() == 1;
    element last;
    return o.size() == 2 && o["last"].get(last) == simdjson::SUCCESS &&
           hex_equal(last, hashes.back());
  }
  array a;
  if (e.get_array().get(a) != simdjson::SUCCESS || a.size() != n) return false;
  size_t i = hashes.size() - n;
  for (element x : a)
    if (!hex_equal(x, hashes[i++])) return false;
  return true;
}

// ------------------------------------------------------------------ writers

void write_groups(const mv::KVCacheBlocks& blocks, JsonWriter* w) {
  w->begin_array();
  for (int g = 0; g < blocks.num_groups(); ++g) {
    w->begin_array();
    for (mv::BlockId b : blocks[g]) w->value(static_cast<int64_t>(b));
    w->end_array();
  }
  w->end_array();
}

void write_hashes(const mv::Request& req, size_t n, bool compact, JsonWriter* w) {
  const auto& hashes = req.block_hashes();
  if (compact) {
    w->begin_object().key("n").value(static_cast<int64_t>(n));
    if (n > 0) w->key("last").value(hashes.back().hex());
    w->end_object();
    return;
  }
  w->begin_array();
  for (size_t i = hashes.size() - n; i < hashes.size(); ++i) w->value(hashes[i].hex());
  w->end_array();
}

void write_external_hash(const mv::ExternalBlockHash& h, JsonWriter* w) {
  if (h.is_int) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h.int_value));
    w->value(std::string_view(buf));
  } else {
    w->value(mv::to_hex(h.bytes));
  }
}

void write_extra_keys(const mv::ExtraKeys& keys, JsonWriter* w) {
  w->begin_array();
  for (const mv::ExtraKey& k : keys) {
    if (k.is_bytes) {
      w->begin_object().key("bytes");
      w->value(mv::to_hex({reinterpret_cast<const uint8_t*>(k.value.data()), k.value.size()}));
      w->end_object();
    } else {
      w->value(k.value);
    }
  }
  w->end_array();
}

void write_event(const mv::KVCacheEvent& event, JsonWriter* w) {
  w->begin_object();
  if (const auto* s = std::get_if<mv::BlockStored>(&event)) {
    w->key("type").value("BlockStored").key("block_hashes").begin_array();
    for (const auto& h : s->block_hashes) write_external_hash(h, w);
    w->end_array().key("parent_block_hash");
    if (s->parent_block_hash) {
      write_external_hash(*s->parent_block_hash, w);
    } else {
      w->null();
    }
    w->key("token_ids").begin_array();
    for (mv::TokenId t : s->token_ids) w->value(static_cast<int64_t>(t));
    w->end_array().key("block_size").value(s->block_size).key("lora_id");
    if (s->lora_id) {
      w->value(*s->lora_id);
    } else {
      w->null();
    }
    w->key("lora_name");
    if (s->lora_name) {
      w->value(*s->lora_name);
    } else {
      w->null();
    }
    w->key("medium").value(s->medium).key("extra_keys");
    if (!s->extra_keys) {
      w->null();
    } else {
      w->begin_array();
      for (const auto& keys : *s->extra_keys) {
        if (keys) {
          write_extra_keys(*keys, w);
        } else {
          w->null();
        }
      }
      w->end_array();
    }
  } else if (const auto* r = std::get_if<mv::BlockRemoved>(&event)) {
    w->key("type").value("BlockRemoved").key("block_hashes").begin_array();
    for (const auto& h : r->block_hashes) write_external_hash(h, w);
    w->end_array().key("medium").value(r->medium);
  } else {
    w->key("type").value("AllBlocksCleared");
  }
  w->end_object();
}

void write_pool_state(const mv::KVCacheManager& m, bool with_hash_map, JsonWriter* w) {
  const mv::BlockPool& pool = m.block_pool();
  w->begin_object().key("ref_cnt").begin_array();
  for (int32_t ref_cnt : pool.ref_cnts()) w->value(static_cast<int64_t>(ref_cnt));
  w->end_array().key("block_hash").begin_array();
  for (const auto& b : pool.blocks()) {
    if (b.block_hash.empty()) {
      w->null();
    } else {
      w->value(b.block_hash.hex());
    }
  }
  w->end_array().key("free_block_ids").int_array(pool.free_block_queue().get_all_free_blocks());
  const mv::BlockHashToBlockMap& map = pool.cached_block_hash_to_block();
  w->key("num_cached_hash_keys").value(static_cast<int64_t>(map.size()));
  if (with_hash_map) {
    w->key("hash_map").begin_object();
    map.for_each_key([&](mv::BlockId head) {
      w->key(pool.block(head).block_hash.hex()).begin_array();
      for (mv::BlockId b = head; b != mv::kNoBlock; b = map.chain_next(b))
        w->value(static_cast<int64_t>(b));
      w->end_array();
    });
    w->end_object();
  }
  w->key("num_cached_block").begin_object();
  for (const auto& [id, per_group] : m.num_cached_blocks()) {
    w->key(id).begin_array();
    for (const auto& n : per_group) {
      if (n) {
        w->value(*n);
      } else {
        w->null();
      }
    }
    w->end_array();
  }
  w->end_object().end_object();
}

// The ops whose actual output is always "{}": write_actual writes nothing inside the object, and
// an absent expectation matches them. One list for both, so the two cannot disagree.
bool writes_empty_object(VllmOpKind kind) {
  switch (kind) {
    case VllmOpKind::kDefSeq:
    case VllmOpKind::kDropSeq:
    case VllmOpKind::kSetComputed:
    case VllmOpKind::kCacheBlocks:
    case VllmOpKind::kEvictBlocks:
    case VllmOpKind::kNewStep:
      return true;
    default:
      return false;
  }
}

}  // namespace

void VllmReplayer::write_actual(const VllmOp& op, const VllmOpArena& arena, JsonWriter* w) {
  const bool compact = config_.compact;
  if (op.kind == VllmOpKind::kPoolState) {
    write_pool_state(manager_, op.flag, w);
    return;
  }
  w->begin_object();
  switch (op.kind) {
    case VllmOpKind::kAddRequest:
      w->key("block_hashes");
      write_hashes(*last_request_, num_new_hashes_, compact, w);
      break;
    case VllmOpKind::kAppendTokens:
      w->key("new_block_hashes");
      write_hashes(*last_request_, num_new_hashes_, compact, w);
      break;
    case VllmOpKind::kSaveSeq:
      w->key("len").value(saved_len_);
      break;
    case VllmOpKind::kGetComputedBlocks:
      w->key("block_ids");
      write_groups(*pending_[static_cast<size_t>(op.req)], w);
      w->key("num_computed_tokens").value(num_computed_tokens_);
      break;
    case VllmOpKind::kAllocateSlots:
      w->key("new_block_ids");
      if (allocated_) {
        write_groups(*allocated_, w);
      } else {
        w->null();
      }
      break;
    case VllmOpKind::kFree:
    case VllmOpKind::kRemoveSkippedBlocks:
      w->key("num_free_blocks").value(num_free_blocks_);
      break;
    case VllmOpKind::kGetBlockIds:
      w->key("block_ids");
      write_groups(manager_.get_blocks(arena.request_name(op.req)), w);
      break;
    case VllmOpKind::kGetNumCommonPrefixBlocks:
      w->key("num_common_prefix_blocks").int_array(common_prefix_);
      break;
    case VllmOpKind::kResetPrefixCache:
      w->key("ok").value(reset_ok_);
      break;
    case VllmOpKind::kTakeEvents:
      w->key("events").begin_array();
      for (const auto& e : events_) write_event(e, w);
      w->end_array();
      break;
    case VllmOpKind::kPrefixCacheStats:
      w->key("stats");
      if (!stats_) {
        w->null();
      } else {
        w->begin_object()
            .key("reset")
            .value(stats_->reset)
            .key("requests")
            .value(stats_->requests)
            .key("queries")
            .value(stats_->queries)
            .key("hits")
            .value(stats_->hits)
            .key("preempted_requests")
            .value(stats_->preempted_requests)
            .key("preempted_queries")
            .value(stats_->preempted_queries)
            .key("preempted_hits")
            .value(stats_->preempted_hits)
            .end_object();
      }
      break;
    case VllmOpKind::kUsage:
      w->key("usage").value(manager_.usage());
      w->key("num_free_blocks").value(static_cast<int64_t>(manager_.num_free_blocks()));
      break;
    case VllmOpKind::kFreeQueue:
      w->key("free_block_ids")
          .int_array(manager_.block_pool().free_block_queue().get_all_free_blocks());
      break;
    default:  // kPoolState is written above
      KVTWIN_CHECK(writes_empty_object(op.kind)) << "no writer for " << vllm_op_name(op.kind);
      break;
  }
  w->end_object();
}

bool VllmReplayer::fast_equal(const VllmOp& op, element expect) const {
  object o;
  if (expect.get_object().get(o) != simdjson::SUCCESS) return false;
  element e;
  switch (op.kind) {
    case VllmOpKind::kAllocateSlots:
      if (o.size() != 1 || o["new_block_ids"].get(e) != simdjson::SUCCESS) return false;
      return allocated_ ? groups_equal(e, *allocated_) : e.is_null();
    case VllmOpKind::kAppendTokens:
      return o.size() == 1 && o["new_block_hashes"].get(e) == simdjson::SUCCESS &&
             hashes_equal(e, *last_request_, num_new_hashes_);
    case VllmOpKind::kAddRequest:
      return o.size() == 1 && o["block_hashes"].get(e) == simdjson::SUCCESS &&
             hashes_equal(e, *last_request_, num_new_hashes_);
    case VllmOpKind::kGetComputedBlocks:
      return o.size() == 2 && int_field_equal(o, "num_computed_tokens", num_computed_tokens_) &&
             o["block_ids"].get(e) == simdjson::SUCCESS &&
             groups_equal(e, *pending_[static_cast<size_t>(op.req)]);
    case VllmOpKind::kFree:
    case VllmOpKind::kRemoveSkippedBlocks:
      return o.size() == 1 && int_field_equal(o, "num_free_blocks", num_free_blocks_);
    case VllmOpKind::kSaveSeq:
      return o.size() == 1 && int_field_equal(o, "len", saved_len_);
    default:
      return false;
  }
}

bool VllmReplayer::expect_equal(const VllmOp& op, const VllmExpect& expect,
                                const VllmExpectArena& data) const {
  switch (expect.kind) {
    case VllmExpect::Kind::kNull:
      return op.kind == VllmOpKind::kAllocateSlots && !allocated_;
    case VllmExpect::Kind::kGroups:
      return op.kind == VllmOpKind::kAllocateSlots && allocated_ &&
             groups_equal(expect.groups, data, *allocated_);
    case VllmExpect::Kind::kComputedBlocks: {
      if (op.kind != VllmOpKind::kGetComputedBlocks || expect.n != num_computed_tokens_ ||
          static_cast<size_t>(op.req) >= pending_.size())
        return false;
      const std::optional<mv::KVCacheBlocks>& pending = pending_[static_cast<size_t>(op.req)];
      return pending && groups_equal(expect.groups, data, *pending);
    }
    case VllmExpect::Kind::kHashes:
      if ((op.kind != VllmOpKind::kAppendTokens && op.kind != VllmOpKind::kAddRequest) ||
          expect.n != static_cast<int64_t>(num_new_hashes_))
        return false;
      if (expect.n == 0) return expect.hex.size() == 0;
      return expect.hex.size() > 0 &&
             hex_equal(std::string_view(data.text.data() + expect.hex.begin, expect.hex.size()),
                       last_request_->block_hashes().back());
    case VllmExpect::Kind::kCount:
      switch (op.kind) {
        case VllmOpKind::kFree:
        case VllmOpKind::kRemoveSkippedBlocks:
          return expect.n == num_free_blocks_;
        case VllmOpKind::kSaveSeq:
          return expect.n == saved_len_;
        default:
          return false;
      }
    case VllmExpect::Kind::kStats: {
      if (op.kind != VllmOpKind::kPrefixCacheStats || !stats_ || expect.counts.size() != 6 ||
          expect.n != (stats_->reset ? 1 : 0))
        return false;
      const int64_t* v = data.ids.data() + expect.counts.begin;
      return v[0] == stats_->requests && v[1] == stats_->queries && v[2] == stats_->hits &&
             v[3] == stats_->preempted_requests && v[4] == stats_->preempted_queries &&
             v[5] == stats_->preempted_hits;
    }
    case VllmExpect::Kind::kAbsent:
      // Ops whose actual output is the empty object need no expectation (compare() would write
      // and parse "{}" to find that out).
      return writes_empty_object(op.kind);
    case VllmExpect::Kind::kText:
      return false;
  }
  return false;
}

std::optional<VllmMismatch> VllmReplayer::compare(const VllmOp& op, const VllmOpArena& arena,
                                                  std::optional<element> expect) {
  if (expect && fast_equal(op, *expect)) return std::nullopt;
  writer_.clear();
  write_actual(op, arena, &writer_);
  element actual;
  auto err = actual_parser_.parse(writer_.str()).get(actual);
  if (err != simdjson::SUCCESS)
    return VllmMismatch{"$", "(expect)", "unparsable actual output: " + writer_.str()};
  object actual_obj = actual;
  if (!expect) {
    if (actual_obj.size() == 0) return std::nullopt;  // an op without output
    throw InputError(path_, op.line, "expect", "missing (the op has an output to compare)");
  }
  object expected_obj;
  if (expect->get_object().get(expected_obj) != simdjson::SUCCESS)
    return VllmMismatch{"$", json_text(*expect), json_text(actual)};
  // Every field we produce must match; fields of expect we do not produce are ignored.
  for (auto [key, value] : actual_obj) {
    element exp_value;
    std::string path = "$." + std::string(key);
    if (expected_obj[key].get(exp_value) != simdjson::SUCCESS)
      return VllmMismatch{path, "(absent)", json_text(value)};
    VllmMismatch m;
    if (find_difference(exp_value, value, path, &m)) return m;
  }
  return std::nullopt;
}

std::optional<VllmMismatch> VllmReplayer::check_derived(element derived) {
  writer_.clear();
  JsonWriter& w = writer_;
  const mv::KVCacheCoordinator& c = manager_.coordinator();
  w.begin_object().key("coordinator").value(c.name()).key("managers").begin_array();
  for (int g = 0; g < c.num_groups(); ++g) w.value(c.manager(g).name());
  w.end_array();
  w.key("none_hash").value(mv::none_hash(config_.hash_fn, config_.python_hash_seed).hex());
  w.key("null_block_id").value(static_cast<int64_t>(manager_.block_pool().null_block()));
  if (const auto* h = dynamic_cast<const mv::HybridKVCacheCoordinator*>(&c)) {
    w.key("attention_groups").begin_array();
    for (const auto& a : h->attention_groups()) {
      w.begin_object().key("group_ids").int_array(a.group_ids);
      w.key("manager").value(mv::manager_name(a.spec.kind)).end_object();
    }
    w.end_array().key("lcm_block_size").value(h->lcm_block_size());
  }
  bool any_sink = false;
  for (int g = 0; g < c.num_groups(); ++g) {
    const auto* sink = dynamic_cast<const mv::SinkFullAttentionManager*>(&c.manager(g));
    if (sink == nullptr) continue;
    if (!any_sink) w.key("sink_block_ids").begin_object();
    any_sink = true;
    w.key(std::to_string(g)).int_array(sink->sink_blocks());
  }
  if (any_sink) w.end_object();
  w.end_object();
  element actual = actual_parser_.parse(w.str());
  object actual_obj = actual, expected_obj;
  if (derived.get_object().get(expected_obj) != simdjson::SUCCESS)
    return VllmMismatch{"$.derived", json_text(derived), json_text(actual)};
  for (auto [key, value] : actual_obj) {
    element exp_value;
    std::string path = "$.derived." + std::string(key);
    if (expected_obj[key].get(exp_value) != simdjson::SUCCESS)
      return VllmMismatch{path, "(absent)", json_text(value)};
    VllmMismatch m;
    if (find_difference(exp_value, value, path, &m)) return m;
  }
  return std::nullopt;
}

}  // namespace kvtwin::sim::golden
