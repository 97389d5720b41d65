// ModelGeometry: what the step model and the cache layers need to know about a model, derived
// once from the scenario's [model] and [gpu] sections. All sizes are per tensor-parallel rank
// unless a name says otherwise.
//
//   KV bytes per token of one layer (per rank):
//     full / sliding   2 · max(1, kv_heads / tp) · head_size · kv_dtype_bytes
//     mla              (kv_lora_rank + qk_rope_head_dim) · kv_dtype_bytes   (replicated per rank)
//   Mamba-2 state of one layer and one sequence (per rank):
//     conv  (conv_kernel − 1) · (d_inner + 2 · n_groups · d_state) · dtype_bytes / tp
//     ssm   n_heads · head_dim · d_state · dtype_bytes / tp,      d_inner = n_heads · head_dim
//
//   Parameters (elements, whole model; divided by tp where the layer is sharded):
//     attention  q: hidden·H·D, k and v: hidden·Hkv·D each, o: H·D·hidden (k and v: a rank
//                holds max(1, Hkv / tp) heads, vLLM replicating KV heads when tp > Hkv)
//     mla        q: hidden·H·(D+R) (or q_a: hidden·Q, replicated, + q_b: Q·H·(D+R) with
//                q_lora_rank Q), kv_a: hidden·(C+R) (replicated), kv_b: C·H·2D,
//                o: H·D·hidden      (C = kv_lora_rank). With quantized weights vLLM also keeps
//                16-bit copies of kv_b (W_UK_T, W_UV) for the absorbed decode kernels.
//     mamba      in: hidden·(2·d_inner + 2·G·N + n_heads), out: d_inner·hidden
//     dense MLP  3·hidden·intermediate (gated)
//     MoE MLP    router hidden·E, each expert 3·hidden·moe_intermediate
//     LM head    hidden·vocab
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"

namespace kvtwin::sim::hw {

enum class LayerKind : uint8_t { kFull, kSliding, kMamba };

// Bytes per element: bfloat16/float16 2, float32 4, fp8 1, mxfp4 0.53125 (4-bit values plus one
// 8-bit scale per 32).
double dtype_bytes(const std::string& dtype);

struct ModelGeometry {
  int tp = 1;
  int num_layers = 0;
  std::vector<LayerKind> layers;  // decoder layers, pattern expanded
  int num_full_layers = 0;
  int num_sliding_layers = 0;
  int num_mamba_layers = 0;
  bool mla = false;
  int mla_kv_lora_rank = 0;
  int mla_rope_dim = 0;
  int sliding_window = 0;
  int hidden_size = 0;
  int heads_per_rank = 0;
  int head_size = 0;
  int vocab_size = 0;
  // Bytes per weight element. A quantized model.dtype quantizes the decoder's projections
  // (fp8: attention, Mamba, MLPs and experts; mxfp4: the routed experts only, as gpt-oss ships);
  // the embedding, the LM head and the MoE routers stay 16-bit (32-bit for float32).
  double linear_weight_bytes = 2;  // attention / Mamba / MLP / shared-expert / encoder weights
  double expert_weight_bytes = 2;  // routed experts
  double head_weight_bytes = 2;    // embedding, LM head, routers
  int activation_bytes = 2;        // per activation element (all-reduce traffic)
  int kv_bytes = 2;                // per KV element

  // KV-cache sizes (per rank).
  int64_t kv_bytes_per_token_per_layer = 0;  // one attention layer (F or S)
  int64_t kv_bytes_per_token = 0;            // all attention layers (F and S)
  int64_t mamba_state_bytes_per_layer = 0;   // one M layer, one sequence
  int64_t cross_kv_bytes_per_token = 0;      // all decoder layers' cross-attention KV

  // Parameters (elements per rank).
  double attn_params_per_layer = 0;      // projections of an attention layer (MLA: with kv_b)
  double mla_kv_b_params_per_layer = 0;  // MLA: kv_b_proj (latent -> keys and values)
  double mamba_params_per_layer = 0;     // projections of a Mamba layer
  double dense_mlp_params = 0;           // one dense MLP
  double expert_params = 0;              // one routed expert
  double router_params = 0;              // one MoE router
  int num_experts = 0;
  int experts_per_token = 0;
  int num_shared_experts = 0;
  int num_moe_layers = 0;
  int num_dense_mlp_layers = 0;
  double lm_head_params = 0;
  double embed_params = 0;  // the input embedding when untied (memory only: a step gathers rows)
  // Encoder (encoder-decoder models).
  int encoder_layers = 0;
  int encoder_tokens = 0;
  double encoder_params_per_layer = 0;
  // A decoder layer's cross-attention projections: q and o run per new token, k and v once per
  // request over the encoder output.
  double cross_attn_params_per_layer = 0;

  // Mamba core work.
  int mamba_d_inner_per_rank = 0;
  int mamba_state_size = 0;

  // Weight bytes per rank: every parameter the rank holds (what the KV pool is sized after).
  double weight_bytes_per_rank() const;
  // MLA: whether vLLM keeps 16-bit copies of kv_b (W_UK_T, W_UV) for the absorbed decode
  // kernels: when the checkpoint's projections are narrower than the activations (quantized);
  // a 16-bit checkpoint's are views of kv_b itself. They are weight memory too.
  bool mla_kv_b_copied() const { return linear_weight_bytes < activation_bytes; }
  // Bytes per element of the kv_b weights the absorbed decode kernels read.
  double mla_absorbed_weight_bytes() const {
    return mla_kv_b_copied() ? activation_bytes : linear_weight_bytes;
  }
};

ModelGeometry derive_geometry(const scenario::Scenario& s);

}  // namespace kvtwin::sim::hw
