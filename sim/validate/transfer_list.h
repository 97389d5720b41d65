// TransferList: the transfers `kvtwin validate` replays when it does not run a scenario — a CSV
// file, or a built-in synthetic mix.
//
// CSV (one transfer per row, header required, '#' lines ignored, plain or gzip):
//   time_us,src,dst,objects,object_bytes,key_prefix,kind
//   0,cpu,disk,8,33554432,run1@a,store
//   1000,disk,cpu,8,33554432,run1@a,retrieve
// src/dst: cpu | disk | remote | gpu. Object j of a row is named "<key_prefix>@<j>", so a row
// that reads back what an earlier row stored uses the same prefix. Rows must be in time order.
//
// Synthetic mix (synth_transfers): for each class, each object size and each object count, a
// store of fresh keys followed later by a retrieve of the same keys; the order of the pairs is a
// seeded shuffle, so the same spec and seed give the same list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/mover.h"
#include "sim/time.h"

namespace kvtwin::sim::validate {

struct PlannedTransfer {
  SimTime at = 0;
  Location src = Location::kCpu;
  Location dst = Location::kDisk;
  std::string kind;
  uint32_t num_objects = 1;
  uint64_t object_bytes = 0;
  std::string key_prefix;
};

// Throws InputError(file, line, field) on a malformed row.
std::vector<PlannedTransfer> read_transfer_list(const std::string& path);
std::string transfer_list_csv(const std::vector<PlannedTransfer>& list);

struct SynthSpec {
  std::vector<Location> tiers;  // kDisk and/or kRemote
  std::vector<uint64_t> object_bytes = {256 << 10, 1 << 20, 4 << 20, 16 << 20, 32 << 20};
  std::vector<uint32_t> object_counts = {1, 4, 16};
  uint64_t max_transfer_bytes = uint64_t{256} << 20;  // (size, count) pairs above are skipped
  int repeats = 2;
  uint64_t seed = 1;
  std::string run_tag = "validate";    // key prefixes start with it (fresh keys per run)
  SimDuration spacing_ns = 1'000'000;  // between consecutive transfers
};
std::vector<PlannedTransfer> synth_transfers(const SynthSpec& spec);

// The sim::Transfer of a planned row (keys "<key_prefix>@<j>").
Transfer to_transfer(const PlannedTransfer& planned);

}  // namespace kvtwin::sim::validate
