#include "sim/engine/kv_cache_layout.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/io/input_error.h"
#include "sim/scenario/scenario_loader.h"
#include "tests/sim/engine/engine_harness.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::engine {
namespace {

using scenario::kGiB;

scenario::Scenario shipped(const std::string& name, std::initializer_list<const char*> sets) {
  scenario::Scenario s = scenario::load_scenario_file(testing::source_path("scenarios/" + name));
  for (const char* a : sets) scenario::apply_override(&s, a);
  scenario::validate(s);
  return s;
}

KvCacheLayout layout_of(const scenario::Scenario& s) {
  return derive_kv_cache_layout(s, hw::derive_geometry(s));
}

// The InputError derive_kv_cache_layout throws, or a failure.
InputError refusal(const scenario::Scenario& s) {
  try {
    layout_of(s);
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "the layout was derived";
  return InputError("", 0, "", "");
}

// The memory left for KV per GPU, as the scenario documents it, computed here from its fields.
double kv_memory(const scenario::Scenario& s) {
  return s.gpu.memory_gb * kGiB * s.vllm.gpu_memory_utilization -
         hw::derive_geometry(s).weight_bytes_per_rank() - s.vllm.activation_reserve_gb * kGiB;
}

// Llama-3.1-8B (32 full-attention layers, 8 KV heads of 128, bf16) on one H100 with a quarter of
// its memory: 80 · 0.25 GiB less the weights and the 4-GiB reserve leaves about 2 GiB, while one
// 131,072-token request needs 32 layers · 8,192 blocks · 16 tokens · 4 KiB = 16 GiB. vLLM refuses
// to start and estimates the longest model length that fits: the most whole 16-token blocks of all
// 32 layers that fit, times 16.
TEST(KvCacheLayout, RefusesAModelLengthTheKvMemoryCannotHoldAndEstimatesTheLongestThatFits) {
  scenario::Scenario s = shipped("llama31_8b_h100_cpu.toml", {"vllm.gpu_memory_utilization=0.25"});
  const double per_block = 32.0 * 16 * 2 * 8 * 128 * 2;  // bytes of one block over all layers
  const double available = kv_memory(s);
  ASSERT_GT(available, per_block);
  ASSERT_LT(available, 131072 / 16 * per_block);
  const long long longest = static_cast<long long>(available / per_block) * 16;

  InputError e = refusal(s);
  EXPECT_EQ(e.field(), "vllm.max_model_len");
  const std::string what = e.what();
  EXPECT_NE(what.find("one request of 131072 tokens needs 16.00 GiB"), std::string::npos) << what;
  EXPECT_NE(what.find("the longest model length that fits is " + std::to_string(longest) + ")"),
            std::string::npos)
      << what;

  // The estimate is exact: it starts; one token more needs one more block and does not.
  scenario::apply_override(&s, "vllm.max_model_len=" + std::to_string(longest));
  EXPECT_GE(layout_of(s).num_blocks(), longest / 16);
  scenario::apply_override(&s, "vllm.max_model_len=" + std::to_string(longest + 1));
  EXPECT_EQ(refusal(s).field(), "vllm.max_model_len");
}

// Upstream checks the memory it measured, before num_gpu_blocks_override replaces the count: an
// override does not make a refused configuration start, and an override smaller than one
// max_model_len request does not stop a configuration whose memory suffices.
TEST(KvCacheLayout, TheCheckReadsTheMemoryNotTheBlockOverride) {
  EXPECT_EQ(refusal(shipped("llama31_8b_h100_cpu.toml",
                            {"vllm.gpu_memory_utilization=0.25", "vllm.num_gpu_blocks=50000"}))
                .field(),
            "vllm.max_model_len");
  EXPECT_EQ(
      layout_of(shipped("llama31_8b_h100_cpu.toml", {"vllm.num_gpu_blocks=2048"})).num_blocks(),
      2048);
  // With the override and no memory at all left for KV, vLLM stops at the same check.
  EXPECT_EQ(refusal(shipped("llama31_8b_h100_cpu.toml",
                            {"vllm.gpu_memory_utilization=0.2", "vllm.num_gpu_blocks=2048"}))
                .field(),
            "vllm.gpu_memory_utilization");
}

// The upstream sizing of hybrid models: group_size · page · the pages of the FIRST group's spec.
// gpt-oss alternates sliding-window and full layers starting with a sliding one, so its first group
// is a sliding-window group, which needs cdiv(min(window - 1 + max_num_batched_tokens,
// max_model_len), 16) + 1 pages whatever max_model_len is: a memory that cannot hold one
// max_model_len request in the full-attention group still passes. Starting the pattern with the
// full layer ("FS") makes the same memory refuse.
TEST(KvCacheLayout, HybridModelsAreCheckedByTheirFirstGroupOnlyAsUpstream) {
  scenario::Scenario s = shipped("gpt_oss_120b_hybrid.toml", {});
  const hw::ModelGeometry g = hw::derive_geometry(s);
  ASSERT_EQ(g.layers.front(), hw::LayerKind::kSliding);
  const double page = 16.0 * static_cast<double>(g.kv_bytes_per_token_per_layer);
  const double group_size = 18;  // 18 sliding + 18 full layers: two groups of 18
  const double sliding_need = group_size * page * ((128 - 1 + 8192 + 15) / 16 + 1);
  const double full_need = group_size * page * (131072 / 16);
  // Memory for the sliding group's need and a little more, far below the full group's.
  const double util =
      (sliding_need * 1.5 + g.weight_bytes_per_rank() + s.vllm.activation_reserve_gb * kGiB) /
      (s.gpu.memory_gb * kGiB);
  scenario::apply_override(&s, "vllm.gpu_memory_utilization=" + std::to_string(util));
  ASSERT_GT(kv_memory(s), sliding_need);
  ASSERT_LT(kv_memory(s), full_need);
  EXPECT_GT(layout_of(s).num_blocks(), 0);

  scenario::apply_override(&s, "model.layer_pattern=\"FS\"");
  EXPECT_EQ(refusal(s).field(), "vllm.max_model_len");
}

// Whisper large-v3 (encoder-decoder): each of the 32 decoder layers has a self-attention layer
// and a cross-attention layer over the encoder's output. Their pages are equal (16 tokens · 20 KV
// heads · 64 · K and V · 2 bytes = 81,920 bytes) but their specs differ, so upstream makes one
// group of each kind, 32 layers apiece: a block id is 32 pages. A request's cross-attention needs
// cdiv(1,500 encoder tokens, 16) = 94 blocks.
TEST(KvCacheLayout, WhisperHasASelfAndACrossAttentionGroupOfThirtyTwoLayers) {
  const scenario::Scenario s = shipped("whisper_large_v3_encdec.toml", {});
  const KvCacheLayout l = layout_of(s);
  ASSERT_EQ(l.config.kv_cache_groups.size(), 2u);
  const auto& self = l.config.kv_cache_groups[0];
  const auto& cross = l.config.kv_cache_groups[1];
  EXPECT_EQ(self.kv_cache_spec.kind, model::vllm::KVCacheSpecKind::kFullAttention);
  EXPECT_EQ(cross.kv_cache_spec.kind, model::vllm::KVCacheSpecKind::kCrossAttention);
  ASSERT_EQ(self.layer_names.size(), 32u);
  ASSERT_EQ(cross.layer_names.size(), 32u);
  EXPECT_EQ(self.layer_names[5], "layers.5");
  EXPECT_EQ(cross.layer_names[5], "layers.5.cross");
  EXPECT_EQ(l.page_bytes, 16 * 20 * 64 * 2 * 2);
  EXPECT_EQ(l.layers_per_group, 32);
  EXPECT_EQ(l.block_bytes, 32 * l.page_bytes);
  EXPECT_EQ(l.num_blocks(),
            static_cast<int64_t>(kv_memory(s) / static_cast<double>(l.block_bytes)));
  EXPECT_FALSE(l.enable_caching);  // the scenario turns prefix caching off, as vLLM requires
}

// MLA: vLLM forces the block size of its default MLA backend (CudaPlatform.
// check_and_update_config). DeepSeek-V3's page is block_size · 576 elements · 2 bytes.
TEST(KvCacheLayout, MlaTakesTheBlockSizeItsDefaultBackendForces) {
  auto block = [](std::initializer_list<const char*> sets) {
    return layout_of(shipped("deepseek_v3_mla_h200.toml", sets)).attention_block_size;
  };
  // Hopper, FlashMLA: 64 unless a multiple of 64.
  EXPECT_EQ(block({"vllm.block_size=16"}), 64);
  EXPECT_EQ(block({"vllm.block_size=32"}), 64);
  EXPECT_EQ(block({"vllm.block_size=128"}), 128);
  EXPECT_EQ(layout_of(shipped("deepseek_v3_mla_h200.toml", {"vllm.block_size=16"})).page_bytes,
            64 * 576 * 2);
  // Ampere: no forcing (Triton MLA).
  EXPECT_EQ(block({"vllm.block_size=16", "gpu.compute_capability=8.0"}), 16);
  // Blackwell, FlashInfer-MLA (qk_nope_head_dim 128): 64 unless 32 or a multiple of 64.
  EXPECT_EQ(block({"vllm.block_size=16", "gpu.compute_capability=10.0"}), 64);
  EXPECT_EQ(block({"vllm.block_size=32", "gpu.compute_capability=10.0"}), 32);
  EXPECT_EQ(block({"vllm.block_size=256", "gpu.compute_capability=10.0"}), 256);
  // Blackwell with another head size, CUTLASS-MLA: 128 unless a multiple of 128.
  EXPECT_EQ(block({"vllm.block_size=64", "gpu.compute_capability=10.0", "model.head_size=192"}),
            128);
  EXPECT_EQ(block({"vllm.block_size=256", "gpu.compute_capability=10.0", "model.head_size=192"}),
            256);
  // Not MLA: kept.
  EXPECT_EQ(
      layout_of(shipped("llama31_8b_h100_cpu.toml", {"vllm.block_size=32"})).attention_block_size,
      32);
}

// Nemotron-H 8B (TP 1): one Mamba state is 2 bytes · (3 · (8192 + 2 · 8 · 128) + 8192 · 128) =
// 2,158,592 bytes = exactly 527 tokens of one attention layer's KV (2 · 8 · 128 · 2 = 4,096
// bytes). "align" and "none" grow the attention block to a multiple of 16: 528. "all" grows it
// to a multiple of lcm(chunk, 16): 768 with the default chunk of 256, 640 with 128; the Mamba
// block is that size too. "align" keeps the Mamba block at the attention block, "none" at
// max_model_len (8,192); prefix caching off forces "none".
TEST(KvCacheLayout, TheMambaBlockFollowsTheCacheModeVllmRunsWith) {
  auto mamba_block = [](const KvCacheLayout& l) {
    for (const auto& g : l.config.kv_cache_groups)
      if (g.kv_cache_spec.kind == model::vllm::KVCacheSpecKind::kMamba)
        return g.kv_cache_spec.block_size;
    return -1;
  };
  const KvCacheLayout align = layout_of(shipped("nemotron_h_8b_mamba_hybrid.toml", {}));
  EXPECT_EQ(align.attention_block_size, 528);
  EXPECT_EQ(mamba_block(align), 528);

  const scenario::Scenario off =
      shipped("nemotron_h_8b_mamba_hybrid.toml", {"vllm.enable_prefix_caching=false"});
  EXPECT_EQ(effective_mamba_cache_mode(off), model::vllm::MambaCacheMode::kNone);
  const KvCacheLayout none = layout_of(off);
  EXPECT_EQ(none.attention_block_size, 528);
  EXPECT_EQ(mamba_block(none), 8192);
  EXPECT_FALSE(none.enable_caching);

  const KvCacheLayout all =
      layout_of(shipped("nemotron_h_8b_mamba_hybrid.toml", {"vllm.mamba_cache_mode=all"}));
  EXPECT_EQ(all.attention_block_size, 768);
  EXPECT_EQ(mamba_block(all), 768);
  EXPECT_EQ(all.page_bytes, 768 * 4096);
  const KvCacheLayout all128 =
      layout_of(shipped("nemotron_h_8b_mamba_hybrid.toml",
                        {"vllm.mamba_cache_mode=all", "model.mamba_chunk_size=128"}));
  EXPECT_EQ(all128.attention_block_size, 640);
  EXPECT_EQ(mamba_block(all128), 640);
}

// vllm.enable_prefix_caching left unset is vllm serve's default for the model: on for an
// attention-only decoder, off for a Mamba hybrid (whatever mamba_cache_mode says: vLLM forces
// "none", and the Mamba block is max_model_len) and for an encoder-decoder model. Set true on a
// hybrid, it runs Mamba prefix caching, and mode "none" becomes "all" (Nemotron-H: 768-token
// blocks, as the test above computes).
TEST(KvCacheLayout, PrefixCachingDefaultsToWhatVllmServePicksForTheModel) {
  auto toy = [](const std::string& model, const std::string& vllm) {
    scenario::Scenario s = scenario::load_scenario_text(
        "[model]\nnum_layers = 2\nhidden_size = 64\nnum_heads = 4\nnum_kv_heads = 1\n"
        "head_size = 16\nintermediate_size = 64\nvocab_size = 1000\n" +
            model + "[vllm]\nnum_gpu_blocks = 200\nmax_num_batched_tokens = 4096\n" +
            "max_model_len = 4096\n" + vllm,
        "toy.toml", ".");
    scenario::validate(s);
    return s;
  };
  const scenario::Scenario decoder = toy("", "");
  EXPECT_FALSE(decoder.vllm.enable_prefix_caching.has_value());
  EXPECT_TRUE(scenario::effective_enable_prefix_caching(decoder));
  EXPECT_TRUE(layout_of(decoder).enable_caching);

  const std::string mamba =
      "layer_pattern = \"FM\"\nmamba_num_heads = 4\nmamba_head_dim = 16\n"
      "mamba_state_size = 16\n";
  const scenario::Scenario hybrid = toy(mamba, "mamba_cache_mode = \"align\"\n");
  EXPECT_FALSE(scenario::effective_enable_prefix_caching(hybrid));
  EXPECT_EQ(effective_mamba_cache_mode(hybrid), model::vllm::MambaCacheMode::kNone);
  const KvCacheLayout off = layout_of(hybrid);
  EXPECT_FALSE(off.enable_caching);
  for (const auto& g : off.config.kv_cache_groups) {
    if (g.kv_cache_spec.kind == model::vllm::KVCacheSpecKind::kMamba) {
      EXPECT_EQ(g.kv_cache_spec.block_size, 4096);
    }
  }
  const scenario::Scenario on = toy(mamba, "enable_prefix_caching = true\n");
  EXPECT_EQ(effective_mamba_cache_mode(on), model::vllm::MambaCacheMode::kAll);
  EXPECT_TRUE(layout_of(on).enable_caching);

  const KvCacheLayout all =
      layout_of(shipped("nemotron_h_8b_mamba_hybrid.toml", {"vllm.mamba_cache_mode=none"}));
  EXPECT_EQ(all.attention_block_size, 768);
  EXPECT_TRUE(all.enable_caching);

  const std::string encoder = "encoder_layers = 1\nencoder_tokens = 50\n";
  const scenario::Scenario encdec = toy(encoder, "");
  EXPECT_FALSE(scenario::effective_enable_prefix_caching(encdec));
  EXPECT_FALSE(layout_of(encdec).enable_caching);
  EXPECT_THROW(toy(encoder, "enable_prefix_caching = true\n"), InputError);
}

// What vLLM asserts for Mamba cache mode "align", once the block has grown to 528 tokens:
// chunked prefill, a token budget of at least a block, and a long-prefill threshold of 0 or at
// least a block. A block of two sizes under "all" (a tiny state with a 16-token chunk gives a
// 16-token Mamba block under a 256-token attention block) is refused as not modelled.
TEST(KvCacheLayout, MambaAlignRefusesWhatVllmRefuses) {
  const char* nem = "nemotron_h_8b_mamba_hybrid.toml";
  EXPECT_EQ(refusal(shipped(nem, {"vllm.enable_chunked_prefill=false"})).field(),
            "vllm.enable_chunked_prefill");
  InputError budget = refusal(shipped(nem, {"vllm.max_num_batched_tokens=512"}));
  EXPECT_EQ(budget.field(), "vllm.max_num_batched_tokens");
  EXPECT_NE(std::string(budget.what()).find("(528 tokens"), std::string::npos) << budget.what();
  EXPECT_GT(layout_of(shipped(nem, {"vllm.max_num_batched_tokens=528"})).num_blocks(), 0);
  EXPECT_EQ(refusal(shipped(nem, {"vllm.long_prefill_token_threshold=527"})).field(),
            "vllm.long_prefill_token_threshold");
  EXPECT_GT(layout_of(shipped(nem, {"vllm.long_prefill_token_threshold=528"})).num_blocks(), 0);
  // The same values without "align" are vLLM's to take.
  EXPECT_GT(layout_of(shipped(nem, {"vllm.mamba_cache_mode=all", "vllm.max_num_batched_tokens=512",
                                    "vllm.long_prefill_token_threshold=100"}))
                .num_blocks(),
            0);
  EXPECT_EQ(refusal(shipped(nem, {"vllm.mamba_cache_mode=all", "model.mamba_chunk_size=16",
                                  "vllm.block_size=256", "model.mamba_num_heads=2",
                                  "model.mamba_head_dim=8", "model.mamba_state_size=8",
                                  "model.mamba_n_groups=1"}))
                .field(),
            "vllm.block_size");
}

// The instance splits prefills at Mamba blocks exactly when its layout runs mode "align". A toy
// hybrid (an F and an M layer; KV 2 · 16 · 2 = 64 bytes per token, a Mamba state of
// 2 · (3 · (64 + 2 · 16) + 64 · 16) = 2,624 bytes = 41 tokens: 48-token blocks), the profile
// model (1000 µs + 1 µs per token), a 100-token budget, the synchronous loop. A 300-token prompt
// in "align" runs 96, 96, 96 (to the last whole block, 288) and 12 tokens: 4 steps, TTFT
// 4,300 µs. With prefix caching off vLLM runs mode "none": 100, 100, 100, TTFT 3,300 µs.
TEST(KvCacheLayout, AnInstanceSplitsPrefillsAtMambaBlocksOnlyInAlignMode) {
  auto ttft = [](const char* prefix_caching) {
    const scenario::Scenario s = harness::profile_scenario(
        "[step]\nmodel = \"profile\"\nprofile = \"profile.csv\"\n"
        "[model]\nnum_layers = 2\nhidden_size = 64\nnum_heads = 4\nnum_kv_heads = 1\n"
        "head_size = 16\nintermediate_size = 64\nvocab_size = 1000\nlayer_pattern = \"FM\"\n"
        "mamba_num_heads = 4\nmamba_head_dim = 16\nmamba_state_size = 16\n"
        "[vllm]\nnum_gpu_blocks = 200\nmax_num_batched_tokens = 100\nmax_num_seqs = 8\n"
        "mamba_cache_mode = \"align\"\nasync_scheduling = false\n",
        "mamba.toml", {std::string("vllm.enable_prefix_caching=") + prefix_caching});
    EXPECT_EQ(layout_of(s).attention_block_size, 48);
    const harness::RunResult r =
        harness::run_cluster(s, "arrival_s,prompt_tokens,output_tokens\n0,300,1\n");
    return r.records.at(0).first_token - r.records.at(0).arrival;
  };
  EXPECT_EQ(ttft("true"), 4'300'000);
  EXPECT_EQ(ttft("false"), 3'300'000);
}

}  // namespace
}  // namespace kvtwin::sim::engine
