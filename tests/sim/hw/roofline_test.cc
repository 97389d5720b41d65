#include "sim/hw/roofline.h"

#include <gtest/gtest.h>

#include <cmath>
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
  // 4.004e6 → 4.004e-6 s; two layers → 8.008e-6 s. Total 3.8008e-5 s. A layer's share leaves the
  // LM head out: (2.8e-5 + 8.008e-6) / 2 = 1.8004e-5 s.
  auto m = model_of(toy());
  StepTime t = m.step_time({StepSlice{1, 999, 0}});
  EXPECT_EQ(t.linear_ns, 30000);
  EXPECT_EQ(t.attention_ns, 8008);
  EXPECT_EQ(t.total_ns, 38008);
  EXPECT_EQ(t.per_layer_ns, 18004);
}

TEST(Roofline, PrefillStepIsComputeBound) {
  // linear: 2·1000·1.4e7 = 2.8e10 FLOP → 0.028 s (+ LM head 2e-6 s).
  // attention: 1000·1001/2 = 500,500 pairs · 4000 = 2.002e9 FLOP → 2.002e-3 s per layer.
  auto m = model_of(toy());
  StepTime t = m.step_time({StepSlice{1000, 0, 0}});
  EXPECT_EQ(t.linear_ns, 28'002'000);
  EXPECT_EQ(t.attention_ns, 4'004'000);
  EXPECT_EQ(t.total_ns, 32'006'000);
}

TEST(Roofline, SlidingWindowCapsAttendedKeys) {
  // S layer, window 100, one decode on 999 cached: 100 pairs → 4e5 FLOP (4e-7 s); bytes
  // (99 cached + 1 + 1)·4000 = 4.04e5 → 4.04e-7 s. The F layer costs 4.004e-6 s as above.
  auto m = model_of(toy("layer_pattern = \"SF\"\nsliding_window = 100\n"));
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{1, 999, 0}), 4.04e-7 + 4.004e-6);
  // Prefill of 150 on 0: queries 1..100 see 1..100 keys (5050 pairs), 50 more see 100 each.
  double pairs_s = 5050 + 50 * 100;
  double pairs_f = 150.0 * 151 / 2;
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{150, 0, 0}),
                   std::max(pairs_s * 4000 / 1e12, (0 + 150 + 150) * 4000 / 1e12) +
                       std::max(pairs_f * 4000 / 1e12, (150 + 150) * 4000 / 1e12));
}

// A chunk longer than one token on a long context reads every key some query of it reaches: its
// first query reaches w − 1 = 99 cached keys back, its n = 150 new keys are read too, and written:
// (99 + 150 + 150) · 4000 = 1.596e6 bytes (not the window's 100 + 150). At 1e9 bytes/s that is
// 1.596e-3 s, against 150 · 100 pairs · 4000 = 6e7 FLOPs (6e-5 s): memory bound.
TEST(Roofline, ASlidingWindowChunkReadsTheKeysItsFirstQueryReaches) {
  auto s = toy("layer_pattern = \"S\"\nsliding_window = 100\n");
  s.gpu.hbm_tbps = 0.001;
  EXPECT_DOUBLE_EQ(model_of(s).attention_s(StepSlice{150, 999, 0}),
                   2 * (99 + 150 + 150) * 4000 / 1e9);
}

TEST(Roofline, TensorParallelAddsRingAllReduces) {
  // tp 2: each all-reduce moves 1000 tokens · 1000 · 2 bytes = 2e6 bytes;
  // 2·(2−1)/2 · 2e6 / 1e11 = 2e-5 s + 1e-5 s latency; 2 per layer · 2 layers and 1 for the
  // vocab-parallel embedding → 1.5e-4 s.
  auto s = toy();
  s.gpu.tensor_parallel = 2;
  auto m = model_of(s);
  EXPECT_DOUBLE_EQ(m.allreduce_s(1000), 1.5e-4);
  EXPECT_DOUBLE_EQ(model_of(toy()).allreduce_s(1000), 0.0);
  // The logits' all-gather: 4 rows · 1000 vocab · 2 bytes = 8000 bytes, (2−1)/2 of them over
  // the link (4e-8 s) + 1e-5 s latency. A step charges both with its all-reduces.
  EXPECT_DOUBLE_EQ(m.logits_gather_s(4), 4e-8 + 1e-5);
  EXPECT_DOUBLE_EQ(model_of(toy()).logits_gather_s(4), 0.0);
  const std::vector<StepSlice> batch(4, StepSlice{1, 99, 0});
  EXPECT_EQ(m.step_time(batch).allreduce_ns, from_seconds(m.allreduce_s(4) + 4e-8 + 1e-5));
}

TEST(Roofline, MoeDecodeReadsOnlyTouchedExperts) {
  // 8 experts of 3·1000·500 = 1.5e6 params, top-2, no dense MLP: one token touches 8·(1−6/8) =
  // 2 experts per layer. Dense params 2·4e6 = 8e6, so bytes = (8e6 + 2 layers · (router 8000 +
  // 2 · 1.5e6)) · 2 and FLOPs = 2·(8e6 + 2·(8000 + 2·1.5e6)) — memory bound.
  auto m = model_of(toy("num_experts = 8\nexperts_per_token = 2\nmoe_intermediate_size = 500\n"));
  double bytes = (8e6 + 2 * (8000 + 2 * 1.5e6)) * 2;
  EXPECT_DOUBLE_EQ(m.linear_s(1, 0), bytes / 1e12 + 2e-6);
}

// The MoE layer's kernels run one after the other, each its own roofline. 64 experts of 1.5e6
// params, top-2, on a GPU of 1e12 FLOP/s and 1e11 bytes/s (ridge 10 FLOPs per byte). 16 tokens:
//   projections 2·16·8e6 = 2.56e8 FLOPs (2.56e-4 s) against 1.6e7 bytes (1.6e-4 s): compute;
//   routers     2·16·(2 · 1000 · 64) = 4.096e6 FLOPs (4.096e-6 s) against 2.56e5 bytes;
//   experts     2·16·2·1.5e6·2 = 1.92e8 FLOPs (1.92e-4 s) against the touched experts,
//               64·(1 − (62/64)^16) ≈ 25.5 per layer · 1.5e6 · 2 bytes · 2 layers ≈ 1.53e8 bytes
//               (1.53e-3 s): memory;
//   LM head     no rows: its 2e6 bytes, 2e-5 s.
// One max over the sum would hide the projections' compute behind the experts' bytes.
TEST(Roofline, MoeKernelsAreEachTheirOwnRoofline) {
  auto s = toy("num_experts = 64\nexperts_per_token = 2\nmoe_intermediate_size = 500\n");
  s.gpu.hbm_tbps = 0.1;
  const double touched = 64 * (1 - std::pow(1 - 2.0 / 64, 16));
  const double expected = 2.56e-4 + 4.096e-6 + touched * 1.5e6 * 2 * 2 / 1e11 + 2e-5;
  EXPECT_NEAR(model_of(s).linear_s(16, 0), expected, 1e-15);
  const double one_max = (1.6e7 + 2.56e5 + touched * 6e6) / 1e11 + 2e-5;
  EXPECT_GT(expected - one_max, 9e-5);  // the projections' 2.56e-4 − 1.6e-4 s, and more
}

// What runs in 16 bits whatever the weights (attention, the LM head) runs at
// gpu.peak_tflops_16bit; fp8 projections at peak_tflops. fp8 toy, peak 1 TFLOP/s, 16-bit peak
// 0.5: a 1000-token prompt's attention 2 · 2.002e9 FLOPs / 5e11 = 8.008e-3 s (at peak_tflops
// 4.004e-3 s); its projections 2.8e10 FLOPs / 1e12 = 0.028 s as before; one row of logits
// 2e6 FLOPs / 5e11 = 4e-6 s (its 2e6 bytes take 2e-6 s).
TEST(Roofline, SixteenBitKernelsRunAtTheSixteenBitPeak) {
  auto s = toy("dtype = \"fp8\"\n");
  s.gpu.peak_tflops_16bit = 0.5;
  auto m = model_of(s);
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{1000, 0, 0}), 2 * 2.002e9 / 5e11);
  EXPECT_DOUBLE_EQ(m.linear_s(1000, 1), 2.8e10 / 1e12 + 4e-6);
  EXPECT_DOUBLE_EQ(model_of(toy("dtype = \"fp8\"\n")).attention_s(StepSlice{1000, 0, 0}),
                   2 * 2.002e9 / 1e12);
}

// DeepSeek's MLA keeps the low-rank q_a and kv_a projections whole on every rank; q_b, kv_b and o
// are split. C = 400, R = 20, D = 100, Q = 300, 10 heads, tp 2:
//   replicated  q_a 1000 · 300 + kv_a 1000 · 420 = 720,000
//   split       (q_b 300 · 10 · 120 + o 10 · 100 · 1000) / 2 = 680,000, kv_b 400 · 10 · 200 / 2
//               = 400,000: 1,800,000 per layer and rank.
// bf16 weights: (2 · 1.8e6 + MLPs 2 · 1.5e6 + head and embedding 2 · 5e5) · 2 = 1.52e7 bytes.
// fp8: the projections at 1 byte, head and embedding at 2, and vLLM's 16-bit copies of kv_b
// (W_UK_T, W_UV) for the absorbed kernels: 6.6e6 + 2e6 + 2 · 4e5 · 2 = 1.02e7 bytes.
TEST(ModelGeometry, MlaReplicatesItsLowRankProjectionsAndCopiesKvBForDecodes) {
  const std::string mla =
      "attention = \"mla\"\nkv_lora_rank = 400\nqk_rope_head_dim = 20\nq_lora_rank = 300\n";
  auto s = toy(mla);
  s.gpu.tensor_parallel = 2;
  ModelGeometry g = derive_geometry(s);
  EXPECT_DOUBLE_EQ(g.attn_params_per_layer, 1.8e6);
  EXPECT_DOUBLE_EQ(g.mla_kv_b_params_per_layer, 4e5);
  EXPECT_DOUBLE_EQ(g.weight_bytes_per_rank(), 1.52e7);
  auto f = toy(mla + "dtype = \"fp8\"\n");
  f.gpu.tensor_parallel = 2;
  EXPECT_DOUBLE_EQ(derive_geometry(f).weight_bytes_per_rank(), 1.02e7);
}

// A decode's absorbed kernels multiply by the 16-bit copies of kv_b; an MHA-form token by kv_b
// itself. fp8 MLA toy (tp 1: kv_b 8e5 params per layer, 1.6e6 over 2 layers), 1e11 bytes/s:
// kv_b's part of one absorbed token reads 1.6e6 · 2 bytes (3.2e-5 s), of one MHA-form token
// 1.6e6 · 1 byte (1.6e-5 s); its 3.2e6 FLOPs take 3.2e-6 s either way.
TEST(Roofline, AbsorbedMlaTokensReadTheSixteenBitCopiesOfKvB) {
  auto s =
      toy("attention = \"mla\"\nkv_lora_rank = 400\nqk_rope_head_dim = 20\n"
          "q_lora_rank = 300\ndtype = \"fp8\"\n");
  s.gpu.hbm_tbps = 0.1;
  auto m = model_of(s);
  EXPECT_NEAR(m.linear_s(1, 1, 1) - m.linear_s(1, 1, 0), 3.2e-5 - 1.6e-5, 1e-15);
  // Both forms in one step: kv_b streamed in each.
  EXPECT_NEAR(m.linear_s(2, 2, 1) - m.linear_s(2, 2, 0), 3.2e-5, 1e-15);
}

// vLLM computes logits at every scheduled request's last token, a partial prefill chunk's too:
// two slices, two rows (2 · 2 · 1e6 FLOPs = 4e-6 s, over the head's 2e-6 s of bytes).
TEST(Roofline, EverySliceComputesARowOfLogits) {
  auto m = model_of(toy());
  StepTime t = m.step_time({StepSlice{100, 0, 0}, StepSlice{1, 999, 0}});
  EXPECT_EQ(t.linear_ns, from_seconds(m.linear_s(101, 2)));
  EXPECT_DOUBLE_EQ(m.lm_head_s(2), 4e-6);
}

// With more ranks than KV heads vLLM replicates the KV heads: 8 heads, 2 KV heads, tp 4 hold
// q and o 2 · 1000 · 8 · 100 / 4 = 400,000 and one KV head's k and v 2 · 1000 · 100 = 200,000.
TEST(ModelGeometry, RanksBeyondTheKvHeadsHoldOneReplicatedKvHead) {
  auto s = toy();
  s.model.num_heads = 8;
  s.model.num_kv_heads = 2;
  s.gpu.tensor_parallel = 4;
  EXPECT_DOUBLE_EQ(derive_geometry(s).attn_params_per_layer, 6e5);
  s.gpu.tensor_parallel = 2;  // one KV head per rank: split as before
  EXPECT_DOUBLE_EQ(derive_geometry(s).attn_params_per_layer, 2 * 1000 * 8 * 100 / 2 + 2e5);
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
  StepTime t = p.step_time({StepSlice{99, 900, 0}, StepSlice{1, 99, 0}});
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

TEST(Roofline, AFreshMlaPromptRunsTheMhaForm) {
  // A fresh 1000-token prompt is over FlashAttention-MLA's 512-token threshold: the MHA form,
  // per (query, key) pair and head a score over the up-projected key and its RoPE part
  // (D + R = 100 + 20) and a value sum over D: 2·(2·100 + 20) = 440 FLOPs, · 10 heads = 4400
  // (the absorbed form would take 2·(2·400 + 20) · 10 = 16,400 with this latent of C = 400).
  // 500,500 pairs → 2.2022e9 FLOPs → 2.2022e-3 s per layer (compute bound: KV bytes
  // (1000 + 1000)·(400 + 20)·2 = 1.68e6 → 1.68e-6 s), two layers → 4.4044e-3 s.
  auto m = model_of(toy("attention = \"mla\"\nkv_lora_rank = 400\nqk_rope_head_dim = 20\n"));
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{1000, 0, 0}), 2 * 500500 * 4400.0 / 1e12);
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
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{1, 999, 0}, true), 2 * 1000 * 16400.0 / 1e12);
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{100, 900, 0}, false),
                   2 * (95050 * 4400.0 + 2.0 * 900 * 400 * 10 * 200) / 1e12);
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{100, 900, 0}, true), 2 * 95050 * 16400.0 / 1e12);
  // No cached context: no up-projection.
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{1000, 0, 0}, false), 2 * 500500 * 4400.0 / 1e12);
  EXPECT_DOUBLE_EQ(m.attention_s(StepSlice{1000, 0, 0}), 2 * 500500 * 4400.0 / 1e12);
}

// Which slices run the absorbed kernels, as vLLM's MLA metadata builder splits a batch: ordered
// decodes (cached context, at most T new tokens), extends, fresh prompts, and the decodes a
// leading run. Compute capability 9.x with a bf16 KV cache: FlashAttention-MLA, T = 512, any
// lengths; with fp8: FlashMLA, T = 128, one length; elsewhere T = 1.
TEST(Roofline, MlaSplitsABatchAsVllmsDefaultBackendDoes) {
  const std::string mla = "attention = \"mla\"\nkv_lora_rank = 400\nqk_rope_head_dim = 20\n";
  const StepSlice decode{1, 999, 0}, extend{100, 900, 0}, prompt{1000, 0, 0};
  const StepSlice long_extend{600, 900, 0}, short_prompt{300, 0, 0};
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
  EXPECT_EQ(flashmla.mla_absorbed({StepSlice{50, 0, 0}, StepSlice{50, 0, 0}}), (V{true, true}));
  EXPECT_EQ(flashmla.mla_absorbed({StepSlice{129, 900, 0}}), (V{false}));
  auto s = toy(mla);
  s.gpu.compute_capability = 8.0;  // Triton MLA: T = 1
  auto ampere = model_of(s);
  EXPECT_EQ(ampere.mla_absorbed({extend}), (V{false}));
  EXPECT_EQ(ampere.mla_absorbed({decode, extend, decode}), (V{true, false, true}));
  EXPECT_EQ(ampere.mla_absorbed({StepSlice{1, 0, 0}}), (V{true}));
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
  // (after attention and after the MLP), two layers, and the embedding's → 2.1e-4 s.
  auto s = toy();
  s.gpu.tensor_parallel = 5;
  EXPECT_DOUBLE_EQ(model_of(s).allreduce_s(1000), 2.1e-4);
}

}  // namespace
}  // namespace kvtwin::sim::hw
