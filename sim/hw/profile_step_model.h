// ProfileStepModel: step time from measured steps instead of the roofline.
//
// The profile is a CSV with header num_new_tokens,num_seqs,context_tokens,step_us — one measured
// engine step per row (e.g. from vLLM's step logs): query tokens computed, requests in the batch,
// tokens attended (Σ context + new over the batch), and the step's duration in µs. It is fitted
// by least squares to
//
//   step_us ≈ a + b · num_new_tokens + c · num_seqs + d · context_tokens
//
// and the fit is used for every step (clamped at 0). At least 4 rows with independent columns
// are needed; a degenerate profile is an InputError naming the file.
#pragma once

#include <array>
#include <string>

#include "sim/hw/step_model.h"

namespace kvtwin::sim::hw {

class ProfileStepModel final : public StepModel {
 public:
  explicit ProfileStepModel(const std::string& path);
  // From coefficients directly (a, b, c, d in µs).
  explicit ProfileStepModel(std::array<double, 4> coefficients) : coef_(coefficients) {}
  StepTime step_time(const std::vector<StepSlice>& batch) const override;
  const std::array<double, 4>& coefficients() const { return coef_; }
  int num_layers_hint = 1;  // per_layer_ns = total / num_layers_hint

 private:
  std::array<double, 4> coef_{};
};

}  // namespace kvtwin::sim::hw
