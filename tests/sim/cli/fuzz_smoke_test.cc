// A deterministic mutation fuzz of the kvtwin binary's input edge, small enough for every CI run.
//
// Seeds: a native CSV, a Mooncake JSONL and an Azure CSV trace, and a scenario TOML. Each case
// applies one or two byte-level mutations drawn from a fixed-seed stream (a number replaced by a
// nasty value, a line deleted / duplicated / swapped, truncation, a NUL / invalid UTF-8 / BOM /
// CRLF, an extra column, a repeated TOML key ...) and runs the binary on the result. Whatever the
// input, the outcome must be one of:
//   exit 0  with output on stdout and nothing on stderr, or
//   exit 2  with nothing on stdout and exactly one line on stderr, "kvtwin: ...".
// Anything else — a signal, an abort, another exit code, a second line, a hang (timeout 30 s) —
// fails the case, which prints its input so that it can be replayed by hand.
#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/command.h"
#include "tests/support/fuzz_rng.h"
#include "tests/support/paths.h"

namespace {

using kvtwin::testing::CommandRun;
using kvtwin::testing::slurp;

using Rng = kvtwin::testing::FuzzRng;

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// Spans [begin, end) of the decimal numbers in `s`.
std::vector<std::pair<size_t, size_t>> numbers(const std::string& s) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < s.size();) {
    if (s[i] >= '0' && s[i] <= '9') {
      size_t j = i;
      while (j < s.size() && ((s[j] >= '0' && s[j] <= '9') || s[j] == '.')) ++j;
      out.emplace_back(i, j);
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

const std::vector<std::string> kNastyNumbers = {"0",
                                                "-1",
                                                "1e30",
                                                "1e400",
                                                "nan",
                                                "inf",
                                                "-inf",
                                                "abc",
                                                "",
                                                "18446744073709551616",
                                                "9223372036854775807",
                                                "-9223372036854775808",
                                                "0.5",
                                                "1e-300",
                                                "0x10",
                                                "1_000",
                                                "--1",
                                                "1e",
                                                ".",
                                                "+5",
                                                "4294967296",
                                                "2147483648",
                                                "999999999999"};

std::string mutate(std::string text, Rng& rng) {
  std::vector<std::string> lines = split_lines(text);
  if (lines.empty()) lines.push_back("");
  const size_t i = rng.below(lines.size());
  switch (rng.below(14)) {
    case 0:
    case 1:
    case 2: {  // a number replaced
      auto spans = numbers(lines[i]);
      if (spans.empty()) break;
      auto [b, e] = spans[rng.below(spans.size())];
      lines[i] = lines[i].substr(0, b) + rng.pick(kNastyNumbers) + lines[i].substr(e);
      break;
    }
    case 3:
      lines.erase(lines.begin() + static_cast<long>(i));
      break;
    case 4:
      lines.insert(lines.begin() + static_cast<long>(i), lines[i]);
      break;
    case 5:
      std::swap(lines[i], lines[rng.below(lines.size())]);
      break;
    case 6:
      return join_lines(lines).substr(0, rng.below(text.size() + 1));  // truncated
    case 7: {                                                          // a byte that is not text
      static const std::vector<std::string> kBytes = {std::string(1, '\0'), "\xff", "\xc3\x28",
                                                      "\x80"};
      lines[i].insert(rng.below(lines[i].size() + 1), rng.pick(kBytes));
      break;
    }
    case 8:
      return "\xef\xbb\xbf" + join_lines(lines);  // BOM
    case 9: {
      std::string crlf;
      for (const std::string& l : lines) crlf += l + "\r\n";
      return crlf;
    }
    case 10:
      lines[i] += rng.below(2) ? ",7" : ",";
      break;
    case 11:
      lines[i] = rng.below(2) ? "" : "   ";
      break;
    case 12:
      return rng.below(2) ? "" : "\n\n";
    case 13:  // a character that means something to one of the formats
      lines[i].insert(rng.below(lines[i].size() + 1),
                      rng.pick(std::vector<std::string>{"\"", "[", "]", "{", "}", "=", ",", "#"}));
      break;
  }
  return join_lines(lines);
}

// Each case under a 30 s timeout (exit 124): a hang fails the case instead of the test binary.
CommandRun run(const std::string& args) {
  return kvtwin::testing::run_kvtwin(args, 30);
}

// "" when the outcome keeps the contract, else what is wrong. `golden`: kvtwin golden, which
// reports on stdout whatever happens and exits 1 on a mismatch.
std::string verdict(const CommandRun& o, bool stdout_expected, bool golden = false) {
  if (o.exit_code < 0) return "killed by a signal";
  const int code = o.exit_code;
  if (golden && (code == 0 || code == 1)) return o.err.empty() ? "" : "stderr: " + o.err;
  if (golden && code == 2)
    return o.err.rfind("kvtwin: ", 0) == 0 && std::count(o.err.begin(), o.err.end(), '\n') >= 1
               ? ""
               : "exit 2 without 'kvtwin: ' lines on stderr: " + o.err.substr(0, 300);
  if (code == 0) {
    if (!o.err.empty()) return "exit 0 with stderr: " + o.err.substr(0, 300);
    if (stdout_expected && o.out.empty()) return "exit 0 with nothing on stdout";
    return "";
  }
  if (code != 2) return "exit code " + std::to_string(code) + ", stderr: " + o.err.substr(0, 300);
  if (!o.out.empty()) return "exit 2 with stdout: " + o.out.substr(0, 300);
  if (o.err.rfind("kvtwin: ", 0) != 0) return "stderr does not start with 'kvtwin: ': " + o.err;
  if (std::count(o.err.begin(), o.err.end(), '\n') != 1 || o.err.back() != '\n')
    return "stderr is not one line: " + o.err.substr(0, 300);
  return "";
}

std::string first_lines(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string line, out;
  for (size_t i = 0; i < n && std::getline(in, line); ++i) out += line + "\n";
  return out;
}

struct Seed {
  const char* name;
  std::string text;
  std::string args;  // the command, with {} for the mutated file
  bool stdout_expected;
};

void fuzz(const Seed& seed, int cases, uint64_t rng_seed) {
  const std::string dir = kvtwin::testing::scratch_dir();
  Rng rng{rng_seed};
  int failures = 0;
  for (int c = 0; c < cases && failures < 5; ++c) {
    std::string text = mutate(seed.text, rng);
    if (rng.below(3) == 0) text = mutate(text, rng);
    const std::string file = dir + "/case" + std::to_string(c) + "_" + seed.name;
    std::ofstream(file, std::ios::binary) << text;
    std::string args = seed.args;
    args.replace(args.find("{}"), 2, file);
    const std::string v = verdict(run(args), seed.stdout_expected);
    if (v.empty()) {
      std::remove(file.c_str());
      continue;
    }
    ++failures;
    ADD_FAILURE() << "kvtwin " << args << "\n  " << v << "\n  input kept at " << file;
  }
}

// The op-log with one number of one op (or of the header) replaced, and the footer's checksum
// recomputed so that the replayer gets past it: well-formed logs that break the model's
// preconditions (these once aborted in model checks).
std::string mutate_oplog(const std::string& text, Rng& rng) {
  std::vector<std::string> lines = split_lines(text);
  static const std::vector<std::string> kInts = {"0",  "1",   "2",    "3",         "7",
                                                 "17", "64",  "1000", "16777217",  "-1",
                                                 "-2", "513", "4096", "2147483648"};
  for (int tries = 0; tries < 10; ++tries) {
    const size_t i = rng.below(lines.size() - 1);  // not the footer
    auto spans = numbers(lines[i]);
    if (spans.empty()) continue;
    auto [b, e] = spans[rng.below(spans.size())];
    if (lines[i].find('.', b) < e) continue;  // integers only
    lines[i] = lines[i].substr(0, b) + rng.pick(kInts) + lines[i].substr(e);
    break;
  }
  std::string body;
  for (size_t i = 0; i + 1 < lines.size(); ++i) body += lines[i] + "\n";
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(body.data()), body.size(), digest);
  char hex[2 * SHA256_DIGEST_LENGTH + 1];
  for (int k = 0; k < SHA256_DIGEST_LENGTH; ++k) std::snprintf(hex + 2 * k, 3, "%02x", digest[k]);
  std::string& footer = lines.back();
  const std::string key = "\"sha256_of_preceding_lines\":\"";
  const size_t at = footer.find(key);
  if (at != std::string::npos) footer.replace(at + key.size(), 64, hex);
  return body + footer + "\n";
}

TEST(FuzzSmoke, OpLogsThatBreakTheModelsPreconditionsAreInputErrors) {
  const std::string dir = kvtwin::testing::scratch_dir();
  Rng rng{0x676f6c64};
  int failures = 0;
  for (const char* name :
       {"unit_test_evict", "unit_test_sliding_window_remove_skipped_blocks",
        "unit_test_chunked_local_remove_skipped_blocks",
        "unit_test_prefill_hybrid_model_mamba_align", "unit_test_eagle_with_sliding_window",
        "unit_test_different_block_size"}) {
    const std::string seed =
        slurp(kvtwin::testing::shared_path("golden/public/" + std::string(name) + ".jsonl"));
    ASSERT_FALSE(seed.empty()) << name;
    for (int c = 0; c < 40 && failures < 5; ++c) {
      const std::string file = dir + "/" + name + "." + std::to_string(c) + ".jsonl";
      std::ofstream(file, std::ios::binary) << mutate_oplog(seed, rng);
      const std::string v = verdict(run("golden -q " + file), true, /*golden=*/true);
      if (v.empty()) {
        std::remove(file.c_str());
        continue;
      }
      ++failures;
      ADD_FAILURE() << "kvtwin golden " << file << "\n  " << v;
    }
  }
}

TEST(FuzzSmoke, MutatedTracesGiveAResultOrOneLineError) {
  const std::string native =
      first_lines(kvtwin::testing::source_path("traces/examples/asr_requests.csv"), 12);
  const std::string mooncake = first_lines(
      kvtwin::testing::source_path("traces/examples/mooncake_conversation_10min.jsonl"), 8);
  const std::string azure = first_lines(
      kvtwin::testing::source_path("traces/azure_llm_2023/AzureLLMInferenceTrace_code.csv"), 12);
  const std::string native_ids =
      "arrival_s,prompt_tokens,output_tokens,session_id,block_size,block_ids\n"
      "0,40,3,7,16,1 2 3\n0.5,40,2,7,16,1 2 4\n1.25,20,1,,,\n";
  for (const Seed& s : {Seed{"native.csv", native, "trace stats {}", true},
                        Seed{"ids.csv", native_ids, "trace stats {} --format native", true},
                        Seed{"mooncake.jsonl", mooncake, "trace stats {}", true},
                        Seed{"azure.csv", azure, "trace stats {}", true}})
    fuzz(s, 60, 0x6b76 + s.text.size());
}

TEST(FuzzSmoke, MutatedTracesThroughTheSimulator) {
  const std::string mooncake = first_lines(
      kvtwin::testing::source_path("traces/examples/mooncake_conversation_10min.jsonl"), 6);
  const std::string dir = kvtwin::testing::scratch_dir();
  fuzz(Seed{"run.jsonl", mooncake,
            "run -q --trace {} --set cluster.instances=1 --set output.plots=false "
            "--set output.chrome_trace=false --out " +
                dir + "/run",
            false},
       40, 0x72756e);
}

TEST(FuzzSmoke, MutatedScenariosGiveARunOrOneLineError) {
  const std::string scenario = slurp(kvtwin::testing::source_path("scenarios/default.toml"));
  ASSERT_FALSE(scenario.empty());
  const std::string dir = kvtwin::testing::scratch_dir();
  fuzz(Seed{"s.toml", scenario,
            "run -q --scenario {} --set workload.max_requests=8 --set cluster.instances=1 "
            "--set output.plots=false --set output.chrome_trace=false --out " +
                dir + "/run",
            false},
       60, 0x746f6d6c);
}

}  // namespace
