#include "sim/cli/trace_command.h"

#include <sys/stat.h>

#include <cstdio>

#include "sim/cli/common.h"
#include "sim/hw/model_geometry.h"
#include "sim/io/input_error.h"
#include "sim/io/output_file.h"
#include "sim/report/json_writer.h"
#include "sim/time.h"
#include "sim/workload/trace_stats.h"
#include "sim/workload/trace_writer.h"

namespace kvtwin::sim::cli {
namespace {

workload::TraceFormat parse_format(const std::string& name, const char* flag) {
  auto f = workload::trace_format_from_name(name);
  if (!f) throw InputError(flag, 0, name, "expected auto, native, mooncake or azure");
  return *f;
}

// The scenario's workload transforms without its warm-up: stats and conversions describe the
// window a run measures.
workload::WorkloadOptions window_options(const scenario::Scenario& s) {
  workload::WorkloadOptions o = workload_options(s);
  o.warmup_s = 0;
  return o;
}

// `kvtwin trace stats --json`: the figures of the text report as one JSON object (fields in
// traces/README.md); counts and bytes whole, ratios as fractions. Without prefix information
// the block fields are absent.
std::string trace_stats_json(const workload::TraceStats& s, const std::string& name,
                             double kv_bytes_per_token, const std::string& model) {
  report::JsonWriter j;
  j.begin_object();
  j.field("trace", name);
  j.field("requests", s.requests);
  const double span = to_seconds(s.last_arrival - s.first_arrival);
  j.field("span_s", span);
  j.field("mean_rate_per_s", span > 0 ? static_cast<double>(s.requests) / span : 0.0);
  j.field("arrival_instants", s.arrival_instants);
  j.field("largest_arrival_group", s.largest_arrival_group);
  j.field("requests_sharing_an_arrival", s.requests_sharing_an_arrival);
  auto dist = [&](const char* key, const workload::Percentiles& p) {
    j.key(key);
    j.begin_object();
    j.distribution_fields(p);
    j.end_object();
  };
  dist("prompt_tokens", s.prompt_tokens);
  dist("output_tokens", s.output_tokens);
  j.field("sessions", s.sessions);
  j.field("requests_with_ids", s.requests_with_ids);
  auto ratio = [](uint64_t a, uint64_t b) {
    return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b);
  };
  if (s.requests_with_ids > 0) {
    j.field("block_size", s.block_size);
    j.field("block_refs", s.block_refs);
    j.field("unique_blocks", s.unique_blocks);
    j.field("prefix_reuse_blocks", ratio(s.prefix_hit_blocks, s.block_refs));
    j.field("prefix_reuse_tokens", ratio(s.prefix_hit_tokens, s.tokens_with_ids));
    j.field("working_set_tokens", s.working_set_tokens());
    j.field("working_set_bytes", static_cast<double>(s.working_set_tokens()) * kv_bytes_per_token);
    if (s.window_s > 0) {
      j.key("busiest_window");
      j.begin_object();
      j.field("window_s", s.window_s);
      j.field("start_s", s.max_window_start_s);
      j.field("unique_blocks", s.max_window_unique_blocks);
      j.field("tokens", s.max_window_tokens);
      j.field("bytes", static_cast<double>(s.max_window_tokens) * kv_bytes_per_token);
      j.end_object();
    }
  }
  j.field("kv_bytes_per_token", kv_bytes_per_token);
  j.field("model", model);
  j.end_object();
  return j.str();
}

}  // namespace

int run_trace_stats(const TraceStatsOptions& o) {
  scenario::Scenario s = load_scenario(o.scenario, o.sets);
  workload::Workload w(workload::open_trace(o.file, parse_format(o.format, "--format")),
                       window_options(s));
  workload::TraceStats stats = workload::compute_trace_stats(&w, o.window_s);
  // Under MLA every rank holds the same latent KV, and LMCache (save_only_first_rank, its
  // default there; layerwise mode ignores it) keeps rank 0's copy alone: the distinct bytes are
  // one rank's.
  const bool one_copy =
      s.model.attention == "mla" && s.lmcache.save_only_first_rank && !s.lmcache.use_layerwise;
  double kv = static_cast<double>(hw::derive_geometry(s).kv_bytes_per_token) *
              (one_copy ? 1 : s.gpu.tensor_parallel);
  std::string text = o.json ? trace_stats_json(stats, o.file, kv, s.model.name)
                            : workload::format_trace_stats(stats, o.file, kv);
  if (!o.json)
    text += "KV bytes per token    " + std::to_string(static_cast<int64_t>(kv)) + " (" +
            s.model.name +
            (one_copy ? ", one rank's copy: MLA ranks hold the same latent and LMCache keeps rank "
                        "0's (lmcache.save_only_first_rank))\n"
                      : ", all ranks)\n");
  std::fputs(text.c_str(), stdout);
  return 0;
}

int run_trace_convert(const TraceConvertOptions& o) {
  auto to = workload::trace_format_from_name(o.to);
  if (to != workload::TraceFormat::kNative && to != workload::TraceFormat::kMooncake)
    throw InputError("--to", 0, o.to, "expected native or mooncake");
  scenario::Scenario s = load_scenario(o.scenario, o.sets);
  workload::Workload w(workload::open_trace(o.input, parse_format(o.from, "--from")),
                       window_options(s));
  struct stat in_st, out_st;
  if (o.output != "-" && ::stat(o.input.c_str(), &in_st) == 0 &&
      ::stat(o.output.c_str(), &out_st) == 0 && in_st.st_dev == out_st.st_dev &&
      in_st.st_ino == out_st.st_ino)
    throw InputError(o.output, 0, "", "is the input trace; write the conversion to another file");
  std::FILE* out = o.output == "-" ? stdout : io::create_output(o.output);
  workload::TraceWriter writer(out, *to);
  workload::TraceRequest r;
  try {
    while (w.next(&r)) writer.write(r);
  } catch (...) {
    if (out != stdout) std::fclose(out);
    throw;
  }
  if (out != stdout) io::close_output(&out, o.output);
  return 0;
}

}  // namespace kvtwin::sim::cli
