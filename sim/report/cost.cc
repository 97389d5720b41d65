#include "sim/report/cost.h"

#include <cstdio>

#include "sim/report/run_recorder.h"

namespace kvtwin::sim::report {

std::string price_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, v >= 1000 ? "%.0f" : "%.4g", v);
  return buf;
}

std::string hourly_cell(const Cost& c) {
  if (!c.priced) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", c.per_hour);
  return buf;
}

std::string unit_cell(const std::optional<double>& v) {
  return v ? price_text(*v) : "-";
}

Cost deployment_cost(const scenario::CostConfig& prices, const Summary& s) {
  Cost c;
  c.priced = prices.gpu_per_hour > 0 || prices.instance_per_hour > 0 ||
             prices.cpu_memory_gib_per_hour > 0 || prices.disk_gib_per_hour > 0 ||
             prices.remote_gib_per_hour > 0;
  if (!c.priced) return c;
  using scenario::kGiB;
  c.instances = s.instances;
  c.gpus = static_cast<double>(s.instances) * s.tensor_parallel;
  c.cpu_memory_gib = (s.tier_capacity_bytes[kTierCpu] + s.page_cache.capacity_bytes) / kGiB;
  c.disk_gib = s.tier_capacity_bytes[kTierDisk] / kGiB;
  c.remote_gib = s.tier_bytes_peak[kTierRemote] / kGiB;
  c.gpu_per_hour = c.gpus * prices.gpu_per_hour;
  c.instance_per_hour = c.instances * prices.instance_per_hour;
  c.cpu_memory_per_hour = c.cpu_memory_gib * prices.cpu_memory_gib_per_hour;
  c.disk_per_hour = c.disk_gib * prices.disk_gib_per_hour;
  c.remote_per_hour = c.remote_gib * prices.remote_gib_per_hour;
  c.per_hour = c.gpu_per_hour + c.instance_per_hour + c.cpu_memory_per_hour + c.disk_per_hour +
               c.remote_per_hour;
  if (s.output_token_throughput > 0)
    c.per_million_output_tokens = c.per_hour / (s.output_token_throughput * 3600) * 1e6;
  if (s.goodput > 0) c.per_thousand_good_requests = c.per_hour / (s.goodput * 3600) * 1e3;
  return c;
}

}  // namespace kvtwin::sim::report
