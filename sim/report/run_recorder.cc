#include "sim/report/run_recorder.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "model/check.h"
#include "sim/io/input_error.h"
#include "sim/io/output_file.h"
#include "sim/io/parse.h"
#include "sim/report/json_writer.h"
#include "sim/scenario/scenario_loader.h"
#include "sim/workload/trace_stats.h"

namespace kvtwin::sim::report {
namespace {

using scenario::kGiB;

// timeseries.csv's header; the occupancy plot finds its columns by these names.
constexpr char kTimeseriesHeader[] =
    "t_s,running,waiting,gpu_kv_usage_mean,gpu_kv_usage_max,cpu_gib,disk_gib,remote_gib,"
    "tokens_per_s,finished_per_s,pcie_h2d_gbps,pcie_d2h_gbps,disk_read_gbps,disk_write_gbps,"
    "nic_rx_gbps,nic_tx_gbps,remote_rx_gbps,remote_tx_gbps\n";

// Every plot's terminal. Each `set terminal` turns gnuplot's enhanced text (in which "_x" is a
// subscript) back on, so every plot turns it off again.
constexpr char kSvgTerminal[] =
    "set terminal svg size 1200,400 dynamic font 'sans,11'\n"
    "set termoption noenhanced\n";

double ms(SimDuration ns) {
  return static_cast<double>(ns) * 1e-6;
}

std::FILE* create(const std::string& path) {
  return io::create_output(path);
}

void write_text(const std::string& path, const std::string& text) {
  io::write_output(path, text);
}

LatencyStats stats_of(std::vector<double>* v, bool linear) {
  LatencyStats s;
  workload::Percentiles p = workload::percentiles(
      v, linear ? workload::PercentileMethod::kLinear : workload::PercentileMethod::kNearestRank);
  s.mean = p.mean;
  s.p50 = p.p50;
  s.p90 = p.p90;
  s.p99 = p.p99;
  s.max = p.max;
  s.count = v->size();
  return s;
}

std::string secs(SimTime t) {
  if (t < 0) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", to_seconds(t));
  return buf;
}

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

const char* tier_name(int tier) {
  static const char* kNames[] = {"cpu", "disk", "remote"};
  return kNames[tier];
}

RunRecorder::RunRecorder(const scenario::Scenario& s, std::string trace_name, std::string out_dir)
    : scenario_(s), out_dir_(std::move(out_dir)) {
  summary_.scenario_name = s.run.name;
  summary_.trace = std::move(trace_name);
  summary_.instances = s.cluster.instances;
  summary_.tensor_parallel = s.gpu.tensor_parallel;
  summary_.scheduling = s.vllm.async_scheduling ? "async" : "sync";
  summary_.has_warmup = s.workload.warmup_s > 0;
  summary_.lmcache_enabled = s.lmcache.enabled;
  summary_.blocking_get_timeouts.timeout_s = s.lmcache.blocking_timeout_secs;
  if (summary_.has_warmup) measure_from_ = kSimTimeMax;
  if (out_dir_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(out_dir_, ec);
  if (ec) throw InputError(out_dir_, 0, "--out", "cannot create directory: " + ec.message());
  write_text(out_dir_ + "/scenario.toml", scenario::dump_scenario(s));
  requests_csv_ = create(out_dir_ + "/requests.csv");
  std::fputs(
      "index,instance,arrival_s,first_scheduled_s,first_token_s,finish_s,ttft_ms,tpot_ms,e2e_ms,"
      "prompt_tokens,output_tokens,gpu_hit_tokens,lmcache_hit_tokens,cpu_loaded_tokens,"
      "disk_loaded_tokens,remote_loaded_tokens,failed_load_tokens,preemptions,rejected,"
      "load_error,priority\n",
      requests_csv_);
  timeseries_csv_ = create(out_dir_ + "/timeseries.csv");
  std::fputs(kTimeseriesHeader, timeseries_csv_);
  if (s.output.chrome_trace) {
    trace_ =
        std::make_unique<ChromeTrace>(out_dir_ + "/trace.json", s.output.chrome_trace_max_events);
    trace_->name_process(0, "shared links");
    for (int i = 0; i < s.cluster.instances; ++i) {
      trace_->name_process(i + 1, "instance " + std::to_string(i));
      trace_->name_thread(i + 1, 0, "engine steps");
    }
  }
}

RunRecorder::~RunRecorder() {
  if (requests_csv_) std::fclose(requests_csv_);
  if (timeseries_csv_) std::fclose(timeseries_csv_);
}

void RunRecorder::begin_measurement(SimTime t) {
  if (measuring()) return;
  measure_from_ = t;
  summary_.measured_from_s = to_seconds(t);
}

void RunRecorder::on_request_done(const RequestRecord& r, std::span<const SimDuration> itl) {
  if (r.warmup) {
    ++summary_.warmup_requests;
    return;
  }
  ++summary_.requests;
  if (first_arrival_ < 0 || r.arrival < first_arrival_) first_arrival_ = r.arrival;
  last_arrival_ = std::max(last_arrival_, r.arrival);
  summary_.prompt_tokens += static_cast<uint64_t>(r.prompt_tokens);
  PerPriority& pc = per_priority_[r.priority];
  ++pc.requests;
  // What happened to a request before it ended counts whatever its end (a request that fails on a
  // KV load had its prefix hits and loads first): the summary's token counts and preemptions are
  // the sums of requests.csv's columns, over the same requests as prompt_tokens.
  summary_.gpu_hit_tokens += static_cast<uint64_t>(r.gpu_hit_tokens);
  summary_.lmcache_hit_tokens += static_cast<uint64_t>(r.lmcache_hit_tokens);
  for (int t = 0; t < kNumTiers; ++t)
    summary_.loaded_tokens[t] += static_cast<uint64_t>(r.loaded_tokens[t]);
  summary_.failed_load_tokens += static_cast<uint64_t>(r.failed_load_tokens);
  summary_.preemptions += static_cast<uint64_t>(r.preemptions);
  pc.lmcache_hit_tokens += static_cast<uint64_t>(r.lmcache_hit_tokens);
  double ttft = -1, tpot = -1, e2e = -1;
  if (r.rejected) {
    ++summary_.rejected;
  } else if (r.load_error) {
    ++summary_.failed;
  } else {
    ++summary_.finished;
    last_finish_ = std::max(last_finish_, r.finish);
    ttft = ms(r.first_token - r.arrival);
    e2e = ms(r.finish - r.arrival);
    ttft_ms_.push_back(ttft);
    e2e_ms_.push_back(e2e);
    queue_ms_.push_back(ms(r.first_scheduled - r.arrival));
    finished_span_.emplace_back(r.arrival, r.finish);
    if (r.output_tokens > 1) {
      tpot = ms(r.finish - r.first_token) / static_cast<double>(r.output_tokens - 1);
      tpot_ms_.push_back(tpot);
    }
    finished_prompt_tokens_ += static_cast<uint64_t>(r.prompt_tokens);
    for (SimDuration gap : itl) itl_.add(gap);
    output_tokens_ += static_cast<uint64_t>(r.output_tokens);
    const bool slo_ok =
        ttft <= scenario_.slo.ttft_ms && (tpot < 0 || tpot <= scenario_.slo.tpot_ms);
    if (slo_ok) ++slo_ok_;
    pc.slo_ok += slo_ok ? 1 : 0;
    finished_priority_.push_back(r.priority);
  }
  if (!requests_csv_) return;
  std::string row =
      std::to_string(r.index) + "," + std::to_string(r.instance) + "," + secs(r.arrival) + "," +
      secs(r.first_scheduled) + "," + secs(r.first_token) + "," + secs(r.finish) + "," +
      (ttft < 0 ? "" : fixed(ttft, 3)) + "," + (tpot < 0 ? "" : fixed(tpot, 3)) + "," +
      (e2e < 0 ? "" : fixed(e2e, 3)) + "," + std::to_string(r.prompt_tokens) + "," +
      std::to_string(r.output_tokens) + "," + std::to_string(r.gpu_hit_tokens) + "," +
      std::to_string(r.lmcache_hit_tokens) + "," + std::to_string(r.loaded_tokens[kTierCpu]) + "," +
      std::to_string(r.loaded_tokens[kTierDisk]) + "," +
      std::to_string(r.loaded_tokens[kTierRemote]) + "," + std::to_string(r.failed_load_tokens) +
      "," + std::to_string(r.preemptions) + "," + (r.rejected ? "1" : "0") + "," +
      (r.load_error ? "1" : "0") + "," + std::to_string(r.priority) + "\n";
  std::fwrite(row.data(), 1, row.size(), requests_csv_);
}

void RunRecorder::on_sample(const Sample& s) {
  if (!measuring()) {
    prev_sample_ = s;  // the first reported row's rates count from here
    return;
  }
  ++samples_;
  usage_sum_ += s.gpu_kv_usage_mean;
  summary_.gpu_kv_usage_peak = std::max(summary_.gpu_kv_usage_peak, s.gpu_kv_usage_max);
  for (int t = 0; t < kNumTiers; ++t) {
    tier_sum_[t] += s.tier_bytes[t];
    summary_.tier_bytes_peak[t] = std::max(summary_.tier_bytes_peak[t], s.tier_bytes[t]);
  }
  double dt = to_seconds(s.t - prev_sample_.t);
  double tokens_per_s = dt > 0 ? (s.computed_tokens - prev_sample_.computed_tokens) / dt : 0;
  double finished_per_s = dt > 0 ? (s.finished - prev_sample_.finished) / dt : 0;
  // Each link's mean rate since the previous sample (none before the first: 0).
  std::array<double, kNumLinkKinds> busiest{};  // per kLinkKinds column
  KVTWIN_CHECK_EQ(s.link_bytes.size(), link_kinds_.size());
  for (size_t i = 0; i < s.link_bytes.size(); ++i) {
    const double before = i < prev_sample_.link_bytes.size() ? prev_sample_.link_bytes[i] : 0;
    const double rate = dt > 0 ? (s.link_bytes[i] - before) / dt : 0;
    link_peak_[i] = std::max(link_peak_[i], rate);
    if (link_column_[i] >= 0) {
      double& b = busiest[static_cast<size_t>(link_column_[i])];
      b = std::max(b, rate);
    }
  }
  prev_sample_ = s;
  if (!timeseries_csv_) return;
  std::string row = fixed(to_seconds(s.t), 3) + "," + std::to_string(s.running) + "," +
                    std::to_string(s.waiting) + "," + fixed(s.gpu_kv_usage_mean, 4) + "," +
                    fixed(s.gpu_kv_usage_max, 4) + "," + fixed(s.tier_bytes[kTierCpu] / kGiB, 3) +
                    "," + fixed(s.tier_bytes[kTierDisk] / kGiB, 3) + "," +
                    fixed(s.tier_bytes[kTierRemote] / kGiB, 3) + "," + fixed(tokens_per_s, 1) +
                    "," + fixed(finished_per_s, 3);
  for (double rate : busiest) row += "," + fixed(rate * 1e-9, 3);
  row += "\n";
  std::fwrite(row.data(), 1, row.size(), timeseries_csv_);
}

void RunRecorder::on_repeated_samples(const Sample& s, uint64_t count) {
  // The window's start is an event, so a run of repeated samples lies wholly on one side of it.
  if (!measuring()) return;
  samples_ += count;
  const double n = static_cast<double>(count);
  usage_sum_ += n * s.gpu_kv_usage_mean;
  for (int t = 0; t < kNumTiers; ++t) tier_sum_[t] += n * s.tier_bytes[t];
}

void RunRecorder::on_step(int instance, SimTime start, SimDuration duration, int64_t num_tokens,
                          int64_t num_reqs) {
  if (start < measure_from_) return;  // a step of the warm-up
  ++summary_.steps;
  batch_tokens_ += static_cast<uint64_t>(num_tokens);
  if (trace_ && !trace_->skip_event())
    trace_->complete(instance + 1, 0, "step", start, duration,
                     "\"tokens\": " + std::to_string(num_tokens) +
                         ", \"requests\": " + std::to_string(num_reqs));
}

void RunRecorder::on_transfer(const Transfer& t, const TransferResult& r) {
  if (!trace_ || r.start < measure_from_) return;  // a transfer of the warm-up
  // One thread per (src, dst) pair: tid 1 + 4·src + dst.
  int tid = 1 + 4 * static_cast<int>(t.src) + static_cast<int>(t.dst);
  auto path_name = [&] {
    return std::string(location_name(t.src)) + "->" + std::string(location_name(t.dst));
  };
  if (named_threads_.insert({t.instance, tid}).second)
    trace_->name_thread(t.instance + 1, tid, path_name());
  if (trace_->skip_event()) return;  // past the event cap: nothing to format
  std::string name = path_name();
  trace_->complete(t.instance + 1, tid, t.kind.empty() ? name : std::string(t.kind), r.start,
                   r.finish - r.start,
                   "\"path\": \"" + name + "\", \"objects\": " + std::to_string(t.objects.size()) +
                       ", \"bytes\": " + std::to_string(t.total_bytes()));
}

void RunRecorder::on_memory_wait(int instance, SimTime start, SimDuration duration,
                                 int64_t sleeps) {
  if (!trace_ || start < measure_from_) return;  // a wait of the warm-up
  if (named_threads_.insert({instance, kMemoryWaitTid}).second)
    trace_->name_thread(instance + 1, kMemoryWaitTid, "lmcache memory wait");
  if (trace_->skip_event()) return;
  trace_->complete(instance + 1, kMemoryWaitTid, "memory wait", start, duration,
                   "\"sleeps\": " + std::to_string(sleeps));
}

void RunRecorder::set_link_kinds(std::vector<std::string> kinds) {
  link_column_.clear();
  for (const std::string& kind : kinds) {
    const auto* it = std::find(std::begin(kLinkKinds), std::end(kLinkKinds), kind);
    link_column_.push_back(
        it == std::end(kLinkKinds) ? -1 : static_cast<int>(it - std::begin(kLinkKinds)));
  }
  link_peak_.assign(kinds.size(), 0);
  link_kinds_ = std::move(kinds);
}

void RunRecorder::set_link_stats(const std::string& kind, double bytes, double busy_fraction,
                                 double capacity) {
  summary_.link_bytes[kind] += bytes;
  summary_.link_capacity[kind] = capacity;
  double& b = summary_.link_busy_fraction[kind];
  b = std::max(b, busy_fraction);
}

Summary::Load RunRecorder::load() const {
  Summary::Load l;
  l.largest_arrival_group = largest_arrival_group_;
  if (first_arrival_ < 0) return l;
  l.arrival_span_s = to_seconds(last_arrival_ - first_arrival_);
  if (l.arrival_span_s > 0) l.offered_rate = summary_.requests / l.arrival_span_s;
  if (last_finish_ > last_arrival_) l.drain_s = to_seconds(last_finish_ - last_arrival_);
  // Finished requests by arrival; equal arrivals keep their finishing order.
  const size_t n = finished_span_.size();
  std::vector<uint32_t> order(n);
  for (size_t i = 0; i < n; ++i) {
    order[i] = static_cast<uint32_t>(i);
    // Every request arrived by the last arrival: those ending after it were in the system.
    if (finished_span_[i].second > last_arrival_) ++l.in_system_at_last_arrival;
  }
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return finished_span_[a].first < finished_span_[b].first;
  });
  for (size_t q = 0; q < 4; ++q) {
    const size_t from = q * n / 4, to = (q + 1) * n / 4;
    double sum = 0;
    for (size_t k = from; k < to; ++k) sum += queue_ms_[order[k]];
    if (to > from) l.queue_ms_by_arrival_quarter[q] = sum / static_cast<double>(to - from);
  }
  // Two signs of arrivals outpacing service, each against the TTFT target: the queue grew, and
  // what was left at the last arrival took longer than that to clear. (A burst at the window's
  // end grows the queue too, and leaves little.)
  const double rise_ms = l.queue_ms_by_arrival_quarter[3] - l.queue_ms_by_arrival_quarter[0];
  l.saturated =
      n >= 4 && rise_ms > scenario_.slo.ttft_ms && l.drain_s * 1e3 > scenario_.slo.ttft_ms;
  return l;
}

const Summary& RunRecorder::finish(SimTime end) {
  (void)end;
  Summary& s = summary_;
  s.duration_s = first_arrival_ < 0 ? 0 : to_seconds(last_finish_ - first_arrival_);
  if (s.duration_s > 0) {
    s.request_throughput = s.finished / s.duration_s;
    // Finished requests only, as vllm bench serve counts them (and as the output rate does):
    // a rejected or failed request's prompt was never served.
    s.input_token_throughput = static_cast<double>(finished_prompt_tokens_) / s.duration_s;
    s.output_token_throughput = static_cast<double>(output_tokens_) / s.duration_s;
    s.goodput = slo_ok_ / s.duration_s;
  }
  s.slo_met = slo_ok_;
  s.slo_attainment = s.finished ? static_cast<double>(slo_ok_) / s.finished : 0;
  s.load = load();
  for (size_t i = 0; i < link_kinds_.size(); ++i) {
    double& peak = s.link_peak_rate[link_kinds_[i]];
    peak = std::max(peak, link_peak_[i]);
  }
  // Per priority first: stats_of sorts the run's latencies in place, and the split reads them in
  // finishing order, beside finished_priority_.
  const bool linear = scenario_.output.percentiles == "linear";
  s.by_priority.clear();
  if (per_priority_.size() > 1) {
    for (const auto& [priority, pc] : per_priority_) {
      std::vector<double> ttft, e2e, queue;
      for (size_t i = 0; i < finished_priority_.size(); ++i) {
        if (finished_priority_[i] != priority) continue;
        ttft.push_back(ttft_ms_[i]);
        e2e.push_back(e2e_ms_[i]);
        queue.push_back(queue_ms_[i]);
      }
      Summary::PriorityClass k;
      k.priority = priority;
      k.requests = pc.requests;
      k.finished = ttft.size();
      k.slo_attainment = k.finished ? static_cast<double>(pc.slo_ok) / k.finished : 0;
      k.lmcache_hit_tokens = pc.lmcache_hit_tokens;
      k.ttft = stats_of(&ttft, linear);
      k.e2e = stats_of(&e2e, linear);
      k.queue = stats_of(&queue, linear);
      s.by_priority.push_back(k);
    }
  }
  s.ttft = stats_of(&ttft_ms_, linear);
  s.tpot = stats_of(&tpot_ms_, linear);
  s.e2e = stats_of(&e2e_ms_, linear);
  s.queue = stats_of(&queue_ms_, linear);
  s.itl.count = itl_.count();
  s.itl.mean = itl_.mean_ns() * 1e-6;
  s.itl.p50 = itl_.quantile_ns(0.5) * 1e-6;
  s.itl.p90 = itl_.quantile_ns(0.9) * 1e-6;
  s.itl.p99 = itl_.quantile_ns(0.99) * 1e-6;
  s.itl.max = ms(itl_.max_ns());
  auto rate = [&](uint64_t n) {
    return s.prompt_tokens ? static_cast<double>(n) / static_cast<double>(s.prompt_tokens) : 0;
  };
  s.gpu_hit_rate = rate(s.gpu_hit_tokens);
  s.lmcache_hit_rate = rate(s.lmcache_hit_tokens);
  s.failed_load_rate = rate(s.failed_load_tokens);
  for (int t = 0; t < kNumTiers; ++t) s.tier_hit_rate[t] = rate(s.loaded_tokens[t]);
  s.gpu_kv_usage_mean = samples_ ? usage_sum_ / samples_ : 0;
  for (int t = 0; t < kNumTiers; ++t)  // to the byte: summary.json prints it whole
    s.tier_bytes_mean[t] = samples_ ? std::round(tier_sum_[t] / samples_) : 0;
  s.mean_batch_tokens = s.steps ? static_cast<double>(batch_tokens_) / s.steps : 0;
  if (trace_) {
    trace_->close();
    s.trace_events_dropped = trace_->dropped();
  }
  s.cost = deployment_cost(scenario_.cost, s);
  if (!out_dir_.empty()) {
    io::close_output(&requests_csv_, out_dir_ + "/requests.csv");
    io::close_output(&timeseries_csv_, out_dir_ + "/timeseries.csv");
    write_text(out_dir_ + "/summary.json", summary_json(s));
    if (scenario_.output.plots) write_plots();
  }
  return s;
}

std::string RunRecorder::summary_json(const Summary& s) {
  JsonWriter j;
  j.begin_object();
  j.field("scenario", s.scenario_name);
  j.field("trace", s.trace);
  j.field("instances", s.instances);
  j.field("scheduling", s.scheduling);
  j.key("requests");
  j.begin_object();
  j.field("total", s.requests);
  j.field("finished", s.finished);
  j.field("rejected", s.rejected);
  j.field("failed", s.failed);
  j.end_object();
  if (s.has_warmup) {  // absent without one, so that such runs keep their bytes
    j.key("warmup");
    j.begin_object();
    j.field("requests", s.warmup_requests);
    j.field("measured_from_s", s.measured_from_s);
    j.end_object();
  }
  j.field("duration_s", s.duration_s);
  j.key("throughput");
  j.begin_object();
  j.field("requests_per_s", s.request_throughput);
  j.field("input_tokens_per_s", s.input_token_throughput);
  j.field("output_tokens_per_s", s.output_token_throughput);
  j.end_object();
  j.key("goodput");
  j.begin_object();
  j.field("requests_per_s", s.goodput);
  j.field("slo_attainment", s.slo_attainment);
  j.end_object();
  if (s.cost.priced) {  // absent without prices, so that such runs keep their bytes
    const Cost& c = s.cost;
    const double none = std::numeric_limits<double>::quiet_NaN();  // written as null
    j.key("cost");
    j.begin_object();
    j.field("per_hour", c.per_hour);
    j.field("gpu_per_hour", c.gpu_per_hour);
    j.field("instance_per_hour", c.instance_per_hour);
    j.field("cpu_memory_per_hour", c.cpu_memory_per_hour);
    j.field("disk_per_hour", c.disk_per_hour);
    j.field("remote_per_hour", c.remote_per_hour);
    j.field("gpus", c.gpus);
    j.field("cpu_memory_gib", c.cpu_memory_gib);
    j.field("disk_gib", c.disk_gib);
    j.field("remote_gib", c.remote_gib);
    j.field("per_million_output_tokens", c.per_million_output_tokens.value_or(none));
    j.field("per_thousand_good_requests", c.per_thousand_good_requests.value_or(none));
    j.end_object();
  }
  auto lat = [&](const char* name, const LatencyStats& l) {
    j.key(name);
    j.begin_object();
    j.distribution_fields(l);
    j.field("count", l.count);
    j.end_object();
  };
  lat("ttft_ms", s.ttft);
  lat("tpot_ms", s.tpot);
  lat("itl_ms", s.itl);
  lat("e2e_ms", s.e2e);
  lat("queue_ms", s.queue);
  j.key("load");
  j.begin_object();
  j.field("arrival_span_s", s.load.arrival_span_s);
  j.field("offered_requests_per_s", s.load.offered_rate);
  j.field("in_system_at_last_arrival", s.load.in_system_at_last_arrival);
  j.field("drain_s", s.load.drain_s);
  j.key("queue_ms_by_arrival_quarter");
  j.begin_array();
  for (double q : s.load.queue_ms_by_arrival_quarter) j.value(q);
  j.end_array();
  j.field("saturated", s.load.saturated);
  j.field("largest_arrival_group", s.load.largest_arrival_group);
  j.end_object();
  if (!s.by_priority.empty()) {
    j.key("by_priority");
    j.begin_array();
    for (const Summary::PriorityClass& k : s.by_priority) {
      j.begin_object();
      j.field("priority", k.priority);
      j.field("requests", k.requests);
      j.field("finished", k.finished);
      j.field("slo_attainment", k.slo_attainment);
      j.field("lmcache_hit_tokens", k.lmcache_hit_tokens);
      lat("ttft_ms", k.ttft);
      lat("e2e_ms", k.e2e);
      lat("queue_ms", k.queue);
      j.end_object();
    }
    j.end_array();
  }
  j.key("gpu_prefix_cache");
  j.begin_object();
  j.field("enabled", s.prefix_caching);
  j.field("prompt_tokens", s.prompt_tokens);
  j.field("hit_tokens", s.gpu_hit_tokens);
  j.field("hit_rate", s.gpu_hit_rate);
  j.key("evictions");
  if (s.gpu_evictions < 0)
    j.value(std::nan(""));  // null: not tracked
  else
    j.value(s.gpu_evictions);
  j.field("kv_usage_peak", s.gpu_kv_usage_peak);
  j.field("kv_usage_mean", s.gpu_kv_usage_mean);
  j.field("kv_blocks", s.gpu_kv_blocks);
  j.field("kv_cache_groups", s.gpu_kv_groups);
  j.field("kv_cache_tokens", s.gpu_kv_tokens);
  j.field("kv_memory_gib", s.gpu_kv_memory_gib);
  j.end_object();
  j.key("lmcache");
  j.begin_object();
  j.field("enabled", s.lmcache_enabled);
  j.field("hit_tokens", s.lmcache_hit_tokens);
  j.field("hit_rate", s.lmcache_hit_rate);
  j.field("failed_load_tokens", s.failed_load_tokens);
  j.field("stalled_loads", s.stalled_loads);
  j.field("failed_stores", s.failed_stores);
  j.field("failed_remote_writes", s.failed_remote_writes);
  if (s.async_loading.lookups > 0) {
    j.key("async_loading");
    j.begin_object();
    j.field("lookups", s.async_loading.lookups);
    j.field("timeouts", s.async_loading.timeouts);
    j.field("prefetch_bytes_per_rank", s.async_loading.prefetch_bytes);
    j.field("busy_wait_retries", s.async_loading.busy_waits);
    j.field("wrong_kv_chunks", s.async_loading.wrong_kv_chunks);
    j.end_object();
  }
  if (s.health.failed_remote_gets > 0 || s.health.unhealthy_periods > 0) {
    j.key("health");  // absent while nothing failed, so that such runs keep their bytes
    j.begin_object();
    j.field("failed_remote_gets", s.health.failed_remote_gets);
    j.field("unhealthy_periods", s.health.unhealthy_periods);
    j.field("unhealthy_s", s.health.unhealthy_s);
    j.end_object();
  }
  if (s.disk_leaked_bytes > 0)  // absent while none, so that such runs keep their bytes
    j.field("disk_leaked_bytes", s.disk_leaked_bytes);
  if (s.memory_waits.loads > 0) {
    j.key("memory_waits");  // absent while none, so that such runs keep their bytes
    j.begin_object();
    j.field("loads", s.memory_waits.loads);
    j.field("wait_s", s.memory_waits.wait_s);
    j.end_object();
  }
  if (s.blocking_get_timeouts.fetches > 0) {
    j.key("blocking_get_timeouts");  // absent while none, so that such runs keep their bytes
    j.begin_object();
    j.field("timeout_s", s.blocking_get_timeouts.timeout_s);
    j.field("fetches", s.blocking_get_timeouts.fetches);
    j.field("chunks", s.blocking_get_timeouts.chunks);
    j.end_object();
  }
  for (int t = 0; t < kNumTiers; ++t) {
    j.key(tier_name(t));
    j.begin_object();
    j.field("loaded_tokens", s.loaded_tokens[t]);
    j.field("hit_rate", s.tier_hit_rate[t]);
    j.field("evictions", s.tier_evictions[t]);
    j.field("capacity_bytes", s.tier_capacity_bytes[t]);
    j.field("peak_bytes", s.tier_bytes_peak[t]);
    j.field("mean_bytes", s.tier_bytes_mean[t]);
    if (t == kTierDisk && s.page_cache.capacity_bytes > 0) {
      j.key("page_cache");
      j.begin_object();
      j.field("capacity_bytes", s.page_cache.capacity_bytes);
      j.field("peak_bytes", s.page_cache.peak_bytes);
      j.field("hit_bytes", s.page_cache.hit_bytes);
      j.field("device_read_bytes", s.page_cache.miss_bytes);
      j.field("buffered_write_bytes", s.page_cache.buffered_write_bytes);
      j.end_object();
    }
    j.end_object();
  }
  j.end_object();
  j.key("links");
  j.begin_object();
  for (const auto& [kind, bytes] : s.link_bytes) {
    j.key(kind);
    j.begin_object();
    j.field("bytes", bytes);
    j.field("busiest_busy_fraction", s.link_busy_fraction.at(kind));
    j.field("peak_gbps", s.peak_gbps(kind));
    j.field("capacity_gbps", s.capacity_gbps(kind));
    j.end_object();
  }
  j.end_object();
  j.key("engine");
  j.begin_object();
  j.field("steps", s.steps);
  j.field("mean_batch_tokens", s.mean_batch_tokens);
  j.field("preemptions", s.preemptions);
  j.field("trace_events_dropped", s.trace_events_dropped);
  j.end_object();
  j.end_object();
  return j.str();
}

std::string RunRecorder::screen(const Summary& s) {
  std::string out;
  char buf[256];
  auto line = [&](const char* fmt, auto... args) {
    std::snprintf(buf, sizeof buf, fmt, args...);
    out += buf;
  };
  line("kvtwin run: %s  (%d instance%s, %s scheduling)\n", s.scenario_name.c_str(), s.instances,
       s.instances == 1 ? "" : "s", s.scheduling.c_str());
  line("trace       %s\n", s.trace.c_str());
  line("requests    %llu finished, %llu rejected, %llu failed on KV loads, %.1f s simulated\n",
       static_cast<unsigned long long>(s.finished), static_cast<unsigned long long>(s.rejected),
       static_cast<unsigned long long>(s.failed), s.duration_s);
  if (s.has_warmup)
    line("warm-up     %llu requests replayed first; figures from %.1f s on\n",
         static_cast<unsigned long long>(s.warmup_requests), s.measured_from_s);
  line("throughput  %.2f req/s, %.0f input tok/s, %.0f output tok/s\n", s.request_throughput,
       s.input_token_throughput, s.output_token_throughput);
  // With rejected or failed requests the finished ones' share alone flatters the run: a GPU pool
  // that rejects the long prompts meets the SLOs on the rest.
  if (s.rejected + s.failed > 0)
    line("goodput     %.2f req/s (%.1f%% of the finished, %.1f%% of all requests meet the SLOs)\n",
         s.goodput, 100 * s.slo_attainment, 100 * window_attainment(s));
  else
    line("goodput     %.2f req/s (%.1f%% meet the SLOs)\n", s.goodput, 100 * s.slo_attainment);
  if (s.cost.priced) {
    const Cost& c = s.cost;
    std::vector<std::string> parts;  // the priced ones, after the total
    auto part = [&](const char* name, double per_hour) {
      if (per_hour <= 0) return;
      std::snprintf(buf, sizeof buf, "%s %.2f", name, per_hour);
      parts.emplace_back(buf);
    };
    part("GPUs", c.gpu_per_hour);
    part("instances", c.instance_per_hour);
    part("CPU memory", c.cpu_memory_per_hour);
    part("disk", c.disk_per_hour);
    part("remote", c.remote_per_hour);
    std::snprintf(buf, sizeof buf, "cost        %.2f per hour%s", c.per_hour,
                  parts.empty() ? "" : ":");
    out += screen_list(buf, parts);
    if (c.per_million_output_tokens && c.per_thousand_good_requests)
      line("            %s per 1M output tokens, %s per 1k requests within the SLOs\n",
           price_text(*c.per_million_output_tokens).c_str(),
           price_text(*c.per_thousand_good_requests).c_str());
    else if (c.per_million_output_tokens)
      line("            %s per 1M output tokens; no request met the SLOs\n",
           price_text(*c.per_million_output_tokens).c_str());
    else
      line("            nothing served\n");
  }
  const auto& q = s.load.queue_ms_by_arrival_quarter;
  line("load        %.2f req/s offered; queue %.1f s first quarter of arrivals, %.1f s last\n",
       s.load.offered_rate, q[0] / 1e3, q[3] / 1e3);
  if (s.load.saturated)
    line(
        "  saturated the queue grew by more than the TTFT SLO: arrivals outpace service, and\n"
        "            latencies grow with the trace's length\n");
  if (s.load.largest_arrival_group >= kBurstHint)
    line(
        "  bursts    up to %llu requests arrive at one instant; workload.arrivals = \"spread\"\n"
        "            spreads them over the gap to the next\n",
        static_cast<unsigned long long>(s.load.largest_arrival_group));
  line("%-11s %10s %10s %10s %10s\n", "latency ms", "mean", "p50", "p90", "p99");
  auto lat = [&](const char* name, const LatencyStats& l) {
    line("%-11s %10.1f %10.1f %10.1f %10.1f\n", name, l.mean, l.p50, l.p90, l.p99);
  };
  lat("  TTFT", s.ttft);
  lat("  TPOT", s.tpot);
  lat("  ITL", s.itl);
  lat("  E2E", s.e2e);
  for (const Summary::PriorityClass& k : s.by_priority) {
    char name[32];
    std::snprintf(name, sizeof name, "  prio %lld", static_cast<long long>(k.priority));
    line("%-11s %10.1f %10.1f %10.1f %10.1f  TTFT of %llu finished, %.1f%% meet the SLOs\n", name,
         k.ttft.mean, k.ttft.p50, k.ttft.p90, k.ttft.p99,
         static_cast<unsigned long long>(k.finished), 100 * k.slo_attainment);
  }
  // A cache that is off says so, rather than showing a hit rate of 0.
  if (s.prefix_caching)
    line("GPU cache   %.1f%% prefix hit rate, ", 100 * s.gpu_hit_rate);
  else
    line("GPU cache   prefix caching off, ");
  line("KV usage peak %.0f%% mean %.0f%%, %llu preemptions\n", 100 * s.gpu_kv_usage_peak,
       100 * s.gpu_kv_usage_mean, static_cast<unsigned long long>(s.preemptions));
  if (s.gpu_kv_blocks > 0)
    line("  pool      %lld tokens per instance (%lld blocks in %lld group%s; %.2f GiB per GPU)\n",
         static_cast<long long>(s.gpu_kv_tokens), static_cast<long long>(s.gpu_kv_blocks),
         static_cast<long long>(s.gpu_kv_groups), s.gpu_kv_groups == 1 ? "" : "s",
         s.gpu_kv_memory_gib);
  if (s.lmcache_enabled)
    line("LMCache     %.1f%% hit rate beyond the GPU (cpu %.1f%%, disk %.1f%%, remote %.1f%%)\n",
         100 * s.lmcache_hit_rate, 100 * s.tier_hit_rate[0], 100 * s.tier_hit_rate[1],
         100 * s.tier_hit_rate[2]);
  else
    line("LMCache     off\n");
  if (s.failed_load_tokens > 0 || s.stalled_loads > 0)
    line(
        "  failures  %llu tokens recomputed after failed loads, %llu loads upstream would block "
        "on\n",
        static_cast<unsigned long long>(s.failed_load_tokens),
        static_cast<unsigned long long>(s.stalled_loads));
  // A continuation line starts under its first line's figures, so that no line is wider than
  // 100 columns.
  if (s.failed_stores > 0)
    line(
        "  failures  LMCache stores raised in %llu step%s, where upstream's engine stops; kvtwin\n"
        "            dropped the rest of %s stores and went on\n",
        static_cast<unsigned long long>(s.failed_stores), s.failed_stores == 1 ? "" : "s",
        s.failed_stores == 1 ? "that step's" : "those steps'");
  if (s.failed_remote_writes > 0)
    line(
        "  failures  %llu layerwise objects never reached the remote tier: LMCache f4261ef6\n"
        "            cannot serialize them (lmcache.upstream_fixes = true applies the fix)\n",
        static_cast<unsigned long long>(s.failed_remote_writes));
  if (s.health.failed_remote_gets > 0 || s.health.unhealthy_periods > 0)
    line(
        "  health    %llu failed Redis reads; the health check failed %llu times, for %.1f s\n"
        "            in all (summed over instances)\n",
        static_cast<unsigned long long>(s.health.failed_remote_gets),
        static_cast<unsigned long long>(s.health.unhealthy_periods), s.health.unhealthy_s);
  if (s.memory_waits.loads > 0)
    line(
        "  waits     %llu loads slept %.1f s in all for CPU memory (upstream's busy loop) until\n"
        "            disk / Redis writes freed some\n",
        static_cast<unsigned long long>(s.memory_waits.loads), s.memory_waits.wait_s);
  if (s.blocking_get_timeouts.fetches > 0)
    line(
        "  timeouts  %llu remote fetches waited over %lld s for a GET: upstream fails their\n"
        "            last %llu chunks, kvtwin loads them\n",
        static_cast<unsigned long long>(s.blocking_get_timeouts.fetches),
        static_cast<long long>(s.blocking_get_timeouts.timeout_s),
        static_cast<unsigned long long>(s.blocking_get_timeouts.chunks));
  if (s.async_loading.lookups > 0)
    line(
        "  async     %llu lookups, %llu timed out, %.1f GiB prefetched per rank, %llu busy waits\n",
        static_cast<unsigned long long>(s.async_loading.lookups),
        static_cast<unsigned long long>(s.async_loading.timeouts),
        static_cast<double>(s.async_loading.prefetch_bytes) / kGiB,
        static_cast<unsigned long long>(s.async_loading.busy_waits));
  for (int t = 0; t < kNumTiers; ++t) {
    if (s.tier_capacity_bytes[t] > 0)
      line("  %-6s    peak %.1f GiB of %.1f GiB, mean %.1f GiB, %llu evictions\n", tier_name(t),
           s.tier_bytes_peak[t] / kGiB, s.tier_capacity_bytes[t] / kGiB,
           s.tier_bytes_mean[t] / kGiB, static_cast<unsigned long long>(s.tier_evictions[t]));
    // The disk's size counts reservations that no chunk holds (upstream's accounting): say how
    // much of it was such at the end, since the figures above count it as used.
    if (t == kTierDisk && s.disk_leaked_bytes > 0)
      line(
          "            %.1f GiB of it held no chunk at the end (LMCache f4261ef6's accounting;\n"
          "            lmcache.upstream_fixes = true applies the fixes)\n",
          s.disk_leaked_bytes / kGiB);
  }
  if (s.page_cache.capacity_bytes > 0)
    line(
        "  page cache %.1f GiB of disk reads from memory, %.1f GiB from the device\n"
        "             peak %.1f GiB of %.1f GiB\n",
        static_cast<double>(s.page_cache.hit_bytes) / kGiB,
        static_cast<double>(s.page_cache.miss_bytes) / kGiB, s.page_cache.peak_bytes / kGiB,
        s.page_cache.capacity_bytes / kGiB);
  // One row per link kind that moved bytes: how much, how busy the busiest instance's link of
  // that kind was (the remote store's links are one, shared), so that a planner sees which link
  // is near saturation, and the most any one of them moved in a sampling interval (GB/s: what it
  // carried at the run's burstiest), beside one link's bandwidth.
  // With tensor parallelism the PCIe rows are one GPU's bytes (README: "PCIe bytes are one
  // GPU's"), and say so.
  std::string links;
  for (const auto& [kind, bytes] : s.link_bytes)
    if (bytes > 0) {
      const bool one_gpu = s.tensor_parallel > 1 && kind.starts_with("pcie_");
      const std::string label = one_gpu ? kind + " per GPU" : kind;
      std::snprintf(buf, sizeof buf, "  %-17s %12.1f %13.1f%% %11.2f", label.c_str(), bytes / kGiB,
                    100 * s.busy_fraction(kind), s.peak_gbps(kind));
      links += buf;
      if (s.link_capacity.count(kind)) {
        std::snprintf(buf, sizeof buf, " of %.2f", s.capacity_gbps(kind));
        links += buf;
      }
      links += "\n";
    }
  if (!links.empty())
    out += "links                  GiB moved   busiest busy   peak GB/s of link\n" + links;
  return out;
}

std::string screen_list(const std::string& head, const std::vector<std::string>& items) {
  std::string out, row = head;
  for (size_t k = 0; k < items.size(); ++k) {
    const std::string item = items[k] + (k + 1 < items.size() ? "," : "");
    if (row.size() + 1 + item.size() > 100) {
      out += row + "\n";
      row = std::string(11, ' ');  // the space before the item makes 12
    }
    row += " " + item;
  }
  return out + row + "\n";
}

std::string gnuplot_text(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\'')
      out += "''";
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      out += ' ';
    else
      out.push_back(c);
  }
  return out;
}

int csv_column(std::string_view header, std::string_view name) {
  if (header.ends_with('\n')) header.remove_suffix(1);
  const std::vector<std::string_view> columns = io::split(header, ',');
  const auto at = std::find(columns.begin(), columns.end(), name);
  KVTWIN_CHECK(at != columns.end()) << "no column " << name << " in " << header;
  return static_cast<int>(at - columns.begin()) + 1;
}

// Runs `gnuplot script` in `dir` without a shell; returns its exit status (127: not installed).
int run_gnuplot(const std::string& dir, const std::string& script) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      dup2(devnull, STDOUT_FILENO);
      dup2(devnull, STDERR_FILENO);
    }
    if (chdir(dir.c_str()) != 0) _exit(126);
    execlp("gnuplot", "gnuplot", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void RunRecorder::write_plots() {
  std::filesystem::create_directories(out_dir_ + "/plots");
  const Summary& s = summary_;
  // CDFs from the sorted samples (finish() sorted them): "value fraction" per line.
  auto write_cdf = [&](const char* name, const std::vector<double>& v, double scale) {
    std::string text;
    char line[64];
    for (size_t i = 0; i < v.size(); ++i) {
      std::snprintf(line, sizeof line, "%.6f %.6f\n", v[i] * scale,
                    static_cast<double>(i + 1) / static_cast<double>(v.size()));
      text += line;
    }
    write_text(out_dir_ + "/plots/" + name, text);
  };
  write_cdf("ttft_cdf.dat", ttft_ms_, 1e-3);
  write_cdf("tpot_cdf.dat", tpot_ms_, 1.0);
  write_cdf("e2e_cdf.dat", e2e_ms_, 1e-3);
  std::string gp = std::string(kSvgTerminal) +
                   "set grid\n"
                   "set key bottom right\n"
                   "set ylabel 'fraction of requests'\n"
                   "set yrange [0:1]\n"
                   "set output 'plots/latency_cdf.svg'\n"
                   "set multiplot layout 1,3 title '" +
                   gnuplot_text(s.scenario_name) + ": latency CDFs'\n";
  auto cdf = [&](const char* label, const char* unit, const char* file, uint64_t n) {
    if (n == 0) return;
    gp += "set xlabel '" + std::string(label) + " (" + unit + ")'\n";
    gp +=
        "plot 'plots/" + std::string(file) + "' using 1:2 with lines lw 2 title '" + label + "'\n";
  };
  cdf("TTFT", "s", "ttft_cdf.dat", s.ttft.count);
  cdf("TPOT", "ms", "tpot_cdf.dat", s.tpot.count);
  cdf("E2E", "s", "e2e_cdf.dat", s.e2e.count);
  gp += "unset multiplot\n";
  gp += std::string(kSvgTerminal) +
        "set datafile separator ','\n"
        "set output 'plots/occupancy.svg'\n"
        "set key top left\n"
        "set yrange [*:*]\n"
        "set xlabel 'simulated time (s)'\n"
        "set multiplot layout 1,3 title '" +
        gnuplot_text(s.scenario_name) +
        ": occupancy over time'\n"
        "set ylabel 'GPU KV pool used'\n"
        "set yrange [0:1]\n";
  // One panel: each curve is a timeseries.csv column against t_s, named by its header; `lw` is
  // the line's width option ("" for gnuplot's thin default).
  struct Curve {
    const char* column;
    const char* title;
    const char* lw;
  };
  auto panel = [&](const std::vector<Curve>& curves) {
    const char* sep = "plot 'timeseries.csv'";
    for (const Curve& c : curves) {
      gp += std::string(sep) + " every ::1 using " +
            std::to_string(csv_column(kTimeseriesHeader, "t_s")) + ":" +
            std::to_string(csv_column(kTimeseriesHeader, c.column)) + " with lines" + c.lw +
            " title '" + c.title + "'";
      sep = ", ''";
    }
    gp += "\n";
  };
  panel({{"gpu_kv_usage_mean", "mean over instances", " lw 2"}, {"gpu_kv_usage_max", "max", ""}});
  gp += "set yrange [0:*]\nset ylabel 'GiB'\n";
  panel({{"cpu_gib", "cpu", " lw 2"},
         {"disk_gib", "disk", " lw 2"},
         {"remote_gib", "remote", " lw 2"}});
  gp += "set ylabel 'requests'\n";
  panel({{"running", "running", " lw 2"}, {"waiting", "waiting", " lw 2"}});
  gp += "unset multiplot\n";
  // The link kinds that moved bytes: the busiest link of each over time.
  std::vector<std::string> columns;
  columns.reserve(kNumLinkKinds);  // the curves point into it
  std::vector<Curve> curves;
  for (const char* kind : kLinkKinds)
    if (auto it = s.link_bytes.find(kind); it != s.link_bytes.end() && it->second > 0) {
      columns.push_back(std::string(kind) + "_gbps");
      curves.push_back({columns.back().c_str(), kind, " lw 2"});
    }
  if (!curves.empty()) {
    gp += std::string(kSvgTerminal) +
          "set output 'plots/links.svg'\n"
          "set title '" +
          gnuplot_text(s.scenario_name) +
          ": the busiest link of each kind'\n"
          "set ylabel 'GB/s'\n";
    panel(curves);
  }
  write_text(out_dir_ + "/plots/plots.gp", gp);
  int rc = run_gnuplot(out_dir_, "plots/plots.gp");
  if (rc != 0 && rc != 127)  // 127: gnuplot is not installed; plots are optional
    std::fprintf(stderr, "kvtwin: warning: gnuplot failed; see %s/plots/plots.gp\n",
                 out_dir_.c_str());
}

}  // namespace kvtwin::sim::report
