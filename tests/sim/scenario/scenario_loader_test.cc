#include "sim/scenario/scenario_loader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "sim/io/input_error.h"
#include "sim/scenario/key_suggestion.h"
#include "sim/scenario/scenario_fields.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::scenario {
namespace {

template <class F>
std::string input_error(F fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

Scenario load(const std::string& text) {
  return load_scenario_text(text, "s.toml", ".");
}

TEST(ScenarioLoader, FieldsAbsentFromTheFileKeepTheirDefaults) {
  Scenario s = load("[vllm]\nblock_size = 32\n\n[lmcache]\nenabled = true\n");
  EXPECT_EQ(s.vllm.block_size, 32);
  EXPECT_TRUE(s.lmcache.enabled);
  EXPECT_EQ(s.vllm.max_num_seqs, 0);  // vLLM's default, resolved by effective_max_num_seqs
  EXPECT_EQ(s.model.num_layers, 32);
  EXPECT_EQ(s.origins.at("vllm.block_size").line, 2u);
}

TEST(ScenarioLoader, UnknownKeysNameFileLineAndKey) {
  EXPECT_EQ(input_error([] { load("[vllm]\nblock_size = 16\nblok_size = 16\n"); }),
            "s.toml:3: vllm.blok_size: unknown key; did you mean vllm.block_size?");
  // An unknown section is named at its header, empty or not.
  EXPECT_EQ(input_error([] { load("\n[gpus]\nname = \"x\"\n"); }),
            "s.toml:2: gpus: unknown section; did you mean gpu?");
  EXPECT_EQ(input_error([] { load("[gpus]\n"); }),
            "s.toml:1: gpus: unknown section; did you mean gpu?");
  EXPECT_EQ(input_error([] { load("[accelerator]\n"); }), "s.toml:1: accelerator: unknown section");
  EXPECT_EQ(input_error([] { load("seed = 3\n"); }),
            "s.toml:1: seed: unknown key; did you mean run.seed?");
  EXPECT_EQ(input_error([] { load("speed = 3\n"); }),
            "s.toml:1: speed: unknown key (fields belong to sections such as [model], [vllm])");
}

TEST(ScenarioLoader, AnUnknownKeySuggestsTheKeyMeant) {
  // Rule 1: the name in another section; of several, the sections spelt nearest.
  EXPECT_EQ(suggest_keys("vllm.chunk_size"), std::vector<std::string>{"lmcache.chunk_size"});
  EXPECT_EQ(suggest_keys("gpus.name"), std::vector<std::string>{"gpu.name"});
  EXPECT_EQ(suggest_keys("max_local_cpu_size_gb"),
            std::vector<std::string>{"lmcache.max_local_cpu_size_gb"});
  // Rule 2: the unit left off, every field that extends the key, in documentation order.
  EXPECT_EQ(suggest_keys("lmcache.max_local_cpu_size"),
            std::vector<std::string>{"lmcache.max_local_cpu_size_gb"});
  EXPECT_EQ(suggest_keys("links.disk_read"), std::vector<std::string>{"links.disk_read_gbps"});
  EXPECT_EQ(suggest_keys("lmcache.max_local"),
            (std::vector<std::string>{"lmcache.max_local_cpu_size_gb",
                                      "lmcache.max_local_disk_size_gb"}));
  // Rule 3: typos within max(1, min(3, length / 4)) edits; a swap of neighbours is one edit.
  EXPECT_EQ(suggest_keys("vllm.blcok_size"), std::vector<std::string>{"vllm.block_size"});
  EXPECT_EQ(suggest_keys("lmcach.chunk_size"), std::vector<std::string>{"lmcache.chunk_size"});
  EXPECT_EQ(suggest_keys("vllm.max_num_seq"), std::vector<std::string>{"vllm.max_num_seqs"});
  EXPECT_EQ(suggest_keys("vllm.blk_size"), std::vector<std::string>{"vllm.block_size"});  // 2
  EXPECT_TRUE(suggest_keys("run.sd").empty());  // 2 edits from run.seed, but 6 letters allow 1
  EXPECT_TRUE(suggest_keys("vllm.nope").empty());
  EXPECT_TRUE(suggest_keys("x").empty());
  // A hardware profile's keys are [links] keys only.
  EXPECT_EQ(suggest_keys("links.name", "links"), std::vector<std::string>{});
  // "run" is 4 edits from "links", "model" and "gpu" 5.
  EXPECT_EQ(suggest_keys("links.name"), std::vector<std::string>{"run.name"});
  EXPECT_EQ(suggest_sections("lmcach"), std::vector<std::string>{"lmcache"});
  EXPECT_TRUE(suggest_sections("zzzz").empty());
  // Every suggestion is a key the loader accepts.
  for (const char* typed : {"vllm.chunk_size", "gpus.name", "lmcache.max_local", "vllm.blcok_size"})
    for (const std::string& k : suggest_keys(typed)) EXPECT_NE(find_field(k), nullptr) << k;
  EXPECT_EQ(did_you_mean({}), "");
  EXPECT_EQ(did_you_mean({"a"}), "; did you mean a?");
  EXPECT_EQ(did_you_mean({"a", "b", "c"}), "; did you mean a, b or c?");
}

TEST(ScenarioLoader, EditDistanceCountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("block", "blcok"), 1u);  // one swap, not two substitutions
  EXPECT_EQ(edit_distance("ca", "abc"), 3u);       // OSA, not unrestricted Damerau (2)
  EXPECT_EQ(edit_distance("flaw", "lawn"), 2u);
  for (const char* a : {"", "gpu", "lmcache", "links"})
    for (const char* b : {"", "gpus", "lmcach", "link"})
      EXPECT_EQ(edit_distance(a, b), edit_distance(b, a)) << a << " " << b;
}

TEST(ScenarioLoader, OutOfRangeAndWrongTypesNameFileLineAndKey) {
  EXPECT_EQ(input_error([] { load("[vllm]\n\nblock_size = 0\n"); }),
            "s.toml:3: vllm.block_size: value 0 out of range [1, 256]");
  EXPECT_EQ(input_error([] { load("[gpu]\ncompute_efficiency = 1.5\n"); }),
            "s.toml:2: gpu.compute_efficiency: value 1.5 out of range [0.001, 1]");
  EXPECT_EQ(input_error([] { load("[vllm]\nblock_size = \"16\"\n"); }),
            "s.toml:2: vllm.block_size: expected an integer");
  EXPECT_EQ(input_error([] { load("[vllm]\nblock_size = 16.5\n"); }),
            "s.toml:2: vllm.block_size: expected an integer");
  EXPECT_EQ(input_error([] { load("[lmcache]\nenabled = 1\n"); }),
            "s.toml:2: lmcache.enabled: expected true or false");
  EXPECT_EQ(input_error([] { load("[cluster]\nrouter = \"random\"\n"); }),
            "s.toml:2: cluster.router: 'random' is not one of: round_robin, least_loaded, "
            "prefix_aware");
}

// Values vLLM v0.17 does not take: block sizes outside its BlockSize list, KV cache types
// outside --kv-cache-dtype's choices, and more seats than the token budget.
TEST(ScenarioLoader, RefusesWhatVllmDoesNotTake) {
  EXPECT_EQ(input_error([] { load("[vllm]\nblock_size = 48\n"); }),
            "s.toml:2: vllm.block_size: vLLM takes 1, 8, 16, 32, 64, 128 or 256");
  for (const char* ok : {"1", "8", "16", "32", "64", "128", "256"})
    EXPECT_EQ(load(std::string("[vllm]\nblock_size = ") + ok + "\n").vllm.block_size,
              std::stoi(ok));
  EXPECT_EQ(input_error([] { load("[model]\nkv_cache_dtype = \"float16\"\n"); }),
            "s.toml:2: model.kv_cache_dtype: 'float16' is not one of: auto, bfloat16, fp8, "
            "fp8_e4m3, fp8_e5m2");
  EXPECT_EQ(input_error([] { load("[vllm]\nmax_num_batched_tokens = 128\nmax_num_seqs = 256\n"); }),
            "s.toml:2: vllm.max_num_batched_tokens: vllm.max_num_batched_tokens must be >= "
            "vllm.max_num_seqs, as vLLM requires (vllm.max_num_batched_tokens = 128, "
            "vllm.max_num_seqs = 256)");
  EXPECT_EQ(load("[vllm]\nmax_num_batched_tokens = 256\nmax_num_seqs = 256\n").vllm.max_num_seqs,
            256);
  // LMCache on sliding-window layers: with full-attention layers vLLM makes them full attention
  // (one group); alone they stay a sliding-window group, which kvtwin does not model with LMCache.
  EXPECT_TRUE(load("[model]\nlayer_pattern = \"SF\"\nsliding_window = 64\n[lmcache]\n"
                   "enabled = true\n")
                  .lmcache.enabled);
  EXPECT_EQ(input_error([] {
              load(
                  "[model]\nlayer_pattern = \"S\"\nsliding_window = 64\n[lmcache]\n"
                  "enabled = true\n");
            }),
            "s.toml:5: lmcache.enabled: kvtwin does not model LMCache on a model whose attention "
            "layers are all sliding-window (vLLM keeps them one sliding-window group); a pattern "
            "with F layers runs");
  // The pattern repeats to num_layers: four layers of SSSSSF are all sliding-window.
  EXPECT_NE(input_error([] {
              load(
                  "[model]\nnum_layers = 4\nlayer_pattern = \"SSSSSF\"\nsliding_window = 64\n"
                  "[lmcache]\nenabled = true\n");
            }).find("lmcache.enabled: kvtwin does not model LMCache"),
            std::string::npos);
  // vLLM's MLA layers have no sliding window.
  EXPECT_EQ(input_error([] {
              load(
                  "[model]\nattention = \"mla\"\nkv_lora_rank = 512\nqk_rope_head_dim = 64\n"
                  "layer_pattern = \"SF\"\nsliding_window = 64\n");
            }),
            "s.toml:5: model.layer_pattern: vLLM's MLA attention has no sliding window: S layers "
            "cannot be MLA (model.layer_pattern = \"SF\", model.attention = \"mla\")");
}

// max_num_seqs = 0 is vLLM's default as `vllm serve` picks it without --max-num-seqs: 1024 on a
// device of at least 70 GiB whose name lacks "a100", else 256, lowered to the token budget.
TEST(ScenarioLoader, TheDefaultSeatsAreVllmServesForTheGpu) {
  EXPECT_EQ(effective_max_num_seqs(load("")), 1024);  // H100-SXM5-80GB
  EXPECT_EQ(effective_max_num_seqs(load("[vllm]\nmax_num_batched_tokens = 512\n")), 512);
  EXPECT_EQ(effective_max_num_seqs(load("[gpu]\nname = \"A100-SXM4-80GB\"\n")), 256);
  EXPECT_EQ(effective_max_num_seqs(load("[gpu]\nname = \"NVIDIA a100 80GB\"\n")), 256);
  EXPECT_EQ(effective_max_num_seqs(load("[gpu]\nname = \"A800-SXM4-80GB\"\n")), 1024);
  EXPECT_EQ(effective_max_num_seqs(load("[gpu]\nmemory_gb = 48\n")), 256);
  EXPECT_EQ(effective_max_num_seqs(load("[gpu]\nmemory_gb = 70\n")), 1024);
  EXPECT_EQ(effective_max_num_seqs(load("[vllm]\nmax_num_seqs = 300\n")), 300);
  EXPECT_EQ(
      effective_max_num_seqs(load("[gpu]\nmemory_gb = 48\n[vllm]\nmax_num_batched_tokens = 100\n")),
      100);
}

// max_num_batched_tokens = 0 is vLLM's default budget as `vllm serve` picks it without
// --max-num-batched-tokens: 8192 on a device of at least 70 GiB whose name lacks "a100", else
// 2048; without chunked prefill at least max_model_len; at most the seats times max_model_len.
// The default seats are then lowered to that budget.
TEST(ScenarioLoader, TheDefaultBudgetIsVllmServesForTheGpu) {
  EXPECT_EQ(load("").vllm.max_num_batched_tokens, 0);
  EXPECT_EQ(effective_max_num_batched_tokens(load("")), 8192);  // H100-SXM5-80GB
  EXPECT_EQ(effective_max_num_batched_tokens(load("[gpu]\nname = \"A100-SXM4-80GB\"\n")), 2048);
  EXPECT_EQ(effective_max_num_batched_tokens(load("[gpu]\nmemory_gb = 48\n")), 2048);
  EXPECT_EQ(effective_max_num_batched_tokens(load("[vllm]\nmax_num_batched_tokens = 4096\n")),
            4096);
  // Without chunked prefill the budget is raised to one whole prompt.
  EXPECT_EQ(effective_max_num_batched_tokens(
                load("[vllm]\nenable_chunked_prefill = false\nmax_model_len = 30000\n")),
            30000);
  EXPECT_EQ(effective_max_num_batched_tokens(
                load("[vllm]\nenable_chunked_prefill = false\nmax_model_len = 4096\n")),
            8192);
  // So for an encoder-decoder model, which vLLM runs without chunked prefill whatever the key
  // says; such a scenario with a long max_model_len then starts, as vLLM does.
  const Scenario encdec =
      load("[model]\nencoder_layers = 2\nencoder_tokens = 100\n[vllm]\nmax_model_len = 30000\n");
  EXPECT_EQ(effective_max_num_batched_tokens(encdec), 30000);
  EXPECT_NO_THROW(validate(encdec));
  // At most seats x max_model_len: 4 seats of 1,000 tokens.
  EXPECT_EQ(
      effective_max_num_batched_tokens(load("[vllm]\nmax_num_seqs = 4\nmax_model_len = 1000\n")),
      4000);
  // The default seats: 256 on a 48-GiB GPU (within its 2048 tokens); with 8-token requests the
  // default 1024 seats cap the budget at 1024 · 8 = 8192, which leaves them all.
  EXPECT_EQ(effective_max_num_seqs(load("[gpu]\nmemory_gb = 48\n")), 256);
  EXPECT_EQ(effective_max_num_seqs(load("[vllm]\nmax_model_len = 8\nmax_num_seqs = 0\n")), 1024);
  // An explicit seat count above the default budget is refused, the default shown.
  EXPECT_EQ(input_error([] { load("[gpu]\nmemory_gb = 48\n[vllm]\nmax_num_seqs = 4096\n"); }),
            "s.toml:4: vllm.max_num_seqs: vllm.max_num_batched_tokens must be >= "
            "vllm.max_num_seqs, as vLLM requires (vllm.max_num_batched_tokens = 0 (vLLM's "
            "default: 2048), vllm.max_num_seqs = 4096)");
}

TEST(ScenarioLoader, SyntaxErrorsCarryTheLine) {
  std::string msg = input_error([] { load("[vllm]\nblock_size = = 3\n"); });
  EXPECT_EQ(msg.rfind("s.toml:2: ", 0), 0u) << msg;
}

TEST(ScenarioLoader, InconsistentCombinationsCiteTheField) {
  EXPECT_EQ(input_error([] { load("[model]\nnum_heads = 32\n\n[gpu]\ntensor_parallel = 3\n"); }),
            "s.toml:5: gpu.tensor_parallel: gpu.tensor_parallel must divide model.num_heads "
            "(gpu.tensor_parallel = 3, model.num_heads = 32)");
  // Both keys in the file: the first of the rule is named; one left at its default: the other.
  EXPECT_EQ(input_error([] { load("[model]\nnum_heads = 30\n"); }),
            "s.toml:2: model.num_heads: model.num_kv_heads must divide model.num_heads "
            "(model.num_kv_heads = 8, model.num_heads = 30)");
  EXPECT_EQ(input_error([] { load("[model]\nlayer_pattern = \"SF\"\n"); }),
            "s.toml: model.sliding_window: S layers need a window > 0");
  EXPECT_EQ(input_error([] { load("[model]\nlayer_pattern = \"FX\"\n"); }),
            "s.toml:2: model.layer_pattern: only F, S and M may appear");
  EXPECT_EQ(input_error([] { load("[workload]\nstart_s = 60\nwarmup_s = 90\n"); }),
            "s.toml:3: workload.warmup_s: the warm-up replays the trace before workload.start_s, "
            "so workload.warmup_s must be <= workload.start_s (workload.warmup_s = 90.0, "
            "workload.start_s = 60.0)");
}

// An error quoting a multi-line TOML string stays one line (found by scenario_fuzz.py): every
// InputError writes control characters but tab as escapes.
TEST(ScenarioLoader, AnErrorQuotingAMultiLineValueIsOneLine) {
  EXPECT_EQ(input_error([] { load("[vllm]\nkv_load_failure_policy = \"\"\"multi\nline\"\"\"\n"); }),
            "s.toml:2: vllm.kv_load_failure_policy: 'multi\\nline' is not one of: fail, "
            "recompute");
  EXPECT_STREQ(InputError("f", 0, "k",
                          "a\rb\x01"
                          "c\td\x7f")
                   .what(),
               "f: k: a\\rb\\x01c\td\\x7f");
}

// LMCache's CPU pool is whole bytes: a size that is positive but below one byte is refused at the
// input edge (it once reached the model's check and aborted), and one byte is a pool.
TEST(ScenarioLoader, TheCpuPoolMustHoldAtLeastOneByte) {
  for (const char* size : {"0", "1e-10", "9.3e-10"})
    EXPECT_EQ(input_error([&] {
                load(std::string("[lmcache]\nenabled = true\nmax_local_cpu_size_gb = ") + size);
              }),
              "s.toml:3: lmcache.max_local_cpu_size_gb: LMCache needs a CPU pool of at least one "
              "byte (it stages I/O)")
        << size;
  EXPECT_EQ(load("[lmcache]\nenabled = true\nmax_local_cpu_size_gb = 9.32e-10\n")
                .lmcache.max_local_cpu_size_gb,
            9.32e-10);  // 1.0007 bytes
  // Without LMCache the size is unused.
  EXPECT_EQ(load("[lmcache]\nmax_local_cpu_size_gb = 1e-10\n").lmcache.max_local_cpu_size_gb,
            1e-10);
}

TEST(ScenarioLoader, AsyncLoadingIsAcceptedButNotWithLayerwise) {
  Scenario s = load("[lmcache]\nenabled = true\nenable_async_loading = true\n");
  EXPECT_TRUE(s.lmcache.enable_async_loading);
  EXPECT_EQ(s.lmcache.lookup_timeout_ms, 3000);
  EXPECT_NE(input_error([] {
              load(
                  "[lmcache]\nenabled = true\nenable_async_loading = true\n"
                  "use_layerwise = true\n");
            }).find("lmcache.enable_async_loading: LMCache's async loading has no layerwise"),
            std::string::npos);
}

TEST(ScenarioLoader, ThePageCacheTakesMemoryAndABandwidth) {
  Scenario s = load("[lmcache]\nenabled = true\n[links]\npage_cache_gb = 64\n");
  EXPECT_EQ(s.links.page_cache_gb, 64);
  EXPECT_EQ(s.links.page_cache_gbps, 10);
  EXPECT_EQ(s.links.page_cache_write_gbps, 8);
  EXPECT_EQ(input_error([] { load("[links]\npage_cache_gb = -1\n"); }).find("s.toml:2: "), 0u);
  EXPECT_EQ(input_error([] { load("[links]\npage_cache_gbps = 0\n"); }).find("s.toml:2: "), 0u);
}

TEST(ScenarioLoader, MissingFileIsAnInputError) {
  EXPECT_EQ(input_error([] { load_scenario_file("/nonexistent.toml"); }),
            "/nonexistent.toml: cannot open scenario file");
}

TEST(ScenarioOverride, SetsTypedValuesAndBareWords) {
  Scenario s = load("");
  apply_override(&s, "vllm.block_size=32");
  apply_override(&s, "cluster.router=least_loaded");
  apply_override(&s, "lmcache.max_local_cpu_size_gb=12.5");
  apply_override(&s, "lmcache.enabled=true");
  apply_override(&s, "run.name=\"a b\"");
  EXPECT_EQ(s.vllm.block_size, 32);
  EXPECT_EQ(s.cluster.router, "least_loaded");
  EXPECT_DOUBLE_EQ(s.lmcache.max_local_cpu_size_gb, 12.5);
  EXPECT_TRUE(s.lmcache.enabled);
  EXPECT_EQ(s.run.name, "a b");
  EXPECT_EQ(input_error([&] { apply_override(&s, "vllm.block_size=abc"); }),
            "--set: vllm.block_size: expected an integer");
  EXPECT_EQ(input_error([&] { apply_override(&s, "vllm.nope=1"); }),
            "--set: vllm.nope: unknown key");
  EXPECT_EQ(input_error([&] { apply_override(&s, "vllm.max_num_seq=3"); }),
            "--set: vllm.max_num_seq: unknown key; did you mean vllm.max_num_seqs?");
  EXPECT_EQ(input_error([&] { apply_override(&s, "novalue"); }),
            "--set: novalue: expected key=value");
  EXPECT_EQ(input_error([&] { apply_override(&s, " =3"); }), "--set:  =3: expected key=value");
  // Spaces around the key and the value, as a TOML file writes them.
  apply_override(&s, "vllm.block_size = 64");
  apply_override(&s, "\tcluster.router =  round_robin");
  EXPECT_EQ(s.vllm.block_size, 64);
  EXPECT_EQ(s.cluster.router, "round_robin");
}

TEST(ScenarioDump, ReloadingTheDumpGivesTheSameScenario) {
  Scenario s = load("[vllm]\nblock_size = 32\n[gpu]\nmemory_efficiency = 0.7\n");
  apply_override(&s, "run.name=\"quote\\\"d\"");
  std::string dump = dump_scenario(s);
  Scenario back = load_scenario_text(dump, "dump.toml", ".");
  EXPECT_EQ(dump_scenario(back), dump);
  EXPECT_EQ(back.run.name, "quote\"d");
}

// An optional field (upstream's None) dumps as a comment while unset, and reloads either way.
TEST(ScenarioDump, AnUnsetOptionalFieldReloadsUnset) {
  Scenario s = load("[lmcache]\nenabled = true\n");
  EXPECT_FALSE(s.lmcache.priority_limit.has_value());
  std::string dump = dump_scenario(s);
  EXPECT_NE(dump.find("\n# priority_limit unset\n"), std::string::npos) << dump;
  EXPECT_FALSE(load_scenario_text(dump, "dump.toml", ".").lmcache.priority_limit.has_value());
  apply_override(&s, "lmcache.priority_limit=-2");
  dump = dump_scenario(s);
  EXPECT_NE(dump.find("\npriority_limit = -2\n"), std::string::npos) << dump;
  EXPECT_EQ(load_scenario_text(dump, "dump.toml", ".").lmcache.priority_limit, -2);
  EXPECT_EQ(input_error([&] { apply_override(&s, "lmcache.priority_limit=1.5"); }),
            "--set: lmcache.priority_limit: expected an integer");
}

std::vector<std::string> shipped_scenarios() {
  std::vector<std::string> out;
  for (const auto& e :
       std::filesystem::directory_iterator(kvtwin::testing::source_path("scenarios")))
    if (e.path().extension() == ".toml") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ShippedScenarios, EveryFileLoadsAndItsTraceExists) {
  auto files = shipped_scenarios();
  EXPECT_GE(files.size(), 8u);
  for (const std::string& f : files) {
    Scenario s = load_scenario_file(f);
    if (!s.workload.trace.empty()) {
      EXPECT_TRUE(std::filesystem::exists(s.base_dir + "/" + s.workload.trace)) << f;
    }
  }
}

TEST(ShippedScenarios, EmbeddedDefaultIsScenariosDefaultToml) {
  Scenario embedded = load_default_scenario();
  Scenario file = load_scenario_file(kvtwin::testing::source_path("scenarios/default.toml"));
  EXPECT_EQ(dump_scenario(embedded), dump_scenario(file));
}

// A hardware profile as kvtwin calibrate writes one (its other tables are the validator's).
std::string write_profile(const std::string& dir, const std::string& links) {
  std::ofstream(dir + "/profile.toml")
      << "# measured\n[links]\n"
      << links << "\n[link_models.disk_read]\nlatency_us = 1.0\n[tiers]\ndisk_queue_depth = 8\n";
  return dir + "/profile.toml";
}

TEST(HardwareProfile, ItsLinkFiguresReplaceTheScenariosWhereverTheTableAppears) {
  const std::string dir = kvtwin::testing::scratch_dir();
  write_profile(dir, "disk_read_gbps = 1.25\ndisk_latency_us = 90.5\nnetwork_gbps = 0.75");
  Scenario s = load_scenario_text(
      "[hardware]\nprofile = \"profile.toml\"\n[links]\ndisk_read_gbps = 9\npcie_h2d_gbps = 20\n",
      dir + "/s.toml", dir);
  EXPECT_EQ(s.links.disk_read_gbps, 1.25);
  EXPECT_EQ(s.links.disk_latency_us, 90.5);
  EXPECT_EQ(s.links.network_gbps, 0.75);
  EXPECT_EQ(s.links.pcie_h2d_gbps, 20);  // not in the profile: the scenario's
  EXPECT_EQ(s.origins.at("links.disk_read_gbps").file, dir + "/profile.toml");
  EXPECT_EQ(s.origins.at("links.disk_read_gbps").line, 3u);
  // --set still wins over both; --set hardware.profile applies a profile at that point.
  apply_override(&s, "links.disk_read_gbps=3");
  EXPECT_EQ(s.links.disk_read_gbps, 3);
  Scenario t = load("[links]\ndisk_read_gbps = 9\n");
  apply_override(&t, "hardware.profile=" + dir + "/profile.toml");
  EXPECT_EQ(t.links.disk_read_gbps, 1.25);
}

TEST(HardwareProfile, AMissingProfileNamesTheScenarioFileLineAndKey) {
  EXPECT_EQ(input_error([] { load("[run]\nseed = 1\n[hardware]\nprofile = \"nope.toml\"\n"); }),
            "s.toml:4: hardware.profile: cannot read hardware profile ./nope.toml");
  Scenario s = load("");
  EXPECT_EQ(input_error([&] { apply_override(&s, "hardware.profile=/no/p.toml"); }),
            "--set: hardware.profile: cannot read hardware profile /no/p.toml");
}

TEST(HardwareProfile, ABadEntryNamesTheProfileFileLineAndKey) {
  const std::string dir = kvtwin::testing::scratch_dir();
  const std::string p = write_profile(dir, "disk_read_gbps = 1.0\ndisk_speed = 2.0");
  EXPECT_EQ(input_error([&] { load("[hardware]\nprofile = \"" + p + "\"\n"); }),
            p + ":4: links.disk_speed: unknown key");
  write_profile(dir, "disk_read = 2.0");
  EXPECT_EQ(input_error([&] { load("[hardware]\nprofile = \"" + p + "\"\n"); }),
            p + ":3: links.disk_read: unknown key; did you mean links.disk_read_gbps?");
  write_profile(dir, "disk_write_gbps = -1.0");
  EXPECT_NE(input_error([&] {
              load("[hardware]\nprofile = \"" + p + "\"\n");
            }).find(p + ":3: links.disk_write_gbps: value -1 out of range"),
            std::string::npos);
  std::ofstream(p) << "[tiers]\ndisk_queue_depth = 8\n";
  EXPECT_EQ(input_error([&] { load("[hardware]\nprofile = \"" + p + "\"\n"); }),
            p + ": links: a hardware profile needs a [links] table (kvtwin calibrate writes one)");
}

// The PCIe profiles measured on an H100 and an H200 (scenarios/hardware/): each sets the three
// pcie keys and nothing else; a relative --set path is taken from the scenario's folder.
TEST(HardwareProfile, TheShippedGpuProfilesSetOnlyThePcieLinks) {
  struct Shipped {
    const char* file;
    double h2d_gbps, d2h_gbps, latency_us;
  };
  const Shipped shipped[] = {{"hardware/h100_80gb_hbm3_pcie5.toml", 49.725, 51.8499, 22.2552},
                             {"hardware/h200_pcie5.toml", 50.6309, 53.2371, 22.28}};
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(
                              kvtwin::testing::source_path("scenarios/hardware")),
                          std::filesystem::directory_iterator()),
            std::ssize(shipped))
      << "a profile in scenarios/hardware/ that this test does not list";
  auto without_comments = [](std::string dump) {
    std::string out;
    std::istringstream in(dump);
    for (std::string line; std::getline(in, line);)
      if (!line.starts_with("#") && line.find("profile") == std::string::npos) out += line + "\n";
    return out;
  };
  for (const Shipped& p : shipped) {
    SCOPED_TRACE(p.file);
    Scenario s = load_scenario_file(kvtwin::testing::source_path("scenarios/default.toml"));
    const Scenario before = s;
    apply_override(&s, std::string("hardware.profile=") + p.file);
    EXPECT_EQ(s.links.pcie_h2d_gbps, p.h2d_gbps);
    EXPECT_EQ(s.links.pcie_d2h_gbps, p.d2h_gbps);
    EXPECT_EQ(s.links.pcie_latency_us, p.latency_us);
    Scenario expected = before;
    expected.links.pcie_h2d_gbps = s.links.pcie_h2d_gbps;
    expected.links.pcie_d2h_gbps = s.links.pcie_d2h_gbps;
    expected.links.pcie_latency_us = s.links.pcie_latency_us;
    EXPECT_EQ(without_comments(dump_scenario(s)), without_comments(dump_scenario(expected)));
  }
}

TEST(HardwareProfile, TheDumpKeepsTheAppliedFiguresAndReloadsWithoutTheFile) {
  const std::string dir = kvtwin::testing::scratch_dir();
  write_profile(dir, "disk_write_gbps = 0.5");
  Scenario s = load_scenario_text("[hardware]\nprofile = \"profile.toml\"\n", dir + "/s.toml", dir);
  const std::string dump = dump_scenario(s);
  std::filesystem::remove(dir + "/profile.toml");
  Scenario back = load_scenario_text(dump, "elsewhere/scenario.toml", "elsewhere");
  EXPECT_EQ(back.links.disk_write_gbps, 0.5);
  EXPECT_TRUE(back.hardware.profile.empty());
  EXPECT_NE(dump.find("# profile = \"profile.toml\" (applied"), std::string::npos) << dump;
}

TEST(ScenarioReadme, DocumentsEveryField) {
  std::ifstream in(kvtwin::testing::source_path("scenarios/README.md"));
  std::stringstream text;
  text << in.rdbuf();
  for (const FieldSpec& f : scenario_fields()) {
    std::string name = f.key.substr(f.key.find('.') + 1);
    std::string section = f.key.substr(0, f.key.find('.'));
    EXPECT_NE(text.str().find("`" + name + "`"), std::string::npos) << f.key;
    EXPECT_NE(text.str().find("[" + section + "]"), std::string::npos) << section;
  }
}

}  // namespace
}  // namespace kvtwin::sim::scenario
