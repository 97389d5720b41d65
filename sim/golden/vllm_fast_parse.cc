#include "sim/golden/vllm_fast_parse.h"

#include <array>
#include <bit>
#include <cstring>
#include <string>
#include <utility>

namespace kvtwin::sim::golden {
namespace {

// Whether the n bytes at p are those of lit (n known at compile time: a few word compares).
template <size_t n>
bool same_bytes(const char* p, const char* lit) {
  auto word = [](const char* q, auto w) {
    std::memcpy(&w, q, sizeof w);
    return w;
  };
  if constexpr (n >= 8) {
    for (size_t i = 0; i + 8 <= n; i += 8)
      if (word(p + i, uint64_t{}) != word(lit + i, uint64_t{})) return false;
    if constexpr (n % 8 != 0) return word(p + n - 8, uint64_t{}) == word(lit + n - 8, uint64_t{});
    return true;
  } else if constexpr (n >= 4) {
    return word(p, uint32_t{}) == word(lit, uint32_t{}) &&
           word(p + n - 4, uint32_t{}) == word(lit + n - 4, uint32_t{});
  } else {
    for (size_t i = 0; i < n; ++i)
      if (p[i] != lit[i]) return false;
    return true;
  }
}

// A cursor over one line; every method returns false on anything outside the accepted subset.
// Only a line that ends with '}' can be accepted, so a cursor over any other line starts at its
// end; then a run of digits always stops before the end, which spares the digit loop a bound.
class Cursor {
 public:
  explicit Cursor(std::string_view s)
      : p_(s.data()), end_(s.empty() || s.back() != '}' ? s.data() : s.data() + s.size()) {}

  const char* pos() const { return p_; }
  bool at_end() const { return p_ == end_; }
  bool peek(char c) const { return p_ < end_ && *p_ == c; }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++p_;
    return true;
  }
  // A literal (its length known at compile time, so the comparison is a few loads).
  template <size_t N>
  bool eat(const char (&lit)[N]) {
    constexpr size_t n = N - 1;
    if (static_cast<size_t>(end_ - p_) < n || !same_bytes<n>(p_, lit)) return false;
    p_ += n;
    return true;
  }
  char next_char() const { return p_ + 1 < end_ ? p_[1] : '\0'; }
  // A string of printable ASCII without escapes (its quotes consumed).
  bool string(std::string_view* out) {
    if (!eat('"')) return false;
    const char* b = p_;
    while (p_ < end_ && *p_ != '"') {
      unsigned char c = static_cast<unsigned char>(*p_);
      if (c < 0x20 || c > 0x7e || c == '\\') return false;
      ++p_;
    }
    if (p_ == end_) return false;
    *out = std::string_view(b, static_cast<size_t>(p_ - b));
    ++p_;
    return true;
  }
  // A non-negative integer in JSON's form (no leading zeros), at most 18 digits, followed by
  // one of , ] } (so "1.5", "1e3" and "-1" are refused). Up to 7 digits are found and converted
  // a word at a time (the line's padding makes the 8-byte load safe).
  bool uint(int64_t* out) {
    if (p_ == end_) return false;
    uint64_t w;
    std::memcpy(&w, p_, 8);
    const uint64_t t = w ^ 0x3030303030303030ull;  // a digit byte becomes 0..9
    // A byte's high nibble is set iff it is not a digit (a carry out of a non-digit byte only
    // disturbs the bytes after it).
    const uint64_t non_digit = (t | (t + 0x0606060606060606ull)) & 0xF0F0F0F0F0F0F0F0ull;
    if (non_digit == 0) return long_uint(out);
    const size_t n = static_cast<size_t>(std::countr_zero(non_digit)) / 8;
    if (n == 0 || (n > 1 && *p_ == '0')) return false;
    const char* q = p_ + n;  // q < end_: the line's last byte is '}'
    if (*q != ',' && *q != ']' && *q != '}') return false;
    uint64_t v = t << (8 * (8 - n));  // the digits in the top bytes, zeros before them
    v = (v * 10) + (v >> 8);          // pairs of digits
    v = (((v & 0x000000FF000000FFull) * (100 + (1000000ull << 32))) +
         (((v >> 16) & 0x000000FF000000FFull) * (1 + (10000ull << 32)))) >>
        32;
    *out = static_cast<int64_t>(v);
    p_ = q;
    return true;
  }
  // The same digit by digit, for 8 digits or more.
  bool long_uint(int64_t* out) {
    const char* b = p_;
    uint64_t v = 0;  // wraps harmlessly past 19 digits: such a number is refused below
    for (unsigned d; (d = static_cast<unsigned char>(*p_) - unsigned{'0'}) < 10; ++p_)
      v = v * 10 + d;
    size_t n = static_cast<size_t>(p_ - b);  // p_ < end_: the line's last byte is '}'
    if (n == 0 || n > 18 || (n > 1 && *b == '0')) return false;
    if (*p_ != ',' && *p_ != ']' && *p_ != '}') return false;
    *out = static_cast<int64_t>(v);
    return true;
  }
  bool boolean(bool* out) {
    if (eat("true")) {
      *out = true;
      return true;
    }
    *out = false;
    return eat("false");
  }
  // [int,...] appended to *out.
  bool uint_array(std::vector<int64_t>* out) {
    if (!eat('[')) return false;
    if (eat(']')) return true;
    do {
      int64_t v;
      if (!uint(&v)) return false;
      out->push_back(v);
    } while (eat(','));
    return eat(']');
  }

 private:
  const char* p_;
  const char* end_;
};

// Keys seen on the line (a repeated key is left to the DOM path).
enum Key : uint32_t {
  kReq = 1u << 0,
  kTokens = 1u << 1,  // append_tokens' tokens, add_request's prompt
  kNumComputed = 1u << 2,
  kExpect = 1u << 3,
  kDelay = 1u << 4,
  kNewComputed = 1u << 5,
  kCounts = 1u << 6,  // << i: allocate_slots' five counts (bits 6 to 10)
  kName = 1u << 11,
  kParts = 1u << 12,
  kMaxTokens = 1u << 13,
  kSkip = 1u << 14,
  kSalt = 1u << 15,
  kLora = 1u << 16,
  kReason = 1u << 17,
  kValue = 1u << 18,
};

// Prompt parts naming a sequence, at most this many per line (more: the DOM path).
constexpr int kMaxSeqParts = 16;

// Per-line state, committed to the arenas only when the whole line was understood.
struct Parsed {
  std::string_view req, name, salt, lora_name;
  int64_t lora_id = 0;
  const char* expect_begin = nullptr;
  const char* expect_end = nullptr;
  size_t hex_at = 0, hex_len = 0;
  bool null_new_tokens = false;
  uint32_t seen = 0;
  int num_seqs = 0;
  struct SeqPart {
    uint32_t part;
    std::string_view name;
  };
  // [0, num_seqs) are set; left uninitialised beyond (zeroing them cost more than a hot line).
  union {
    SeqPart seqs[kMaxSeqParts];
  };
  Parsed() {}

  bool mark(uint32_t bit) {  // false for a repeated key: the DOM path decides
    if (seen & bit) return false;
    seen |= bit;
    return true;
  }
  bool has(uint32_t bits) const { return (seen & bits) == bits; }
};

// [[ids],...] appended to the expect arena.
bool parse_groups(Cursor& c, VllmExpectArena* ex, IndexRange* groups) {
  if (!c.eat('[')) return false;
  groups->begin = static_cast<uint32_t>(ex->groups.size());
  if (!c.eat(']')) {
    do {
      IndexRange r;
      r.begin = static_cast<uint32_t>(ex->ids.size());
      if (!c.uint_array(&ex->ids)) return false;
      r.end = static_cast<uint32_t>(ex->ids.size());
      ex->groups.push_back(r);
    } while (c.eat(','));
    if (!c.eat(']')) return false;
  }
  groups->end = static_cast<uint32_t>(ex->groups.size());
  return true;
}

// {"new_block_ids":null} or {"new_block_ids":[[ids],...]} (allocate_slots).
bool parse_new_block_ids(Cursor& c, VllmExpectArena* ex, VllmExpect* e) {
  if (!c.eat("{\"new_block_ids\":")) return false;
  if (c.eat("null")) {
    e->kind = VllmExpect::Kind::kNull;
    return c.eat('}');
  }
  e->kind = VllmExpect::Kind::kGroups;
  return parse_groups(c, ex, &e->groups) && c.eat('}');
}

// {"block_ids":[[ids],...],"num_computed_tokens":n} (get_computed_blocks).
bool parse_computed_blocks(Cursor& c, VllmExpectArena* ex, VllmExpect* e) {
  if (!c.eat("{\"block_ids\":")) return false;
  e->kind = VllmExpect::Kind::kComputedBlocks;
  return parse_groups(c, ex, &e->groups) && c.eat(",\"num_computed_tokens\":") && c.uint(&e->n) &&
         c.eat('}');
}

// `open` then {"n":n}} or {"n":n,"last":"hex"}} where open is {"new_block_hashes":
// (append_tokens) or {"block_hashes": (add_request); the hex string's offset from the expect's
// first byte goes to p->hex_at.
template <size_t N>
bool parse_hashes(Cursor& c, const char (&open)[N], Parsed* p, VllmExpect* e) {
  if (!c.eat(open) || !c.eat("{\"n\":") || !c.uint(&e->n)) return false;
  e->kind = VllmExpect::Kind::kHashes;
  p->hex_len = 0;
  if (c.eat(",\"last\":")) {
    std::string_view hex;
    if (!c.string(&hex)) return false;
    p->hex_at = static_cast<size_t>(hex.data() - p->expect_begin);
    p->hex_len = hex.size();
  }
  return c.eat("}}");
}

// `open` then n} where open is {"num_free_blocks": (free) or {"len": (save_seq).
template <size_t N>
bool parse_count_expect(Cursor& c, const char (&open)[N], VllmExpect* e) {
  e->kind = VllmExpect::Kind::kCount;
  return c.eat(open) && c.uint(&e->n) && c.eat('}');
}

// {"stats":{"reset":b,"requests":n,"queries":n,"hits":n,"preempted_requests":n,
// "preempted_queries":n,"preempted_hits":n}} (prefix_cache_stats), in the recorder's key order.
bool parse_stats(Cursor& c, VllmExpectArena* ex, VllmExpect* e) {
  bool reset;
  if (!c.eat("{\"stats\":{\"reset\":") || !c.boolean(&reset)) return false;
  e->kind = VllmExpect::Kind::kStats;
  e->n = reset ? 1 : 0;
  e->counts.begin = static_cast<uint32_t>(ex->ids.size());
  int64_t v[6];
  if (!c.eat(",\"requests\":") || !c.uint(&v[0]) || !c.eat(",\"queries\":") || !c.uint(&v[1]) ||
      !c.eat(",\"hits\":") || !c.uint(&v[2]) || !c.eat(",\"preempted_requests\":") ||
      !c.uint(&v[3]) || !c.eat(",\"preempted_queries\":") || !c.uint(&v[4]) ||
      !c.eat(",\"preempted_hits\":") || !c.uint(&v[5]) || !c.eat("}}"))
    return false;
  ex->ids.insert(ex->ids.end(), v, v + 6);
  e->counts.end = static_cast<uint32_t>(ex->ids.size());
  return true;
}

// "expect": followed by the op's one accepted shape, parsed by `shape`.
template <typename Shape>
bool parse_expect(Cursor& c, Parsed* p, Shape shape) {
  if (!c.eat("\"expect\":") || !p->mark(kExpect)) return false;
  p->expect_begin = c.pos();
  bool ok = shape();
  p->expect_end = c.pos();
  return ok;
}

bool parse_req(Cursor& c, Parsed* p) {
  return c.eat("\"req\":") && p->mark(kReq) && c.string(&p->req);
}

bool parse_name(Cursor& c, Parsed* p) {
  return c.eat("\"name\":") && p->mark(kName) && c.string(&p->name);
}

// "key":[ints] into the arena's tokens.
bool parse_tokens(Cursor& c, VllmOpArena* arena, IndexRange* r) {
  r->begin = static_cast<uint32_t>(arena->tokens.size());
  if (!c.uint_array(&arena->tokens)) return false;
  r->end = static_cast<uint32_t>(arena->tokens.size());
  return true;
}

// One "key":value of append_tokens (after the comma).
bool parse_append_field(Cursor& c, Parsed* p, VllmOpArena* arena, VllmOp* op, VllmExpect* e) {
  switch (c.next_char()) {
    case 'r':
      return parse_req(c, p);
    case 't':
      return c.eat("\"tokens\":") && p->mark(kTokens) && parse_tokens(c, arena, &op->tokens);
    case 'n':
      if (!c.eat("\"num_computed_tokens\":") || !p->mark(kNumComputed)) return false;
      if (c.eat("null")) return true;
      op->flag = true;
      return c.uint(&op->n[0]);
    case 'e':
      return parse_expect(c, p, [&] { return parse_hashes(c, "{\"new_block_hashes\":", p, e); });
    default:
      return false;
  }
}

// Count i of allocate_slots: a non-negative integer or null (as if absent).
bool parse_count(Cursor& c, int i, Parsed* p, VllmOp* op) {
  if (!p->mark(kCounts << i)) return false;
  if (c.eat("null")) {
    p->null_new_tokens |= i == 0;  // num_new_tokens stays missing
    return true;
  }
  return c.uint(&op->n[i]);
}

// One "key":value of allocate_slots (after the comma).
bool parse_allocate_field(Cursor& c, Parsed* p, VllmExpectArena* ex, VllmOp* op, VllmExpect* e) {
  switch (c.next_char()) {
    case 'r':
      return parse_req(c, p);
    case 'n':
      if (c.eat("\"num_new_tokens\":")) return parse_count(c, 0, p, op);
      if (c.eat("\"num_lookahead_tokens\":")) return parse_count(c, 2, p, op);
      if (c.eat("\"num_new_computed_tokens\":")) return parse_count(c, 1, p, op);
      if (c.eat("\"num_external_computed_tokens\":")) return parse_count(c, 3, p, op);
      if (c.eat("\"num_encoder_tokens\":")) return parse_count(c, 4, p, op);
      if (!c.eat("\"new_computed_blocks\":") || !p->mark(kNewComputed)) return false;
      if (c.eat("null")) return true;
      if (c.eat("\"pending\"")) {
        op->new_computed_blocks = NewComputedBlocks::kPending;
        return true;
      }
      op->new_computed_blocks = NewComputedBlocks::kEmpty;
      return c.eat("\"empty\"");
    case 'd':
      if (!c.eat("\"delay_cache_blocks\":") || !p->mark(kDelay)) return false;
      if (c.eat("null") || c.eat("false")) return true;
      op->flag = true;
      return c.eat("true");
    case 'e':
      return parse_expect(c, p, [&] { return parse_new_block_ids(c, ex, e); });
    default:
      return false;
  }
}

// add_request's prompt_parts: [{"seq":name} | {"seq":name,"len":n} | {"tokens":[ints]}, ...].
// The sequence names are interned at commit (p->seqs).
bool parse_prompt_parts(Cursor& c, Parsed* p, VllmOpArena* arena, VllmOp* op) {
  if (!c.eat('[')) return false;
  op->parts.begin = static_cast<uint32_t>(arena->parts.size());
  if (!c.eat(']')) {
    do {
      PromptPart part;
      if (c.eat("{\"seq\":")) {
        std::string_view name;
        if (!c.string(&name) || p->num_seqs == kMaxSeqParts) return false;
        if (c.eat(",\"len\":") && !c.uint(&part.len)) return false;
        p->seqs[p->num_seqs++] = {static_cast<uint32_t>(arena->parts.size()), name};
      } else if (!c.eat("{\"tokens\":") || !parse_tokens(c, arena, &part.tokens)) {
        return false;
      }
      if (!c.eat('}')) return false;
      arena->parts.push_back(part);
    } while (c.eat(','));
    if (!c.eat(']')) return false;
  }
  op->parts.end = static_cast<uint32_t>(arena->parts.size());
  return true;
}

// One "key":value of add_request (after the comma). mm and null values: the DOM path.
bool parse_add_request_field(Cursor& c, Parsed* p, VllmOpArena* arena, VllmOp* op, VllmExpect* e) {
  switch (c.next_char()) {
    case 'r':
      return parse_req(c, p);
    case 'p':
      if (c.eat("\"prompt\":")) return p->mark(kTokens) && parse_tokens(c, arena, &op->tokens);
      return c.eat("\"prompt_parts\":") && p->mark(kParts) && parse_prompt_parts(c, p, arena, op);
    case 'm':
      return c.eat("\"max_tokens\":") && p->mark(kMaxTokens) && c.uint(&op->n[0]);
    case 's':
      return c.eat("\"skip_reading_prefix_cache\":") && p->mark(kSkip) && c.boolean(&op->flag);
    case 'c':
      return c.eat("\"cache_salt\":") && p->mark(kSalt) && c.string(&p->salt);
    case 'l':
      return c.eat("\"lora\":{\"name\":") && p->mark(kLora) && c.string(&p->lora_name) &&
             c.eat(",\"id\":") && c.uint(&p->lora_id) && c.eat('}');
    case 'e':
      return parse_expect(c, p, [&] { return parse_hashes(c, "{\"block_hashes\":", p, e); });
    default:
      return false;
  }
}

// One "key":value of the other accepted ops (after the comma).
bool parse_other_field(Cursor& c, VllmOpKind kind, Parsed* p, VllmExpectArena* ex, VllmOp* op,
                       VllmExpect* e) {
  using K = VllmOpKind;
  switch (c.next_char()) {
    case 'r':
      if (c.eat("\"req\":")) {  // only on the ops that take a request
        return (kind == K::kGetComputedBlocks || kind == K::kFree || kind == K::kSaveSeq ||
                kind == K::kSetComputed) &&
               p->mark(kReq) && c.string(&p->req);
      }
      if (kind != K::kFree || !c.eat("\"reason\":") || !p->mark(kReason)) return false;
      if (c.eat("\"finished\"")) return true;  // the default
      if (c.eat("\"aborted\"")) {
        op->reason = FreeReason::kAborted;
        return true;
      }
      op->reason = FreeReason::kPreempted;
      return c.eat("\"preempted\"");
    case 'n':
      return (kind == K::kSaveSeq || kind == K::kDropSeq) && parse_name(c, p);
    case 'v':
      return kind == K::kSetComputed && c.eat("\"value\":") && p->mark(kValue) && c.uint(&op->n[0]);
    case 'e':
      switch (kind) {
        case K::kGetComputedBlocks:
          return parse_expect(c, p, [&] { return parse_computed_blocks(c, ex, e); });
        case K::kFree:
          return parse_expect(c, p,
                              [&] { return parse_count_expect(c, "{\"num_free_blocks\":", e); });
        case K::kSaveSeq:
          return parse_expect(c, p, [&] { return parse_count_expect(c, "{\"len\":", e); });
        case K::kPrefixCacheStats:
          return parse_expect(c, p, [&] { return parse_stats(c, ex, e); });
        default:
          return false;
      }
    default:
      return false;
  }
}

// The op's kind from `"name"` at the cursor (consumed), when the fast path takes it. The first
// letter picks the one to three literals to try, so a hot line costs a few word compares.
bool fast_kind(Cursor& c, VllmOpKind* kind) {
  using K = VllmOpKind;
  auto is = [&](const auto& lit, K k) {
    if (!c.eat(lit)) return false;
    *kind = k;
    return true;
  };
  switch (c.next_char()) {
    case 'a':
      return is("\"allocate_slots\"", K::kAllocateSlots) ||
             is("\"append_tokens\"", K::kAppendTokens) || is("\"add_request\"", K::kAddRequest);
    case 'g':
      return is("\"get_computed_blocks\"", K::kGetComputedBlocks);
    case 'f':
      return is("\"free\"", K::kFree);
    case 's':
      return is("\"save_seq\"", K::kSaveSeq) || is("\"set_computed\"", K::kSetComputed);
    case 'n':
      return is("\"new_step\"", K::kNewStep);
    case 'p':
      return is("\"prefix_cache_stats\"", K::kPrefixCacheStats);
    case 'd':
      return is("\"drop_seq\"", K::kDropSeq);
    default:
      return false;
  }
}

// Whether the fields the DOM path requires are all there (and nothing it would read otherwise).
bool complete(VllmOpKind kind, const Parsed& p) {
  using K = VllmOpKind;
  switch (kind) {
    case K::kAllocateSlots:
      return p.has(kReq | kCounts) && !p.null_new_tokens;
    case K::kAppendTokens:
      return p.has(kReq | kTokens);
    case K::kAddRequest:  // exactly one of prompt and prompt_parts
      return p.has(kReq | kMaxTokens) && p.has(kTokens) != p.has(kParts);
    case K::kGetComputedBlocks:
    case K::kFree:
      return p.has(kReq);
    case K::kSaveSeq:
      return p.has(kReq | kName);
    case K::kDropSeq:
      return p.has(kName);
    case K::kSetComputed:
      return p.has(kReq | kValue);
    default:
      return kind == K::kNewStep || kind == K::kPrefixCacheStats;
  }
}

// Interns the line's names and stores its extras (nothing can fail any more).
void commit_names(const Parsed& p, VllmOpArena* arena, VllmOp* op) {
  if (p.seen & kReq) op->req = arena->intern_request(p.req);
  if (p.seen & kName) op->seq = arena->intern_seq(p.name);
  for (int i = 0; i < p.num_seqs; ++i) {
    arena->parts[p.seqs[i].part].seq = arena->intern_seq(p.seqs[i].name);
  }
  if (!(p.seen & (kSalt | kLora))) return;
  AddRequestExtras x;
  if (p.seen & kSalt) x.cache_salt = std::string(p.salt);
  if (p.seen & kLora) x.lora = model::vllm::LoRARequest{std::string(p.lora_name), p.lora_id};
  op->extras = static_cast<int32_t>(arena->extras.size());
  arena->extras.push_back(std::move(x));
}

}  // namespace

bool parse_hot_vllm_op(std::string_view line, uint64_t line_no, bool want_expect,
                       VllmOpArena* arena, VllmExpectArena* ex, VllmOp* op, VllmExpect* e) {
  Cursor c(line);
  VllmOpKind kind;
  if (!c.eat("{\"op\":") || !fast_kind(c, &kind)) return false;
  const size_t tokens_size = arena->tokens.size(), parts_size = arena->parts.size();
  const size_t groups_size = ex->groups.size(), ids_size = ex->ids.size();
  VllmOp o;
  o.kind = kind;
  o.line = line_no;
  VllmExpect x;
  Parsed p;
  bool ok = true;
  while (ok && c.eat(',')) {
    switch (kind) {
      case VllmOpKind::kAllocateSlots:
        ok = parse_allocate_field(c, &p, ex, &o, &x);
        break;
      case VllmOpKind::kAppendTokens:
        ok = parse_append_field(c, &p, arena, &o, &x);
        break;
      case VllmOpKind::kAddRequest:
        ok = parse_add_request_field(c, &p, arena, &o, &x);
        break;
      default:
        ok = parse_other_field(c, kind, &p, ex, &o, &x);
        break;
    }
  }
  ok = ok && c.eat('}') && c.at_end() && complete(kind, p);
  if (!ok) {
    arena->tokens.resize(tokens_size);
    arena->parts.resize(parts_size);
    ex->groups.resize(groups_size);
    ex->ids.resize(ids_size);
    return false;
  }
  commit_names(p, arena, &o);
  *op = o;
  *e = VllmExpect{};
  if (!want_expect || p.expect_begin == nullptr) {
    ex->groups.resize(groups_size);
    ex->ids.resize(ids_size);
    return true;
  }
  x.text.begin = static_cast<uint32_t>(ex->text.size());
  ex->text.append(p.expect_begin, p.expect_end);
  x.text.end = static_cast<uint32_t>(ex->text.size());
  if (p.hex_len > 0) {
    x.hex.begin = x.text.begin + static_cast<uint32_t>(p.hex_at);
    x.hex.end = x.hex.begin + static_cast<uint32_t>(p.hex_len);
  }
  *e = x;
  return true;
}

}  // namespace kvtwin::sim::golden
