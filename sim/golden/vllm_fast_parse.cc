#include "sim/golden/vllm_fast_parse.h"

#include <cstring>

namespace kvtwin::sim::golden {
namespace {

// A cursor over one line; every method returns false on anything outside the accepted subset.
class Cursor {
 public:
  explicit Cursor(std::string_view s) : p_(s.data()), end_(s.data() + s.size()) {}

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
    if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, lit, n) != 0) return false;
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
  // one of , ] } (so "1.5", "1e3" and "-1" are refused).
  bool uint(int64_t* out) {
    const char* b = p_;
    int64_t v = 0;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') v = v * 10 + (*p_++ - '0');
    size_t n = static_cast<size_t>(p_ - b);
    if (n == 0 || n > 18 || (n > 1 && *b == '0')) return false;
    if (p_ == end_ || (*p_ != ',' && *p_ != ']' && *p_ != '}')) return false;
    *out = v;
    return true;
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

// {"new_block_ids":null} or {"new_block_ids":[[ids],...]}.
bool parse_groups_expect(Cursor& c, VllmExpectArena* ex, VllmExpect* e) {
  if (!c.eat("{\"new_block_ids\":")) return false;
  if (c.eat("null")) {
    e->kind = VllmExpect::Kind::kNull;
    return c.eat('}');
  }
  if (!c.eat('[')) return false;
  e->kind = VllmExpect::Kind::kGroups;
  e->groups.begin = static_cast<uint32_t>(ex->groups.size());
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
  e->groups.end = static_cast<uint32_t>(ex->groups.size());
  return c.eat('}');
}

// {"new_block_hashes":{"n":n}} or {"new_block_hashes":{"n":n,"last":"hex"}}; *hex_at is the
// offset of the hex string from the expect's first byte.
bool parse_hashes_expect(Cursor& c, const char* start, VllmExpect* e, size_t* hex_at,
                         size_t* hex_len) {
  if (!c.eat("{\"new_block_hashes\":{\"n\":")) return false;
  if (!c.uint(&e->n)) return false;
  e->kind = VllmExpect::Kind::kHashes;
  *hex_len = 0;
  if (c.eat(",\"last\":")) {
    std::string_view hex;
    if (!c.string(&hex)) return false;
    *hex_at = static_cast<size_t>(hex.data() - start);
    *hex_len = hex.size();
  }
  return c.eat("}}");
}

enum Key : uint32_t {
  kReq = 1,
  kTokens = 2,
  kNumComputed = 4,
  kExpect = 8,
  kDelay = 16,
  kNewComputed = 32,
  kCounts = 64,  // << i: allocate_slots' five counts
};

// Per-line state, committed to the arenas only when the whole line was understood.
struct Parsed {
  std::string_view req;
  const char* expect_begin = nullptr;
  const char* expect_end = nullptr;
  size_t hex_at = 0, hex_len = 0;
  bool null_new_tokens = false;
  uint32_t seen = 0;

  bool mark(uint32_t bit) {  // false for a repeated key: the DOM path decides
    if (seen & bit) return false;
    seen |= bit;
    return true;
  }
};

// One "key":value of append_tokens (after the comma).
bool parse_append_field(Cursor& c, Parsed* p, VllmOpArena* arena, VllmExpectArena* ex, VllmOp* op,
                        VllmExpect* e) {
  switch (c.next_char()) {
    case 'r':
      return c.eat("\"req\":") && p->mark(kReq) && c.string(&p->req);
    case 't':
      if (!c.eat("\"tokens\":") || !p->mark(kTokens)) return false;
      op->tokens.begin = static_cast<uint32_t>(arena->tokens.size());
      if (!c.uint_array(&arena->tokens)) return false;
      op->tokens.end = static_cast<uint32_t>(arena->tokens.size());
      return true;
    case 'n':
      if (!c.eat("\"num_computed_tokens\":") || !p->mark(kNumComputed)) return false;
      if (c.eat("null")) return true;
      op->flag = true;
      return c.uint(&op->n[0]);
    case 'e': {
      if (!c.eat("\"expect\":") || !p->mark(kExpect)) return false;
      p->expect_begin = c.pos();
      bool ok = parse_hashes_expect(c, p->expect_begin, e, &p->hex_at, &p->hex_len);
      p->expect_end = c.pos();
      return ok;
    }
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
      return c.eat("\"req\":") && p->mark(kReq) && c.string(&p->req);
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
    case 'e': {
      if (!c.eat("\"expect\":") || !p->mark(kExpect)) return false;
      p->expect_begin = c.pos();
      bool ok = parse_groups_expect(c, ex, e);
      p->expect_end = c.pos();
      return ok;
    }
    default:
      return false;
  }
}

}  // namespace

bool parse_hot_vllm_op(std::string_view line, uint64_t line_no, bool want_expect,
                       VllmOpArena* arena, VllmExpectArena* ex, VllmOp* op, VllmExpect* e) {
  Cursor c(line);
  bool alloc;
  if (c.eat("{\"op\":\"allocate_slots\"")) {
    alloc = true;
  } else if (c.eat("{\"op\":\"append_tokens\"")) {
    alloc = false;
  } else {
    return false;
  }
  const size_t tokens_size = arena->tokens.size();
  const size_t groups_size = ex->groups.size(), ids_size = ex->ids.size();
  VllmOp o;
  o.kind = alloc ? VllmOpKind::kAllocateSlots : VllmOpKind::kAppendTokens;
  o.line = line_no;
  VllmExpect x;
  Parsed p;
  bool ok = true;
  while (ok && c.eat(',')) {
    ok = alloc ? parse_allocate_field(c, &p, ex, &o, &x)
               : parse_append_field(c, &p, arena, ex, &o, &x);
  }
  const uint32_t seen = p.seen;
  ok = ok && c.eat('}') && c.at_end() && (seen & kReq) &&
       (alloc ? (seen & kCounts) != 0 && !p.null_new_tokens : (seen & kTokens) != 0);
  if (!ok) {
    arena->tokens.resize(tokens_size);
    ex->groups.resize(groups_size);
    ex->ids.resize(ids_size);
    return false;
  }
  o.req = arena->intern_request(p.req);
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
