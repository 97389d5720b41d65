#include "sim/cli/trace_command.h"

#include <cstdio>

#include "sim/cli/common.h"
#include "sim/hw/model_geometry.h"
#include "sim/io/input_error.h"
#include "sim/workload/trace_stats.h"
#include "sim/workload/trace_writer.h"

namespace kvtwin::sim::cli {
namespace {

workload::TraceFormat parse_format(const std::string& name, const char* flag) {
  auto f = workload::trace_format_from_name(name);
  if (!f) throw InputError(flag, 0, name, "expected auto, native, mooncake or azure");
  return *f;
}

}  // namespace

int run_trace_stats(const TraceStatsOptions& o) {
  scenario::Scenario s = load_scenario(o.scenario, o.sets);
  workload::Workload w(workload::open_trace(o.file, parse_format(o.format, "--format")),
                       workload_options(s));
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
  workload::TraceFormat to = parse_format(o.to, "--to");
  if (to != workload::TraceFormat::kNative && to != workload::TraceFormat::kMooncake)
    throw InputError("--to", 0, o.to, "output format must be native or mooncake");
  scenario::Scenario s = load_scenario(o.scenario, o.sets);
  workload::Workload w(workload::open_trace(o.input, parse_format(o.from, "--from")),
                       workload_options(s));
  std::FILE* out = o.output == "-" ? stdout : std::fopen(o.output.c_str(), "wb");
  if (!out) throw InputError(o.output, 0, "", "cannot create file");
  workload::TraceWriter writer(out, to);
  workload::TraceRequest r;
  try {
    while (w.next(&r)) writer.write(r);
  } catch (...) {
    if (out != stdout) std::fclose(out);
    throw;
  }
  bool ok = std::fflush(out) == 0;
  if (out != stdout) ok &= std::fclose(out) == 0;
  if (!ok) throw InputError(o.output, 0, "", "write failed");
  return 0;
}

}  // namespace kvtwin::sim::cli
