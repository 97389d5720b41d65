// The kvtwin binary's edge: bad input gives one line on stderr naming file, line and field, and
// exit code 2 — never a crash.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/command.h"
#include "tests/support/paths.h"

namespace {

struct Outcome {
  int code = -1;
  std::string out;  // stdout and stderr
};

Outcome kvtwin(const std::string& args) {
  std::string cmd = std::string(KVTWIN_BINARY_DIR) + "/kvtwin " + args + " 2>&1";
  Outcome o;
  std::FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) o.out.append(buf.data(), n);
  int status = pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

std::string write(const std::string& dir, const std::string& name, const std::string& text) {
  std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

void expect_bad_input(const Outcome& o, const std::string& line) {
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_EQ(o.out, "kvtwin: " + line + "\n");
}

TEST(Cli, BadScenarioFilesNameFileLineAndKey) {
  std::string dir = kvtwin::testing::scratch_dir();
  std::string f = write(dir, "s.toml", "[vllm]\nblock_size = 16\nblok_size = 1\n");
  expect_bad_input(kvtwin("run --scenario " + f),
                   f + ":3: vllm.blok_size: unknown key; did you mean vllm.block_size?");
  std::string g = write(dir, "g.toml", "[gpu]\n\ntensor_parallel = 0\n");
  expect_bad_input(kvtwin("run --scenario " + g),
                   g + ":3: gpu.tensor_parallel: value 0 out of range [1, 1024]");
  expect_bad_input(kvtwin("run --scenario " + dir + "/none.toml"),
                   dir + "/none.toml: cannot open scenario file");
  expect_bad_input(kvtwin("run --set lmcache.chunk_size=-1"),
                   "--set: lmcache.chunk_size: value -1 out of range [1, 1048576]");
}

TEST(Cli, MalformedTraceRowsNameFileLineAndColumn) {
  std::string dir = kvtwin::testing::scratch_dir();
  std::string t = write(dir, "t.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,1\n1,x,1\n");
  expect_bad_input(kvtwin("run --trace " + t + " --out " + dir + "/run"),
                   t + ":3: prompt_tokens: expected an integer, got 'x'");
  expect_bad_input(kvtwin("trace stats " + t),
                   t + ":3: prompt_tokens: expected an integer, got 'x'");
}

TEST(Cli, BadFlagsAreOneLineAndExitTwo) {
  Outcome o = kvtwin("run --no-such-flag");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(std::count(o.out.begin(), o.out.end(), '\n'), 1) << o.out;
  expect_bad_input(kvtwin("sweep --vary lmcache.chunk_size"),
                   "--vary: lmcache.chunk_size: expected key=v1,v2,...");
  expect_bad_input(kvtwin("sweep -q --vary lmcache.max_local_cpu_size=4,16"),
                   "--vary: lmcache.max_local_cpu_size: unknown key; did you mean "
                   "lmcache.max_local_cpu_size_gb?");
  expect_bad_input(kvtwin("cache-replay --tier l3"), "--tier: l3: expected gpu, cpu or disk");
  expect_bad_input(kvtwin("capacity --slo-attainment 1.5"),
                   "--slo-attainment: 1.5: expected a share in (0, 1]");
  expect_bad_input(kvtwin("capacity --precision nan"), "--precision: nan: expected 0.001 .. 1");
  expect_bad_input(kvtwin("capacity --probes 65"), "--probes: 65: expected 1 .. 64");
  expect_bad_input(kvtwin("capacity --for cluster.instances --vary cluster.instances=2,4"),
                   "--vary: cluster.instances: is the key searched (--for); vary other keys");
}

TEST(Cli, HelpWorksForEverySubcommand) {
  for (const char* sub : {"", "run", "sweep", "capacity", "cache-replay", "trace", "trace stats",
                          "trace convert", "golden"}) {
    Outcome o = kvtwin(std::string(sub) + " --help");
    EXPECT_EQ(o.code, 0) << sub;
    EXPECT_NE(o.out.find("Usage"), std::string::npos) << sub;
  }
}

// The table prints a capacity as it was asked for: 1536 GiB once read "1.54e+03", and 12.75 GiB
// "12.8" (three significant digits).
TEST(Cli, CacheReplayTablePrintsCapacitiesAsGiven) {
  Outcome o = kvtwin(
      "cache-replay --set workload.max_requests=3 --tier cpu --capacity-gb 1536,12.75,0.125");
  ASSERT_EQ(o.code, 0) << o.out;
  for (const char* cell : {" 1536 ", " 12.75 ", " 0.125 "})
    EXPECT_NE(o.out.find(cell), std::string::npos) << cell << " in\n" << o.out;
  EXPECT_EQ(o.out.find("e+0"), std::string::npos) << o.out;
}

// A GPU tier smaller than every prompt rejects them all: no hits, and the table and the CSV say
// how many were rejected (a large tier rejects none).
TEST(Cli, CacheReplayCountsTheRequestsATierCannotHold) {
  std::string csv = kvtwin::testing::scratch_dir() + "/replay.csv";
  Outcome o = kvtwin(
      "cache-replay --set workload.max_requests=5 --tier gpu --capacity-gb 0.0625,100"
      " --csv " +
      csv);
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("rejected"), std::string::npos) << o.out;
  const auto rows = kvtwin::testing::read_csv(csv);
  ASSERT_EQ(rows.size(), 2u);
  // 512 tokens hold none of the first five prompts (2,290 to 7,322 tokens).
  EXPECT_EQ(rows[0].at("rejected"), "5");
  EXPECT_EQ(rows[0].at("gpu_hit_rate"), "0.000000");
  EXPECT_EQ(rows[0].at("lmcache_hit_rate"), "0.000000");
  EXPECT_EQ(rows[1].at("rejected"), "0");
}

// A disk retrieve needs CPU memory for all its chunks at once; with a 1-GiB CPU tier (32 chunks)
// a long disk hit can never get it (upstream would wait forever) and is recomputed. LMCache's
// hit rate counts what its lookups found; `failed_load_rate` is the part recomputed, and the
// tiers' loads cover the rest (whole chunks: a load may repeat up to chunk_size - block_size
// tokens the GPU already holds). With a 20-GiB CPU tier nothing fails.
//
// What the lookups find is the same with either CPU tier: neither is larger than the GPU's pool
// (so neither adds hits beyond it), and the disk receives every chunk, since a step stores at
// most the scenario's 8,192-token budget (32 chunks). cache-replay once ran each prompt as one
// step; a store that cannot stage all its chunks keeps the leading ones, so the 1-GiB tier fed
// the disk prompt prefixes only, and its lookups found 6 times as much.
TEST(Cli, CacheReplayReportsTheHitsWhoseLoadFailed) {
  const std::string dir = kvtwin::testing::scratch_dir();
  std::vector<std::string> lookup_hits;
  for (int cpu_gb : {1, 20}) {
    const std::string csv = dir + "/cpu" + std::to_string(cpu_gb) + ".csv";
    Outcome o = kvtwin(
        "cache-replay -q --set workload.max_requests=600 --tier disk --set "
        "lmcache.max_local_cpu_size_gb=" +
        std::to_string(cpu_gb) + " --capacity-gb 100 --csv " + csv);
    ASSERT_EQ(o.code, 0) << o.out;
    const auto rows = kvtwin::testing::read_csv(csv);
    ASSERT_EQ(rows.size(), 1u);
    const auto& r = rows[0];
    const double failed = std::stod(r.at("failed_load_rate"));
    const double loaded = std::stod(r.at("cpu_hit_rate")) + std::stod(r.at("disk_hit_rate")) +
                          std::stod(r.at("remote_hit_rate"));
    if (cpu_gb == 1) {
      EXPECT_GT(failed, 0) << cpu_gb;
      EXPECT_GT(loaded, 0) << cpu_gb;
    } else {
      EXPECT_EQ(failed, 0) << cpu_gb;
    }
    EXPECT_GE(loaded + 3e-6, std::stod(r.at("lmcache_hit_rate")) - failed) << cpu_gb;
    lookup_hits.push_back(r.at("lmcache_hit_rate"));
  }
  EXPECT_EQ(lookup_hits[0], lookup_hits[1]);
  EXPECT_NE(lookup_hits[0], "0.000000");
}

TEST(Cli, QuietRunPrintsNothingAndWritesTheRunDirectory) {
  std::string dir = kvtwin::testing::scratch_dir();
  Outcome o = kvtwin("run -q --set workload.max_requests=20 --out " + dir + "/run");
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_EQ(o.out, "");
  for (const char* f : {"summary.json", "requests.csv", "timeseries.csv", "scenario.toml"})
    EXPECT_TRUE(std::ifstream(dir + "/run/" + f).good()) << f;
}

// Without -q, `kvtwin run` (the README's main command) prints the one-screen summary on stdout,
// and nothing on stderr when it is not a terminal (no progress bar): at most 24 lines, the
// run's figures as summary.json gives them, its wall time and where its outputs went.
TEST(Cli, ARunPrintsItsSummaryOnOneScreen) {
  const std::string dir = kvtwin::testing::scratch_dir();
  const auto r =
      kvtwin::testing::run_kvtwin("run --set workload.max_requests=40 --out " + dir + "/run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_GE(lines.size(), 12u) << r.out;
  EXPECT_LE(lines.size(), 24u) << r.out;
  EXPECT_EQ(lines[0], "kvtwin run: default  (4 instances, async scheduling)");
  EXPECT_EQ(lines[1], "trace       <embedded traces/examples/mooncake_conversation_10min.jsonl>");
  const std::string summary = kvtwin::testing::slurp(dir + "/run/summary.json");
  char want[160];
  std::snprintf(want, sizeof want,
                "requests    40 finished, 0 rejected, 0 failed on KV loads, %.1f s simulated",
                kvtwin::testing::number_after(summary, "\"duration_s\": "));
  EXPECT_EQ(lines[2], want);
  std::snprintf(want, sizeof want, "GPU cache   %.1f%% prefix hit rate,",
                100 * kvtwin::testing::number_after(summary, "\"hit_rate\": "));
  EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  EXPECT_EQ(lines[lines.size() - 2].rfind("wall time   ", 0), 0u) << r.out;
  EXPECT_EQ(lines.back(), "outputs     " + dir + "/run/");
  EXPECT_EQ(lines[4].rfind("goodput     ", 0), 0u) << r.out;
  EXPECT_EQ(lines[4].find(" of all requests"), std::string::npos) << r.out;

  // Rejected requests: the goodput line gives the share of all requests beside the finished
  // ones'. A pool of 100 blocks (1,600 tokens) rejects the longer prompts.
  const auto small = kvtwin::testing::run_kvtwin(
      "run --set workload.max_requests=40 --set vllm.num_gpu_blocks=100 --out " + dir + "/small");
  ASSERT_EQ(small.exit_code, 0) << small.err;
  const std::string s = kvtwin::testing::slurp(dir + "/small/summary.json");
  const double total = kvtwin::testing::number_after(s, "\"total\": ");
  const double finished = kvtwin::testing::number_after(s, "\"finished\": ");
  const double rejected = kvtwin::testing::number_after(s, "\"rejected\": ");
  const double attainment = kvtwin::testing::number_after(s, "\"slo_attainment\": ");
  ASSERT_GT(rejected, 0) << s;
  std::snprintf(want, sizeof want,
                "(%.1f%% of the finished, %.1f%% of all requests meet the SLOs)\n",
                100 * attainment, 100 * std::round(attainment * finished) / total);
  EXPECT_NE(small.out.find(want), std::string::npos) << want << "\n" << small.out;
}

// `trace stats --json` gives the text report's figures: every count as printed, the reuse ratios
// as the fractions the text rounds to percent, and the working set's bytes whole (tokens times
// the scenario's KV bytes per token). A trace without block ids has no block fields.
TEST(Cli, TraceStatsJsonGivesTheReportsFigures) {
  using kvtwin::testing::number_after;
  const std::string trace =
      kvtwin::testing::source_path("traces/examples/mooncake_conversation_10min.jsonl");
  const auto text = kvtwin::testing::run_kvtwin("trace stats --window-s 60 " + trace);
  const auto json = kvtwin::testing::run_kvtwin("trace stats --json --window-s 60 " + trace);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const std::string& t = text.out;
  const std::string& j = json.out;
  EXPECT_EQ(number_after(j, "\"requests\": "), number_after(t, "requests "));
  EXPECT_EQ(number_after(j, "\"block_refs\": "), number_after(t, "block references "));
  EXPECT_EQ(number_after(j, "\"unique_blocks\": "), number_after(t, "unique blocks "));
  EXPECT_EQ(number_after(j, "\"p90\": "), number_after(t, "p90 "));  // the prompts' first
  EXPECT_NEAR(100 * number_after(j, "\"prefix_reuse_blocks\": "),
              number_after(t, "prefix reuse ratio "), 0.005);
  EXPECT_NEAR(100 * number_after(j, "\"prefix_reuse_tokens\": "), number_after(t, "of blocks, "),
              0.005);
  const double tokens = number_after(j, "\"working_set_tokens\": ");
  EXPECT_EQ(tokens, number_after(t, "working set "));
  const double per_token = number_after(j, "\"kv_bytes_per_token\": ");
  EXPECT_EQ(per_token, number_after(t, "KV bytes per token "));
  EXPECT_EQ(number_after(j, "\"working_set_bytes\": "), tokens * per_token);
  EXPECT_NE(j.find("\"working_set_bytes\": 2282418339840,"), std::string::npos) << j;
  EXPECT_EQ(number_after(j, "\"start_s\": "), number_after(t, " s from "));
  EXPECT_EQ(number_after(j, "\"tokens\": "), number_after(t, " s = "));

  const auto azure = kvtwin::testing::run_kvtwin(
      "trace stats --json " +
      kvtwin::testing::source_path("traces/azure_llm_2023/AzureLLMInferenceTrace_code.csv"));
  ASSERT_EQ(azure.exit_code, 0) << azure.err;
  EXPECT_EQ(number_after(azure.out, "\"requests_with_ids\": "), 0);
  EXPECT_EQ(azure.out.find("block_size"), std::string::npos) << azure.out;
}

// Under MLA every rank holds the same latent KV, and LMCache keeps rank 0's copy alone
// (save_only_first_rank): trace stats sizes the working set with one rank's 70,272 bytes per
// token (61 layers · 576 · 2) for DeepSeek-V3 at TP 8, not eight copies.
TEST(Cli, TraceStatsSizesAnMlaWorkingSetWithOneRanksCopy) {
  using kvtwin::testing::number_after;
  const std::string trace =
      kvtwin::testing::source_path("traces/examples/mooncake_conversation_10min.jsonl");
  const std::string ds =
      " --scenario " + kvtwin::testing::source_path("scenarios/deepseek_v3_mla_h200.toml");
  const auto one = kvtwin::testing::run_kvtwin("trace stats --json" + ds + " " + trace);
  const auto all = kvtwin::testing::run_kvtwin(
      "trace stats --json" + ds + " --set lmcache.save_only_first_rank=false " + trace);
  const auto text = kvtwin::testing::run_kvtwin("trace stats" + ds + " " + trace);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(number_after(one.out, "\"kv_bytes_per_token\": "), 61 * 576 * 2);
  EXPECT_EQ(number_after(all.out, "\"kv_bytes_per_token\": "), 8 * 61 * 576 * 2);
  EXPECT_NE(text.out.find("KV bytes per token    70272 (deepseek-ai/DeepSeek-V3, one rank's copy"),
            std::string::npos)
      << text.out;
  // Layerwise mode ignores save_only_first_rank: every rank stores its copy.
  const auto layerwise = kvtwin::testing::run_kvtwin("trace stats --json" + ds +
                                                     " --set lmcache.use_layerwise=true " + trace);
  ASSERT_EQ(layerwise.exit_code, 0) << layerwise.err;
  EXPECT_EQ(number_after(layerwise.out, "\"kv_bytes_per_token\": "), 8 * 61 * 576 * 2);
}

// `trace convert --scenario` writes the requests the scenario replays (scaled arrivals, the
// window from time 0, synthetic prefix ids): replayed at rate scale 1 without those keys, the
// file gives the run the scenario gives on the original trace, but for requests.csv's index
// (the converted file numbers its rows from 0) and summary.json's trace name.
TEST(Cli, AConvertedTraceReplaysAsTheScenarioDid) {
  std::string dir = kvtwin::testing::scratch_dir();
  const std::string scenario =
      " --scenario " + kvtwin::testing::source_path("scenarios/llama31_8b_h100_cpu.toml");
  const std::string transforms =
      " --set workload.prefix_groups=4 --set workload.prefix_tokens=700"
      " --set workload.start_s=200 --set workload.max_duration_s=120";
  const std::string azure =
      kvtwin::testing::source_path("traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv");
  Outcome c =
      kvtwin("trace convert " + azure + " " + dir + "/t.csv --to native" + scenario + transforms);
  ASSERT_EQ(c.code, 0) << c.out;
  Outcome a = kvtwin("run -q" + scenario + " --trace " + azure + transforms +
                     " --set output.plots=false --out " + dir + "/a");
  ASSERT_EQ(a.code, 0) << a.out;
  Outcome b =
      kvtwin("run -q" + scenario + " --trace " + dir +
             "/t.csv --set workload.rate_scale=1 --set output.plots=false --out " + dir + "/b");
  ASSERT_EQ(b.code, 0) << b.out;
  auto rows_a = kvtwin::testing::read_csv(dir + "/a/requests.csv");
  auto rows_b = kvtwin::testing::read_csv(dir + "/b/requests.csv");
  ASSERT_GT(rows_a.size(), 20u);
  ASSERT_EQ(rows_a.size(), rows_b.size());
  int64_t hits = 0;
  for (size_t i = 0; i < rows_a.size(); ++i) {
    EXPECT_NE(rows_a[i].at("index"), rows_b[i].at("index")) << i;  // the trace's numbers
    rows_a[i].erase("index");
    rows_b[i].erase("index");
    EXPECT_EQ(rows_a[i], rows_b[i]) << "row " << i;
    hits += std::stoll(rows_a[i].at("gpu_hit_tokens"));
  }
  EXPECT_GT(hits, 0);  // the synthetic prefixes were shared
  const auto without_trace_name = [](std::string s) {
    const size_t at = s.find("\"trace\"");
    return at == std::string::npos ? s : s.erase(at, s.find('\n', at) - at);
  };
  EXPECT_EQ(without_trace_name(kvtwin::testing::slurp(dir + "/a/summary.json")),
            without_trace_name(kvtwin::testing::slurp(dir + "/b/summary.json")));
}

// Determinism across processes, where addresses differ (ASLR): nothing may depend on pointer
// values or on uninitialised memory. The 70B CPU + disk + Redis scenario with async loading
// exercises every LMCache tier, prefetch and the builtin chunk hash; an uninitialised XXH3 state
// once made one run in three differ here.
TEST(Cli, SeparateProcessesWriteIdenticalBytes) {
  std::string dir = kvtwin::testing::scratch_dir();
  const std::string args =
      "run -q --scenario " +
      kvtwin::testing::source_path("scenarios/llama31_70b_tp4_cpu_disk_redis.toml") +
      " --set lmcache.enable_async_loading=true"
      " --set workload.max_requests=400 --out " +
      dir + "/run";
  std::string first_requests, first_summary;
  for (int i = 0; i < 3; ++i) {
    Outcome o = kvtwin(args + std::to_string(i));
    ASSERT_EQ(o.code, 0) << o.out;
    const std::string run = dir + "/run" + std::to_string(i);
    std::string requests = kvtwin::testing::slurp(run + "/requests.csv");
    std::string summary = kvtwin::testing::slurp(run + "/summary.json");
    ASSERT_GT(requests.size(), 1000u);
    if (i == 0) {
      first_requests = requests;
      first_summary = summary;
      continue;
    }
    EXPECT_EQ(requests, first_requests) << "run " << i;
    EXPECT_EQ(summary, first_summary) << "run " << i;
  }
}

}  // namespace
