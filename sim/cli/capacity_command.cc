#include "sim/cli/capacity_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "sim/cli/common.h"
#include "sim/cli/run_command.h"
#include "sim/io/input_error.h"
#include "sim/io/output_file.h"
#include "sim/report/run_recorder.h"

namespace kvtwin::sim::cli {
namespace {

constexpr double kMinScale = 1e-6, kMaxScale = 1e6;  // workload.rate_scale's bounds

// A computed scale, rounded to 5 significant digits: what the table and capacity.csv print is
// the very value simulated, so `--set workload.rate_scale=<it>` repeats a probe exactly.
double round_scale(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.5g", x);
  return std::strtod(buf, nullptr);
}

std::string scale_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.5g", x);
  return buf;
}

std::string value_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

struct Probe {
  size_t order = 0;  // the order simulated: points/<order>/
  double scale = 0;
  report::Summary summary;
  bool holds = false;
};

class Search {
 public:
  Search(const CapacityOptions& o, scenario::Scenario base) : o_(o), base_(std::move(base)) {}

  // Simulates the scales (in parallel); returns their indices in probes(), in the order given.
  std::vector<size_t> run(const std::vector<double>& scales) {
    const size_t first = probes_.size();
    for (double x : scales) probes_.push_back(Probe{probes_.size(), x, {}, false});
    PointsProgress progress("kvtwin capacity", o_.quiet, scales.size());
    parallel_for(scales.size(), o_.jobs, [&](size_t i) {
      Probe& p = probes_[first + i];
      scenario::Scenario s = base_;
      s.workload.rate_scale = p.scale;
      std::string dir = o_.out.empty() ? "" : o_.out + "/points/" + std::to_string(p.order);
      if (!dir.empty()) {  // each probe's summary and scenario; not the heavy outputs
        s.output.chrome_trace = false;
        s.output.plots = false;
      }
      p.summary = simulate(s, o_.trace, dir, true, nullptr, {}, progress.reporter(i));
      p.holds = p.summary.slo_attainment >= o_.slo_attainment && !p.summary.load.saturated;
      progress.point(i, 1.0);
    });
    progress.finish();
    std::vector<size_t> index(scales.size());
    for (size_t i = 0; i < scales.size(); ++i) index[i] = first + i;
    return index;
  }
  const std::vector<Probe>& probes() const { return probes_; }
  const Probe& at(size_t i) const { return probes_[i]; }

 private:
  const CapacityOptions& o_;
  const scenario::Scenario base_;
  std::vector<Probe> probes_;
};

// The search's answer: lo holds and hi fails (both set), or only one of them when every scale up
// to the bound held (lo) or none down to the bound did (hi); indices into the probes.
struct Answer {
  std::optional<size_t> lo, hi;
};

Answer search(Search* s, double r0, int n, double precision) {
  Answer a;
  const size_t start = s->run({r0})[0];
  const bool up = s->at(start).holds;
  (up ? a.lo : a.hi) = start;
  // Bracket: doublings (or halvings) from r0, n per round, until the verdict changes.
  for (int k = 1;; k += n) {
    std::vector<double> scales;
    for (int j = k; j < k + n; ++j) {
      const double x = round_scale(up ? r0 * std::ldexp(1.0, j) : r0 / std::ldexp(1.0, j));
      if (x > kMaxScale || x < kMinScale) break;
      scales.push_back(x);
    }
    if (scales.empty()) return a;  // the bound: every (or no) scale held
    for (size_t i : s->run(scales)) {
      if (s->at(i).holds == up) {
        (up ? a.lo : a.hi) = i;
        continue;
      }
      (up ? a.hi : a.lo) = i;
      break;
    }
    if (a.lo && a.hi) break;
  }
  // Narrow: n scales spaced evenly in log between lo and hi; the first failure becomes hi.
  while (s->at(*a.hi).scale / s->at(*a.lo).scale > 1 + precision) {
    const double lo = s->at(*a.lo).scale, hi = s->at(*a.hi).scale;
    std::vector<double> scales;
    for (int i = 1; i <= n; ++i) {
      const double x = round_scale(lo * std::pow(hi / lo, static_cast<double>(i) / (n + 1)));
      if (x > lo && x < hi && (scales.empty() || x > scales.back())) scales.push_back(x);
    }
    if (scales.empty()) break;  // lo and hi are neighbours at 5 significant digits
    for (size_t i : s->run(scales)) {
      if (!s->at(i).holds) {
        a.hi = i;
        break;
      }
      a.lo = i;
    }
  }
  return a;
}

std::string verdict(const Probe& p, double target) {
  if (p.holds) return "holds";
  std::string why;
  if (p.summary.slo_attainment < target) why = "SLOs";
  if (p.summary.load.saturated) why += why.empty() ? "saturated" : ", saturated";
  return "fails: " + why;
}

std::string csv(const std::vector<const Probe*>& by_scale) {
  std::string out =
      "probe,rate_scale,offered_requests_per_s,requests_per_s,finished,slo_attainment,"
      "ttft_p50_ms,ttft_p99_ms,tpot_p50_ms,queue_q1_ms,queue_q4_ms,saturated,holds\n";
  char buf[512];
  for (const Probe* p : by_scale) {
    const report::Summary& s = p->summary;
    std::snprintf(buf, sizeof buf, "%zu,%s,%.6f,%.6f,%llu,%.6f,%.3f,%.3f,%.3f,%.3f,%.3f,%d,%d\n",
                  p->order, scale_text(p->scale).c_str(), s.load.offered_rate, s.request_throughput,
                  static_cast<unsigned long long>(s.finished), s.slo_attainment, s.ttft.p50,
                  s.ttft.p99, s.tpot.p50, s.load.queue_ms_by_arrival_quarter[0],
                  s.load.queue_ms_by_arrival_quarter[3], s.load.saturated ? 1 : 0,
                  p->holds ? 1 : 0);
    out += buf;
  }
  return out;
}

std::string screen(const scenario::Scenario& base, const CapacityOptions& o,
                   const std::vector<const Probe*>& by_scale, const Search& s, const Answer& a) {
  std::string out;
  char buf[256];
  auto line = [&](const char* fmt, auto... args) {
    std::snprintf(buf, sizeof buf, fmt, args...);
    out += buf;
  };
  line("kvtwin capacity: %s\n", base.run.name.c_str());
  line(
      "target      %.1f%% of finished requests with TTFT <= %.6g ms and TPOT <= %.6g ms; a queue\n"
      "            that does not grow through the run\n",
      100 * o.slo_attainment, base.slo.ttft_ms, base.slo.tpot_ms);
  line("%12s %12s %11s %11s %13s %12s   %s\n", "rate_scale", "offered/s", "served/s", "meet SLOs",
       "TTFT p99 ms", "queue q4 s", "verdict");
  for (const Probe* p : by_scale) {
    const report::Summary& m = p->summary;
    line("%12s %12.3f %11.3f %10.1f%% %13.1f %12.1f   %s\n", scale_text(p->scale).c_str(),
         m.load.offered_rate, m.request_throughput, 100 * m.slo_attainment, m.ttft.p99,
         m.load.queue_ms_by_arrival_quarter[3] / 1e3, verdict(*p, o.slo_attainment).c_str());
  }
  if (a.lo && a.hi) {
    const Probe& lo = s.at(*a.lo);
    const Probe& hi = s.at(*a.hi);
    line("capacity    rate_scale %s holds: %.3f req/s offered, %.1f%% meet the SLOs\n",
         scale_text(lo.scale).c_str(), lo.summary.load.offered_rate,
         100 * lo.summary.slo_attainment);
    line("            rate_scale %s %s (%.3f req/s offered)\n", scale_text(hi.scale).c_str(),
         verdict(hi, o.slo_attainment).c_str(), hi.summary.load.offered_rate);
  } else if (a.lo) {
    line("capacity    every scale probed holds, up to rate_scale %s (the field's bound)\n",
         scale_text(s.at(*a.lo).scale).c_str());
  } else {
    line("capacity    no scale probed holds, down to rate_scale %s (the field's bound)\n",
         scale_text(s.at(*a.hi).scale).c_str());
  }
  // Probes on the wrong side of the answer: attainment was not monotone in the rate.
  for (const Probe* p : by_scale) {
    const bool above = a.hi && p->scale > s.at(*a.hi).scale && p->holds;
    const bool below = a.lo && p->scale < s.at(*a.lo).scale && !p->holds;
    if (above || below)
      line(
          "note        rate_scale %s, %s the answer, %s: the verdict is not monotone in the rate\n",
          scale_text(p->scale).c_str(), above ? "above" : "below", above ? "held" : "failed");
  }
  return out;
}

}  // namespace

int run_capacity(const CapacityOptions& o) {
  if (!(o.slo_attainment > 0 && o.slo_attainment <= 1))
    throw InputError("--slo-attainment", 0, value_text(o.slo_attainment),
                     "expected a share in (0, 1]");
  if (!(o.precision >= 0.001 && o.precision <= 1))
    throw InputError("--precision", 0, value_text(o.precision), "expected 0.001 .. 1");
  if (o.probes < 1 || o.probes > 64)
    throw InputError("--probes", 0, std::to_string(o.probes), "expected 1 .. 64");
  scenario::Scenario base = load_scenario(o.scenario, o.sets);
  Search s(o, base);
  const Answer a = search(&s, base.workload.rate_scale, o.probes, o.precision);
  std::vector<const Probe*> by_scale;
  for (const Probe& p : s.probes()) by_scale.push_back(&p);
  std::stable_sort(by_scale.begin(), by_scale.end(),
                   [](const Probe* x, const Probe* y) { return x->scale < y->scale; });
  if (!o.quiet) std::fputs(screen(base, o, by_scale, s, a).c_str(), stdout);
  if (!o.out.empty()) io::write_output(o.out + "/capacity.csv", csv(by_scale));
  return 0;
}

}  // namespace kvtwin::sim::cli
