// The DOM-free parser of hot vllm-kv-golden lines against the DOM path it stands in for: every
// line it accepts must give the op and expectation the DOM path gives, and every line it refuses
// must leave the arenas as they were (the DOM path then handles it).
#include "sim/golden/vllm_fast_parse.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "sim/golden/json.h"
#include "sim/io/input_error.h"

namespace kvtwin::sim::golden {
namespace {

const std::string kFile = "t.jsonl";

// A line followed by the padding the fast parser may read (its digits are read by the word),
// filled with digits so that a read past the line would show.
class Padded {
 public:
  explicit Padded(const std::string& line)
      : buf_(line + std::string(kLinePadding, '7')), size_(line.size()) {}
  operator std::string_view() const { return {buf_.data(), size_}; }

 private:
  std::string buf_;
  size_t size_;
};

struct DomResult {
  bool ok = false;  // parse_vllm_op succeeded
  VllmOp op;
  std::optional<std::string> expect;  // minified
};

// The reference: simdjson DOM + parse_vllm_op, as OplogStream and the replayer do it.
DomResult dom_parse(const std::string& line, VllmOpArena* arena) {
  static simdjson::dom::parser parser;
  DomResult r;
  simdjson::dom::element root;
  simdjson::dom::object obj;
  if (parser.parse(line).get(root) != simdjson::SUCCESS ||
      root.get_object().get(obj) != simdjson::SUCCESS)
    return r;
  OpFields f(&kFile, 7, obj);
  try {
    parse_vllm_op(f, arena, &r.op);
  } catch (const InputError&) {
    return r;
  }
  r.ok = true;
  if (auto e = f.optional_element("expect")) r.expect = json_text(*e);
  return r;
}

// The expectation a fast parse produced, written back as JSON.
std::string expect_json(VllmOpKind kind, const VllmExpect& e, const VllmExpectArena& ex) {
  JsonWriter w;
  auto groups = [&] {
    w.begin_array();
    for (uint32_t g = e.groups.begin; g < e.groups.end; ++g) {
      w.begin_array();
      for (uint32_t i = ex.groups[g].begin; i < ex.groups[g].end; ++i) w.value(ex.ids[i]);
      w.end_array();
    }
    w.end_array();
  };
  switch (e.kind) {
    case VllmExpect::Kind::kNull:
      w.begin_object().key("new_block_ids").null().end_object();
      break;
    case VllmExpect::Kind::kGroups:
      w.begin_object().key("new_block_ids");
      groups();
      w.end_object();
      break;
    case VllmExpect::Kind::kComputedBlocks:
      w.begin_object().key("block_ids");
      groups();
      w.key("num_computed_tokens").value(e.n).end_object();
      break;
    case VllmExpect::Kind::kHashes:
      w.begin_object().key(kind == VllmOpKind::kAddRequest ? "block_hashes" : "new_block_hashes");
      w.begin_object().key("n").value(e.n);
      if (e.hex.size() > 0)
        w.key("last").value(std::string_view(ex.text.data() + e.hex.begin, e.hex.size()));
      w.end_object().end_object();
      break;
    case VllmExpect::Kind::kStats: {
      const int64_t* v = ex.ids.data() + e.counts.begin;
      w.begin_object().key("stats").begin_object().key("reset").value(e.n != 0);
      w.key("requests").value(v[0]).key("queries").value(v[1]).key("hits").value(v[2]);
      w.key("preempted_requests").value(v[3]).key("preempted_queries").value(v[4]);
      w.key("preempted_hits").value(v[5]).end_object().end_object();
      break;
    }
    case VllmExpect::Kind::kCount:
      w.begin_object().key(kind == VllmOpKind::kSaveSeq ? "len" : "num_free_blocks");
      w.value(e.n).end_object();
      break;
    default:
      return "?";
  }
  return w.str();
}

// A value: mostly one of the first `valid` (which the fast path accepts), sometimes any.
std::string pick(const std::vector<std::string>& values, size_t valid) {
  bool any = *rc::gen::weightedElement<bool>({{1, true}, {12, false}});
  return values[*rc::gen::inRange<size_t>(0, any ? values.size() : valid)];
}

struct Field {
  std::string name;
  std::vector<std::string> values;
  size_t valid;
  bool required = false;  // nearly always present
};

const std::vector<std::string> kInts = {"0",
                                        "7",
                                        "123456",
                                        "null",
                                        "-1",
                                        "1.0",
                                        "1e2",
                                        "007",
                                        "\"5\"",
                                        "1234567",
                                        "12345678",
                                        "99999999",
                                        "1234567890123456789",
                                        "123456789012345678",
                                        "99999999999999999999"};
// Numbers of 1 to 18 digits (the word-at-a-time reader stops at 7).
const std::vector<std::string> kTokenLists = {
    "[]",
    "[1,2,3]",
    "[5,0,12,1234567,12345678,123456789012345678,9999999,10000000]",
    "[1,-1]",
    "[1.0]",
    "[[1]]",
    "[1,2",
    "[1,]",
    "[01]",
    "[1234567890123456789]"};
const Field kReq = {
    "req", {"\"r1\"", "\"r2\"", "\"a b\"", "\"r\\u0031\"", "\"\xc3\xa9\"", "7"}, 3, true};

// The fields of one op kind, in the recorder's vocabulary with some departures from it.
std::vector<Field> fields_of(const std::string& op) {
  if (op == "allocate_slots") {
    std::vector<Field> f = {
        kReq,
        {"expect",
         {R"({"new_block_ids":[[1,2],[]]})", R"({"new_block_ids":null})", R"({"new_block_ids":[]})",
          R"({"new_block_ids":[[0]]})", R"({"new_block_ids":[[1,-2]]})",
          R"({"new_block_ids":[[1]],"x":1})", R"({"new_block_ids":[[1.5]]})"},
         4},
        {"num_new_tokens", kInts, 4, true}};
    for (const char* k : {"num_new_computed_tokens", "num_lookahead_tokens",
                          "num_external_computed_tokens", "num_encoder_tokens"})
      f.push_back({k, kInts, 4});
    f.push_back({"delay_cache_blocks", {"true", "false", "null", "1"}, 3});
    f.push_back({"new_computed_blocks", {"\"pending\"", "\"empty\"", "null", "\"x\""}, 3});
    return f;
  }
  if (op == "append_tokens")
    return {kReq,
            {"expect",
             {R"({"new_block_hashes":{"n":0}})", R"({"new_block_hashes":{"n":1,"last":"ab12"}})",
              R"({"new_block_hashes":["ab"]})", R"({"new_block_hashes":{"n":1,"last":"a\"b"}})",
              R"({"new_block_hashes":{"last":"ab","n":1}})", "null"},
             2},
            {"tokens", kTokenLists, 3, true},
            {"num_computed_tokens", kInts, 4}};
  if (op == "add_request")
    return {kReq,
            {"expect",
             {R"({"block_hashes":{"n":0}})", R"({"block_hashes":{"n":2,"last":"ab"}})",
              R"({"block_hashes":["ab"]})", R"({"new_block_hashes":{"n":0}})", "null"},
             2},
            {"prompt_parts",
             {R"([{"seq":"s1"}])", R"([{"seq":"s1"},{"tokens":[4,5]}])",
              R"([{"seq":"s2","len":16},{"seq":"s1"},{"seq":"s2"}])", "[]",
              R"([{"seq":"s1","len":-1}])", R"([{"tokens":[1],"seq":"s1"}])", R"([{"seq":7}])",
              R"([{"len":3}])", R"([{"seq":"s1","len":null}])", R"([{"tokens":[1,2})", "null"},
             4,
             true},
            {"max_tokens", kInts, 3, true},
            {"prompt", kTokenLists, 3},
            {"skip_reading_prefix_cache", {"true", "false", "null", "1"}, 2},
            {"cache_salt", {"\"salt-1\"", "\"s\\\"x\"", "null", "3"}, 1},
            {"lora",
             {R"({"name":"a1","id":2})", R"({"id":2,"name":"a1"})", R"({"name":"a1","id":-2})",
              "null", R"({"name":"a1"})"},
             1},
            {"mm", {R"([{"identifier":"x","offset":0,"length":4}])"}, 1}};
  if (op == "get_computed_blocks")
    return {kReq,
            {"expect",
             {R"({"block_ids":[[1,2]],"num_computed_tokens":32})",
              R"({"block_ids":[[]],"num_computed_tokens":0})",
              R"({"block_ids":[],"num_computed_tokens":0})",
              R"({"num_computed_tokens":0,"block_ids":[[1]]})", R"({"block_ids":[[1]]})",
              R"({"block_ids":[[1]],"num_computed_tokens":-1})",
              R"({"block_ids":[[1],"num_computed_tokens":1})"},
             3}};
  if (op == "free")
    return {
        kReq,
        {"reason", {"\"finished\"", "\"aborted\"", "\"preempted\"", "\"other\"", "null", "1"}, 3},
        {"expect",
         {R"({"num_free_blocks":7})", R"({"num_free_blocks":-1})", R"({"num_free_blocks":1,"x":2})",
          R"({"len":3})"},
         1}};
  if (op == "save_seq")
    return {kReq,
            {"name", {"\"s1\"", "\"conv2\"", "3"}, 2, true},
            {"expect", {R"({"len":1036})", R"({"len":"x"})", R"({"num_free_blocks":1})"}, 1}};
  if (op == "drop_seq")
    return {{"name", {"\"s1\"", "\"conv2\"", "3"}, 2, true}, {"req", {"\"r1\""}, 1}};
  if (op == "set_computed") return {kReq, {"value", kInts, 3, true}};
  if (op == "new_step") return {{"req", {"\"r1\""}, 1}, {"expect", {"{}"}, 1}};
  if (op == "prefix_cache_stats")
    return {
        {"expect",
         {R"({"stats":{"reset":false,"requests":5,"queries":9342,"hits":0,)"
          R"("preempted_requests":0,"preempted_queries":0,"preempted_hits":0}})",
          R"({"stats":{"reset":true,"requests":0,"queries":0,"hits":12345678,)"
          R"("preempted_requests":1,"preempted_queries":2,"preempted_hits":3}})",
          R"({"stats":null})", R"({"stats":{"reset":false,"requests":5,"queries":9342,"hits":0}})",
          R"({"stats":{"requests":5,"reset":false,"queries":9342,"hits":0,)"
          R"("preempted_requests":0,"preempted_queries":0,"preempted_hits":0}})",
          R"({"stats":{"reset":false,"requests":-5,"queries":9342,"hits":0,)"
          R"("preempted_requests":0,"preempted_queries":0,"preempted_hits":0}})"},
         2,
         true},
        {"req", {"\"r1\""}, 1}};
  return {};  // def_seq, usage, ...: never fast
}

// An op line, mostly in the recorder's form, with rare departures from it.
std::string gen_line() {
  const std::string op = *rc::gen::weightedElement<std::string>({{6, "allocate_slots"},
                                                                 {6, "append_tokens"},
                                                                 {4, "add_request"},
                                                                 {3, "get_computed_blocks"},
                                                                 {3, "free"},
                                                                 {2, "save_seq"},
                                                                 {1, "drop_seq"},
                                                                 {1, "set_computed"},
                                                                 {1, "new_step"},
                                                                 {1, "prefix_cache_stats"},
                                                                 {1, "def_seq"}});
  std::vector<Field> fields = fields_of(op);
  fields.push_back({"zzz", {"1"}, 1});
  // Required fields nearly always, others at random (repeats included).
  std::vector<size_t> picks;
  if (fields.size() > 1)
    picks = *rc::gen::container<std::vector<size_t>>(
        *rc::gen::inRange<size_t>(0, 6), rc::gen::inRange<size_t>(0, fields.size() - 1));
  for (size_t k = 0; k < fields.size(); ++k)
    if (fields[k].required && *rc::gen::weightedElement<bool>({{15, true}, {1, false}}))
      picks.push_back(k);
  if (*rc::gen::weightedElement<bool>({{1, true}, {8, false}})) picks.push_back(fields.size() - 1);
  std::string line = R"({"op":")" + op + "\"";
  for (size_t k : picks) {
    line += *rc::gen::weightedElement<std::string>({{30, ","}, {1, ", "}});
    line += "\"" + fields[k].name + "\":" + pick(fields[k].values, fields[k].valid);
  }
  return line + *rc::gen::weightedElement<std::string>({{30, "}"}, {1, "} "}, {1, "}x"}});
}

std::vector<int64_t> tokens_of(const VllmOpArena& arena, IndexRange r) {
  return {arena.tokens.begin() + r.begin, arena.tokens.begin() + r.end};
}

RC_GTEST_PROP(VllmFastParse, AcceptsOnlyWhatTheDomPathParsesTheSameWay, ()) {
  const std::string line = gen_line();
  VllmOpArena fast_arena, dom_arena;
  VllmExpectArena ex;
  VllmOp op;
  VllmExpect expect;
  const bool accepted = parse_hot_vllm_op(Padded(line), 7, true, &fast_arena, &ex, &op, &expect);
  RC_TAG(accepted ? std::string(vllm_op_name(op.kind)) : std::string("refused"));
  if (!accepted) {
    RC_ASSERT(fast_arena.tokens.empty() && fast_arena.parts.empty() && fast_arena.extras.empty());
    RC_ASSERT(fast_arena.names->requests.size() == 0u);
    RC_ASSERT(fast_arena.names->seqs.size() == 0u);
    RC_ASSERT(ex.ids.empty() && ex.groups.empty() && ex.text.empty());
    return;
  }
  DomResult dom = dom_parse(line, &dom_arena);
  RC_ASSERT(dom.ok);
  RC_ASSERT(op.kind == dom.op.kind);
  RC_ASSERT(op.line == dom.op.line);
  RC_ASSERT((op.req < 0) == (dom.op.req < 0));
  if (op.req >= 0) RC_ASSERT(fast_arena.request_name(op.req) == dom_arena.request_name(dom.op.req));
  RC_ASSERT((op.seq < 0) == (dom.op.seq < 0));
  if (op.seq >= 0) RC_ASSERT(fast_arena.seq_name(op.seq) == dom_arena.seq_name(dom.op.seq));
  RC_ASSERT(fast_arena.names->requests.size() == dom_arena.names->requests.size());
  RC_ASSERT(fast_arena.names->seqs.size() == dom_arena.names->seqs.size());
  for (size_t i = 0; i < dom_arena.names->seqs.size(); ++i)
    RC_ASSERT(fast_arena.seq_name(static_cast<int32_t>(i)) ==
              dom_arena.seq_name(static_cast<int32_t>(i)));
  RC_ASSERT(op.flag == dom.op.flag);
  RC_ASSERT(op.reason == dom.op.reason);
  RC_ASSERT(op.new_computed_blocks == dom.op.new_computed_blocks);
  for (int i = 0; i < 5; ++i) RC_ASSERT(op.n[i] == dom.op.n[i]);
  RC_ASSERT(tokens_of(fast_arena, op.tokens) == tokens_of(dom_arena, dom.op.tokens));
  RC_ASSERT(op.parts.size() == dom.op.parts.size());
  for (uint32_t i = 0; i < op.parts.size(); ++i) {
    const PromptPart& a = fast_arena.parts[op.parts.begin + i];
    const PromptPart& b = dom_arena.parts[dom.op.parts.begin + i];
    RC_ASSERT(a.seq == b.seq);
    RC_ASSERT(a.len == b.len);
    RC_ASSERT(tokens_of(fast_arena, a.tokens) == tokens_of(dom_arena, b.tokens));
  }
  RC_ASSERT((op.extras < 0) == (dom.op.extras < 0));
  if (op.extras >= 0) {
    const AddRequestExtras& a = fast_arena.extras[static_cast<size_t>(op.extras)];
    const AddRequestExtras& b = dom_arena.extras[static_cast<size_t>(dom.op.extras)];
    RC_ASSERT(a.cache_salt == b.cache_salt);
    RC_ASSERT(a.lora.has_value() == b.lora.has_value());
    if (a.lora)
      RC_ASSERT(a.lora->lora_name == b.lora->lora_name &&
                a.lora->lora_int_id == b.lora->lora_int_id);
    RC_ASSERT(a.mm.empty() && b.mm.empty());
  }
  RC_ASSERT((expect.kind == VllmExpect::Kind::kAbsent) == !dom.expect.has_value());
  if (dom.expect) {
    RC_ASSERT(expect_json(op.kind, expect, ex) == *dom.expect);
    std::string text(ex.text.data() + expect.text.begin, expect.text.size());
    RC_ASSERT(text == *dom.expect);  // the compact recorder form is already minified
  }
}

TEST(VllmFastParse, ParsesADecodeLine) {
  VllmOpArena arena;
  VllmExpectArena ex;
  VllmOp op;
  VllmExpect e;
  std::string line =
      R"({"op":"append_tokens","req":"r21","num_computed_tokens":1403,"tokens":[13797],)"
      R"("expect":{"new_block_hashes":{"n":1,"last":"8edf"}}})";
  ASSERT_TRUE(parse_hot_vllm_op(Padded(line), 3, true, &arena, &ex, &op, &e));
  EXPECT_EQ(op.kind, VllmOpKind::kAppendTokens);
  EXPECT_EQ(arena.request_name(op.req), "r21");
  EXPECT_TRUE(op.flag);
  EXPECT_EQ(op.n[0], 1403);
  ASSERT_EQ(op.tokens.size(), 1u);
  EXPECT_EQ(arena.tokens[op.tokens.begin], 13797);
  EXPECT_EQ(e.kind, VllmExpect::Kind::kHashes);
  EXPECT_EQ(e.n, 1);
  EXPECT_EQ(std::string_view(ex.text.data() + e.hex.begin, e.hex.size()), "8edf");
}

// Numbers are read a word at a time up to 7 digits and digit by digit beyond: every length up
// to 18 digits reads back its value, and 19 digits or a leading zero go to the DOM path.
TEST(VllmFastParse, ReadsNumbersOfEveryLengthUpTo18Digits) {
  std::string digits;
  for (int n = 1; n <= 19; ++n) {
    digits += static_cast<char>('0' + (n * 7 + 3) % 10);
    if (digits[0] == '0') digits[0] = '9';
    for (const std::string& number : {digits, std::string(static_cast<size_t>(n), '9')}) {
      VllmOpArena arena;
      VllmExpectArena ex;
      VllmOp op;
      VllmExpect e;
      std::string line = R"({"op":"set_computed","req":"a","value":)" + number + "}";
      bool ok = parse_hot_vllm_op(Padded(line), 1, true, &arena, &ex, &op, &e);
      EXPECT_EQ(ok, n <= 18) << number;
      if (ok) {
        EXPECT_EQ(op.n[0], std::stoll(number)) << number;
      }
      std::string zero = R"({"op":"set_computed","req":"a","value":0)" + number + "}";
      EXPECT_FALSE(parse_hot_vllm_op(Padded(zero), 1, true, &arena, &ex, &op, &e)) << zero;
    }
  }
}

TEST(VllmFastParse, RefusesOtherOpsAndLeavesTheArenasAlone) {
  VllmOpArena arena;
  VllmExpectArena ex;
  VllmOp op;
  VllmExpect e;
  EXPECT_FALSE(parse_hot_vllm_op(Padded(R"({"op":"def_seq","name":"a","tokens":[1]})"), 1, true,
                                 &arena, &ex, &op, &e));
  EXPECT_FALSE(parse_hot_vllm_op(Padded(R"({"op":"append_tokens","req":"a","tokens":[1,2],"i":0})"),
                                 1, true, &arena, &ex, &op, &e));
  EXPECT_TRUE(arena.tokens.empty());
  EXPECT_EQ(arena.names->requests.size(), 0u);
}

// Names stay readable at their index while more are added (another thread reads them).
TEST(NameIndex, InternsInFirstSeenOrderAndKeepsNamesInPlace) {
  NameIndex index;
  std::vector<const std::string*> where;
  for (int i = 0; i < 20000; ++i) {
    ASSERT_EQ(index.intern("r" + std::to_string(i)), i);
    where.push_back(&index.name(i));
  }
  for (int i = 0; i < 20000; ++i) {
    EXPECT_EQ(index.intern("r" + std::to_string(i)), i);
    EXPECT_EQ(&index.name(i), where[static_cast<size_t>(i)]);
    EXPECT_EQ(index.name(i), "r" + std::to_string(i));
  }
  EXPECT_EQ(index.size(), 20000u);
}

// Against a map: names of every length (long ones sharing their first 16 bytes, NULs, empty)
// get first-seen indices, and each index reads back its name.
RC_GTEST_PROP(NameIndex, InternsLikeAMapFromNameToFirstSeenIndex, ()) {
  const auto gen_name = rc::gen::oneOf(
      rc::gen::container<std::string>(rc::gen::elementOf(std::string("ab\0r1"))),
      rc::gen::map(rc::gen::inRange(0, 40),
                   [](int i) { return "request-prefix-16" + std::to_string(i); }),
      rc::gen::map(rc::gen::inRange(0, 300), [](int i) { return "r" + std::to_string(i); }));
  const auto names = *rc::gen::container<std::vector<std::string>>(gen_name);
  NameIndex index;
  std::map<std::string, int32_t> reference;
  for (const std::string& n : names) {
    auto [it, added] = reference.emplace(n, static_cast<int32_t>(reference.size()));
    RC_ASSERT(index.intern(n) == it->second);
    RC_ASSERT(index.size() == reference.size());
  }
  for (const auto& [n, i] : reference) RC_ASSERT(index.name(i) == n);
}

}  // namespace
}  // namespace kvtwin::sim::golden
