// The DOM-free parser of hot vllm-kv-golden lines against the DOM path it stands in for: every
// line it accepts must give the op and expectation the DOM path gives, and every line it refuses
// must leave the arenas as they were (the DOM path then handles it).
#include "sim/golden/vllm_fast_parse.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <vector>

#include "sim/golden/json.h"
#include "sim/io/input_error.h"

namespace kvtwin::sim::golden {
namespace {

const std::string kFile = "t.jsonl";

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
std::string expect_json(const VllmExpect& e, const VllmExpectArena& ex) {
  JsonWriter w;
  switch (e.kind) {
    case VllmExpect::Kind::kNull:
      w.begin_object().key("new_block_ids").null().end_object();
      break;
    case VllmExpect::Kind::kGroups:
      w.begin_object().key("new_block_ids").begin_array();
      for (uint32_t g = e.groups.begin; g < e.groups.end; ++g) {
        w.begin_array();
        for (uint32_t i = ex.groups[g].begin; i < ex.groups[g].end; ++i) w.value(ex.ids[i]);
        w.end_array();
      }
      w.end_array().end_object();
      break;
    case VllmExpect::Kind::kHashes:
      w.begin_object().key("new_block_hashes").begin_object().key("n").value(e.n);
      if (e.hex.size() > 0)
        w.key("last").value(std::string_view(ex.text.data() + e.hex.begin, e.hex.size()));
      w.end_object().end_object();
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

// A hot op line, mostly in the recorder's form, with rare departures from it.
std::string gen_line() {
  const bool alloc = *rc::gen::arbitrary<bool>();
  const std::vector<std::string> ints = {"0",   "7",   "123456", "null",  "-1",
                                         "1.0", "1e2", "007",    "\"5\"", "99999999999999999999"};
  struct Field {
    std::string name;
    std::vector<std::string> values;
    size_t valid;
  };
  std::vector<Field> fields = {
      {"req", {"\"r1\"", "\"r2\"", "\"a b\"", "\"r\\u0031\"", "\"\xc3\xa9\"", "7"}, 3},
      {"expect",
       alloc
           ? std::vector<std::string>{R"({"new_block_ids":[[1,2],[]]})",
                                      R"({"new_block_ids":null})", R"({"new_block_ids":[]})",
                                      R"({"new_block_ids":[[0]]})", R"({"new_block_ids":[[1,-2]]})",
                                      R"({"new_block_ids":[[1]],"x":1})",
                                      R"({"new_block_ids":[[1.5]]})"}
           : std::vector<std::string>{R"({"new_block_hashes":{"n":0}})",
                                      R"({"new_block_hashes":{"n":1,"last":"ab12"}})",
                                      R"({"new_block_hashes":["ab"]})",
                                      R"({"new_block_hashes":{"n":1,"last":"a\"b"}})",
                                      R"({"new_block_hashes":{"last":"ab","n":1}})", "null"},
       alloc ? 4u : 2u},
      {"zzz", {"1"}, 1}};
  if (alloc) {
    fields.push_back({"num_new_tokens", ints, 4});
    for (const char* k : {"num_new_computed_tokens", "num_lookahead_tokens",
                          "num_external_computed_tokens", "num_encoder_tokens"})
      fields.push_back({k, ints, 4});
    fields.push_back({"delay_cache_blocks", {"true", "false", "null", "1"}, 3});
    fields.push_back({"new_computed_blocks", {"\"pending\"", "\"empty\"", "null", "\"x\""}, 3});
  } else {
    fields.push_back({"tokens", {"[]", "[1,2,3]", "[5,0,12]", "[1,-1]", "[1.0]", "[[1]]"}, 3});
    fields.push_back({"num_computed_tokens", ints, 4});
  }
  // req and the required count or tokens (field 3) nearly always; others at random.
  std::vector<size_t> picks = *rc::gen::container<std::vector<size_t>>(
      *rc::gen::inRange<size_t>(0, 6), rc::gen::inRange<size_t>(1, fields.size()));
  if (*rc::gen::weightedElement<bool>({{15, true}, {1, false}})) picks.push_back(0);
  if (*rc::gen::weightedElement<bool>({{15, true}, {1, false}})) picks.push_back(3);
  std::string line = alloc ? R"({"op":"allocate_slots")" : R"({"op":"append_tokens")";
  for (size_t k : picks) {
    if (fields[k].name == "zzz" && *rc::gen::weightedElement<bool>({{8, true}, {1, false}}))
      continue;  // unknown keys are rare
    line += *rc::gen::weightedElement<std::string>({{30, ","}, {1, ", "}});
    line += "\"" + fields[k].name + "\":" + pick(fields[k].values, fields[k].valid);
  }
  return line + *rc::gen::weightedElement<std::string>({{30, "}"}, {1, "} "}, {1, "}x"}});
}

RC_GTEST_PROP(VllmFastParse, AcceptsOnlyWhatTheDomPathParsesTheSameWay, ()) {
  const std::string line = gen_line();
  VllmOpArena fast_arena, dom_arena;
  VllmExpectArena ex;
  VllmOp op;
  VllmExpect expect;
  const bool accepted = parse_hot_vllm_op(line, 7, true, &fast_arena, &ex, &op, &expect);
  RC_CLASSIFY(accepted);
  if (!accepted) {
    RC_ASSERT(fast_arena.tokens.empty());
    RC_ASSERT(fast_arena.names->requests.size() == 0u);
    RC_ASSERT(ex.ids.empty() && ex.groups.empty() && ex.text.empty());
    return;
  }
  DomResult dom = dom_parse(line, &dom_arena);
  RC_ASSERT(dom.ok);
  RC_ASSERT(op.kind == dom.op.kind);
  RC_ASSERT(op.line == dom.op.line);
  RC_ASSERT(fast_arena.request_name(op.req) == dom_arena.request_name(dom.op.req));
  RC_ASSERT(op.flag == dom.op.flag);
  RC_ASSERT(op.new_computed_blocks == dom.op.new_computed_blocks);
  for (int i = 0; i < 5; ++i) RC_ASSERT(op.n[i] == dom.op.n[i]);
  RC_ASSERT(std::vector<int64_t>(fast_arena.tokens.begin() + op.tokens.begin,
                                 fast_arena.tokens.begin() + op.tokens.end) ==
            std::vector<int64_t>(dom_arena.tokens.begin() + dom.op.tokens.begin,
                                 dom_arena.tokens.begin() + dom.op.tokens.end));
  RC_ASSERT((expect.kind == VllmExpect::Kind::kAbsent) == !dom.expect.has_value());
  if (dom.expect) {
    RC_ASSERT(expect_json(expect, ex) == *dom.expect);
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
  ASSERT_TRUE(parse_hot_vllm_op(line, 3, true, &arena, &ex, &op, &e));
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

TEST(VllmFastParse, RefusesOtherOpsAndLeavesTheArenasAlone) {
  VllmOpArena arena;
  VllmExpectArena ex;
  VllmOp op;
  VllmExpect e;
  EXPECT_FALSE(parse_hot_vllm_op(R"({"op":"free","req":"a"})", 1, true, &arena, &ex, &op, &e));
  EXPECT_FALSE(parse_hot_vllm_op(R"({"op":"append_tokens","req":"a","tokens":[1,2],"i":0})", 1,
                                 true, &arena, &ex, &op, &e));
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

}  // namespace
}  // namespace kvtwin::sim::golden
