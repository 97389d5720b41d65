#include "sim/cli/common.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "sim/embedded/embedded.h"
#include "sim/engine/kv_cache_layout.h"
#include "sim/hw/model_geometry.h"
#include "sim/io/input_error.h"
#include "sim/io/line_reader.h"
#include "sim/io/parse.h"
#include "sim/scenario/scenario_loader.h"

namespace kvtwin::sim::cli {
namespace {

double wall_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

scenario::Scenario load_scenario(const std::string& path, const std::vector<std::string>& sets) {
  scenario::Scenario s =
      path.empty() ? scenario::load_default_scenario() : scenario::load_scenario_file(path);
  for (const std::string& set : sets) scenario::apply_override(&s, set);
  scenario::validate(s);
  return s;
}

void check_vllm_starts(const scenario::Scenario& s) {
  engine::derive_kv_cache_layout(s, hw::derive_geometry(s));
}

workload::WorkloadOptions workload_options(const scenario::Scenario& s) {
  workload::WorkloadOptions o;
  o.spread_arrivals = s.workload.arrivals == "spread";
  o.rate_scale = s.workload.rate_scale;
  o.max_requests = s.workload.max_requests;
  o.max_duration_s = s.workload.max_duration_s;
  o.start_s = s.workload.start_s;
  o.warmup_s = s.workload.warmup_s;
  o.prefix_groups = s.workload.prefix_groups;
  o.prefix_tokens = s.workload.prefix_tokens;
  o.prefix_zipf = s.workload.prefix_zipf;
  o.prefix_block_size = s.workload.prefix_block_size;
  o.seed = s.run.seed;
  return o;
}

std::string scenario_trace_name(const scenario::Scenario& s, const std::string& trace_override) {
  if (!trace_override.empty()) return trace_override;
  if (!s.workload.trace.empty()) {
    std::string path =
        s.workload.trace.front() == '/' ? s.workload.trace : s.base_dir + "/" + s.workload.trace;
    // A trace the scenario names and nobody can read is the scenario's error: name its key.
    if (::access(path.c_str(), R_OK) != 0)
      scenario::scenario_error(s, "workload.trace",
                               "cannot open trace " + path + ": " + std::strerror(errno));
    return path;
  }
  return std::string(embedded::kDefaultTraceName);
}

std::unique_ptr<workload::TraceReader> open_scenario_trace(const scenario::Scenario& s,
                                                           const std::string& trace_override) {
  workload::TraceFormat format = *workload::trace_format_from_name(s.workload.format);
  if (trace_override.empty() && s.workload.trace.empty())
    return workload::open_trace_bytes(std::string(embedded::kDefaultTraceName),
                                      embedded::default_trace(), format);
  return workload::open_trace(scenario_trace_name(s, trace_override), format);
}

void parallel_for(size_t n, int jobs, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr error;
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        next = n;  // stop handing out work
      }
    }
  };
  size_t threads = std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(std::max(jobs, 1)), n));
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

uint64_t estimate_requests(const scenario::Scenario& s, const std::string& trace_override) {
  uint64_t lines = 0;
  if (trace_override.empty() && s.workload.trace.empty()) {
    std::string_view bytes = embedded::default_trace();
    lines = static_cast<uint64_t>(std::count(bytes.begin(), bytes.end(), '\n'));
  } else {
    io::LineReader reader(scenario_trace_name(s, trace_override));
    std::string_view line;
    while (reader.next(&line)) ++lines;
    if (lines > 0) --lines;  // a CSV header (one line too few for JSON Lines: fine for a bar)
  }
  if (s.workload.max_requests > 0)
    lines = std::min<uint64_t>(lines, static_cast<uint64_t>(s.workload.max_requests));
  return std::max<uint64_t>(lines, 1);
}

Progress::Progress(std::string label, bool quiet)
    : label_(std::move(label)), enabled_(!quiet && isatty(STDERR_FILENO)), start_s_(wall_s()) {
  if (const char* env = std::getenv("KVTWIN_PROGRESS_AFTER_S")) {
    std::optional<double> v = io::parse_double(env);
    if (!v || *v < 0) throw InputError("KVTWIN_PROGRESS_AFTER_S", 0, env, "expected seconds >= 0");
    delay_s_ = *v;
  }
}

Progress::~Progress() {
  finish();
}

void Progress::update(double fraction, const std::string& detail) {
  if (!enabled_) return;
  double now = wall_s();
  if (now - start_s_ < delay_s_ || now - last_draw_s_ < 0.1) return;
  last_draw_s_ = now;
  constexpr int kWidth = 30;
  int filled = static_cast<int>(std::min(1.0, std::max(0.0, fraction)) * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  std::fprintf(stderr, "\r%s [%s] %3.0f%% %s\033[K", label_.c_str(), bar.c_str(), 100 * fraction,
               detail.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

PointsProgress::PointsProgress(std::string label, bool quiet, size_t n)
    : bar_(std::move(label), quiet), fraction_(n, 0.0) {}

void PointsProgress::point(size_t i, double fraction) {
  if (!bar_.enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (fraction >= 1.0 && fraction_[i] < 1.0) ++finished_;
  fraction_[i] = std::min(1.0, fraction);
  double sum = 0;
  for (double f : fraction_) sum += f;
  bar_.update(sum / static_cast<double>(fraction_.size()),
              std::to_string(finished_) + " of " + std::to_string(fraction_.size()) + " points");
}

void PointsProgress::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  bar_.finish();
}

}  // namespace kvtwin::sim::cli
