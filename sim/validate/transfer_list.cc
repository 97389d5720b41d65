#include "sim/validate/transfer_list.h"

#include <charconv>
#include <sstream>
#include <string_view>

#include "sim/io/input_error.h"
#include "sim/io/line_reader.h"

namespace kvtwin::sim::validate {
namespace {

constexpr std::string_view kHeader = "time_us,src,dst,objects,object_bytes,key_prefix,kind";

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> out;
  size_t begin = 0;
  while (true) {
    const size_t comma = line.find(',', begin);
    out.push_back(line.substr(begin, comma == std::string_view::npos ? comma : comma - begin));
    if (comma == std::string_view::npos) return out;
    begin = comma + 1;
  }
}

template <typename T>
T parse_uint(std::string_view text, const io::LineReader& r, const char* field) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    throw InputError(r.path(), r.line_number(), field,
                     "expected a non-negative integer, got \"" + std::string(text) + "\"");
  return v;
}

Location parse_location(std::string_view text, const io::LineReader& r, const char* field) {
  for (Location l : {Location::kGpu, Location::kCpu, Location::kDisk, Location::kRemote})
    if (location_name(l) == text) return l;
  throw InputError(r.path(), r.line_number(), field,
                   "expected cpu, disk, remote or gpu, got \"" + std::string(text) + "\"");
}

// splitmix64: the seeded stream of the synthetic shuffle.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<PlannedTransfer> read_transfer_list(const std::string& path) {
  io::LineReader reader(path);
  std::vector<PlannedTransfer> out;
  std::string_view line;
  bool header_seen = false;
  while (reader.next(&line)) {
    if (line.empty() || line.front() == '#') continue;
    if (!header_seen) {
      if (line != kHeader)
        throw InputError(path, reader.line_number(), "header",
                         "expected \"" + std::string(kHeader) + "\"");
      header_seen = true;
      continue;
    }
    const auto f = split(line);
    if (f.size() != 7)
      throw InputError(path, reader.line_number(), "row",
                       "expected 7 fields, got " + std::to_string(f.size()));
    PlannedTransfer t;
    t.at = 1000 * parse_uint<int64_t>(f[0], reader, "time_us");
    t.src = parse_location(f[1], reader, "src");
    t.dst = parse_location(f[2], reader, "dst");
    t.num_objects = parse_uint<uint32_t>(f[3], reader, "objects");
    t.object_bytes = parse_uint<uint64_t>(f[4], reader, "object_bytes");
    t.key_prefix = std::string(f[5]);
    t.kind = std::string(f[6]);
    if (t.num_objects == 0)
      throw InputError(path, reader.line_number(), "objects", "must be at least 1");
    if (t.key_prefix.empty())
      throw InputError(path, reader.line_number(), "key_prefix", "must not be empty");
    if (t.src == t.dst) throw InputError(path, reader.line_number(), "dst", "must differ from src");
    if (!out.empty() && t.at < out.back().at)
      throw InputError(path, reader.line_number(), "time_us", "rows must be in time order");
    out.push_back(std::move(t));
  }
  if (!header_seen) throw InputError(path, 0, "header", "empty transfer list");
  return out;
}

std::string transfer_list_csv(const std::vector<PlannedTransfer>& list) {
  std::ostringstream out;
  out << kHeader << "\n";
  for (const PlannedTransfer& t : list)
    out << t.at / 1000 << "," << location_name(t.src) << "," << location_name(t.dst) << ","
        << t.num_objects << "," << t.object_bytes << "," << t.key_prefix << "," << t.kind << "\n";
  return out.str();
}

std::vector<PlannedTransfer> synth_transfers(const SynthSpec& spec) {
  // One (store, retrieve) pair per tier, size, count and repeat.
  struct Pair {
    Location tier;
    uint64_t bytes;
    uint32_t count;
    int repeat;
  };
  std::vector<Pair> pairs;
  for (Location tier : spec.tiers)
    for (uint64_t bytes : spec.object_bytes)
      for (uint32_t count : spec.object_counts)
        if (bytes * count <= spec.max_transfer_bytes)
          for (int r = 0; r < spec.repeats; ++r) pairs.push_back({tier, bytes, count, r});
  uint64_t state = spec.seed;
  for (size_t i = pairs.size(); i > 1; --i) std::swap(pairs[i - 1], pairs[next_random(state) % i]);
  // Stores of pair k, then the retrieve of pair k-1 (a retrieve never directly follows its own
  // store, so the two are not back to back on the device).
  std::vector<PlannedTransfer> out;
  auto planned = [&](const Pair& p, size_t k, bool store) {
    PlannedTransfer t;
    t.src = store ? Location::kCpu : p.tier;
    t.dst = store ? p.tier : Location::kCpu;
    t.kind = store ? "store" : "retrieve";
    t.num_objects = p.count;
    t.object_bytes = p.bytes;
    t.key_prefix = spec.run_tag + "@" + std::to_string(k);
    return t;
  };
  for (size_t k = 0; k <= pairs.size(); ++k) {
    if (k < pairs.size()) out.push_back(planned(pairs[k], k, true));
    if (k > 0) out.push_back(planned(pairs[k - 1], k - 1, false));
  }
  for (size_t i = 0; i < out.size(); ++i) out[i].at = static_cast<SimTime>(i) * spec.spacing_ns;
  return out;
}

Transfer to_transfer(const PlannedTransfer& planned) {
  Transfer t;
  t.src = planned.src;
  t.dst = planned.dst;
  t.kind = planned.kind;  // kind is a string_view: the planned row must outlive the transfer
  t.objects.reserve(planned.num_objects);
  for (uint32_t j = 0; j < planned.num_objects; ++j) {
    KvObject o;
    o.key = planned.key_prefix + "@" + std::to_string(j);
    o.bytes = planned.object_bytes;
    t.objects.push_back(std::move(o));
  }
  return t;
}

}  // namespace kvtwin::sim::validate
