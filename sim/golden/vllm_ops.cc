#include "sim/golden/vllm_ops.h"

#include <array>
#include <bit>
#include <cstring>
#include <stdexcept>

namespace kvtwin::sim::golden {
namespace {

constexpr std::array<std::string_view, 21> kOpNames = {"add_request",
                                                       "def_seq",
                                                       "save_seq",
                                                       "drop_seq",
                                                       "append_tokens",
                                                       "set_computed",
                                                       "get_computed_blocks",
                                                       "allocate_slots",
                                                       "free",
                                                       "cache_blocks",
                                                       "remove_skipped_blocks",
                                                       "get_block_ids",
                                                       "get_num_common_prefix_blocks",
                                                       "reset_prefix_cache",
                                                       "evict_blocks",
                                                       "new_step",
                                                       "take_events",
                                                       "prefix_cache_stats",
                                                       "usage",
                                                       "free_queue",
                                                       "pool_state"};

std::optional<VllmOpKind> op_kind(std::string_view name) {
  // The hot ops first.
  if (name == "allocate_slots") return VllmOpKind::kAllocateSlots;
  if (name == "append_tokens") return VllmOpKind::kAppendTokens;
  for (size_t i = 0; i < kOpNames.size(); ++i)
    if (kOpNames[i] == name) return static_cast<VllmOpKind>(i);
  return std::nullopt;
}

// Appends the integers of array field `field` to *out.
IndexRange read_ints(const OpFields& f, simdjson::dom::array a, std::string_view field,
                     std::vector<int64_t>* out) {
  IndexRange r;
  r.begin = static_cast<uint32_t>(out->size());
  for (simdjson::dom::element e : a) {
    int64_t v;
    if (e.get_int64().get(v) != simdjson::SUCCESS) v = f.as_i64(e, field);
    out->push_back(v);
  }
  r.end = static_cast<uint32_t>(out->size());
  return r;
}

void parse_prompt_parts(const OpFields& f, VllmOpArena* arena, VllmOp* op) {
  op->parts.begin = static_cast<uint32_t>(arena->parts.size());
  for (simdjson::dom::element e : f.array("prompt_parts")) {
    simdjson::dom::object o;
    if (e.get_object().get(o) != simdjson::SUCCESS)
      f.fail("prompt_parts", "expected objects {\"seq\":...} or {\"tokens\":[...]}");
    OpFields part(&f.file(), f.line(), o);
    PromptPart p;
    if (part.has("seq")) {
      p.seq = arena->intern_seq(part.str("seq"));
      p.len = part.i64_or("len", -1);
      if (part.has_value("len") && p.len < 0) part.fail("len", "negative length");
    } else if (part.has("tokens")) {
      p.tokens = read_ints(part, part.array("tokens"), "tokens", &arena->tokens);
    } else {
      f.fail("prompt_parts", "a part needs \"seq\" or \"tokens\"");
    }
    arena->parts.push_back(p);
  }
  op->parts.end = static_cast<uint32_t>(arena->parts.size());
}

void parse_add_request(const OpFields& f, VllmOpArena* arena, VllmOp* op) {
  op->req = arena->intern_request(f.str("req"));
  if (f.has_value("prompt")) {
    op->tokens = read_ints(f, f.array("prompt"), "prompt", &arena->tokens);
  } else if (f.has_value("prompt_parts")) {
    parse_prompt_parts(f, arena, op);
  } else {
    f.fail("prompt", "missing (neither prompt nor prompt_parts)");
  }
  op->n[0] = f.i64("max_tokens");
  op->flag = f.boolean_or("skip_reading_prefix_cache", false);
  bool salt = f.has_value("cache_salt"), lora = f.has_value("lora"), mm = f.has_value("mm");
  if (!salt && !lora && !mm) return;
  AddRequestExtras x;
  if (salt) x.cache_salt = std::string(f.str("cache_salt"));
  if (lora) {
    OpFields l = f.sub("lora");
    x.lora = model::vllm::LoRARequest{std::string(l.str("name")), l.i64("id")};
  }
  if (mm) {
    for (simdjson::dom::element e : f.array("mm")) {
      simdjson::dom::object o;
      if (e.get_object().get(o) != simdjson::SUCCESS) f.fail("mm", "expected objects");
      OpFields m(&f.file(), f.line(), o);
      x.mm.push_back({std::string(m.str("identifier")), m.i64("offset"), m.i64("length")});
    }
  }
  op->extras = static_cast<int32_t>(arena->extras.size());
  arena->extras.push_back(std::move(x));
}

// One pass over the fields (the hottest op: key lookups would rescan the object each time).
void parse_allocate_slots(const OpFields& f, VllmOpArena* arena, VllmOp* op) {
  static constexpr std::string_view kNames[5] = {
      "num_new_tokens", "num_new_computed_tokens", "num_lookahead_tokens",
      "num_external_computed_tokens", "num_encoder_tokens"};
  bool have_req = false, have_new_tokens = false;
  for (auto [key, value] : f.object()) {
    if (key == "req") {
      op->req = arena->intern_request(f.as_str(value, "req"));
      have_req = true;
      continue;
    }
    for (int i = 0; i < 5; ++i) {
      if (key != kNames[i]) continue;
      if (!value.is_null()) op->n[i] = f.as_i64(value, kNames[i]);
      if (op->n[i] < 0) f.fail(kNames[i], "negative token count");
      have_new_tokens |= i == 0 && !value.is_null();
    }
    if (key == "delay_cache_blocks" && !value.is_null()) {
      bool b;
      if (value.get_bool().get(b) != simdjson::SUCCESS) f.fail(key, "expected true or false");
      op->flag = b;
    } else if (key == "new_computed_blocks" && !value.is_null()) {
      std::string_view v = f.as_str(value, key);
      if (v == "pending") {
        op->new_computed_blocks = NewComputedBlocks::kPending;
      } else if (v == "empty") {
        op->new_computed_blocks = NewComputedBlocks::kEmpty;
      } else {
        f.fail(key, "expected \"pending\", \"empty\" or null, got \"" + std::string(v) + "\"");
      }
    }
  }
  if (!have_req) f.fail("req", "missing");
  if (!have_new_tokens) f.fail("num_new_tokens", "missing");
}

}  // namespace

std::string_view vllm_op_name(VllmOpKind kind) {
  return kOpNames[static_cast<size_t>(kind)];
}

const std::string& NameIndex::name(int32_t index) const {
  size_t i = static_cast<size_t>(index) + 64;
  int k = std::bit_width(i) - 7;
  return chunks_[static_cast<size_t>(k)][i - (size_t{64} << k)];
}

namespace {

// n (< 8) bytes at p as the low bytes of a word, without reading past them.
uint64_t load_short(const char* p, size_t n) {
  uint32_t a, b;
  if (n >= 4) {  // two overlapping 4-byte loads
    std::memcpy(&a, p, 4);
    std::memcpy(&b, p + n - 4, 4);
    return a | (static_cast<uint64_t>(b) << (8 * (n - 4)));
  }
  uint64_t w = 0;
  for (size_t i = 0; i < n; ++i)
    w |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return w;
}

uint64_t mix(uint64_t h) {
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ull;
  h ^= h >> 32;
  return h;
}

}  // namespace

NameIndex::Key NameIndex::key_of(std::string_view name) {
  Key k;
  const char* p = name.data();
  size_t n = name.size();
  k.size = n;
  if (n >= 16) {
    std::memcpy(&k.w0, p, 8);
    std::memcpy(&k.w1, p + 8, 8);
  } else if (n >= 8) {
    std::memcpy(&k.w0, p, 8);
    k.w1 = load_short(p + 8, n - 8);
  } else {
    k.w0 = load_short(p, n);
  }
  return k;
}

uint64_t NameIndex::hash_of(const Key& key, std::string_view name) {
  uint64_t h = mix(key.w0 * 0x9E3779B97F4A7C15ull ^ key.w1 * 0xff51afd7ed558ccdull ^ key.size);
  for (size_t i = 16; i < name.size(); ++i)  // the rare long name
    h = mix(h ^ static_cast<unsigned char>(name[i]));
  return h;
}

int32_t NameIndex::intern(std::string_view name) {
  const Key key = key_of(name);
  size_t mask = table_.size() - 1;
  for (size_t i = hash_of(key, name) & mask;; i = (i + 1) & mask) {
    Slot& s = table_[i];
    if (s.index < 0) return add(name, &s, key);
    if (s.key == key && (key.size <= 16 || this->name(s.index) == name)) return s.index;
  }
}

int32_t NameIndex::add(std::string_view name, Slot* slot, const Key& key) {
  size_t at = size_ + 64;
  int k = std::bit_width(at) - 7;
  if (k >= kChunks) throw std::length_error("too many names");
  auto& chunk = chunks_[static_cast<size_t>(k)];
  if (!chunk) chunk = std::make_unique<std::string[]>(size_t{64} << k);
  chunk[at - (size_t{64} << k)] = std::string(name);
  *slot = Slot{key, static_cast<int32_t>(size_)};
  ++size_;
  if (size_ * 2 > table_.size()) grow();
  return static_cast<int32_t>(size_) - 1;
}

void NameIndex::grow() {
  std::vector<Slot> old = std::move(table_);
  table_.assign(old.size() * 2, Slot{});
  size_t mask = table_.size() - 1;
  for (const Slot& s : old) {
    if (s.index < 0) continue;
    size_t i = hash_of(s.key, name(s.index)) & mask;
    while (table_[i].index >= 0) i = (i + 1) & mask;
    table_[i] = s;
  }
}

void parse_vllm_op(const OpFields& f, VllmOpArena* arena, VllmOp* op) {
  std::string_view name = f.str("op");
  std::optional<VllmOpKind> kind = op_kind(name);
  if (!kind) f.fail("op", "unknown op '" + std::string(name) + "'");
  *op = VllmOp{};
  op->kind = *kind;
  op->line = f.line();
  switch (*kind) {
    case VllmOpKind::kAddRequest:
      parse_add_request(f, arena, op);
      break;
    case VllmOpKind::kDefSeq:
      op->seq = arena->intern_seq(f.str("name"));
      op->tokens = read_ints(f, f.array("tokens"), "tokens", &arena->tokens);
      break;
    case VllmOpKind::kSaveSeq:
      op->seq = arena->intern_seq(f.str("name"));
      op->req = arena->intern_request(f.str("req"));
      break;
    case VllmOpKind::kDropSeq:
      op->seq = arena->intern_seq(f.str("name"));
      break;
    case VllmOpKind::kAppendTokens:
      op->req = arena->intern_request(f.str("req"));
      op->tokens = read_ints(f, f.array("tokens"), "tokens", &arena->tokens);
      op->flag = f.has_value("num_computed_tokens");
      if (op->flag) op->n[0] = f.i64("num_computed_tokens");
      break;
    case VllmOpKind::kSetComputed:
      op->req = arena->intern_request(f.str("req"));
      op->n[0] = f.i64("value");
      break;
    case VllmOpKind::kAllocateSlots:
      parse_allocate_slots(f, arena, op);
      break;
    case VllmOpKind::kFree: {
      op->req = arena->intern_request(f.str("req"));
      // The unit-test mirrors omit the reason: a plain KVCacheManager.free of a finished request.
      std::string_view r = f.has_value("reason") ? f.str("reason") : std::string_view("finished");
      if (r == "finished") {
        op->reason = FreeReason::kFinished;
      } else if (r == "aborted") {
        op->reason = FreeReason::kAborted;
      } else if (r == "preempted") {
        op->reason = FreeReason::kPreempted;
      } else {
        f.fail("reason", "expected finished, aborted or preempted, got '" + std::string(r) + "'");
      }
      break;
    }
    case VllmOpKind::kCacheBlocks:
      op->req = arena->intern_request(f.str("req"));
      op->n[0] = f.i64("num_computed_tokens");
      break;
    case VllmOpKind::kRemoveSkippedBlocks:
      op->req = arena->intern_request(f.str("req"));
      op->n[0] = f.i64("total_computed_tokens");
      break;
    case VllmOpKind::kGetComputedBlocks:
    case VllmOpKind::kGetBlockIds:
    case VllmOpKind::kGetNumCommonPrefixBlocks:
      op->req = arena->intern_request(f.str("req"));
      break;
    case VllmOpKind::kEvictBlocks:
      op->tokens = read_ints(f, f.array("block_ids"), "block_ids", &arena->tokens);
      break;
    case VllmOpKind::kPoolState:
      op->flag = f.boolean_or("hash_map", true);
      break;
    case VllmOpKind::kResetPrefixCache:
    case VllmOpKind::kNewStep:
    case VllmOpKind::kTakeEvents:
    case VllmOpKind::kPrefixCacheStats:
    case VllmOpKind::kUsage:
    case VllmOpKind::kFreeQueue:
      break;
  }
}

}  // namespace kvtwin::sim::golden
