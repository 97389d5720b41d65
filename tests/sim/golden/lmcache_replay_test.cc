// The LMCache golden replay: every public case passes, through the library and through the
// kvtwin binary (the data is read from KVTWIN_SHARED_DIR, never copied); malformed input is one
// line naming file and line with exit code 2; a wrong expectation is a FAIL with exit code 1.
#include "sim/golden/lmcache_replay.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#define OPENSSL_API_COMPAT 10101
#include <openssl/sha.h>

#include "model/vllm/block_hash.h"
#include "sim/io/input_error.h"
#include "sim/io/line_reader.h"
#include "tests/support/command.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::golden {
namespace {

namespace fs = std::filesystem;

std::string public_dir() {
  return kvtwin::testing::shared_path("golden/lmcache/public");
}

std::vector<std::string> public_cases() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(public_dir())) {
    if (e.path().extension() == ".jsonl") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct RunResult {
  int exit_code = -1;
  std::string output;
};

RunResult run_kvtwin(const std::string& args) {
  std::string cmd = std::string(KVTWIN_BINARY_DIR) + "/kvtwin golden " + args + " 2>&1";
  RunResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Header of a real case + the given ops + a correct footer.
std::string write_log(const std::vector<std::string>& ops) {
  std::string body = first_line(public_dir() + "/e_lru_cpu_basic.jsonl") + "\n";
  for (const std::string& op : ops) body += op + "\n";
  uint8_t d[32];
  SHA256(reinterpret_cast<const uint8_t*>(body.data()), body.size(), d);
  std::string footer = R"({"type":"footer","num_ops":)" + std::to_string(ops.size()) +
                       R"(,"sha256_of_preceding_lines":")" + model::vllm::to_hex({d, 32}) + "\"}";
  std::string path = kvtwin::testing::scratch_dir() + "/case.jsonl";
  std::ofstream(path) << body << footer << "\n";
  return path;
}

TEST(LmcacheGolden, EveryPublicCasePassesThroughTheReplayer) {
  std::vector<std::string> cases = public_cases();
  ASSERT_GE(cases.size(), 21u);
  int engine = 0, connector = 0;
  for (const std::string& path : cases) {
    io::LineReader reader(path);
    std::string_view header;
    ASSERT_TRUE(reader.next(&header));
    std::string h(header);
    CaseOutcome out = replay_lmcache(reader, h, ReplayOptions{});
    EXPECT_TRUE(out.passed) << path << ": op " << out.op_index << " " << out.op_name << " "
                            << out.field << "\n expected " << out.expected << "\n actual   "
                            << out.actual;
    EXPECT_GT(out.num_ops, 0u);
    (h.find("\"kind\":\"connector\"") != std::string::npos ? connector : engine)++;
  }
  EXPECT_GE(engine, 17);
  EXPECT_GE(connector, 4);
}

TEST(LmcacheGolden, TheKvtwinBinaryReplaysThePublicSuite) {
  RunResult r = run_kvtwin(public_dir());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("golden: " + std::to_string(public_cases().size()) + " passed, 0 failed"),
            std::string::npos)
      << r.output;
}

TEST(LmcacheGolden, MalformedJsonIsOneLineWithFileAndLineAndExitCodeTwo) {
  std::string path = write_log({R"({"i":0,"op":"def_seq","name":"A","tokens":[1,2,3]})",
                                R"({"i":1,"op":"store","token_parts":[{"seq":"A"}],)"});
  RunResult r = run_kvtwin(path);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(path + ":3:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("malformed JSON"), std::string::npos) << r.output;
}

TEST(LmcacheGolden, AMissingFieldNamesTheFieldAndLine) {
  std::string path = write_log({R"({"i":0,"op":"store","expect":{"stored":[],"removed":{}}})"});
  RunResult r = run_kvtwin(path);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(path + ":2: tokens:"), std::string::npos) << r.output;
}

TEST(LmcacheGolden, AnUndefinedSequenceAndAnUnknownOpAreInputErrors) {
  std::string a = write_log({R"({"i":0,"op":"store","token_parts":[{"seq":"nope"}]})"});
  RunResult r = run_kvtwin(a);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find(":2: token_parts.seq: undefined sequence 'nope'"), std::string::npos)
      << r.output;
  std::string b = write_log({R"({"i":0,"op":"teleport"})"});
  r = run_kvtwin(b);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find(":2: op: unknown engine op 'teleport'"), std::string::npos) << r.output;
}

TEST(LmcacheGolden, AWrongExpectationIsAFailWithExitCodeOne) {
  std::string path = write_log(
      {R"({"i":0,"op":"def_seq","name":"A","tokens":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]})",
       R"({"i":1,"op":"store","token_parts":[{"seq":"A"}],"expect":{"stored":[[0,8]],"removed":{}}})"});
  RunResult r = run_kvtwin(path);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("op 1 store: $.stored[0][1]"), std::string::npos) << r.output;
}

// Like the vLLM replayer: with op_index_field, "i" must be an integer counting the ops from 0.
TEST(LmcacheGolden, AnOpIndexThatIsNotTheOpsPositionIsAnInputError) {
  for (const auto& [i, expected] : std::vector<std::pair<std::string, std::string>>{
           {R"("abc")", R"(:3: i: expected an integer, got "abc")"},
           {"99", ":3: i: op index 99, expected 1"},
           {"0", ":3: i: op index 0, expected 1"}}) {
    std::string path = write_log({R"({"i":0,"op":"def_seq","name":"A","tokens":[1,2,3]})",
                                  R"({"i":)" + i + R"(,"op":"def_seq","name":"B","tokens":[4]})"});
    RunResult r = run_kvtwin(path);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("ERROR " + path + expected + "\n"), std::string::npos) << r.output;
  }
}

TEST(LmcacheGolden, FooterOpCountsMustMatchTheOps) {
  std::string path = write_log({R"({"i":0,"op":"def_seq","name":"A","tokens":[1,2,3]})"});
  std::string log = kvtwin::testing::slurp(path);
  log.replace(log.find(R"({"type":"footer",)"), 17,
              R"({"type":"footer","op_counts":{"def_seq":2},)");
  std::ofstream(path) << log;
  RunResult r = run_kvtwin(path);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(
      r.output.find("ERROR " + path + ":3: op_counts: footer says 2 'def_seq' ops, file has 1\n"),
      std::string::npos)
      << r.output;
}

TEST(LmcacheGolden, AHeaderWhoseDerivedGeometryDisagreesIsRejected) {
  std::string header = first_line(public_dir() + "/e_lru_cpu_basic.jsonl");
  size_t at = header.find("\"bytes_per_token\":1024");
  ASSERT_NE(at, std::string::npos);
  header.replace(at, 22, "\"bytes_per_token\":2048");
  std::string body = header + "\n";
  uint8_t d[32];
  SHA256(reinterpret_cast<const uint8_t*>(body.data()), body.size(), d);
  std::string path = kvtwin::testing::scratch_dir() + "/derived.jsonl";
  std::ofstream(path) << body << R"({"type":"footer","num_ops":0,"sha256_of_preceding_lines":")"
                      << model::vllm::to_hex({d, 32}) << "\"}\n";
  RunResult r = run_kvtwin(path);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(":1: derived.bytes_per_token: the model derives 1024"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace kvtwin::sim::golden
