// Helpers shared by the kvtwin subcommands: scenario loading with overrides, opening the
// scenario's workload (its trace file, or the embedded default), and a progress bar.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"
#include "sim/workload/workload.h"

namespace kvtwin::sim::cli {

// The scenario at `path` (or the embedded default when empty) with each "key=value" of `sets`
// applied in order, then validated. Throws InputError.
scenario::Scenario load_scenario(const std::string& path, const std::vector<std::string>& sets);

// vLLM's start-up check, which scenario::validate cannot run (it needs the model's geometry and
// the KV-cache layout): throws the InputError a run of `s` would throw when it starts (a
// max_model_len whose one request the KV cache cannot hold, weights that leave no memory for
// KV). For scenarios a command builds before running them (a grid's points, a search's probes),
// so that such a value is refused before anything runs.
void check_vllm_starts(const scenario::Scenario& s);

// The [workload] transforms of a scenario.
workload::WorkloadOptions workload_options(const scenario::Scenario& s);

// Opens the trace of the scenario: `trace_override` (relative to the working directory) if set,
// else workload.trace (relative to the scenario's directory), else the embedded default trace.
std::unique_ptr<workload::TraceReader> open_scenario_trace(const scenario::Scenario& s,
                                                           const std::string& trace_override);
// About how many requests the scenario's workload will produce (lines of the trace, capped by
// workload.max_requests), for progress bars only.
uint64_t estimate_requests(const scenario::Scenario& s, const std::string& trace_override);

// A printable name of the trace open_scenario_trace opens.
std::string scenario_trace_name(const scenario::Scenario& s, const std::string& trace_override);

// Runs fn(0..n-1) on up to `jobs` threads (each index once). The first exception thrown by any
// call is rethrown here after every thread has stopped; results stay deterministic as long as
// fn(i) writes only its own slot.
void parallel_for(size_t n, int jobs, const std::function<void(size_t)>& fn);

// A progress bar on stderr: drawn only when stderr is a terminal, `quiet` is false and the work
// has run for more than a second (the environment variable KVTWIN_PROGRESS_AFTER_S, seconds >= 0,
// sets another delay; a malformed value is an InputError); redrawn at most 10 times a second.
// finish() (or the destructor) erases it.
class Progress {
 public:
  Progress(std::string label, bool quiet);
  bool enabled() const { return enabled_; }
  ~Progress();
  // fraction in [0, 1]; `detail` is shown after the bar.
  void update(double fraction, const std::string& detail);
  void finish();

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  double start_s_;
  double delay_s_ = 1.0;
  double last_draw_s_ = 0;
};

// One bar over `n` points simulated in parallel (sweep points, cache-replay capacities): each
// point reports the share of its own work done, and the bar shows their mean and how many points
// have finished. Thread-safe.
class PointsProgress {
 public:
  PointsProgress(std::string label, bool quiet, size_t n);
  bool enabled() const { return bar_.enabled(); }
  // Point i has done `fraction` of its work (1: finished).
  void point(size_t i, double fraction);
  // point(i, ·) as a callback for the point's own loop; empty when no bar is drawn.
  std::function<void(double)> reporter(size_t i) {
    if (!enabled()) return {};
    return [this, i](double fraction) { point(i, fraction); };
  }
  void finish();

 private:
  std::mutex mu_;
  Progress bar_;
  std::vector<double> fraction_;
  size_t finished_ = 0;
};

}  // namespace kvtwin::sim::cli
