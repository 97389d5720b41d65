// RooflineStepModel: step time from FLOPs and bytes, per component, on one tensor-parallel rank.
//
// Each kernel group costs max(FLOPs / (peak · compute_efficiency), bytes / (HBM · memory_eff.)),
// the groups one after the other (summed). The peak is gpu.peak_tflops for GEMMs at the weights'
// type, gpu.peak_tflops_16bit (0: the same) for what runs in 16 bits whatever the weights.
//
//   linear     T = Σ new tokens over the batch, Lg = logits rows (one per slice with new
//              tokens: vLLM computes logits at every scheduled request's last token)
//              projections  FLOPs = 2·T·(attention/Mamba projections + dense MLPs + shared
//                           experts + cross attention's q and o), bytes = those weights once
//              MLA kv_b     MHA-form tokens: 2·T'·kv_b at the weights' type, bytes kv_b;
//                           absorbed tokens: the same at 16 bits, bytes its 16-bit copies
//              routers      16-bit: 2·T·hidden·E per MoE layer, bytes the routers
//              experts      2·T·k·expert (k = experts_per_token), bytes touched experts'
//                           weights (E·(1 − (1 − k/E)^T) experts per MoE layer)
//              LM head      16-bit: 2·Lg·hidden·vocab/tp, bytes the LM head
//              (each weight at its own width, ModelGeometry: quantized projections, 16-bit
//              head and routers)
//   attention  per attention layer and slice (n new tokens on c cached), one roofline whose
//              compute is the 16-bit kernels' FLOPs at the 16-bit peak plus MLA's up-projection
//              at the weights' peak:
//              pairs = Σ_{i=1..n} keys(c + i), keys(x) = x (full) or min(x, window) (sliding)
//              FLOPs = 4 · pairs · heads_per_rank · head_size
//                mla, absorbed (decode kernels): 2 · pairs · heads · (2·kv_lora_rank + rope)
//                mla, otherwise (prefill, MHA form): 2 · pairs · heads · (2·head_size + rope)
//                      + 2 · c' · kv_lora_rank · heads · 2·head_size (the attended cached
//                      context c' = keys(c) up-projected from its latent to keys and values)
//              which MLA slices are absorbed: mla_absorbed below
//              bytes = (cached keys + n + n) · KV bytes per token per layer, cached keys = c
//                      (full) or min(c, window − 1) (sliding: the chunk's first query's reach)
//              Mamba layer (16-bit): FLOPs = 6·n·d_inner·d_state, bytes = 2 · state bytes
//   encoder    encoder tokens e: 2·e·encoder params + 4·e²·heads·head_size per encoder layer,
//              bytes = encoder weights; then per decoder layer the cross-attention k and v
//              projections of the e outputs: 2·e·(k, v params), bytes = those weights
//   all-reduce tp > 1: 2 per decoder layer and 1 for the vocab-parallel embedding, of
//              T·hidden·activation bytes, ring: 2·(tp−1)/tp · bytes / allreduce bandwidth
//              + latency; then the logits' all-gather, (tp−1)/tp · Lg·vocab·activation bytes
//              / allreduce bandwidth + latency
//   overhead   step_overhead_us, once per step
//
// Every component's seconds are summed, then rounded to integer ns once.
#pragma once

#include "sim/hw/model_geometry.h"
#include "sim/hw/step_model.h"
#include "sim/scenario/scenario.h"

namespace kvtwin::sim::hw {

class RooflineStepModel final : public StepModel {
 public:
  RooflineStepModel(const ModelGeometry& geometry, const scenario::GpuConfig& gpu);
  StepTime step_time(const std::vector<StepSlice>& batch) const override;

  // The pieces, exposed for tests (seconds).
  double roofline_s(double flops, double bytes) const;    // FLOPs at peak_tflops
  double roofline16_s(double flops, double bytes) const;  // FLOPs at the 16-bit peak
  // `logits_rows` rows of logits; `mla_absorbed_tokens` of the tokens in absorbed MLA slices.
  double linear_s(double tokens, double logits_rows, double mla_absorbed_tokens = 0) const;
  double lm_head_s(double logits_rows) const;
  // linear_s without the LM head: the decoder layers' projections, routers and experts.
  double layers_linear_s(double tokens, double mla_absorbed_tokens) const;
  // A slice as a batch of its own (mla_absorbed({slice})).
  double attention_s(const StepSlice& slice) const;
  double attention_s(const StepSlice& slice, bool mla_absorbed) const;
  // MLA: the slices that run the absorbed (decode) kernels, as vLLM's MLA metadata builder
  // splits a batch with its default backend's threshold T: on compute capability 9.x
  // FlashAttention-MLA for a 16-bit KV cache (T = 512, any lengths) and FlashMLA for fp8
  // (T = 128, uniform lengths); elsewhere T = 1. The batch is ordered decodes (cached context,
  // at most T new tokens; 1 when Mamba layers are there, whose builder's threshold the runner
  // reorders with), extends (cached context, more), fresh prompts (vLLM swaps only the slices in
  // the wrong region, so its order within a region follows its persistent batch; kvtwin keeps
  // its own batch order, an approximation), and the decodes are a leading run:
  // all slices when every one has at most T tokens (uniform backends: T = 1 only), none when the
  // first has more, all when a uniform backend sees one length, else the run up to the first
  // slice longer than T (uniform: of another length than the first).
  std::vector<bool> mla_absorbed(const std::vector<StepSlice>& batch) const;
  double allreduce_s(double tokens) const;
  double logits_gather_s(double logits_rows) const;
  double encoder_s(double encoder_tokens) const;

 private:
  // max(FLOPs at peak_tflops + FLOPs at the 16-bit peak, bytes at the HBM rate).
  double bound_s(double flops, double flops16, double bytes) const;

  ModelGeometry g_;
  double flops_per_s_;
  double flops16_per_s_;
  double bytes_per_s_;
  double overhead_s_;
  double allreduce_bytes_per_s_;
  double allreduce_latency_s_;
  int64_t mla_decode_threshold_;
  bool mla_uniform_;
};

}  // namespace kvtwin::sim::hw
