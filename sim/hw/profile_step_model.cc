#include "sim/hw/profile_step_model.h"

#include <cmath>

#include "sim/io/input_error.h"
#include "sim/io/parse.h"
#include "sim/workload/csv.h"

namespace kvtwin::sim::hw {
namespace {

// Solves the 4x4 system a·x = b by Gaussian elimination with partial pivoting; false if singular.
bool solve4(std::array<std::array<double, 5>, 4> m, std::array<double, 4>* x) {
  for (int col = 0; col < 4; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 4; ++r)
      if (std::fabs(m[r][col]) > std::fabs(m[pivot][col])) pivot = r;
    if (std::fabs(m[pivot][col]) < 1e-12) return false;
    std::swap(m[col], m[pivot]);
    for (int r = 0; r < 4; ++r) {
      if (r == col) continue;
      double f = m[r][col] / m[col][col];
      for (int k = col; k < 5; ++k) m[r][k] -= f * m[col][k];
    }
  }
  for (int i = 0; i < 4; ++i) (*x)[i] = m[i][4] / m[i][i];
  return true;
}

}  // namespace

ProfileStepModel::ProfileStepModel(const std::string& path) {
  auto lines = workload::LineSource::file(path);
  workload::CsvReader<4> csv(path, std::make_unique<workload::CsvByteSource>(lines.get()));
  std::array<std::array<double, 5>, 4> normal{};  // [XᵀX | Xᵀy]
  int rows = 0;
  // Columns are scaled to similar magnitudes before the normal equations, then unscaled.
  const std::array<double, 4> scale = {1.0, 1e-3, 1e-2, 1e-5};
  try {
    csv.read_header(::io::ignore_extra_column, "num_new_tokens", "num_seqs", "context_tokens",
                    "step_us");
    char* col[4] = {};
    while (csv.read_row(col[0], col[1], col[2], col[3])) {
      uint64_t line = csv.get_file_line();
      const char* names[4] = {"num_new_tokens", "num_seqs", "context_tokens", "step_us"};
      double v[4];
      for (int i = 0; i < 4; ++i) {
        auto d = io::parse_double(col[i]);
        if (!d || *d < 0) throw InputError(path, line, names[i], "expected a number >= 0");
        v[i] = *d;
      }
      std::array<double, 4> x = {1.0, v[0] * scale[1], v[1] * scale[2], v[2] * scale[3]};
      for (int r = 0; r < 4; ++r) {
        for (int c = 0; c < 4; ++c) normal[r][c] += x[r] * x[c];
        normal[r][4] += x[r] * v[3];
      }
      ++rows;
    }
  } catch (const ::io::error::base& e) {
    workload::throw_csv_error(e, path, csv.get_file_line());
  }
  std::array<double, 4> fit{};
  if (rows < 4 || !solve4(normal, &fit))
    throw InputError(path, 0, "step_us",
                     "profile is degenerate: need >= 4 rows varying num_new_tokens, num_seqs and "
                     "context_tokens independently");
  for (int i = 0; i < 4; ++i) coef_[i] = fit[i] * scale[i];
}

StepTime ProfileStepModel::step_time(const std::vector<StepSlice>& batch) const {
  double tokens = 0, seqs = 0, context = 0;
  for (const StepSlice& s : batch) {
    tokens += static_cast<double>(s.num_new_tokens);
    seqs += 1;
    context += static_cast<double>(s.num_context_tokens + s.num_new_tokens);
  }
  double us = coef_[0] + coef_[1] * tokens + coef_[2] * seqs + coef_[3] * context;
  StepTime t;
  t.total_ns = from_seconds(std::max(0.0, us) * 1e-6);
  t.linear_ns = t.total_ns;
  t.per_layer_ns = t.total_ns / std::max(1, num_layers_hint);
  return t;
}

}  // namespace kvtwin::sim::hw
