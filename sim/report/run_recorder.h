// RunRecorder: collects what a simulation run reports and writes the run directory.
//
//   summary.json     latencies (TTFT, TPOT, ITL, E2E: mean/p50/p90/p99/max), throughput,
//                    goodput under the scenario's SLOs, GPU prefix hit rate, LMCache hit rate per
//                    tier, bytes per link, evictions per tier, preemptions, peak and mean
//                    occupancy per tier
//   requests.csv     one row per request, in completion order
//   timeseries.csv   one row per output.timeseries_interval_s of simulated time (an idle gap of
//                    more than 1,000 intervals: its first and last rows only)
//   trace.json       Chrome / Perfetto timeline of steps and transfers (output.chrome_trace)
//   plots/*.svg      latency CDFs and occupancy over time (gnuplot, when installed)
//   scenario.toml    the effective scenario
//
// The engine reports facts (requests done, tokens, samples, steps, transfers); the recorder owns
// the formats. With an empty output directory nothing is written and only the Summary is built
// (sweeps, tests). Every number is printed with a fixed format, so equal runs give equal bytes.
//
// Memory: per finished request its TTFT, TPOT, E2E and queue delay (exact percentiles), its
// priority, arrival and end (about 56 bytes); inter-token latencies go into a fixed-size log
// histogram. Threading: the simulation thread only.
#pragma once

#include <array>
#include <cstdio>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/mover.h"
#include "sim/report/chrome_trace.h"
#include "sim/report/cost.h"
#include "sim/report/histogram.h"
#include "sim/scenario/scenario.h"
#include "sim/time.h"

namespace kvtwin::sim::report {

// The screen points to workload.arrivals = "spread" when this many requests or more arrive at
// one instant (a trace clock's grain: the Mooncake conversation trace records up to 28 at once).
inline constexpr uint64_t kBurstHint = 8;

// The link kinds that timeseries.csv gives a column each and sweep.csv, capacity.csv and
// frontier.csv two columns each (busy fraction, peak rate), in column order. Every run has them
// (a link that moved nothing gives 0); the page cache's links are in summary.json only.
inline constexpr const char* kLinkKinds[] = {"pcie_h2d", "pcie_d2h", "disk_read", "disk_write",
                                             "nic_rx",   "nic_tx",   "remote_rx", "remote_tx"};
inline constexpr size_t kNumLinkKinds = std::size(kLinkKinds);

// Tiers of LMCache, in its search order.
enum Tier { kTierCpu = 0, kTierDisk = 1, kTierRemote = 2, kNumTiers = 3 };
const char* tier_name(int tier);

struct RequestRecord {
  uint64_t index = 0;
  int instance = 0;
  SimTime arrival = 0;
  SimTime first_scheduled = -1;
  SimTime first_token = -1;
  SimTime finish = -1;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;       // generated
  int64_t gpu_hit_tokens = 0;      // vLLM prefix-cache hit at first schedule
  int64_t lmcache_hit_tokens = 0;  // LMCache lookup hit beyond vLLM's at first schedule
  std::array<int64_t, kNumTiers> loaded_tokens{};  // tokens loaded per tier
  int64_t failed_load_tokens = 0;                  // tokens whose load failed (recomputed or lost)
  int64_t preemptions = 0;
  bool rejected = false;    // never finished: prompt too long for max_model_len, or its tokens
                            // need more blocks than the whole GPU pool
  bool load_error = false;  // ended with an error by a failed KV load (policy "fail")
  bool warmup = false;      // replayed before the window (workload.warmup_s): not reported
  int64_t priority = 0;     // the trace's priority (vLLM's; lower runs first)
};

// A snapshot of the cluster at one instant (sums over instances unless noted).
struct Sample {
  SimTime t = 0;
  int64_t running = 0;
  int64_t waiting = 0;
  double gpu_kv_usage_mean = 0;  // mean over instances of the used fraction of the KV pool
  double gpu_kv_usage_max = 0;
  std::array<double, kNumTiers> tier_bytes{};  // bytes resident per LMCache tier
  uint64_t computed_tokens = 0;                // cumulative tokens computed by all steps
  uint64_t finished = 0;                       // cumulative finished requests
  // Cumulative bytes moved per link, in the order of RunRecorder::set_link_kinds (empty: no
  // links reported).
  std::vector<double> link_bytes;
};

struct LatencyStats {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;  // milliseconds
  uint64_t count = 0;
};

struct Summary {
  std::string scenario_name;
  std::string trace;
  int instances = 1;
  int tensor_parallel = 1;  // GPUs per instance; pcie_* bytes are one GPU's (not in summary.json)
  std::string scheduling = "async";  // vLLM's engine loop: "async" or "sync"
  uint64_t requests = 0;
  uint64_t finished = 0;
  // workload.warmup_s > 0: the requests replayed before the window (in no other figure), and
  // where the window starts on the run's clock; every figure covers the run from there.
  bool has_warmup = false;
  uint64_t warmup_requests = 0;
  double measured_from_s = 0;
  uint64_t rejected = 0;
  uint64_t failed = 0;                 // load_error
  double duration_s = 0;               // first arrival to last completion
  double request_throughput = 0;       // finished / duration
  double input_token_throughput = 0;   // prompt tokens of the finished requests / duration
  double output_token_throughput = 0;  // tokens the finished requests generated / duration
  double goodput = 0;                  // requests/s meeting both SLOs
  uint64_t slo_met = 0;                // finished requests meeting both SLOs
  double slo_attainment = 0;           // slo_met / finished
  LatencyStats ttft, tpot, itl, e2e, queue;
  // Caches. prefix_caching: vLLM's prefix cache is on (the KV layout's enable_caching, which the
  // cluster sets: scenario::effective_enable_prefix_caching); lmcache_enabled: lmcache.enabled.
  bool prefix_caching = true;
  // One instance's GPU KV pool, as vLLM logs it at start-up: blocks, KV cache groups, "GPU KV
  // cache size" in tokens (KvCacheLayout::kv_cache_tokens) and the memory per GPU it was
  // sized from ("Available KV cache memory").
  int64_t gpu_kv_blocks = 0;
  int64_t gpu_kv_groups = 0;
  int64_t gpu_kv_tokens = 0;
  double gpu_kv_memory_gib = 0;
  bool lmcache_enabled = false;
  uint64_t prompt_tokens = 0;
  uint64_t gpu_hit_tokens = 0;
  double gpu_hit_rate = 0;
  uint64_t lmcache_hit_tokens = 0;
  double lmcache_hit_rate = 0;
  std::array<uint64_t, kNumTiers> loaded_tokens{};
  std::array<double, kNumTiers> tier_hit_rate{};
  uint64_t failed_load_tokens = 0;
  double failed_load_rate = 0;  // failed_load_tokens / prompt_tokens (not in summary.json)
  uint64_t stalled_loads = 0;   // loads upstream would block on forever (recomputed here)
  uint64_t failed_stores = 0;
  uint64_t failed_remote_writes = 0;  // objects the Redis writer could not serialize (not sent)
  // At the end of the run, the disk tiers' reservations (what their size counts) that no chunk
  // or in-flight write holds: LMCache f4261ef6's disk accounting quirks. Summed over ranks.
  double disk_leaked_bytes = 0;
  // LMCache async loading (lmcache.enable_async_loading); all 0 when off.
  struct AsyncLoading {
    uint64_t lookups = 0, timeouts = 0, prefetch_bytes = 0, busy_waits = 0, wrong_kv_chunks = 0;
  } async_loading;
  // LMCache's health monitor over the remote tier (lmcache.health_monitor), summed over
  // instances: failed blocking Redis reads, times LMCache was turned off, and for how long.
  struct Health {
    uint64_t failed_remote_gets = 0, unhealthy_periods = 0;
    double unhealthy_s = 0;
  } health;
  // Bulk remote fetches that LMCache's blocking GET would have given up on after
  // lmcache.blocking_timeout_secs, and the chunks from the first such GET on (loaded here: the
  // timeout is counted, not modelled; sim/engine/blocking_get.h).
  struct BlockingGetTimeouts {
    int64_t timeout_s = 0;  // the scenario's
    uint64_t fetches = 0, chunks = 0;
  } blocking_get_timeouts;
  // Bulk loads whose disk get slept in upstream's busy loop until in-flight writes freed CPU
  // memory, and the time they slept (summed over instances).
  struct MemoryWaits {
    uint64_t loads = 0;
    double wait_s = 0;
  } memory_waits;
  // The page cache over the disk tier's files (links.page_cache_gb > 0; capacity 0: off). Sums over
  // instances; peak: the sum of each instance's peak.
  struct PageCache {
    double capacity_bytes = 0, peak_bytes = 0;
    uint64_t hit_bytes = 0;             // disk reads served from memory
    uint64_t miss_bytes = 0;            // disk reads that went to the device
    uint64_t buffered_write_bytes = 0;  // disk writes done once in memory (written back later)
  } page_cache;
  uint64_t preemptions = 0;
  int64_t gpu_evictions = -1;  // -1: not tracked (vLLM KV events off)
  std::array<uint64_t, kNumTiers> tier_evictions{};
  // Occupancy.
  double gpu_kv_usage_peak = 0, gpu_kv_usage_mean = 0;
  std::array<double, kNumTiers> tier_bytes_peak{};
  std::array<double, kNumTiers> tier_bytes_mean{};
  std::array<double, kNumTiers> tier_capacity_bytes{};
  // Links: kind → bytes moved (summed over instances), busiest instance's busy fraction, and
  // the highest rate any one link of the kind moved over one sampling interval (bytes/s).
  std::map<std::string, double> link_bytes;
  std::map<std::string, double> link_busy_fraction;
  std::map<std::string, double> link_peak_rate;
  std::map<std::string, double> link_capacity;  // one link's bandwidth (bytes/s)
  // The busiest instance's busy fraction of link kind `kind` (0 when no link of that kind).
  double busy_fraction(const std::string& kind) const {
    auto it = link_busy_fraction.find(kind);
    return it == link_busy_fraction.end() ? 0.0 : it->second;
  }
  // link_peak_rate's and link_capacity's entries for `kind` in GB/s (1e9 bytes/s; 0 when no
  // link of that kind).
  double peak_gbps(const std::string& kind) const { return gbps(link_peak_rate, kind); }
  double capacity_gbps(const std::string& kind) const { return gbps(link_capacity, kind); }
  static double gbps(const std::map<std::string, double>& rates, const std::string& kind) {
    auto it = rates.find(kind);
    return it == rates.end() ? 0.0 : it->second * 1e-9;
  }
  // Engine.
  uint64_t steps = 0;
  double mean_batch_tokens = 0;
  int64_t trace_events_dropped = 0;
  // Whether arrivals outpaced service (sim/report/README.md, `load`). Over the window's requests;
  // the queue figures over its finished ones, ordered by arrival.
  struct Load {
    double arrival_span_s = 0;  // first arrival to last
    double offered_rate = 0;    // requests / arrival_span_s (0 for a span of 0)
    // Finished requests that had arrived and not finished when the last request arrived.
    uint64_t in_system_at_last_arrival = 0;
    double drain_s = 0;  // last arrival to the last finished request's end (0 if that is earlier)
    // Mean arrival-to-first-schedule of each quarter of the finished requests by arrival (the
    // first n/4, ..., the last); 0 for an empty quarter.
    std::array<double, 4> queue_ms_by_arrival_quarter{};
    // The most requests arriving at one instant (Workload::arrival_groups).
    uint64_t largest_arrival_group = 0;
    // The last quarter waited more than slo.ttft_ms longer than the first, and drain_s exceeds
    // slo.ttft_ms: the queue grew over the run by more than the TTFT target, and latencies grow
    // with the trace's length.
    bool saturated = false;
  } load;
  // Per trace priority, lowest first; empty when every request has the same priority.
  struct PriorityClass {
    int64_t priority = 0;
    uint64_t requests = 0, finished = 0;
    double slo_attainment = 0;  // of its finished requests
    uint64_t lmcache_hit_tokens = 0;
    LatencyStats ttft, e2e, queue;
  };
  std::vector<PriorityClass> by_priority;
  // What the deployment costs (scenario [cost]; sim/report/cost.h); not priced: cost.priced false.
  Cost cost;
};

// The share of the window's requests (finished, rejected and failed) that finished within both
// SLOs: a rejected or failed request is a miss. slo_attainment counts the finished ones only (as
// vllm bench serve does), so a GPU pool that rejects the long prompts, or a remote tier whose
// failed loads end requests, meets it by serving fewer. kvtwin capacity's verdict; 0 without
// requests.
inline double window_attainment(const Summary& s) {
  return s.requests ? static_cast<double>(s.slo_met) / static_cast<double>(s.requests) : 0;
}

class RunRecorder {
 public:
  // `out_dir` empty: build the summary only.
  RunRecorder(const scenario::Scenario& s, std::string trace_name, std::string out_dir);
  ~RunRecorder();

  // The window starts (workload.warmup_s > 0; without a warm-up it starts with the run): from
  // `t` on, samples, steps and transfers are reported. Before, only the last sample is kept (the
  // first reported row's rates count from it). Warm-up requests are never reported.
  void begin_measurement(SimTime t);
  bool measuring() const { return measure_from_ != kSimTimeMax; }
  SimTime measure_from() const { return measure_from_; }  // kSimTimeMax until the window starts

  // A request ended; `itl` holds the gaps between its consecutive tokens. They count only when it
  // finished (as vllm bench serve counts the ITLs of successful requests): a request rejected or
  // failed after producing tokens (preempted, then too large to fit again, or a failed reload)
  // leaves no gap in the ITL figures.
  void on_request_done(const RequestRecord& r, std::span<const SimDuration> itl = {});
  void on_sample(const Sample& s);
  // `count` more samples equal to the last one given to on_sample, at the following intervals,
  // with nothing computed or finished in between: they count toward the summary's means but get
  // no timeseries rows (the simulator collapses long idle gaps so).
  void on_repeated_samples(const Sample& s, uint64_t count);
  // One engine step of `instance` on the timeline.
  void on_step(int instance, SimTime start, SimDuration duration, int64_t num_tokens,
               int64_t num_reqs);
  void on_transfer(const Transfer& t, const TransferResult& r);
  // A bulk load of `instance` whose disk get slept `sleeps` times for CPU memory, from its first
  // sleep for `duration`: a span of the timeline (thread kMemoryWaitTid).
  void on_memory_wait(int instance, SimTime start, SimDuration duration, int64_t sleeps);
  static constexpr int kMemoryWaitTid = 17;  // after the transfer paths' 1 + 4·src + dst
  void set_gpu_evictions(int64_t n) { summary_.gpu_evictions = n; }
  void set_prefix_caching(bool on) { summary_.prefix_caching = on; }
  void set_gpu_kv_pool(int64_t blocks, int64_t groups, int64_t tokens, double memory_gib) {
    summary_.gpu_kv_blocks = blocks;
    summary_.gpu_kv_groups = groups;
    summary_.gpu_kv_tokens = tokens;
    summary_.gpu_kv_memory_gib = memory_gib;
  }
  void set_tier_evictions(int tier, uint64_t n) { summary_.tier_evictions[tier] = n; }
  void set_tier_capacity(int tier, double bytes) { summary_.tier_capacity_bytes[tier] = bytes; }
  void set_lmcache_failures(uint64_t stalled_loads, uint64_t failed_stores,
                            uint64_t failed_remote_writes) {
    summary_.stalled_loads = stalled_loads;
    summary_.failed_stores = failed_stores;
    summary_.failed_remote_writes = failed_remote_writes;
  }
  void set_lmcache_async(const Summary::AsyncLoading& a) { summary_.async_loading = a; }
  void set_disk_leaked_bytes(double bytes) { summary_.disk_leaked_bytes = bytes; }
  void set_lmcache_health(const Summary::Health& h) { summary_.health = h; }
  void set_lmcache_memory_waits(uint64_t loads, double wait_s) {
    summary_.memory_waits.loads = loads;
    summary_.memory_waits.wait_s = wait_s;
  }
  void set_lmcache_blocking_get_timeouts(uint64_t fetches, uint64_t chunks) {
    summary_.blocking_get_timeouts.fetches = fetches;
    summary_.blocking_get_timeouts.chunks = chunks;
  }
  void set_page_cache(const Summary::PageCache& p) { summary_.page_cache = p; }
  void set_largest_arrival_group(uint64_t n) { largest_arrival_group_ = n; }
  // One link of `kind` (bandwidth `capacity`, bytes/s): what it moved in the window and the share
  // of the window it was busy. Links of one kind have one bandwidth.
  void set_link_stats(const std::string& kind, double bytes, double busy_fraction, double capacity);
  // The kind ("pcie_h2d", ...) of each link whose bytes Sample::link_bytes lists, in that order;
  // set before the first sample. Each sampling interval's rate per link is the bytes it moved
  // since the previous sample over the interval: timeseries.csv gives the busiest link's of each
  // of kLinkKinds, the summary each kind's highest (link_peak_rate).
  void set_link_kinds(std::vector<std::string> kinds);

  // Computes the summary, writes summary.json, plots; returns the summary.
  const Summary& finish(SimTime end);
  static std::string summary_json(const Summary& s);
  static std::string screen(const Summary& s);  // the one-screen report on stdout

 private:
  void write_plots();
  Summary::Load load() const;  // before stats_of sorts queue_ms_

  const scenario::Scenario& scenario_;
  std::string out_dir_;
  Summary summary_;
  std::vector<double> ttft_ms_, tpot_ms_, e2e_ms_, queue_ms_;
  // The trace priority of each finished request, parallel to ttft_ms_, e2e_ms_ and queue_ms_
  // (Summary::by_priority splits those by it), and per priority the counts.
  std::vector<int64_t> finished_priority_;
  // Arrival and end of each finished request, parallel to queue_ms_ (Summary::load).
  std::vector<std::pair<SimTime, SimTime>> finished_span_;
  struct PerPriority {
    uint64_t requests = 0, slo_ok = 0, lmcache_hit_tokens = 0;
  };
  std::map<int64_t, PerPriority> per_priority_;
  LogHistogram itl_;
  SimTime measure_from_ = 0;  // where the window starts; kSimTimeMax until it does (warm-up)
  uint64_t slo_ok_ = 0;
  SimTime first_arrival_ = -1;
  SimTime last_arrival_ = -1;
  uint64_t largest_arrival_group_ = 0;
  SimTime last_finish_ = 0;
  uint64_t finished_prompt_tokens_ = 0;  // the input throughput's (prompt_tokens counts all)
  uint64_t output_tokens_ = 0;
  uint64_t batch_tokens_ = 0;
  // Occupancy integrals over samples.
  uint64_t samples_ = 0;
  double usage_sum_ = 0;
  std::array<double, kNumTiers> tier_sum_{};
  Sample prev_sample_;
  std::vector<std::string> link_kinds_;  // per link of Sample::link_bytes
  std::vector<int> link_column_;         // per link: its kind's index in kLinkKinds, or -1
  std::vector<double> link_peak_;        // per link: its highest rate over an interval (bytes/s)
  std::FILE* requests_csv_ = nullptr;
  std::FILE* timeseries_csv_ = nullptr;
  std::unique_ptr<ChromeTrace> trace_;
  std::set<std::pair<int, int>> named_threads_;  // (instance, tid) with a thread name
};

// Runs `gnuplot script` in `dir` (no shell); returns its exit status, 127 when gnuplot is absent.
int run_gnuplot(const std::string& dir, const std::string& script);

// `text` for the inside of a single-quoted gnuplot string: quotes doubled, control characters
// (which end a gnuplot line) as spaces.
std::string gnuplot_text(const std::string& text);

// A screen line: `head`, then `items` separated by ", ", continued on lines that start under the
// figures (12 columns in) wherever the next item would pass 100 columns. Ends in a new line.
std::string screen_list(const std::string& head, const std::vector<std::string>& items);

// The 1-based position of the column `name` in a comma-separated CSV header line (gnuplot's
// `using` numbering), so that a plot names its columns instead of counting them.
// REQUIRES: `name` is one of the header's columns.
int csv_column(std::string_view header, std::string_view name);

}  // namespace kvtwin::sim::report
