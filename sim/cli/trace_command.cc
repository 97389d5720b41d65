#include "sim/cli/trace_command.h"

#include <sys/stat.h>

#include <cstdio>

#include "sim/cli/common.h"
#include "sim/hw/model_geometry.h"
#include "sim/io/input_error.h"
#include "sim/io/output_file.h"
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

}  // namespace

int run_trace_stats(const TraceStatsOptions& o) {
  scenario::Scenario s = load_scenario(o.scenario, o.sets);
  workload::Workload w(workload::open_trace(o.file, parse_format(o.format, "--format")),
                       window_options(s));
  workload::TraceStats stats = workload::compute_trace_stats(&w, o.window_s);
  double kv =
      static_cast<double>(hw::derive_geometry(s).kv_bytes_per_token) * s.gpu.tensor_parallel;
  std::string text = o.json ? workload::trace_stats_json(stats, o.file, kv)
                            : workload::format_trace_stats(stats, o.file, kv);
  if (!o.json)
    text += "KV bytes per token    " + std::to_string(static_cast<int64_t>(kv)) + " (" +
            s.model.name + ", all ranks)\n";
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
