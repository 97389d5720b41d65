#include "sim/calibrate/calibrate_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "cuda/tiers/tier_mover.h"
#include "sim/calibrate/fit.h"
#include "sim/calibrate/hardware_profile.h"
#include "sim/io/input_error.h"
#include "sim/io/line_reader.h"

namespace kvtwin::sim::calibrate {
namespace {

using cuda::tiers::TierMover;
using cuda::tiers::TierMoverConfig;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * 1024;
constexpr uint64_t kMaxTransferBytes = 256 * kMiB;

struct Point {
  Location tier;
  bool direct_io;
  int depth;
  uint64_t object_bytes;
  uint32_t count;
};

struct Sample {
  Point point;
  std::string cls;  // disk_read, ...
  double measured_ns;
};

// splitmix64 for the seeded shuffle.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Transfer make_transfer(Location src, Location dst, const std::string& prefix, const Point& p) {
  Transfer t;
  t.src = src;
  t.dst = dst;
  t.kind = "calibrate";
  for (uint32_t j = 0; j < p.count; ++j) {
    KvObject o;
    o.key = prefix + "@" + std::to_string(j);
    o.bytes = p.object_bytes;
    t.objects.push_back(std::move(o));
  }
  return t;
}

// The tiers of one (tier, mode, depth) configuration.
struct Rig {
  RealTiers tiers;
  std::unique_ptr<TierMover> mover;
};

class Calibration {
 public:
  Calibration(const CalibrateOptions& o, Simulator& sim) : o_(o), sim_(sim), rng_(o.seed) {}

  // Opens one rig per configuration of `points`; false with *error on a bad configuration.
  bool open_rigs(const std::vector<Point>& points, std::string* error) {
    for (const Point& p : points) {
      const auto key = rig_key(p);
      if (rigs_.count(key)) continue;
      RealTierOptions t = o_.tiers;
      if (p.tier == Location::kDisk) {
        t.remote_url.clear();
        t.direct_io = p.direct_io;
        t.disk_queue_depth = p.depth;
      } else {
        t.disk_path.clear();
        t.pipeline_depth = p.depth;
      }
      Rig rig;
      if (!open_real_tiers(t, &rig.tiers, error)) return false;
      rig.mover =
          std::make_unique<TierMover>(sim_, rig.tiers.disk.get(), rig.tiers.remote.get(),
                                      TierMoverConfig{.charge = TierMoverConfig::Charge::kNone});
      rigs_[key] = std::move(rig);
    }
    return true;
  }

  // Store then retrieve the objects of `p`; appends the two samples (when every object moved).
  void measure(const Point& p, std::vector<Sample>* out) {
    Rig& rig = rigs_.at(rig_key(p));
    const std::string prefix =
        "kvtwin-calibrate@" + std::to_string(::getpid()) + "@" + std::to_string(next_id_++);
    const bool disk = p.tier == Location::kDisk;
    const TransferResult w = rig.mover->execute(make_transfer(Location::kCpu, p.tier, prefix, p));
    const TransferResult r = rig.mover->execute(make_transfer(p.tier, Location::kCpu, prefix, p));
    std::vector<std::string> keys;
    for (uint32_t j = 0; j < p.count; ++j) keys.push_back(prefix + "@" + std::to_string(j));
    remove_objects(rig.tiers, keys);
    if (w.all_ok()) out->push_back({p, disk ? "disk_write" : "remote_put", double(w.measured_ns)});
    if (r.all_ok()) out->push_back({p, disk ? "disk_read" : "remote_get", double(r.measured_ns)});
    if (!w.all_ok() || !r.all_ok()) ++failed_;
  }

  void shuffle(std::vector<Point>& points) {
    for (size_t i = points.size(); i > 1; --i)
      std::swap(points[i - 1], points[next_random(rng_) % i]);
  }
  int failed() const { return failed_; }

 private:
  static std::tuple<int, bool, int> rig_key(const Point& p) {
    return {static_cast<int>(p.tier), p.direct_io, p.depth};
  }

  const CalibrateOptions& o_;
  Simulator& sim_;
  uint64_t rng_;
  std::map<std::tuple<int, bool, int>, Rig> rigs_;
  uint64_t next_id_ = 0;
  int failed_ = 0;
};

std::vector<Point> plan(const CalibrateOptions& o) {
  const std::vector<uint64_t> sizes =
      !o.object_bytes.empty() ? o.object_bytes
      : o.quick
          ? std::vector<uint64_t>{256 * kKiB, kMiB, 4 * kMiB, 32 * kMiB}
          : std::vector<uint64_t>{64 * kKiB, 256 * kKiB, kMiB, 4 * kMiB, 16 * kMiB, 32 * kMiB};
  const std::vector<uint32_t> counts = !o.object_counts.empty() ? o.object_counts
                                       : o.quick                ? std::vector<uint32_t>{1, 4, 8}
                                                 : std::vector<uint32_t>{1, 2, 4, 8, 16};
  std::vector<Point> points;
  auto add = [&](Location tier, bool direct, int configured) {
    std::vector<int> depths =
        o.quick ? std::vector<int>{1, configured} : std::vector<int>{1, 4, configured};
    std::sort(depths.begin(), depths.end());
    depths.erase(std::unique(depths.begin(), depths.end()), depths.end());
    for (int d : depths)
      for (uint64_t s : sizes)
        for (uint32_t c : counts)
          if (s * c <= kMaxTransferBytes)
            for (int r = 0; r < o.repeats; ++r) points.push_back({tier, direct, d, s, c});
  };
  if (!o.tiers.disk_path.empty()) add(Location::kDisk, o.tiers.direct_io, o.tiers.disk_queue_depth);
  if (!o.tiers.remote_url.empty()) add(Location::kRemote, true, o.tiers.pipeline_depth);
  return points;
}

// The configured depth's throughput at the largest transfer of each object size.
void print_figures(const std::vector<Sample>& samples, const std::string& cls, bool direct,
                   int depth) {
  std::map<uint64_t, std::pair<uint64_t, double>> best;  // size -> (bytes, best GB/s)
  for (const Sample& s : samples) {
    if (s.cls != cls || s.point.direct_io != direct || s.point.depth != depth) continue;
    const uint64_t bytes = s.point.object_bytes * s.point.count;
    auto& b = best[s.point.object_bytes];
    const double gbps = static_cast<double>(bytes) / s.measured_ns;
    if (bytes > b.first || (bytes == b.first && gbps > b.second)) b = {bytes, gbps};
  }
  const char* mode = !cls.starts_with("disk") ? "" : direct ? "direct" : "buffered";
  std::printf("  %-10s %-8s depth %2d:", cls.c_str(), mode, depth);
  for (const auto& [size, b] : best)
    std::printf("  %lluK %.2f", static_cast<unsigned long long>(size / kKiB), b.second);
  std::printf("  (GB/s by object size, largest transfer)\n");
}

bool is_pcie(const std::string& cls) {
  return cls.starts_with("pcie");
}

const char* const kPcieNotMeasured =
    "pcie_h2d / pcie_d2h: not measured (needs a GPU: kvtwin_pcie_calibrate's samples, refitted)";
const char* const kPcieMeasured =
    "pcie_h2d / pcie_d2h: fitted from kvtwin_pcie_calibrate's samples (CudaMover on a GPU)";

std::vector<std::string> profile_comments(const CalibrateOptions& o, bool pcie) {
  char host[256] = "?";
  ::gethostname(host, sizeof(host) - 1);
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::vector<std::string> c = {
      "kvtwin hardware profile, written by `kvtwin calibrate` (sim/calibrate/hardware_profile.h)",
      o.refit.empty() ? std::string("machine: ") + host + ", " + date
                      : "refit of " + o.refit + " on " + host + ", " + date +
                            " (the samples were measured where they were written)"};
  if (!o.tiers.disk_path.empty())
    c.push_back("disk: " + o.tiers.disk_path + (o.tiers.direct_io ? ", O_DIRECT" : ", buffered") +
                (o.tiers.uring ? ", io_uring" : ", posix") + " depth " +
                std::to_string(o.tiers.disk_queue_depth));
  if (!o.tiers.remote_url.empty())
    c.push_back("remote: " + o.tiers.remote_url + ", pipeline depth " +
                std::to_string(o.tiers.pipeline_depth));
  c.push_back(pcie ? kPcieMeasured : kPcieNotMeasured);
  return c;
}

// Measures every point of the plan; 0, or the exit code of a bad configuration.
int measure_all(const CalibrateOptions& o, std::vector<Sample>* samples) {
  Simulator sim;
  Calibration cal(o, sim);
  std::vector<Point> points = plan(o);
  std::vector<Point> other_mode;
  if (o.compare_modes && !o.tiers.disk_path.empty())
    for (const Point& p : points)
      if (p.tier == Location::kDisk && p.depth == o.tiers.disk_queue_depth)
        other_mode.push_back({p.tier, !p.direct_io, p.depth, p.object_bytes, p.count});
  points.insert(points.end(), other_mode.begin(), other_mode.end());
  std::string error;
  if (!cal.open_rigs(points, &error)) {
    std::fprintf(stderr, "kvtwin calibrate: %s\n", error.c_str());
    return kExitBadInput;
  }
  cal.shuffle(points);
  // Warm-up (discarded): one transfer per configuration.
  {
    std::set<std::tuple<int, bool, int>> warmed;
    std::vector<Sample> discard;
    for (const Point& p : points)
      if (warmed.insert({static_cast<int>(p.tier), p.direct_io, p.depth}).second)
        cal.measure(p, &discard);
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < points.size(); ++i) {
    cal.measure(points[i], samples);
    if (isatty(STDERR_FILENO))
      std::fprintf(stderr, "\rkvtwin calibrate: %zu / %zu transfers", i + 1, points.size());
  }
  if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\n");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("kvtwin calibrate: %zu samples in %.1f s (%d transfers with failures left out)\n",
              samples->size(), seconds, cal.failed());
  return 0;
}

// Reads the samples CSV that --samples writes. Throws InputError.
std::vector<Sample> read_samples(const std::string& path) {
  io::LineReader reader(path);
  std::string_view line;
  std::vector<Sample> out;
  const std::string header = "class,direct_io,depth,objects,object_bytes,measured_ns";
  if (!reader.next(&line) || line != header)
    throw InputError(path, reader.line_number(), "header", "expected \"" + header + "\"");
  while (reader.next(&line)) {
    std::vector<std::string> f;
    std::stringstream row{std::string(line)};
    for (std::string cell; std::getline(row, cell, ',');) f.push_back(cell);
    auto number = [&](size_t i, const char* field) {
      char* end = nullptr;
      const double v = i < f.size() ? std::strtod(f[i].c_str(), &end) : -1;
      if (i >= f.size() || end == f[i].c_str() || *end != '\0' || !(v >= 0))
        throw InputError(path, reader.line_number(), field, "expected a non-negative number");
      return v;
    };
    Sample s;
    s.cls = f.empty() ? "" : f[0];
    if (std::find(std::begin(kLinkClasses), std::end(kLinkClasses), s.cls) ==
        std::end(kLinkClasses))
      throw InputError(path, reader.line_number(), "class", "unknown class \"" + s.cls + "\"");
    s.point.tier = s.cls.starts_with("disk")     ? Location::kDisk
                   : s.cls.starts_with("remote") ? Location::kRemote
                                                 : Location::kGpu;
    s.point.direct_io = number(1, "direct_io") != 0;
    s.point.depth = static_cast<int>(number(2, "depth"));
    s.point.count = static_cast<uint32_t>(number(3, "objects"));
    s.point.object_bytes = static_cast<uint64_t>(number(4, "object_bytes"));
    s.measured_ns = number(5, "measured_ns");
    if (s.point.depth < 1 || s.point.count < 1 || s.measured_ns <= 0)
      throw InputError(path, reader.line_number(), "row", "depth, objects and time must be > 0");
    out.push_back(s);
  }
  return out;
}

}  // namespace

int run_calibrate(const CalibrateOptions& o) {
  std::vector<Sample> samples;
  if (!o.refit.empty()) {
    samples = read_samples(o.refit);
    std::printf("kvtwin calibrate: %zu samples read from %s\n", samples.size(), o.refit.c_str());
  } else {
    if (o.tiers.disk_path.empty() && o.tiers.remote_url.empty()) {
      std::fprintf(stderr, "kvtwin calibrate: give --disk-path and/or --remote-url\n");
      return kExitBadInput;
    }
    if (int rc = measure_all(o, &samples); rc != 0) return rc;
  }
  const bool pcie =
      std::any_of(samples.begin(), samples.end(), [](const Sample& s) { return is_pcie(s.cls); });
  HardwareProfile profile;
  profile.comments = profile_comments(o, pcie);
  profile.tiers = {o.tiers.direct_io, o.tiers.uring, o.tiers.disk_queue_depth,
                   o.tiers.pipeline_depth};
  std::map<std::string, double> large_mape;   // fit MAPE over objects >= 1 MiB, by class
  std::map<std::string, double> noise_floor;  // repeats vs their median, objects >= 1 MiB
  std::printf("\nMeasured throughput (noisy on a shared machine):\n");
  for (const std::string cls :
       {"disk_write", "disk_read", "remote_put", "remote_get", "pcie_d2h", "pcie_h2d"}) {
    const bool disk = cls.starts_with("disk");
    // The GPU mover runs one transfer's objects in batches, one after the other: depth 1.
    const int depth = disk ? o.tiers.disk_queue_depth : is_pcie(cls) ? 1 : o.tiers.pipeline_depth;
    std::vector<LinkSample> fit_samples, other;
    for (const Sample& s : samples) {
      if (s.cls != cls) continue;
      LinkSample ls{s.point.count, s.point.object_bytes * s.point.count, s.measured_ns,
                    s.point.depth};
      (s.point.direct_io == o.tiers.direct_io || !disk ? fit_samples : other).push_back(ls);
    }
    if (fit_samples.empty()) continue;
    print_figures(samples, cls, disk ? o.tiers.direct_io : !is_pcie(cls), depth);
    if (!other.empty()) print_figures(samples, cls, !o.tiers.direct_io, depth);
    const std::vector<LinkSample> medians = median_per_point(fit_samples);
    const LinkFit fit = fit_link_model(medians, depth);
    profile.links[cls] = {fit.model, fit.num_samples, fit.mape_pct};
    std::vector<LinkSample> large;
    for (const LinkSample& m : medians)
      if (m.bytes >= (uint64_t{1} << 20) * m.num_objects) large.push_back(m);
    large_mape[cls] = mape_pct(fit.model, large);
    noise_floor[cls] = repeat_spread_pct(fit_samples, uint64_t{1} << 20);
    if (!other.empty()) {
      const LinkFit alt = fit_link_model(median_per_point(other), depth);
      std::printf("  %-10s %-8s fit MAPE %.1f%% (not written to the profile)\n", cls.c_str(),
                  o.tiers.direct_io ? "buffered" : "direct", alt.mape_pct);
    }
  }
  std::printf(
      "\nFitted link models (t = latency + n*(object + object_serial/q) + "
      "B*(1/gbps + 1/(q*stream_gbps)) + spill/spill_gbps, spill per object or per window of q "
      "objects):\n");
  for (const auto& [cls, link] : profile.links) {
    const LinkModel& m = link.model;
    std::printf(
        "  %-10s latency %.1f us, object %.1f us, object_serial %.1f us, gbps %.3g, "
        "stream_gbps %.3g, spill past %llu KiB per %s at %.3g GB/s, depth %d\n"
        "  %-10s fit MAPE %.1f%% over %llu points (medians), %.1f%% for objects >= 1 MiB "
        "(noise floor: repeats vs their median %.1f%%)\n",
        cls.c_str(), m.latency_us, m.object_us, m.object_serial_us, m.gbps, m.stream_gbps,
        static_cast<unsigned long long>(m.spill_bytes >> 10),
        m.spill_scope == LinkModel::SpillScope::kWindow ? "window" : "object", m.spill_gbps,
        m.queue_depth, "", link.fit_mape_pct, static_cast<unsigned long long>(link.samples),
        large_mape[cls], noise_floor[cls]);
  }
  if (!pcie) std::printf("  %s\n", kPcieNotMeasured);

  std::ofstream out(o.out);
  if (!out) {
    std::fprintf(stderr, "kvtwin calibrate: cannot write %s\n", o.out.c_str());
    return kExitBadInput;
  }
  out << to_toml(profile);
  std::printf("\nwrote %s\n", o.out.c_str());
  if (!o.samples_csv.empty()) {
    std::ofstream csv(o.samples_csv);
    csv << "class,direct_io,depth,objects,object_bytes,measured_ns\n";
    for (const Sample& s : samples)
      csv << s.cls << "," << s.point.direct_io << "," << s.point.depth << "," << s.point.count
          << "," << s.point.object_bytes << "," << static_cast<int64_t>(s.measured_ns) << "\n";
  }
  return 0;
}

}  // namespace kvtwin::sim::calibrate
