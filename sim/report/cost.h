// What a deployment costs, from the scenario's prices ([cost], per hour in one currency) and the
// quantities a run's summary gives:
//
//   gpus            = cluster.instances · gpu.tensor_parallel
//   cpu_memory_gib  = LMCache's CPU pools (lmcache.cpu.capacity_bytes: every rank and instance)
//                     + the page caches (links.page_cache_gb · instances)
//   disk_gib        = LMCache's disk tiers (lmcache.disk.capacity_bytes)
//   remote_gib      = the most the remote store held (lmcache.remote.peak_bytes: it is unbounded,
//                     so what it held at most is what it must be sized for)
//
//   per_hour = gpus · gpu_per_hour + instances · instance_per_hour
//            + cpu_memory_gib · cpu_memory_gib_per_hour + disk_gib · disk_gib_per_hour
//            + remote_gib · remote_gib_per_hour
//
// The deployment is paid for the whole run whatever it serves, so what a unit of service costs
// divides the hourly price by what was served in an hour at the run's load:
//
//   per_million_output_tokens  = per_hour / (throughput.output_tokens_per_s · 3600) · 1e6
//   per_thousand_good_requests = per_hour / (goodput.requests_per_s · 3600) · 1e3
//
// each absent when nothing was served (a rate of 0). A lightly loaded deployment pays for idle
// hardware: these fall as the load rises toward what it sustains (`kvtwin capacity`).
#pragma once

#include <optional>
#include <string>

#include "sim/scenario/scenario.h"

namespace kvtwin::sim::report {

struct Summary;

struct Cost {
  bool priced = false;  // some price of the scenario is above 0; else every figure is 0 / absent
  // Quantities priced.
  double gpus = 0, instances = 0, cpu_memory_gib = 0, disk_gib = 0, remote_gib = 0;
  // Their price per hour, and the sum.
  double gpu_per_hour = 0, instance_per_hour = 0, cpu_memory_per_hour = 0, disk_per_hour = 0,
         remote_per_hour = 0, per_hour = 0;
  std::optional<double> per_million_output_tokens;
  std::optional<double> per_thousand_good_requests;
};

// A price as the screens write it: whole units from 1,000 on, else 4 significant digits.
std::string price_text(double v);

// A table's cells of a cost: the hourly price to the cent ("-" when not priced), and a unit price
// (price_text; "-" when absent: not priced, or nothing served).
std::string hourly_cell(const Cost& c);
std::string unit_cell(const std::optional<double>& v);

// REQUIRES: s's figures final (instances, tensor_parallel, tier capacities and peaks, page
// cache, output-token throughput, goodput).
Cost deployment_cost(const scenario::CostConfig& prices, const Summary& s);

}  // namespace kvtwin::sim::report
