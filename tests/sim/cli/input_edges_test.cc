// Input edges of the kvtwin binary found by a fuzz pass (2026-11-26): each case once ended in a
// crash, a hang, a silently wrong result or exit 0 with output missing. Now each is one line on
// stderr and a non-zero exit, or (for valid but extreme input) a bounded, correct run.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/command.h"
#include "tests/support/paths.h"

namespace {

using kvtwin::testing::CommandRun;
using kvtwin::testing::number_after;
using kvtwin::testing::run_kvtwin;
using kvtwin::testing::slurp;

std::string write(const std::string& dir, const std::string& name, const std::string& text) {
  std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Exit 2, nothing on stdout, exactly `line` on stderr.
void expect_bad_input(const CommandRun& r, const std::string& line) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "kvtwin: " + line + "\n");
}

size_t count_lines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST(InputEdges, ConvertingATraceOntoItselfIsRefusedAndLeavesItIntact) {
  const std::string dir = kvtwin::testing::scratch_dir();
  const std::string text = "arrival_s,prompt_tokens,output_tokens\n0,10,1\n1,20,2\n";
  const std::string t = write(dir, "t.csv", text);
  expect_bad_input(run_kvtwin("trace convert " + t + " " + t + " --to mooncake"),
                   t + ": is the input trace; write the conversion to another file");
  EXPECT_EQ(slurp(t), text);
  // Through another name of the same file, too.
  std::filesystem::create_symlink(t, dir + "/link.csv");
  expect_bad_input(run_kvtwin("trace convert " + t + " " + dir + "/link.csv"),
                   dir + "/link.csv: is the input trace; write the conversion to another file");
  EXPECT_EQ(slurp(t), text);
  expect_bad_input(run_kvtwin("trace convert " + t + " - --to azure"),
                   "--to: azure: expected native or mooncake");
}

TEST(InputEdges, ALongIdleGapIsCollapsedInTheTimeseriesAndCountedInTheMeans) {
  const std::string dir = kvtwin::testing::scratch_dir();
  // Two requests a million seconds apart: a million one-second samples if written out.
  const std::string t = write(dir, "gap.csv",
                              "arrival_s,prompt_tokens,output_tokens\n"
                              "0,600,5\n"
                              "1000000,10,5\n");
  CommandRun r =
      run_kvtwin("run -q --trace " + t + " --set output.plots=false --out " + dir + "/run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string ts = slurp(dir + "/run/timeseries.csv");
  EXPECT_LT(count_lines(ts), 20u) << ts;
  // The gap's first sample (t = 1) and its last before the second arrival (t = 999,999) stay.
  EXPECT_NE(ts.find("\n1.000,0,0,"), std::string::npos) << ts;
  EXPECT_NE(ts.find("\n999999.000,0,0,"), std::string::npos) << ts;
  // The first request stores two 256-token chunks in the CPU tier, which keeps them through the
  // gap (the second, 10 tokens, stores no chunk): the mean occupancy counts the ~10^6 collapsed
  // samples, so it is the peak up to the sample at t = 0, before the stores (over the written
  // rows alone it would be below 0.9).
  const std::string summary = slurp(dir + "/run/summary.json");
  const double peak = number_after(summary, "\"peak_bytes\": ");
  const double mean = number_after(summary, "\"mean_bytes\": ");
  EXPECT_GT(peak, 0) << summary;
  EXPECT_GT(mean, 0.9999 * peak) << summary;
  EXPECT_LE(mean, peak) << summary;
}

TEST(InputEdges, ArrivalsBeyondTheSimulatorsRangeAreInputErrors) {
  const std::string dir = kvtwin::testing::scratch_dir();
  const std::string t = write(dir, "t.csv",
                              "arrival_s,prompt_tokens,output_tokens\n"
                              "0,100,5\n"
                              "1000000000,100,5\n");
  expect_bad_input(run_kvtwin("trace stats " + t + " --set workload.rate_scale=0.001"),
                   t + ":3: arrival_s: arrival 1e+09 s divided by workload.rate_scale 0.001 is "
                       "more than 1e9 s");
  const std::string a = write(dir, "a.csv",
                              "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                              "2023-11-16 18:17:03,10,1\n"
                              "2199-12-31 23:59:59,10,1\n");
  expect_bad_input(run_kvtwin("trace stats " + a),
                   a + ":3: TIMESTAMP: arrival more than 1e9 s after the trace's time origin");
  const std::string y = write(dir, "y.csv",
                              "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                              "0000-01-01 00:00:00,10,1\n");
  expect_bad_input(run_kvtwin("trace stats " + y),
                   y + ":2: TIMESTAMP: expected YYYY-MM-DD HH:MM:SS[.fffffff] (years 1900 to "
                       "2199), got '0000-01-01 00:00:00'");
}

TEST(InputEdges, TracesWithoutRequestsOrWithNulBytesAreRefused) {
  const std::string dir = kvtwin::testing::scratch_dir();
  const std::string h = write(dir, "h.csv", "arrival_s,prompt_tokens,output_tokens\n");
  expect_bad_input(run_kvtwin("trace stats " + h), h + ": the trace has no requests");
  expect_bad_input(run_kvtwin("run -q --trace " + h + " --out " + dir + "/run"),
                   h + ": the trace has no requests");
  const std::string n =
      write(dir, "n.csv",
            std::string("arrival_s,prompt_tokens,output_tokens\n0,4,1\n1.5,4,1") + '\0' + "junk\n");
  expect_bad_input(run_kvtwin("trace stats " + n), n + ":3: NUL byte in the line");
  expect_bad_input(run_kvtwin("trace stats " + dir), dir + ": is a directory, not a file");
}

TEST(InputEdges, ScenarioFilesThatAreNotFilesOrHaveEmptyTablesAreRefused) {
  const std::string dir = kvtwin::testing::scratch_dir();
  std::filesystem::create_directory(dir + "/d.toml");
  expect_bad_input(run_kvtwin("run -q --scenario " + dir + "/d.toml"),
                   dir + "/d.toml: is a directory, not a scenario file");
  const std::string u = write(dir, "u.toml", "[bogus]\n[vllm]\nblock_size = 16\n");
  expect_bad_input(run_kvtwin("run -q --scenario " + u), u + ":1: bogus: unknown section");
  const std::string i = write(dir, "i.toml", "[vllm]\nblock_size = {}\n");
  expect_bad_input(run_kvtwin("run -q --scenario " + i),
                   i + ":2: vllm.block_size: expected a value, got a table");
  const std::string k = write(dir, "k.toml", "[vllm.nope]\n");
  expect_bad_input(run_kvtwin("run -q --scenario " + k), k + ":1: vllm.nope: unknown key");
  // Integer bounds are exact near 2^63 (9.2e18 is the documented maximum of run.seed).
  expect_bad_input(run_kvtwin("run -q --set run.seed=9200000000000000001"),
                   "--set: run.seed: value 9200000000000000001 out of range [0, "
                   "9200000000000000000]");
}

TEST(InputEdges, AConflictIsBlamedOnTheOverrideThatCausedIt) {
  // The embedded default sets num_kv_heads = 8 on its line 15; the user's --set broke the rule.
  expect_bad_input(run_kvtwin("run -q --set model.num_heads=30"),
                   "--set: model.num_heads: model.num_kv_heads must divide model.num_heads "
                   "(model.num_kv_heads = 8, model.num_heads = 30)");
  expect_bad_input(run_kvtwin("run -q --set vllm.enable_chunked_prefill=false"),
                   "--set: vllm.enable_chunked_prefill: without chunked prefill, "
                   "vllm.max_num_batched_tokens must be >= vllm.max_model_len (as vLLM requires) "
                   "(vllm.max_num_batched_tokens = 8192, vllm.max_model_len = 131072, "
                   "vllm.enable_chunked_prefill = false)");
}

// Each value is blamed where it was set: the Mamba field that is 0, the MoE key the user changed,
// the encoder-decoder rule in its own words, a trace the scenario names by its key and line.
TEST(InputEdges, MessagesNameTheValueThatIsWrong) {
  const std::string nem = kvtwin::testing::source_path("scenarios/nemotron_h_8b_mamba_hybrid.toml");
  expect_bad_input(run_kvtwin("run -q --scenario " + nem + " --set model.mamba_state_size=0"),
                   "--set: model.mamba_state_size: M layers need mamba_num_heads, mamba_head_dim "
                   "and mamba_state_size > 0");
  expect_bad_input(run_kvtwin("run -q --set model.num_experts=8"),
                   "--set: model.num_experts: MoE needs 0 < model.experts_per_token <= "
                   "model.num_experts (model.experts_per_token = 0, model.num_experts = 8)");
  const std::string whisper =
      kvtwin::testing::source_path("scenarios/whisper_large_v3_encdec.toml");
  expect_bad_input(run_kvtwin("run -q --scenario " + whisper + " --set vllm.max_model_len=65536"),
                   "--set: vllm.max_model_len: vLLM runs encoder-decoder models without chunked "
                   "prefill, so vllm.max_num_batched_tokens must be >= vllm.max_model_len "
                   "(vllm.max_num_batched_tokens = 8192, vllm.max_model_len = 65536, "
                   "model.encoder_layers = 32)");
  const std::string dir = kvtwin::testing::scratch_dir();
  const std::string sc = write(dir, "s.toml", "[workload]\ntrace = \"missing.csv\"\n");
  expect_bad_input(run_kvtwin("run -q --scenario " + sc),
                   sc + ":2: workload.trace: cannot open trace " + dir +
                       "/missing.csv: No such file or directory");
}

// --set and --vary take one value each time: a positional argument after them stays one.
TEST(InputEdges, RepeatableOptionsDoNotSwallowPositionalArguments) {
  const std::string trace =
      kvtwin::testing::source_path("traces/examples/mooncake_conversation_10min.jsonl");
  CommandRun r = run_kvtwin("trace stats --set workload.max_requests=50 " + trace + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"requests\": 50,"), std::string::npos) << r.out;
  const std::string dir = kvtwin::testing::scratch_dir();
  r = run_kvtwin("trace convert --set workload.max_requests=5 " + trace + " " + dir +
                 "/out.jsonl --to mooncake");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines(slurp(dir + "/out.jsonl")), 5u);
  // A second word after one --set is not a second override.
  expect_bad_input(run_kvtwin("run -q --set workload.max_requests=5 output.plots=false"),
                   "The following argument was not expected: output.plots=false (see kvtwin "
                   "--help)");
  expect_bad_input(run_kvtwin("sweep --vary workload.rate_scale=1,2 vllm.block_size=16,32"),
                   "The following argument was not expected: vllm.block_size=16,32 (see kvtwin "
                   "--help)");
}

// Upstream LMCache f4261ef6 asserts, for a request resumed after preemption, that its computed
// tokens equal its LMCache hit, even when that hit was below min_retrieve_tokens and nothing was
// loaded: the AssertionError stops vLLM's engine. The run reproduces that as one line and exit 1;
// with the fixes it completes.
TEST(InputEdges, AnUpstreamDefectThatStopsTheEngineEndsTheRunWithOneLine) {
  const std::string dir = kvtwin::testing::scratch_dir();
  const std::string args =
      "run -q --scenario " +
      kvtwin::testing::source_path("scenarios/llama31_70b_tp4_cpu_disk_redis.toml") +
      " --set lmcache.min_retrieve_tokens=16777216 --set workload.max_requests=300"
      " --set output.plots=false --out " +
      dir + "/run";
  CommandRun r = run_kvtwin(args);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("kvtwin: error: the modelled LMCache scheduler raised AssertionError: "
                        "preempted request ",
                        0),
            0u)
      << r.err;
  EXPECT_NE(r.err.find("lmcache.upstream_fixes = true applies the fixes)\n"), std::string::npos);
  EXPECT_EQ(count_lines(r.err), 1u);
  r = run_kvtwin(args + " --set lmcache.upstream_fixes=true");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// vLLM's cross-attention manager raises NotImplementedError on the first prefix-cache lookup, and
// vLLM turns chunked prefill off for encoder-decoder models: the scenario is refused up front.
TEST(InputEdges, EncoderDecoderModelsCannotUsePrefixCaching) {
  expect_bad_input(
      run_kvtwin("run -q --scenario " +
                 kvtwin::testing::source_path("scenarios/whisper_large_v3_encdec.toml") +
                 " --set vllm.enable_prefix_caching=true"),
      "--set: vllm.enable_prefix_caching: encoder-decoder models cannot use "
      "vllm.enable_prefix_caching (vLLM's CrossAttentionManager does not support caching) "
      "(vllm.enable_prefix_caching = true, model.encoder_layers = 32)");
}

// Valid scenarios that once ran forever (found by fuzzing valid configurations): each must now
// finish well within the timeout with exit 0.
TEST(InputEdges, ValidScenariosThatOnceRanForeverFinish) {
  const std::string dir = kvtwin::testing::scratch_dir();
  // An 8-block pool of 64-token MLA blocks with async loading: a request whose tokens outgrow the
  // pool preempted itself, was recomputed and looked up again, forever.
  const std::string dsv3 =
      "--scenario " + kvtwin::testing::source_path("scenarios/deepseek_v3_mla_h200.toml") +
      " --set vllm.max_num_batched_tokens=255 --set vllm.max_num_seqs=64"
      " --set vllm.num_gpu_blocks=8"
      " --set lmcache.enable_async_loading=true --set workload.max_requests=20";
  CommandRun r = run_kvtwin("run -q " + dsv3 + " --set output.plots=false --out " + dir + "/run",
                            /*timeout_s=*/60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string summary = slurp(dir + "/run/summary.json");
  EXPECT_NE(summary.find("\"total\": 20,"), std::string::npos) << summary;
  // Async loading, a 3,000-block pool and requests larger than it: one whose own lookup had timed
  // out (still pending upstream, its prefetch never ending) was never rejected, and the run
  // sampled an idle state until the disk was full (stop 17). The oversized ones are rejected.
  r = run_kvtwin(
      "run -q --scenario " + kvtwin::testing::source_path("scenarios/llama31_8b_h100_cpu.toml") +
          " --trace " +
          kvtwin::testing::source_path("traces/examples/mooncake_conversation_10min.jsonl") +
          " --set workload.max_requests=140 --set workload.rate_scale=0.02"
          " --set lmcache.enable_async_loading=true --set vllm.num_gpu_blocks=3000"
          " --set lmcache.max_local_cpu_size_gb=4 --set lmcache.max_local_disk_size_gb=20"
          " --set output.plots=false --out " +
          dir + "/stall",
      /*timeout_s=*/60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string stall = slurp(dir + "/stall/summary.json");
  EXPECT_NE(stall.find("\"total\": 140,"), std::string::npos) << stall;
  EXPECT_NE(stall.find("\"rejected\": 7,\n    \"failed\": 0\n"), std::string::npos) << stall;
}

// A step profile (or roofline figures) giving steps of ~10^9 s: the second step would pass the
// int64 nanosecond clock. Once an abort in the event queue (after a 23 GB timeseries while the
// first step ran); now one line and exit 1, with the timeseries collapsed meanwhile.
TEST(InputEdges, StepsLongerThanTheClockCanHoldEndTheRunWithOneLine) {
  const std::string dir = kvtwin::testing::scratch_dir();
  const std::string profile = write(dir, "huge.csv",
                                    "num_new_tokens,num_seqs,context_tokens,step_us\n"
                                    "1,1,1,1e15\n2,1,3,2e15\n4,2,5,3e15\n8,3,20,4e15\n"
                                    "16,1,7,5e15\n");
  CommandRun r =
      run_kvtwin("run -q --set step.model=profile --set step.profile=" + profile +
                 " --set workload.max_requests=1 --set output.plots=false --out " + dir + "/run");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("kvtwin: error: simulated time overflows the 292-year clock: ", 0), 0u)
      << r.err;
  EXPECT_EQ(count_lines(r.err), 1u);
  EXPECT_LT(slurp(dir + "/run/timeseries.csv").size(), 100000u);
}

TEST(InputEdges, AnAbsoluteStepProfilePathIsUsedAsWritten) {
  const std::string dir = kvtwin::testing::scratch_dir();
  std::filesystem::create_directory(dir + "/elsewhere");
  const std::string profile = write(dir, "elsewhere/p.csv", "x\n");
  const std::string s =
      write(dir, "s.toml", "[step]\nmodel = \"profile\"\nprofile = \"" + profile + "\"\n");
  // The profile is read from its absolute path (and found malformed), not from <dir>/<path>.
  CommandRun r = run_kvtwin("run -q --scenario " + s + " --out " + dir + "/run");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("kvtwin: " + profile + ":1: ", 0), 0u) << r.err;
}

TEST(InputEdges, ScenarioNamesWithControlCharactersRoundTripThroughTheRunDirectory) {
  const std::string dir = kvtwin::testing::scratch_dir();
  const std::string s = write(dir, "s.toml", "[run]\nname = \"a\\nb\\u0001'c\"\n");
  CommandRun r = run_kvtwin("run -q --scenario " + s + " --set workload.max_requests=5 --out " +
                            dir + "/run1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");  // gnuplot (when installed) accepted the title
  EXPECT_NE(slurp(dir + "/run1/scenario.toml").find("name = \"a\\nb\\u0001'c\""),
            std::string::npos);
  r = run_kvtwin("run -q --scenario " + dir + "/run1/scenario.toml --out " + dir + "/run2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(slurp(dir + "/run2/requests.csv"), slurp(dir + "/run1/requests.csv"));
}

TEST(InputEdges, SizesTheSimulatorCannotHoldAreRefusedBeforeAllocating) {
  expect_bad_input(run_kvtwin("run -q --set vllm.num_gpu_blocks=1000000000000000"),
                   "--set: vllm.num_gpu_blocks: 1000000000000000 GPU blocks per instance; the "
                   "simulator holds at most 16777216");
  expect_bad_input(run_kvtwin("run -q --set gpu.memory_gb=1e6"),
                   "--set: gpu.memory_gb: 460790294 GPU blocks per instance; the simulator holds "
                   "at most 16777216");
  expect_bad_input(run_kvtwin("run -q --set vllm.num_gpu_blocks=1"),
                   "--set: vllm.num_gpu_blocks: at least 2 blocks are needed (vLLM keeps one as "
                   "its null block)");
  CommandRun r = run_kvtwin("run -q --set cluster.instances=4096");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("kvtwin: --set: cluster.instances: 4096 instances of ", 0), 0u) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u);
}

TEST(InputEdges, CommandLineListsAndNumbersAreCheckedWhole) {
  for (const char* bad : {"inf", "1e400", "nan", "-1", "abc"})
    expect_bad_input(
        run_kvtwin(std::string("cache-replay --capacity-gb ") + bad),
        std::string("--capacity-gb: ") + bad + ": expected a number of GiB in (0, 1e9]");
  expect_bad_input(run_kvtwin("cache-replay --capacity-gb 1,,2"),
                   "--capacity-gb: empty item in the list");
  // Positive but below one byte: no CPU pool (it once reached the model's check and aborted).
  expect_bad_input(run_kvtwin("cache-replay --tier cpu --capacity-gb 1e-10"),
                   "--capacity-gb: 1e-10: lmcache.max_local_cpu_size_gb: LMCache needs a CPU pool "
                   "of at least one byte (it stages I/O)");
  for (const char* bad : {"nan", "inf", "0", "-1"}) {
    CommandRun r = run_kvtwin(std::string("trace stats x --window-s ") + bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_EQ(r.err, std::string("kvtwin: --window-s: expected seconds in (0, 1e9], got '") + bad +
                         "' (see kvtwin --help)\n");
  }
  expect_bad_input(run_kvtwin("sweep --vary vllm.block_size=16,32 --vary vllm.block_size=8,64"),
                   "--vary: vllm.block_size: varied twice (list its values once)");
}

TEST(InputEdges, FailedWritesAreErrorsNotSilentlyShortOutput) {
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  expect_bad_input(run_kvtwin("cache-replay -q --set workload.max_requests=3 --csv /dev/full"),
                   "/dev/full: write failed");
  const std::string dir = kvtwin::testing::scratch_dir();
  // stdout on a full device (run_kvtwin would redirect it to a file).
  const int status = std::system((std::string(KVTWIN_BINARY_DIR) + "/kvtwin trace stats " +
                                  kvtwin::testing::source_path("traces/examples/asr_requests.csv") +
                                  " >/dev/full 2>" + dir + "/err.txt")
                                     .c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status;
  EXPECT_EQ(slurp(dir + "/err.txt"), "kvtwin: standard output: write failed\n");
  // A run directory whose summary.json cannot be written.
  std::filesystem::create_directory(dir + "/run");
  std::filesystem::create_symlink("/dev/full", dir + "/run/summary.json");
  expect_bad_input(run_kvtwin("run -q --set workload.max_requests=3 --set output.plots=false "
                              "--out " +
                              dir + "/run"),
                   dir + "/run/summary.json: write failed");
}

}  // namespace
