// StepModel: how long one engine step (one forward pass over a batch) takes.
//
// A step's batch is a list of per-request slices: `num_new_tokens` query tokens computed this
// step on top of `num_context_tokens` already in the KV cache. A prefill chunk has many new
// tokens; a decode has one. Every slice computes one row of logits (vLLM's model runner does so
// at each scheduled request's last token, a partial prefill chunk's too). `encoder_tokens` > 0
// runs the encoder for that request
// (encoder-decoder models, first step only).
//
// Two implementations: RooflineStepModel (from the model geometry and GPU figures, hw/roofline.h)
// and ProfileStepModel (a fit of measured steps, hw/profile_step_model.h).
//
// Threading: const and pure; share freely.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/time.h"

namespace kvtwin::sim::hw {

struct StepSlice {
  int64_t num_new_tokens = 0;
  int64_t num_context_tokens = 0;
  int64_t encoder_tokens = 0;
};

struct StepTime {
  SimDuration total_ns = 0;
  // Breakdown (sums to total_ns up to rounding).
  SimDuration linear_ns = 0;     // dense projections, MLP / experts, LM head
  SimDuration attention_ns = 0;  // attention core and Mamba scans
  SimDuration encoder_ns = 0;
  SimDuration allreduce_ns = 0;  // tensor-parallel collectives (all-reduces, logits' gather)
  SimDuration overhead_ns = 0;
  // Time of one decoder layer's forward (what a layerwise transfer overlaps with): the step's
  // layer work over num_layers, without the LM head, the logits' gather and the overhead (the
  // embedding's all-reduce is spread over the layers). A profile model divides the whole step.
  SimDuration per_layer_ns = 0;
};

class StepModel {
 public:
  virtual ~StepModel() = default;
  // REQUIRES: every slice has num_new_tokens >= 1 (or encoder_tokens >= 1).
  virtual StepTime step_time(const std::vector<StepSlice>& batch) const = 0;
};

}  // namespace kvtwin::sim::hw
