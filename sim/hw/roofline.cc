#include "sim/hw/roofline.h"

#include <algorithm>
#include <cmath>

#include "model/check.h"

namespace kvtwin::sim::hw {
namespace {

// Σ_{x=c+1}^{c+n} min(x, w): keys attended by n new queries on c cached tokens, window w
// (w <= 0: no window).
double key_pairs(double c, double n, double w) {
  if (w <= 0) return n * c + n * (n + 1) / 2;
  double a = std::clamp(w - c, 0.0, n);  // queries whose whole causal context fits the window
  return a * c + a * (a + 1) / 2 + (n - a) * w;
}

}  // namespace

RooflineStepModel::RooflineStepModel(const ModelGeometry& geometry, const scenario::GpuConfig& gpu)
    : g_(geometry),
      flops_per_s_(gpu.peak_tflops * 1e12 * gpu.compute_efficiency),
      flops16_per_s_((gpu.peak_tflops_16bit > 0 ? gpu.peak_tflops_16bit : gpu.peak_tflops) * 1e12 *
                     gpu.compute_efficiency),
      bytes_per_s_(gpu.hbm_tbps * 1e12 * gpu.memory_efficiency),
      overhead_s_(gpu.step_overhead_us * 1e-6),
      allreduce_bytes_per_s_(gpu.allreduce_gbps * 1e9),
      allreduce_latency_s_(gpu.allreduce_latency_us * 1e-6),
      // vLLM's default MLA backend (CudaPlatform's priorities): on 9.x FlashAttention-MLA for
      // a 16-bit KV cache, FlashMLA for fp8; FlashInfer-MLA, CUTLASS-MLA (10.x) and Triton-MLA
      // split at one token.
      mla_decode_threshold_(gpu.capability_major() != 9 ? 1
                            : geometry.kv_bytes == 1    ? 128
                                                        : 512),
      mla_uniform_(gpu.capability_major() != 9 || geometry.kv_bytes == 1) {}

std::vector<bool> RooflineStepModel::mla_absorbed(const std::vector<StepSlice>& batch) const {
  std::vector<bool> out(batch.size(), false);
  if (!g_.mla || batch.empty()) return out;
  const int64_t t = mla_decode_threshold_;
  // reorder_batch_to_split_decodes_and_prefills: decodes (cached context, at most r new tokens),
  // then extends (cached context, more), then fresh prompts; kvtwin's order within each. The
  // model runner reorders with the least threshold of all its attention groups: 1 when Mamba
  // layers are there.
  const int64_t reorder = g_.num_mamba_layers > 0 ? 1 : t;
  std::vector<size_t> order;
  for (int region = 0; region < 3; ++region)
    for (size_t i = 0; i < batch.size(); ++i) {
      const StepSlice& s = batch[i];
      const int r = s.num_context_tokens == 0 ? 2 : s.num_new_tokens <= reorder ? 0 : 1;
      if (r == region) order.push_back(i);
    }
  // split_decodes_and_prefills: the decodes are a leading run of that order.
  auto len = [&](size_t k) { return batch[order[k]].num_new_tokens; };
  int64_t longest = 0;
  bool one_length = true;
  for (size_t k = 0; k < order.size(); ++k) {
    longest = std::max(longest, len(k));
    one_length = one_length && len(k) == len(0);
  }
  size_t decodes = 0;
  if (longest <= t && (!mla_uniform_ || t <= 1)) {
    decodes = order.size();
  } else if (len(0) > t) {
    decodes = 0;
  } else if (mla_uniform_ && one_length) {
    decodes = order.size();
  } else {
    while (decodes < order.size() && (mla_uniform_ ? len(decodes) == len(0) : len(decodes) <= t))
      ++decodes;
  }
  for (size_t k = 0; k < decodes; ++k) out[order[k]] = true;
  return out;
}

double RooflineStepModel::bound_s(double flops, double flops16, double bytes) const {
  return std::max(flops / flops_per_s_ + flops16 / flops16_per_s_, bytes / bytes_per_s_);
}

double RooflineStepModel::roofline_s(double flops, double bytes) const {
  return bound_s(flops, 0, bytes);
}

double RooflineStepModel::roofline16_s(double flops, double bytes) const {
  return bound_s(0, flops, bytes);
}

double RooflineStepModel::lm_head_s(double logits_rows) const {
  return roofline16_s(2 * logits_rows * g_.lm_head_params,
                      g_.lm_head_params * g_.head_weight_bytes);
}

double RooflineStepModel::linear_s(double tokens, double logits_rows,
                                   double mla_absorbed_tokens) const {
  if (tokens <= 0) return 0;
  return layers_linear_s(tokens, mla_absorbed_tokens) + lm_head_s(logits_rows);
}

double RooflineStepModel::layers_linear_s(double tokens, double mla_absorbed_tokens) const {
  if (tokens <= 0) return 0;
  const int attn_layers = g_.num_full_layers + g_.num_sliding_layers;
  // The projections at the weights' type, one intensity (2 · tokens FLOPs per weight) for all:
  // cross attention's q and o run per new token (k and v: encoder_s); MLA's kv_b apart.
  const double kv_b = g_.mla_kv_b_params_per_layer * attn_layers;
  double dense_params = g_.attn_params_per_layer * attn_layers - kv_b +
                        g_.mamba_params_per_layer * g_.num_mamba_layers +
                        g_.dense_mlp_params * g_.num_dense_mlp_layers +
                        g_.num_moe_layers * g_.expert_params * g_.num_shared_experts +
                        g_.cross_attn_params_per_layer / 2 * g_.num_layers;
  double t = roofline_s(2 * tokens * dense_params, dense_params * g_.linear_weight_bytes);
  if (kv_b > 0) {  // MHA form: kv_b itself; absorbed: its 16-bit copies, 16-bit bmm
    const double absorbed = std::clamp(mla_absorbed_tokens, 0.0, tokens);
    if (tokens - absorbed > 0)
      t += roofline_s(2 * (tokens - absorbed) * kv_b, kv_b * g_.linear_weight_bytes);
    if (absorbed > 0) t += roofline16_s(2 * absorbed * kv_b, kv_b * g_.mla_absorbed_weight_bytes());
  }
  if (g_.num_moe_layers > 0) {
    // Routers (16-bit GEMMs), then the fused-MoE kernels: each its own roofline, as they run one
    // after the other (a memory-bound expert kernel hides no GEMM's compute).
    const double routers = g_.num_moe_layers * g_.router_params;
    t += roofline16_s(2 * tokens * routers, routers * g_.head_weight_bytes);
    double e = g_.num_experts, k = g_.experts_per_token;
    double touched = e * (1 - std::pow(1 - k / e, tokens));
    t += roofline_s(2 * tokens * k * g_.expert_params * g_.num_moe_layers,
                    touched * g_.expert_params * g_.expert_weight_bytes * g_.num_moe_layers);
  }
  return t;
}

double RooflineStepModel::attention_s(const StepSlice& slice) const {
  return attention_s(slice, mla_absorbed({slice}).front());
}

double RooflineStepModel::attention_s(const StepSlice& slice, bool mla_absorbed) const {
  const double n = static_cast<double>(slice.num_new_tokens);
  const double c = static_cast<double>(slice.num_context_tokens);
  if (n <= 0) return 0;
  const double kv = static_cast<double>(g_.kv_bytes_per_token_per_layer);
  const double H = g_.heads_per_rank, D = g_.head_size;
  // FLOPs per (query, key) pair: scores over D and values over D per head. MLA: the decode
  // kernels run the absorbed form, scores over the latent plus RoPE part (C + R) and values over
  // the latent C; a prefill runs the MHA form over up-projected keys (D + R) and values (D),
  // after up-projecting the attended cached context's latent (kv_b_proj, C -> H·2D per token).
  const bool mla_decode = g_.mla && mla_absorbed;
  const double per_pair = !g_.mla      ? 4.0 * H * D
                          : mla_decode ? 2.0 * H * (2.0 * g_.mla_kv_lora_rank + g_.mla_rope_dim)
                                       : 2.0 * H * (2.0 * D + g_.mla_rope_dim);
  // kv_b_proj over `cached` tokens of latent.
  auto up_projection = [&](double cached) {
    return g_.mla && !mla_decode ? 2.0 * cached * g_.mla_kv_lora_rank * H * 2 * D : 0.0;
  };
  // The attention kernels compute in 16 bits; the up-projection is a GEMM at kv_b's type. One
  // bound per layer: compute = the up-projection at the weights' peak + the rest at 16 bits.
  double t = 0;
  if (g_.num_full_layers > 0) {
    double pairs = key_pairs(c, n, 0);
    t += g_.num_full_layers * bound_s(up_projection(c), pairs * per_pair, (c + n + n) * kv);
  }
  if (g_.num_sliding_layers > 0) {
    // A window of w keys: the chunk's first query reaches w − 1 cached tokens back, so it reads
    // min(c, w − 1) cached keys and its n new ones.
    double w = g_.sliding_window;
    double pairs = key_pairs(c, n, w);
    double cached = std::min(c, std::max(0.0, w - 1));
    t += g_.num_sliding_layers *
         bound_s(up_projection(cached), pairs * per_pair, (cached + n + n) * kv);
  }
  if (g_.num_mamba_layers > 0) {
    double flops = 6 * n * g_.mamba_d_inner_per_rank * g_.mamba_state_size;
    t += g_.num_mamba_layers *
         roofline16_s(flops, 2.0 * static_cast<double>(g_.mamba_state_bytes_per_layer));
  }
  if (g_.encoder_tokens > 0) {  // cross attention of every decoder layer over the encoder KV
    double e = g_.encoder_tokens;
    double cross_kv = static_cast<double>(g_.cross_kv_bytes_per_token) / g_.num_layers;
    t += g_.num_layers * roofline16_s(4.0 * n * e * g_.heads_per_rank * g_.head_size, e * cross_kv);
  }
  return t;
}

double RooflineStepModel::allreduce_s(double tokens) const {
  if (g_.tp <= 1 || tokens <= 0) return 0;
  double bytes = tokens * g_.hidden_size * g_.activation_bytes;
  double one = 2.0 * (g_.tp - 1) / g_.tp * bytes / allreduce_bytes_per_s_ + allreduce_latency_s_;
  return (2.0 * g_.num_layers + 1) * one;
}

double RooflineStepModel::logits_gather_s(double logits_rows) const {
  if (g_.tp <= 1 || logits_rows <= 0) return 0;
  double bytes = logits_rows * g_.vocab_size * g_.activation_bytes;
  return static_cast<double>(g_.tp - 1) / g_.tp * bytes / allreduce_bytes_per_s_ +
         allreduce_latency_s_;
}

double RooflineStepModel::encoder_s(double e) const {
  if (e <= 0 || g_.encoder_layers == 0) return 0;
  double flops_layer =
      2 * e * g_.encoder_params_per_layer + 4 * e * e * g_.heads_per_rank * g_.head_size;
  double t = g_.encoder_layers *
             roofline_s(flops_layer, g_.encoder_params_per_layer * g_.linear_weight_bytes);
  // Each decoder layer projects the encoder output to its cross-attention keys and values.
  const double kv_params = g_.cross_attn_params_per_layer / 2;
  return t + g_.num_layers * roofline_s(2 * e * kv_params, kv_params * g_.linear_weight_bytes);
}

StepTime RooflineStepModel::step_time(const std::vector<StepSlice>& batch) const {
  double tokens = 0, rows = 0, absorbed_tokens = 0, attn = 0, enc = 0;
  // Only an MLA model splits its batch (every step: no allocation for the others).
  const std::vector<bool> absorbed = g_.mla ? mla_absorbed(batch) : std::vector<bool>();
  for (size_t i = 0; i < batch.size(); ++i) {
    const StepSlice& s = batch[i];
    KVTWIN_CHECK(s.num_new_tokens >= 1 || s.encoder_tokens >= 1) << "empty slice";
    tokens += static_cast<double>(s.num_new_tokens);
    // The model runner computes logits at every scheduled request's last token (a partial
    // prefill chunk's too, then discarded).
    rows += s.num_new_tokens >= 1 ? 1 : 0;
    const bool a = g_.mla && absorbed[i];
    if (a) absorbed_tokens += static_cast<double>(s.num_new_tokens);
    attn += attention_s(s, a);
    enc += encoder_s(static_cast<double>(s.encoder_tokens));
  }
  // Each piece once: the layer's share below leaves out the LM head and the logits' gather.
  const double layers_lin = layers_linear_s(tokens, absorbed_tokens);
  const double head = tokens > 0 ? lm_head_s(rows) : 0;
  const double gather = logits_gather_s(rows);
  const double lin = layers_lin + head;
  const double reduces = allreduce_s(tokens);
  const double ar = reduces + gather;
  StepTime t;
  t.linear_ns = from_seconds(lin);
  t.attention_ns = from_seconds(attn);
  t.encoder_ns = from_seconds(enc);
  t.allreduce_ns = from_seconds(ar);
  t.overhead_ns = from_seconds(overhead_s_);
  t.total_ns = from_seconds(lin + attn + enc + ar + overhead_s_);
  // The layerwise pipeline's unit (the embedding's all-reduce is spread over the layers).
  t.per_layer_ns = from_seconds((layers_lin + attn + reduces) / g_.num_layers);
  return t;
}

}  // namespace kvtwin::sim::hw
