#include "sim/hw/roofline.h"

#include <gtest/gtest.h>

#include <fstream>

#include "sim/hw/profile_step_model.h"
#include "sim/scenario/scenario_loader.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::hw {
namespace {

// A toy model with round numbers so that every figure below can be checked by hand:
//   attention params per layer = 2·1000·1000 + 2·1000·1000 = 4e6, MLP = 3·1000·1000 = 3e6,
//   dense params = 2 layers · 7e6 = 1.4e7, LM head = 1e6 (and an untied input embedding of 1e6,
//   memory only); KV per token per layer = 2·10·100·2 =
//   4000 bytes. GPU: 1e12 FLOP/s and 1e12 bytes/s after efficiency, no overhead.
scenario::Scenario toy(const std::string& extra = "") {
  return scenario::load_scenario_text(
      "[model]\nnum_layers = 2\nhidden_size = 1000\nnum_heads = 10\nnum_kv_heads = 10\n"
      "head_size = 100\nintermediate_size = 1000\nvocab_size = 1000\n" +
          extra +
          "\n[gpu]\npeak_tflops = 1\nhbm_tbps = 1\ncompute_efficiency = 1\n"
          "memory_efficiency = 1\nstep_overhead_us = 0\nallreduce_gbps = 100\n"
          "allreduce_latency_us = 10\n",
      "toy.toml", ".");
}

RooflineStepModel model_of(const scenario::Scenario& s) {
  return RooflineStepModel(derive_geometry(s), s.gpu);
}

TEST(ModelGeometry, DerivesParametersAndKvSizes) {
  ModelGeometry g = derive_geometry(toy());
  EXPECT_DOUBLE_EQ(g.attn_params_per_layer, 4e6);
  EXPECT_DOUBLE_EQ(g.dense_mlp_params, 3e6);
  EXPECT_DOUBLE_EQ(g.lm_head_params, 1e6);
  EXPECT_EQ(g.kv_bytes_per_token_per_layer, 4000);
  EXPECT_EQ(g.kv_bytes_per_token, 8000);
  EXPECT_DOUBLE_EQ(g.weight_bytes_per_rank(), 2 * (1.4e7 + 1e6 + 1e6));
  // A tied embedding is the LM head's matrix.
  EXPECT_DOUBLE_EQ(derive_geometry(toy("tie_word_embeddings = true\n")).weight_bytes_per_rank(),
                   2 * (1.4e7 + 1e6));
}

TEST(ModelGeometry, Llama8BHas128KiBOfKvPerToken) {
  auto s = scenario::load_scenario_file(
      kvtwin::testing::source_path("scenarios/llama31_8b_h100_cpu.toml"));
  EXPECT_EQ(derive_geometry(s).kv_bytes_per_token, 131072);
}

TEST(ModelGeometry, Llama70BTp4Has80KiBPerTokenPerRank) {
  auto s = scenario::load_scenario_file(
      kvtwin::testing::source_path("scenarios/llama31_70b_tp4_cpu_disk_redis.toml"));
  EXPECT_EQ(derive_geometry(s).kv_bytes_per_token, 81920);
}

TEST(ModelGeometry, DeepSeekMlaCaches576ElementsPerLayer) {
  auto s = scenario::load_scenario_file(
      kvtwin::testing::source_path("scenarios/deepseek_v3_mla_h200.toml"));
  ModelGeometry g = derive_geometry(s);
  EXPECT_EQ(g.kv_bytes_per_token_per_layer, 576 * 2);
  EXPECT_EQ(g.kv_bytes_per_token, 70272);
}

TEST(Roofline, DecodeStepIsMemoryBoundOnWeights) {
  // linear: 2·1·1.4e7 FLOP and 2.8e7 bytes → 2.8e-5 s; LM head 2e6 FLOP / 2e6 bytes → 2e-6 s.
  // attention per layer: 1000 pairs · 4000 FLOP = 4e6 → 4e-6 s; bytes (999+1+1)·4000 =
  // 4.004e6 → 4.004e-6 s; two layers → 8.008e-6 s. Total 3.8008e-5 s.
  auto m = model_of(toy());
  StepTime t = m.step_time({StepSlice{1, 999, true, 0}});
  EXPECT_EQ(t.linear_ns, 30000);
  EXPECT_EQ(t.attention_ns, 8008);
  EXPECT_EQ(t.total_ns, 38008);
  EXPECT_EQ(t.per_layer_ns, 19004);
}

TEST(Roofline, PrefillStepIsComputeBound) {
  // linear: 2·1000·1.4e7 = 2.8e10 FLOP → 0.028 s (+ LM head 2e-6 s).
  // attention: 1000·1001/2 = 500,500 pairs · 4000 = 2.002e9 FLOP → 2.002e-3 s per layer.
  auto m = model_of(toy());
  StepTime t = m.step_time({StepSlice{1000, 0, true, 0}});
  EXPECT_EQ(t.linear_ns, 28'002'000);
  EXPECT_EQ(t.attention_ns, 4'004'000);
  EXPECT_EQ(t.total_ns, 32'006'000);
}

TEST(Roofline, SlidingWindowCapsAttendedKeys) {
  // S layer, window 100, one decode on 999 cached: 100 pairs → 4e5 FLOP (4e-7 s); bytes
  // (100 + 1)·4000 = 4.04e5 → 4.04e-7 s. The F layer costs 4.004e-6 s as above.
  auto m = model_of(toy("layer_pattern = \"SF\"\nsliding_window = 100\n"));
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{1, 999, true, 0}), 4.04e-7 + 4.004e-6);
  // Prefill of 150 on 0: queries 1..100 see 1..100 keys (5050 pairs), 50 more see 100 each.
  double pairs_s = 5050 + 50 * 100;
  double pairs_f = 150.0 * 151 / 2;
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{150, 0, true, 0}),
                   std::max(pairs_s * 4000 / 1e12, (100 + 150) * 4000 / 1e12) +
                       std::max(pairs_f * 4000 / 1e12, (150 + 150) * 4000 / 1e12));
}

TEST(Roofline, TensorParallelAddsRingAllReduces) {
  // tp 2: each all-reduce moves 1000 tokens · 1000 · 2 bytes = 2e6 bytes;
  // 2·(2−1)/2 · 2e6 / 1e11 = 2e-5 s + 1e-5 s latency; 2 per layer · 2 layers → 1.2e-4 s.
  auto s = toy();
  s.gpu.tensor_parallel = 2;
  auto m = model_of(s);
  EXPECT_DOUBLE_EQ(m.allreduce_s(1000), 1.2e-4);
  EXPECT_DOUBLE_EQ(model_of(toy()).allreduce_s(1000), 0.0);
}

TEST(Roofline, MoeDecodeReadsOnlyTouchedExperts) {
  // 8 experts of 3·1000·500 = 1.5e6 params, top-2, no dense MLP: one token touches 8·(1−6/8) =
  // 2 experts per layer. Dense params 2·4e6 = 8e6, so bytes = (8e6 + 2 layers · (router 8000 +
  // 2 · 1.5e6)) · 2 and FLOPs = 2·(8e6 + 2·(8000 + 2·1.5e6)) — memory bound.
  auto m = model_of(toy("num_experts = 8\nexperts_per_token = 2\nmoe_intermediate_size = 500\n"));
  double bytes = (8e6 + 2 * (8000 + 2 * 1.5e6)) * 2;
  EXPECT_DOUBLE_EQ(m.linear_s(1, 0), bytes / 1e12 + 2e-6);
}

TEST(ProfileStepModel, FitRecoversALinearProfileExactly) {
  std::string path = kvtwin::testing::scratch_dir() + "/p.csv";
  {
    std::ofstream out(path);
    out << "num_new_tokens,num_seqs,context_tokens,step_us\n";
    for (int t : {1, 64, 512, 4096})
      for (int s : {1, 8, 64})
        for (int c : {1000, 50000})
          out << t << "," << s << "," << c << "," << (3000 + 0.5 * t + 20.0 * s + 0.01 * c) << "\n";
  }
  ProfileStepModel p(path);
  EXPECT_NEAR(p.coefficients()[0], 3000, 1e-6);
  EXPECT_NEAR(p.coefficients()[1], 0.5, 1e-9);
  EXPECT_NEAR(p.coefficients()[2], 20, 1e-8);
  EXPECT_NEAR(p.coefficients()[3], 0.01, 1e-11);
  // Batch: 100 new tokens over 2 seqs attending (900 + 99) + (99 + 1) = 1099 tokens.
  StepTime t = p.step_time({StepSlice{99, 900, true, 0}, StepSlice{1, 99, true, 0}});
  EXPECT_EQ(t.total_ns, from_seconds((3000 + 0.5 * 100 + 20 * 2 + 0.01 * 1099) * 1e-6));
}

TEST(Roofline, MoePrefillComputesTopKExpertsPerToken) {
  // Each token runs experts_per_token (k = 2) experts of 1.5e6 params in each of the 2 MoE
  // layers (vLLM's fused_moe computes topk GEMMs per token), so 1000 tokens add
  // 2·1000·2·1.5e6·2 = 1.2e10 FLOPs on top of the dense 2·1000·(8e6 + 2·8000) = 1.6032e10
  // (attention 8e6, routers 2·8000). Compute bound: 2.8032e10 / 1e12 = 0.028032 s, while bytes
  // (every expert touched: (8.016e6 + 8·1.5e6·2)·2 = 6.4032e7) take 6.4e-5 s; LM head 2e-6 s.
  auto m = model_of(toy("num_experts = 8\nexperts_per_token = 2\nmoe_intermediate_size = 500\n"));
  double flops = 2 * 1000 * (8e6 + 2 * 8000) + 2 * 1000 * 2 * 1.5e6 * 2;
  EXPECT_DOUBLE_EQ(m.linear_s(1000, 0), flops / 1e12 + 2e-6);
}

TEST(Roofline, MlaAttentionScoresOverLatentPlusRopeAndValuesOverLatent) {
  // Absorbed MLA (DeepSeek-V2 §2.1.3): per (query, key) pair and head, the score is a dot over
  // the latent plus the RoPE part (C + R = 100 + 20) and the value sum runs over the latent C:
  // 2·(C + R) + 2·C = 2·(2·100 + 20) = 440 FLOPs, · 10 heads = 4400. A 1000-token prefill has
  // 500,500 pairs → 2.2022e9 FLOPs → 2.2022e-3 s per layer (compute bound: KV bytes
  // (1000 + 1000)·(100 + 20)·2 = 4.8e5 → 4.8e-7 s), two layers → 4.4044e-3 s.
  auto m = model_of(toy("attention = \"mla\"\nkv_lora_rank = 100\nqk_rope_head_dim = 20\n"));
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{1000, 0, true, 0}), 2 * 500500 * 4400.0 / 1e12);
}

// gpt-oss-120b ships MXFP4 experts and keeps everything else in bf16 (model card: 60.8 GiB of
// weights). Counted by hand from config.json: 36 layers of 128 experts, each 3 · 2880 · 2880
// params at 0.53125 bytes (4.25 bits); bf16 attention (q and o: 2 · 2880 · 64 · 64, k and v:
// 2 · 2880 · 8 · 64 per layer), routers (2880 · 128 per layer), the untied embedding and LM head
// (201,088 · 2880 each): 60.69 GiB.
TEST(ModelGeometry, GptOssWeighsItsMxfp4ExpertsAndBf16Rest) {
  auto s = scenario::load_scenario_file(
      kvtwin::testing::source_path("scenarios/gpt_oss_120b_hybrid.toml"));
  const double experts = 36.0 * 128 * 3 * 2880 * 2880;
  const double attention = 36.0 * (2.0 * 2880 * 64 * 64 + 2.0 * 2880 * 8 * 64);
  const double routers = 36.0 * 2880 * 128;
  const double vocab = 2.0 * 201088 * 2880;
  const double bytes = experts * 0.53125 + (attention + routers + vocab) * 2;
  EXPECT_DOUBLE_EQ(derive_geometry(s).weight_bytes_per_rank(), bytes);
  EXPECT_NEAR(bytes / (1 << 30), 60.69, 0.005);
}

// fp8 weights quantize the decoder's projections (1 byte), not the embedding or the LM head, and
// vLLM's "auto" KV type for an fp8 checkpoint is its bf16 dtype: 2 · 10 · 100 · 2 bytes.
TEST(ModelGeometry, Fp8WeightsKeepTheHeadIn16BitsAndTheKvInBf16) {
  ModelGeometry g = derive_geometry(toy("dtype = \"fp8\"\n"));
  EXPECT_DOUBLE_EQ(g.weight_bytes_per_rank(), 1.4e7 * 1 + (1e6 + 1e6) * 2);
  EXPECT_EQ(g.kv_bytes_per_token_per_layer, 4000);
  EXPECT_EQ(derive_geometry(toy("dtype = \"fp8\"\nkv_cache_dtype = \"fp8_e4m3\"\n"))
                .kv_bytes_per_token_per_layer,
            2000);
  // One decode token: 2.8e7 FLOPs over 1.4e7 fp8 bytes (compute bound, 2.8e-5 s); the LM head
  // streams 1e6 bf16 params (2e6 bytes, 2e-6 s; fp8 would take half).
  EXPECT_DOUBLE_EQ(model_of(toy("dtype = \"fp8\"\n")).linear_s(1, 0), 2.8e-5 + 2e-6);
}

// MLA with C = kv_lora_rank = 400, R = 20, D = head_size = 100, 10 heads. The absorbed form
// (decode kernels): 2 · 10 · (2 · 400 + 20) = 16,400 FLOPs per (query, key) pair; one token on
// 999 cached has 1,000 pairs → 1.64e7 FLOPs (1.64e-5 s), against (999 + 1 + 1) · 420 · 2 bytes
// (8.4e-7 s): compute bound. The MHA form (prefill kernels): 2 · 10 · (2 · 100 + 20) = 4,400 per
// pair, after up-projecting the cached context's latent: 100 new tokens on 900 cached have
// 100 · 900 + 100 · 101 / 2 = 95,050 pairs (4.1822e8 FLOPs) plus 2 · 900 · 400 · 10 · 200 =
// 1.44e9 → 1.85822e-3 s per layer. Two layers each.
TEST(Roofline, MlaAbsorbedAndMhaFormsCostWhatTheirKernelsCompute) {
  auto m = model_of(toy("attention = \"mla\"\nkv_lora_rank = 400\nqk_rope_head_dim = 20\n"));
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{1, 999, true, 0}, true), 2 * 1000 * 16400.0 / 1e12);
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{100, 900, true, 0}, false),
                   2 * (95050 * 4400.0 + 2.0 * 900 * 400 * 10 * 200) / 1e12);
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{100, 900, true, 0}, true), 2 * 95050 * 16400.0 / 1e12);
  // No cached context: no up-projection.
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{1000, 0, true, 0}, false), 2 * 500500 * 4400.0 / 1e12);
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{1000, 0, true, 0}), 2 * 500500 * 4400.0 / 1e12);
}

// Which slices run the absorbed kernels, as vLLM's MLA metadata builder splits a batch: ordered
// decodes (cached context, at most T new tokens), extends, fresh prompts, and the decodes a
// leading run. Compute capability 9.x with a bf16 KV cache: FlashAttention-MLA, T = 512, any
// lengths; with fp8: FlashMLA, T = 128, one length; elsewhere T = 1.
TEST(Roofline, MlaSplitsABatchAsVllmsDefaultBackendDoes) {
  const std::string mla = "attention = \"mla\"\nkv_lora_rank = 400\nqk_rope_head_dim = 20\n";
  const StepSlice decode{1, 999, true, 0}, extend{100, 900, true, 0}, prompt{1000, 0, true, 0};
  const StepSlice long_extend{600, 900, true, 0}, short_prompt{300, 0, true, 0};
  using V = std::vector<bool>;
  auto fa = model_of(toy(mla));  // 9.0, bf16
  EXPECT_EQ(fa.mla_absorbed({decode, extend, prompt}), (V{true, true, false}));
  EXPECT_EQ(fa.mla_absorbed({extend}), (V{true}));
  EXPECT_EQ(fa.mla_absorbed({prompt}), (V{false}));
  EXPECT_EQ(fa.mla_absorbed({long_extend, decode}), (V{false, true}));  // decodes come first
  EXPECT_EQ(fa.mla_absorbed({short_prompt, prompt}), (V{true, false}));
  EXPECT_EQ(fa.mla_absorbed({prompt, short_prompt}), (V{false, false}));  // the first is long
  EXPECT_EQ(fa.mla_absorbed({long_extend, short_prompt}), (V{false, false}));
  auto flashmla = model_of(toy(mla + "kv_cache_dtype = \"fp8\"\n"));  // 9.0, fp8
  EXPECT_EQ(flashmla.mla_absorbed({decode, extend, prompt}), (V{true, false, false}));
  EXPECT_EQ(flashmla.mla_absorbed({extend, decode}), (V{true, false}));
  EXPECT_EQ(flashmla.mla_absorbed({decode, extend, decode}), (V{true, false, false}));
  EXPECT_EQ(flashmla.mla_absorbed({extend}), (V{true}));  // one length <= 128
  EXPECT_EQ(flashmla.mla_absorbed({StepSlice{50, 0, true, 0}, StepSlice{50, 0, true, 0}}),
            (V{true, true}));
  EXPECT_EQ(flashmla.mla_absorbed({StepSlice{129, 900, true, 0}}), (V{false}));
  auto s = toy(mla);
  s.gpu.compute_capability = 8.0;  // Triton MLA: T = 1
  auto ampere = model_of(s);
  EXPECT_EQ(ampere.mla_absorbed({extend}), (V{false}));
  EXPECT_EQ(ampere.mla_absorbed({decode, extend, decode}), (V{true, false, true}));
  EXPECT_EQ(ampere.mla_absorbed({StepSlice{1, 0, true, 0}}), (V{true}));
  // With Mamba layers the runner orders the batch with their threshold of 1: the 100-token
  // extend is no decode there, so the decodes stop at once (FlashAttention-MLA) or are the
  // one-token decode (FlashMLA).
  const std::string hybrid = mla +
                             "layer_pattern = \"MF\"\nmamba_num_heads = 8\n"
                             "mamba_head_dim = 8\nmamba_state_size = 8\n";
  EXPECT_EQ(model_of(toy(hybrid)).mla_absorbed({long_extend, extend}), (V{false, false}));
  EXPECT_EQ(model_of(toy(hybrid + "kv_cache_dtype = \"fp8\"\n")).mla_absorbed({extend, decode}),
            (V{false, true}));
  // A step's time charges each slice its form.
  EXPECT_EQ(fa.step_time({decode, long_extend}).attention_ns,
            from_seconds(fa.attention_s(decode, true) + fa.attention_s(long_extend, false)));
  EXPECT_EQ(model_of(toy()).mla_absorbed({decode, extend}), (V{false, false}));  // not MLA
}

// Encoder-decoder: each decoder layer also holds cross-attention q, k, v, o projections
// (4 · 1000 · 10 · 100 = 4e6 params); q and o run per new token, k and v once per request over
// the encoder's output. Toy with 1 encoder layer and 50 encoder tokens: the encoder layer costs
// 2 · 50 · 7e6 + 4 · 50² · 10 · 100 = 7.1e8 FLOPs (7.1e-4 s, against 7e6 params · 2 bytes =
// 1.4e7 bytes), and each of the 2 decoder layers projects the 50 outputs: 2 · 50 · 2e6 = 2e8
// FLOPs (2e-4 s) against 4e6 bytes.
TEST(Roofline, EncoderDecoderModelsCountTheirCrossAttentionProjections) {
  auto s =
      toy("encoder_layers = 1\nencoder_tokens = 50\n[vllm]\nenable_prefix_caching = false\n"
          "max_model_len = 8192\n");
  ModelGeometry g = derive_geometry(s);
  EXPECT_DOUBLE_EQ(g.cross_attn_params_per_layer, 4e6);
  EXPECT_DOUBLE_EQ(g.weight_bytes_per_rank(), 2 * (1.4e7 + 7e6 + 2 * 4e6 + 1e6 + 1e6));
  auto m = model_of(s);
  EXPECT_DOUBLE_EQ(m.encoder_s(50), 7.1e8 / 1e12 + 2 * 2e8 / 1e12);
  // A decode's linear part streams the q and o projections too: (1.4e7 + 2 · 2e6) params.
  EXPECT_DOUBLE_EQ(m.linear_s(1, 0), 2 * (1.4e7 + 2 * 2e6) / 1e12 + 2e-6);
}

TEST(Roofline, RingAllReduceFactorIsFractionalForTpNotDividingTwo) {
  // Ring all-reduce moves 2·(tp−1)/tp of the buffer per rank: tp 5 → 1.6 (not the integer
  // 2·4/5 = 1). 1.6 · 2e6 bytes / 1e11 B/s = 3.2e-5 s + 1e-5 s latency = 4.2e-5 s; two per layer
  // (after attention and after the MLP), two layers → 1.68e-4 s.
  auto s = toy();
  s.gpu.tensor_parallel = 5;
  EXPECT_DOUBLE_EQ(model_of(s).allreduce_s(1000), 1.68e-4);
}

}  // namespace
}  // namespace kvtwin::sim::hw
