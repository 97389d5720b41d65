// The vllm-kv-golden replayer through the kvtwin binary: the verdict line of a mismatch, and
// one-line input errors (exit 2, file and line named, no crash) for each kind of bad input.
// The public suites themselves are replayed by the ctest test vllm_golden_public.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#define OPENSSL_API_COMPAT 10101
#include <openssl/sha.h>

#include "model/vllm/block_hash.h"
#include "sim/golden/vllm_golden.h"
#include "tests/support/command.h"
#include "tests/support/gzip.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::golden {
namespace {

const char* kHeader =
    R"({"type":"header","format":"vllm-kv-golden","format_version":1,"case":"tiny",)"
    R"("expect_level":"full","op_index_field":true,"unknown_header_field":{"x":1},)"
    R"("config":{"num_gpu_blocks":6,"max_model_len":64,"hash_block_size":4,)"
    R"("enable_caching":true,"compute_block_hashes":true,"hash_fn":"sha256_cbor",)"
    R"("python_hash_seed":"0","use_eagle":false,"log_stats":true,"enable_kv_cache_events":false,)"
    R"("kv_events_use_int_block_hashes":false,"dcp_world_size":1,"pcp_world_size":1,)"
    R"("kv_cache_groups":[{"spec":"full","block_size":4,"layer_names":["l0"],)"
    R"("num_kv_heads":1,"head_size":8,"dtype":"bfloat16"}]},)"
    R"("derived":{"coordinator":"UnitaryKVCacheCoordinator","managers":["FullAttentionManager"],)"
    R"("none_hash":"4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e",)"
    R"("null_block_id":0}})";

// Ops of a valid tiny case (i is filled in).
std::vector<std::string> valid_ops() {
  return {
      // sha256 of cbor (NONE_HASH, (1, 2, 3, 4), None), computed independently with hashlib.
      R"("op":"add_request","req":"a","prompt":[1,2,3,4,5,6],"max_tokens":4,"new_field":true,)"
      R"("expect":{"block_hashes":["c9d58ba695280d69b243e1e0df813136ca9196b286fb1a021e0b2e028ef071cb"]})",
      R"("op":"get_computed_blocks","req":"a","expect":{"block_ids":[[]],"num_computed_tokens":0})",
      R"("op":"allocate_slots","req":"a","num_new_tokens":6,"new_computed_blocks":"pending","expect":{"new_block_ids":[[1,2]]})",
      R"("op":"free_queue","expect":{"free_block_ids":[3,4,5]})",
      R"("op":"free","req":"a","reason":"finished","expect":{"num_free_blocks":5})",
      R"("op":"usage","expect":{"usage":0.0,"num_free_blocks":5})",
  };
}

std::string sha256_hex(const std::string& s) {
  uint8_t d[32];
  SHA256(reinterpret_cast<const uint8_t*>(s.data()), s.size(), d);
  return model::vllm::to_hex({d, 32});
}

// Header + ops (with "i") + a correct footer.
std::string make_log(const std::vector<std::string>& ops) {
  std::string body = std::string(kHeader) + "\n";
  for (size_t i = 0; i < ops.size(); ++i)
    body += "{\"i\":" + std::to_string(i) + "," + ops[i] + "}\n";
  return body + "{\"type\":\"footer\",\"num_ops\":" + std::to_string(ops.size()) +
         ",\"sha256_of_preceding_lines\":\"" + sha256_hex(body) + "\"}\n";
}

// The same without "i" (op_index_field false): the hot ops take the DOM-free parser.
std::string make_log_without_index(const std::vector<std::string>& ops) {
  std::string header = kHeader;
  header.replace(header.find("\"op_index_field\":true"), 21, "\"op_index_field\":false");
  std::string body = header + "\n";
  for (const std::string& op : ops) body += "{" + op + "}\n";
  return body + "{\"type\":\"footer\",\"num_ops\":" + std::to_string(ops.size()) +
         ",\"sha256_of_preceding_lines\":\"" + sha256_hex(body) + "\"}\n";
}

std::string write(const std::string& name, const std::string& content) {
  std::string path = testing::scratch_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

struct KvtwinRun {
  int exit_code;
  std::string output;
};

KvtwinRun run_kvtwin(const std::string& path) {
  std::string cmd = std::string(KVTWIN_BINARY_DIR) + "/kvtwin golden -q '" + path + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  KvtwinRun r{-1, ""};
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) r.output.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// The single ERROR line of a run (the summary line follows it).
std::string error_line(const KvtwinRun& r) {
  size_t at = r.output.find("ERROR ");
  if (at == std::string::npos) return "";
  return r.output.substr(at, r.output.find('\n', at) - at);
}

TEST(VllmGolden, AValidLogWithUnknownFieldsPasses) {
  KvtwinRun r = run_kvtwin(write("ok.jsonl", make_log(valid_ops())));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 passed, 0 failed"), std::string::npos) << r.output;
}

TEST(VllmGolden, GzipLogsAreReadToo) {
  KvtwinRun r =
      run_kvtwin(write("ok.jsonl.gz", kvtwin::testing::gzip_bytes(make_log(valid_ops()))));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(VllmGolden, AMismatchNamesTheOpTheFieldAndBothValues) {
  auto ops = valid_ops();
  ops[2] =
      R"("op":"allocate_slots","req":"a","num_new_tokens":6,"new_computed_blocks":"pending","expect":{"new_block_ids":[[1,3]]})";
  KvtwinRun r = run_kvtwin(write("bad.jsonl", make_log(ops)));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAIL tiny"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("op 2 allocate_slots: $.new_block_ids[0][1]: expected 3, got 2"),
            std::string::npos)
      << r.output;
}

TEST(VllmGolden, HotOpsWithoutIndexPassThroughTheFastParser) {
  auto ops = valid_ops();
  ops.insert(ops.begin() + 3,
             R"("op":"append_tokens","req":"a","num_computed_tokens":6,"tokens":[7],)"
             R"("expect":{"new_block_hashes":[]})");
  KvtwinRun r =
      run_kvtwin(write("fast.jsonl.gz", kvtwin::testing::gzip_bytes(make_log_without_index(ops))));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 passed, 0 failed"), std::string::npos) << r.output;
}

TEST(VllmGolden, AMismatchOnTheFastParserPathNamesTheFieldAndBothValues) {
  auto ops = valid_ops();
  ops[2] =
      R"("op":"allocate_slots","req":"a","num_new_tokens":6,"expect":{"new_block_ids":[[1,3]]})";
  KvtwinRun r = run_kvtwin(write("fastbad.jsonl", make_log_without_index(ops)));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("op 2 allocate_slots: $.new_block_ids[0][1]: expected 3, got 2"),
            std::string::npos)
      << r.output;
}

// add_request with compact hashes, get_computed_blocks and free take the DOM-free path too.
std::vector<std::string> compact_ops() {
  auto ops = valid_ops();
  ops[0] = R"("op":"add_request","req":"a","prompt":[1,2,3,4,5,6],"max_tokens":4,)"
           R"("expect":{"block_hashes":{"n":1,"last":)"
           R"("c9d58ba695280d69b243e1e0df813136ca9196b286fb1a021e0b2e028ef071cb"}})";
  ops[3] = R"("op":"prefix_cache_stats","expect":{"stats":{"reset":false,"requests":1,)"
           R"("queries":6,"hits":0,"preempted_requests":0,"preempted_queries":0,)"
           R"("preempted_hits":0}})";
  return ops;
}

TEST(VllmGolden, CompactOpsWithoutIndexPassThroughTheFastParser) {
  KvtwinRun r = run_kvtwin(write("fastmore.jsonl", make_log_without_index(compact_ops())));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 passed, 0 failed"), std::string::npos) << r.output;
}

TEST(VllmGolden, MismatchesOfTheNewFastKindsNameTheFieldAndBothValues) {
  for (const auto& [at, op, expected] : std::vector<std::tuple<size_t, std::string, std::string>>{
           {0,
            R"("op":"add_request","req":"a","prompt":[1,2,3,4,5,6],"max_tokens":4,)"
            R"("expect":{"block_hashes":{"n":1,"last":"00"}})",
            "op 0 add_request: $.block_hashes: expected {\"n\":1,\"last\":\"00\"}, got [\"c9d5"},
           {0,
            R"("op":"add_request","req":"a","prompt":[1,2,3,4,5,6],"max_tokens":4,)"
            R"("expect":{"block_hashes":{"n":0}})",
            "op 0 add_request: $.block_hashes: expected {\"n\":0}, got [\"c9d5"},
           {1,
            R"("op":"get_computed_blocks","req":"a","expect":{"block_ids":[[]],)"
            R"("num_computed_tokens":4})",
            "op 1 get_computed_blocks: $.num_computed_tokens: expected 4, got 0"},
           {1,
            R"("op":"get_computed_blocks","req":"a","expect":{"block_ids":[[3]],)"
            R"("num_computed_tokens":0})",
            "op 1 get_computed_blocks: $.block_ids[0][0]: expected 3, got (absent"},
           {4, R"("op":"free","req":"a","reason":"finished","expect":{"num_free_blocks":4})",
            "op 4 free: $.num_free_blocks: expected 4, got 5"},
           {3,
            R"("op":"prefix_cache_stats","expect":{"stats":{"reset":false,"requests":1,)"
            R"("queries":9,"hits":0,"preempted_requests":0,"preempted_queries":0,)"
            R"("preempted_hits":0}})",
            "op 3 prefix_cache_stats: $.stats.queries: expected 9, got 6"}}) {
    auto ops = compact_ops();
    ops[at] = op;
    KvtwinRun r = run_kvtwin(write("fastmorebad.jsonl", make_log_without_index(ops)));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << r.output;
  }
}

TEST(VllmGolden, ACompactHashMismatchIsReportedWithItsPath) {
  auto ops = valid_ops();
  ops.insert(ops.begin() + 3,
             R"("op":"append_tokens","req":"a","num_computed_tokens":6,"tokens":[7,8],)"
             R"("expect":{"new_block_hashes":{"n":0}})");
  KvtwinRun r = run_kvtwin(write("fasthash.jsonl", make_log_without_index(ops)));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("op 3 append_tokens: $.new_block_hashes"), std::string::npos) << r.output;
}

// The parser runs ahead of execution, yet a mismatch before a malformed line is what is reported.
TEST(VllmGolden, AMismatchBeforeABadLineIsReportedFirst) {
  auto ops = valid_ops();
  ops[2] =
      R"("op":"allocate_slots","req":"a","num_new_tokens":6,"expect":{"new_block_ids":[[1,3]]})";
  ops[4] = R"("op":"usage",,)";
  KvtwinRun r = run_kvtwin(write("order.jsonl", make_log_without_index(ops)));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("op 2 allocate_slots"), std::string::npos) << r.output;
}

TEST(VllmGolden, BadHotLinesWithoutIndexAreStillOneLineErrors) {
  for (const auto& [op, expected] : std::vector<std::pair<std::string, std::string>>{
           {R"("op":"allocate_slots","req":"a","num_new_tokens":-1)", "negative token count"},
           {R"("op":"allocate_slots","req":"a","num_new_tokens":1.5)", "expected an integer"},
           {R"("op":"append_tokens","req":"a","tokens":[1,"x"])", "tokens: expected an integer"},
           {R"("op":"allocate_slots","req":"a","num_new_tokens":1} x)", "malformed JSON"},
           {R"("op":"add_request","req":"b","prompt":[1,2,"max_tokens":4)", "malformed JSON"},
           {R"("op":"add_request","req":"b","prompt":[1,2.5],"max_tokens":4)",
            "prompt: expected an integer"},
           {R"("op":"add_request","req":"b","prompt":[10000000000000000000],"max_tokens":4)",
            "prompt: integer out of range"},
           {R"("op":"add_request","req":"b","prompt_parts":[{"tokens":[1,"x"]}],"max_tokens":4)",
            "tokens: expected an integer"},
           {R"("op":"add_request","req":"b","prompt_parts":[{"seq":"s","len":-3}],"max_tokens":4)",
            "len: negative length"},
           {R"("op":"add_request","req":"b","prompt":[1,2])", "max_tokens: missing"},
           {R"("op":"add_request","req":"b","prompt":[1],"max_tokens":4,"lora":{"name":"x"})",
            "id: missing"},
           {R"("op":"get_computed_blocks","expect":{"block_ids":[[1]],"num_computed_tokens":0})",
            "req: missing"},
           {R"("op":"get_computed_blocks","req":"a","expect":{"block_ids":[[1],"x":0})",
            "malformed JSON"},
           {R"("op":"free","req":"a","reason":"done","expect":{"num_free_blocks":5})",
            "reason: expected finished, aborted or preempted"},
           {R"("op":"save_seq","req":"a","expect":{"len":6})", "name: missing"},
           {R"("op":"set_computed","req":"a","value":99999999999999999999999)",
            "malformed JSON"}}) {
    auto ops = valid_ops();
    ops[2] = op;
    std::string path = write("fastinput.jsonl", make_log_without_index(ops));
    KvtwinRun r = run_kvtwin(path);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(error_line(r).find(path + ":4: "), std::string::npos) << r.output;
    EXPECT_NE(error_line(r).find(expected), std::string::npos) << r.output;
  }
}

TEST(VllmGolden, AWrongDerivedHeaderFieldFails) {
  std::string log = make_log(valid_ops());
  log.replace(log.find("\"null_block_id\":0"), 17, "\"null_block_id\":1");
  // The digest no longer matches, but the header is checked first.
  KvtwinRun r = run_kvtwin(write("derived.jsonl", log));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("header: $.derived.null_block_id: expected 1, got 0"), std::string::npos)
      << r.output;
}

struct BadInput {
  const char* name;
  std::string op;        // replaces op 2
  std::string expected;  // substring of the error line
};

class VllmGoldenBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(VllmGoldenBadInput, IsOneLineNamingFileAndLineWithExitCode2) {
  auto ops = valid_ops();
  ops[2] = GetParam().op;
  std::string path = write(std::string(GetParam().name) + ".jsonl", make_log(ops));
  KvtwinRun r = run_kvtwin(path);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  std::string line = error_line(r);
  EXPECT_NE(line.find(path + ":4: "), std::string::npos) << r.output;
  EXPECT_NE(line.find(GetParam().expected), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, VllmGoldenBadInput,
    ::testing::Values(
        BadInput{"unknown_op", R"("op":"explode","req":"a")", "op: unknown op 'explode'"},
        BadInput{"missing_field", R"("op":"allocate_slots","req":"a")", "num_new_tokens: missing"},
        BadInput{"wrong_type", R"("op":"allocate_slots","req":"a","num_new_tokens":"six")",
                 "num_new_tokens: expected an integer"},
        BadInput{"block_out_of_range", R"("op":"evict_blocks","block_ids":[2,6])",
                 "block_ids: block id 6 out of range [0, 6)"},
        BadInput{"unknown_request", R"("op":"get_computed_blocks","req":"zz")",
                 "req: unknown request 'zz'"},
        BadInput{"malformed_json", R"("op":"usage",,)", "malformed JSON"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

// ---------------------------------------------------------------------------------------------
// Well-formed op-logs that break a precondition of the model: each is one input error naming
// file, line and field, checked before the model is called (which would abort).

// make_log with `from` replaced by `to` in the header.
std::string make_log_with_header(const std::vector<std::string>& ops, const std::string& from,
                                 const std::string& to) {
  std::string log = make_log(ops);
  size_t at = log.find(from);
  EXPECT_LT(at, log.find('\n')) << from;
  log.replace(at, from.size(), to);
  // Recompute the footer's digest over the new header.
  size_t footer = log.find("{\"type\":\"footer\"");
  std::string body = log.substr(0, footer);
  return body + "{\"type\":\"footer\",\"num_ops\":" + std::to_string(ops.size()) +
         ",\"sha256_of_preceding_lines\":\"" + sha256_hex(body) + "\"}\n";
}

const char* kGroup =
    R"({"spec":"full","block_size":4,"layer_names":["l0"],"num_kv_heads":1,"head_size":8,)"
    R"("dtype":"bfloat16"})";

struct BadConfig {
  const char* name;
  std::string from, to;  // header replacement
  std::string expected;  // the whole error, after "<path>:"
};

class VllmGoldenBadConfig : public ::testing::TestWithParam<BadConfig> {};

TEST_P(VllmGoldenBadConfig, IsOneLineErrorWithExitCode2) {
  const BadConfig& c = GetParam();
  std::string path =
      write(std::string(c.name) + ".jsonl", make_log_with_header(valid_ops(), c.from, c.to));
  KvtwinRun r = run_kvtwin(path);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(error_line(r), "ERROR " + path + ":" + c.expected) << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, VllmGoldenBadConfig,
    ::testing::Values(
        BadConfig{"prompt_longer_than_max_model_len", "\"max_model_len\":64", "\"max_model_len\":5",
                  "2: prompt: prompt of 6 tokens is longer than config.max_model_len 5"},
        BadConfig{"group_listed_twice", kGroup, std::string(kGroup) + "," + kGroup,
                  "1: kv_cache_groups: layer 'l0' is in group 0 and in group 1"},
        BadConfig{"hybrid_groups_with_one_spec", kGroup,
                  std::string(kGroup) + "," +
                      R"({"spec":"full","block_size":4,"layer_names":["l1"],"num_kv_heads":1,)"
                      R"("head_size":8,"dtype":"bfloat16"})",
                  "1: kv_cache_groups: all 2 groups have the same spec: "
                  "HybridKVCacheCoordinator requires at least two attention groups"},
        BadConfig{"unknown_dtype", "\"dtype\":\"bfloat16\"", "\"dtype\":\"bogus\"",
                  "1: dtype: unknown dtype 'bogus' (expected a torch dtype name such as "
                  "bfloat16, float16, float32)"},
        BadConfig{"too_many_blocks", "\"num_gpu_blocks\":6", "\"num_gpu_blocks\":268435456",
                  "1: num_gpu_blocks: 268435456 is not in 1 .. 2^24 (16777216)"},
        BadConfig{"eagle_with_chunked_local",
                  R"("use_eagle":false,"log_stats":true,"enable_kv_cache_events":false,)"
                  R"("kv_events_use_int_block_hashes":false,"dcp_world_size":1,"pcp_world_size":1,)"
                  R"("kv_cache_groups":[{"spec":"full")",
                  R"("use_eagle":true,"log_stats":true,"enable_kv_cache_events":false,)"
                  R"("kv_events_use_int_block_hashes":false,"dcp_world_size":1,"pcp_world_size":1,)"
                  R"("kv_cache_groups":[{"spec":"chunked_local","attention_chunk_size":8)",
                  "1: use_eagle: EAGLE is not supported with chunked local attention"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// Ops 0 and 1 of valid_ops, then `ops` (from line 4 on).
std::vector<std::string> after_get_computed_blocks(std::vector<std::string> ops) {
  auto v = valid_ops();
  ops.insert(ops.begin(), v.begin(), v.begin() + 2);
  return ops;
}

// Op 2 of valid_ops: request "a" allocates its 6 tokens in blocks 1 and 2.
const std::string kAllocate = valid_ops()[2];

struct BadOp {
  const char* name;
  std::vector<std::string> ops;  // after ops 0 and 1 of valid_ops
  std::string expected;          // the whole error, after "<path>:"
};

class VllmGoldenBadOp : public ::testing::TestWithParam<BadOp> {};

TEST_P(VllmGoldenBadOp, IsOneLineErrorWithExitCode2) {
  const BadOp& c = GetParam();
  auto ops = after_get_computed_blocks(c.ops);
  for (auto write_log : {make_log, make_log_without_index}) {
    std::string path = write(std::string(c.name) + ".jsonl", write_log(ops));
    KvtwinRun r = run_kvtwin(path);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_EQ(error_line(r), "ERROR " + path + ":" + c.expected) << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, VllmGoldenBadOp,
    ::testing::Values(
        // Upstream: the allocation would come up short in get_new_blocks (ValueError) once
        // new computed tokens outrun the hits.
        BadOp{"new_computed_tokens_beyond_the_hit",
              {R"("op":"allocate_slots","req":"a","num_new_tokens":6,)"
               R"("num_new_computed_tokens":1000,"new_computed_blocks":"pending")"},
              "4: num_new_computed_tokens: 1000 new computed tokens, but the pending "
              "get_computed_blocks of request 'a' hit 0"},
        BadOp{"new_computed_tokens_without_hits",
              {R"("op":"allocate_slots","req":"a","num_new_tokens":2,"num_new_computed_tokens":4)"},
              "4: num_new_computed_tokens: 4 new computed tokens without new_computed_blocks "
              "\"pending\""},
        BadOp{"external_tokens_beyond_max_model_len",
              {R"("op":"allocate_slots","req":"a","num_new_tokens":6,)"
               R"("num_external_computed_tokens":100)"},
              "4: num_external_computed_tokens: computed tokens of request 'a' (0 + 0 new + 100 "
              "external) exceed config.max_model_len 64"},
        BadOp{"computed_tokens_ahead_of_the_blocks",
              {R"("op":"set_computed","req":"a","value":4)",
               R"("op":"allocate_slots","req":"a","num_new_tokens":2)"},
              "5: req: request 'a' has 4 computed tokens, but its allocations cover 0 "
              "(set_computed or append_tokens ran ahead of allocate_slots)"},
        BadOp{"prefix_hits_for_a_running_request",
              {kAllocate,
               R"("op":"get_computed_blocks","req":"a","expect":{"block_ids":[[1]],)"
               R"("num_computed_tokens":4})",
               R"("op":"allocate_slots","req":"a","num_new_tokens":1,)"
               R"("new_computed_blocks":"pending")"},
              "6: new_computed_blocks: prefix hits for request 'a', which already holds blocks "
              "for 6 tokens"},
        BadOp{"external_tokens_for_a_running_request",
              {kAllocate, R"("op":"allocate_slots","req":"a","num_new_tokens":1,)"
                          R"("num_external_computed_tokens":4)"},
              "5: num_external_computed_tokens: external computed tokens for request 'a', "
              "which already holds blocks for 6 tokens"},
        BadOp{"cache_blocks_beyond_the_allocation",
              {R"("op":"cache_blocks","req":"a","num_computed_tokens":4)"},
              "4: num_computed_tokens: 4 is not in 0 .. min(the request's 6 tokens, the 0 its "
              "allocations cover)"},
        BadOp{"negative_computed_tokens",
              {R"("op":"set_computed","req":"a","value":-1)"},
              "4: value: negative num_computed_tokens -1"},
        BadOp{"append_beyond_max_model_len",
              {kAllocate, R"("op":"append_tokens","req":"a","num_computed_tokens":6,"tokens":[7)" +
                              repeat(",7", 58) + "]"},
              "5: tokens: request 'a' would hold 65 tokens, more than config.max_model_len 64"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

// A hybrid full + mamba ("align") model: the mamba group keeps one state block per step.
const char* kMambaGroups =
    R"({"spec":"full","block_size":4,"layer_names":["l0"],"num_kv_heads":1,"head_size":8,)"
    R"("dtype":"bfloat16"},{"spec":"mamba","block_size":4,"mamba_cache_mode":"align",)"
    R"("layer_names":["l1"],"num_speculative_blocks":0})";
const char* kMambaDerived =
    R"("derived":{"coordinator":"HybridKVCacheCoordinator",)"
    R"("managers":["FullAttentionManager","MambaManager"],)"
    R"("none_hash":"4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e",)"
    R"("null_block_id":0,"attention_groups":[{"group_ids":[0],"manager":"FullAttentionManager"},)"
    R"({"group_ids":[1],"manager":"MambaManager"}],"lcm_block_size":4})";

std::string make_mamba_log(const std::vector<std::string>& more) {
  std::vector<std::string> ops = {
      valid_ops()[0],
      R"("op":"get_computed_blocks","req":"a","expect":{"block_ids":[[],[]],)"
      R"("num_computed_tokens":0})",
      R"("op":"allocate_slots","req":"a","num_new_tokens":6,"new_computed_blocks":"pending",)"
      R"("expect":{"new_block_ids":[[1,2],[0,3]]})"};
  ops.insert(ops.end(), more.begin(), more.end());
  std::string log = make_log_with_header(ops, kGroup, kMambaGroups);
  size_t from = log.find("\"derived\":");
  size_t to = log.find("}", log.find("\"null_block_id\"", from)) + 1;
  log.replace(from, to - from, kMambaDerived);
  size_t footer = log.find("{\"type\":\"footer\"");
  std::string body = log.substr(0, footer);
  return body + "{\"type\":\"footer\",\"num_ops\":" + std::to_string(ops.size()) +
         ",\"sha256_of_preceding_lines\":\"" + sha256_hex(body) + "\"}\n";
}

TEST(VllmGolden, AValidMambaAlignLogPasses) {
  KvtwinRun r = run_kvtwin(write(
      "mamba.jsonl",
      make_mamba_log({
          R"("op":"set_computed","req":"a","value":6)",
          R"("op":"allocate_slots","req":"a","num_new_tokens":1,"expect":{"new_block_ids":[[],[]]})",
      })));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(VllmGolden, MambaAlignComputedTokensCannotGoBackwards) {
  for (const auto& [op, expected] : std::vector<std::pair<std::string, std::string>>{
           {R"("op":"set_computed","req":"a","value":2)",
            "6: value: 2 is below the request's num_computed_tokens 6: computed tokens cannot "
            "go backwards with a mamba \"align\" group"},
           {R"("op":"append_tokens","req":"a","num_computed_tokens":2,"tokens":[9])",
            "6: num_computed_tokens: 2 is below the request's num_computed_tokens 6: computed "
            "tokens cannot go backwards with a mamba \"align\" group"}}) {
    std::string path = write("mamba_back.jsonl",
                             make_mamba_log({R"("op":"set_computed","req":"a","value":6)", op}));
    KvtwinRun r = run_kvtwin(path);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_EQ(error_line(r), "ERROR " + path + ":" + expected) << r.output;
  }
}

// Upstream's MambaManager asserts num_required_blocks >= len(req_blocks) in align mode.
TEST(VllmGolden, AMambaAlignAllocationMayNotShrinkTheBlockTable) {
  std::string path =
      write("mamba_shrink.jsonl", make_mamba_log({
                                      R"("op":"allocate_slots","req":"a","num_new_tokens":1)",
                                  }));
  KvtwinRun r = run_kvtwin(path);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(error_line(r), "ERROR " + path +
                               ":5: num_new_tokens: request 'a' (0 computed + 1 new tokens) "
                               "needs 1 blocks of mamba group 1, fewer than the 2 it holds")
      << r.output;
}

// The footer's op_counts (as every recorded footer has them) must count the ops by name.
TEST(VllmGolden, FooterOpCountsMustMatchTheOps) {
  const std::string right =
      R"("op_counts":{"add_request":1,"get_computed_blocks":1,"allocate_slots":1,)"
      R"("free_queue":1,"free":1,"usage":1},)";
  for (const auto& [counts, expected] : std::vector<std::pair<std::string, std::string>>{
           {right, ""},
           {R"("op_counts":{"add_request":1,"get_computed_blocks":1,"allocate_slots":2,)"
            R"("free_queue":1,"free":1,"usage":1},)",
            ":8: op_counts: footer says 2 'allocate_slots' ops, file has 1"},
           {R"("op_counts":{"add_request":1,"get_computed_blocks":1,"allocate_slots":1,)"
            R"("free_queue":1,"usage":1},)",
            ":8: op_counts: footer says 0 'free' ops, file has 1"},
           {R"("op_counts":{"add_request":1,"get_computed_blocks":1,"allocate_slots":1,)"
            R"("free_queue":1,"free":1,"usage":1,"new_step":3},)",
            ":8: op_counts: footer says 3 'new_step' ops, file has 0"},
           {R"("op_counts":{"add_request":"x"},)",
            ":8: op_counts: expected an integer, got \"x\""}}) {
    for (auto write_log : {make_log, make_log_without_index}) {
      std::string log = write_log(valid_ops());
      log.replace(log.find("{\"type\":\"footer\",") + 17, 0, counts);
      std::string path = write("counts.jsonl", log);
      KvtwinRun r = run_kvtwin(path);
      if (expected.empty()) {
        EXPECT_EQ(r.exit_code, 0) << r.output;
      } else {
        EXPECT_EQ(r.exit_code, 2) << r.output;
        EXPECT_EQ(error_line(r), "ERROR " + path + expected) << r.output;
      }
    }
  }
}

// The report stays on stdout; each input error is also one line on stderr.
TEST(VllmGolden, AnInputErrorIsAlsoOneLineOnStderr) {
  auto ops = valid_ops();
  ops[2] = R"("op":"explode","req":"a")";
  std::string path = write("stderr.jsonl", make_log(ops));
  kvtwin::testing::CommandRun r = kvtwin::testing::run_kvtwin("golden '" + path + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "kvtwin: " + path + ":4: op: unknown op 'explode'\n");
  EXPECT_NE(r.out.find("ERROR " + path + ":4: op: unknown op 'explode'\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("golden: 0 passed, 0 failed, 1 unreadable"), std::string::npos) << r.out;
}

TEST(VllmGolden, ATruncatedGzipIsAnInputError) {
  std::string gz = kvtwin::testing::gzip_bytes(make_log(valid_ops()));
  std::string path = write("cut.jsonl.gz", gz.substr(0, gz.size() / 2));
  KvtwinRun r = run_kvtwin(path);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(error_line(r).find(path + ":"), std::string::npos) << r.output;
}

TEST(VllmGolden, AMissingFooterIsAnInputError) {
  std::string log = make_log(valid_ops());
  log = log.substr(0, log.rfind("{\"type\":\"footer\""));
  std::string path = write("nofooter.jsonl", log);
  KvtwinRun r = run_kvtwin(path);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(error_line(r).find("footer"), std::string::npos) << r.output;
}

TEST(VllmGolden, PreparsedExecutionRunsEveryOp) {
  std::string path = write("ok.jsonl", make_log(valid_ops()));
  VllmPreparsedLog log = preparse_vllm_log(path);
  EXPECT_EQ(log.case_name, "tiny");
  EXPECT_EQ(execute_vllm_log(log), valid_ops().size());
}

}  // namespace
}  // namespace kvtwin::sim::golden
