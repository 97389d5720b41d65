// The validation report: predicted vs measured transfer times per transfer class and object size
// bucket, with MAPE, bias and the worst cases.
//
//   relative error e = (predicted - measured) / measured
//   MAPE = mean |e|,  bias = mean e (positive: the model is pessimistic),  p90 / max of |e|
// and, for points measured more than once, the same of each point's medians.
//
// Transfers in which any object failed (a miss, a fault) are left out of the statistics and
// counted apart: their measured time is that of a different operation.
//
// Buckets are by object size (bytes / objects): < 64 KiB, then powers of 4 up to >= 64 MiB.
// Output files (write_report):
//   samples.csv                 one row per transfer
//   summary.tsv                 one row per (class, bucket) and per class for objects >= 1 MiB
//                               (bucket ">=1M medians": over repeated points)
//   report.md                   the tables and the worst cases, as printed on stdout
//   predicted_vs_measured.svg   log-log scatter per class with the y = x line (gnuplot; skipped
//                               with a note when gnuplot is not installed)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/validate/validating_mover.h"

namespace kvtwin::sim::validate {

struct ErrorStats {
  std::string transfer_class;  // "disk_read", ...
  std::string bucket;          // "1M-4M", or ">=1M" for the per-class rows
  size_t count = 0;
  double mape_pct = 0;
  double bias_pct = 0;
  double p90_abs_pct = 0;
  double max_abs_pct = 0;
  double mean_measured_ms = 0;
  double mean_predicted_ms = 0;
};

struct ValidationSummary {
  std::vector<ErrorStats> buckets;  // (class, bucket), in class then size order
  std::vector<ErrorStats> large;    // per class, objects >= 1 MiB (the MAPE target's scope)
  // The same, over repeated points: each (class, objects, bytes) measured at least twice counts
  // once, with the median of its measured times and of its predictions (count = points). On a
  // shared machine one transfer's time scatters by tens of percent around its point's median;
  // this separates the model's error from that scatter. Empty when nothing was repeated.
  std::vector<ErrorStats> large_medians;
  std::vector<TransferSample> worst;  // largest |e| first
  size_t num_failed = 0;              // transfers left out (an object failed)
};

std::string size_bucket(uint64_t object_bytes);
ValidationSummary summarize(const std::vector<TransferSample>& samples, size_t num_worst = 10);
std::string format_summary(const ValidationSummary& summary);

// The exit code of a validation: 1 (with a line on stderr each) when an object came back with
// wrong bytes or, with max_mape_pct > 0, a class's MAPE for objects >= 1 MiB exceeds it; else 0.
int validation_exit_code(uint64_t wrong_bytes, const ValidationSummary& summary,
                         double max_mape_pct);

// Writes the files listed above into `dir` (created). `header` lines open report.md.
// Returns a one-line note about the plot ("" when it was drawn).
std::string write_report(const std::string& dir, const std::vector<std::string>& header,
                         const std::vector<TransferSample>& samples,
                         const ValidationSummary& summary);

}  // namespace kvtwin::sim::validate
