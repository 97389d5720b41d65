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
#include "sim/scenario/key_suggestion.h"
#include "sim/scenario/scenario_fields.h"
#include "sim/scenario/scenario_loader.h"

namespace kvtwin::sim::cli {
namespace {

constexpr const char* kRateKey = "workload.rate_scale";

// The key searched (its field gives the bounds and whether it is an integer), and which way
// helps.
struct Axis {
  const scenario::FieldSpec* field;
  bool integer;
  bool more_helps;  // a resource (find the least that holds); else the rate (the most)
};

// A computed value as probed: an integer key's nearest integer, else 5 significant digits. What
// the table and capacity.csv print is the very value simulated, so `--set KEY=<it>` repeats a
// probe exactly.
std::string value_text(const Axis& a, double x) {
  char buf[32];
  if (a.integer)
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(std::llround(x)));
  else
    std::snprintf(buf, sizeof buf, "%.5g", x);
  return buf;
}
double round_value(const Axis& a, double x) {
  return std::strtod(value_text(a, x).c_str(), nullptr);
}

std::string option_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

struct Probe {
  size_t order = 0;  // the order simulated: points/<order>/
  double value = 0;  // of the key searched
  report::Summary summary;
  bool holds = false;
};

class Search {
 public:
  Search(const CapacityOptions& o, const Axis& axis, scenario::Scenario base)
      : o_(o), axis_(axis), base_(std::move(base)) {}

  // Simulates the values (in parallel); returns their indices in probes(), in the order given.
  std::vector<size_t> run(const std::vector<double>& values) {
    const size_t first = probes_.size();
    std::vector<scenario::Scenario> scenarios;
    for (double x : values) {
      probes_.push_back(Probe{probes_.size(), x, {}, false});
      scenarios.push_back(base_);
      scenario::apply_override(&scenarios.back(), axis_.field->key + "=" + value_text(axis_, x),
                               "--for");
      scenario::validate(scenarios.back());
    }
    PointsProgress progress("kvtwin capacity", o_.quiet, values.size());
    parallel_for(values.size(), o_.jobs, [&](size_t i) {
      Probe& p = probes_[first + i];
      scenario::Scenario& s = scenarios[i];
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
    std::vector<size_t> index(values.size());
    for (size_t i = 0; i < values.size(); ++i) index[i] = first + i;
    return index;
  }
  const std::vector<Probe>& probes() const { return probes_; }
  const Probe& at(size_t i) const { return probes_[i]; }

 private:
  const CapacityOptions& o_;
  const Axis& axis_;
  const scenario::Scenario base_;
  std::vector<Probe> probes_;
};

// The search's answer: `ok` holds and `bad` fails, neighbours on the axis (both set); or only
// one of them when every value to the bound held (ok) or none did (bad); indices into probes.
struct Answer {
  std::optional<size_t> ok, bad;
};

Answer search(Search* s, const Axis& axis, double x0, int n, double precision) {
  Answer a;
  const size_t start = s->run({x0})[0];
  const bool held = s->at(start).holds;
  (held ? a.ok : a.bad) = start;
  // Bracket: doublings or halvings from x0, n per round, away from the side x0 is on: toward
  // less help while it holds, toward more while it fails. An integer key halves to its floor.
  const bool up = held != axis.more_helps;  // the rate rises while it holds; a resource falls
  double last = x0;
  for (int k = 1; !(a.ok && a.bad); k += n) {
    std::vector<double> values;
    for (int j = k; j < k + n; ++j) {
      const double step = std::ldexp(1.0, j);
      const double v =
          round_value(axis, up ? x0 * step : (axis.integer ? std::floor(x0 / step) : x0 / step));
      if (v > axis.field->max || v < axis.field->min || v == last) break;
      values.push_back(last = v);
    }
    if (values.empty()) return a;  // the bound: every (or no) value held
    for (size_t i : s->run(values)) {
      if (s->at(i).holds == held) {
        (held ? a.ok : a.bad) = i;
        continue;
      }
      (held ? a.bad : a.ok) = i;
      break;
    }
  }
  // Narrow: n values spaced evenly in log from ok toward bad; the first failure becomes bad.
  for (;;) {
    const double ok = s->at(*a.ok).value, bad = s->at(*a.bad).value;
    if (std::max(ok, bad) / std::min(ok, bad) <= 1 + precision) break;
    std::vector<double> values;
    for (int i = 1; i <= n; ++i) {
      const double v = round_value(axis, ok * std::pow(bad / ok, static_cast<double>(i) / (n + 1)));
      const bool inside = ok < bad ? (v > ok && v < bad) : (v < ok && v > bad);
      const bool onward = values.empty() || (ok < bad ? v > values.back() : v < values.back());
      if (inside && onward) values.push_back(v);
    }
    if (values.empty()) break;  // ok and bad are neighbours on the axis
    for (size_t i : s->run(values)) {
      if (!s->at(i).holds) {
        a.bad = i;
        break;
      }
      a.ok = i;
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

std::string csv(const Axis& axis, const std::vector<const Probe*>& by_value) {
  std::string out = "probe," + axis.field->key +
                    ",offered_requests_per_s,requests_per_s,finished,slo_attainment,"
                    "ttft_p50_ms,ttft_p99_ms,tpot_p50_ms,queue_q1_ms,queue_q4_ms,saturated,holds\n";
  char buf[512];
  for (const Probe* p : by_value) {
    const report::Summary& s = p->summary;
    std::snprintf(buf, sizeof buf, "%zu,%s,%.6f,%.6f,%llu,%.6f,%.3f,%.3f,%.3f,%.3f,%.3f,%d,%d\n",
                  p->order, value_text(axis, p->value).c_str(), s.load.offered_rate,
                  s.request_throughput, static_cast<unsigned long long>(s.finished),
                  s.slo_attainment, s.ttft.p50, s.ttft.p99, s.tpot.p50,
                  s.load.queue_ms_by_arrival_quarter[0], s.load.queue_ms_by_arrival_quarter[3],
                  s.load.saturated ? 1 : 0, p->holds ? 1 : 0);
    out += buf;
  }
  return out;
}

std::string screen(const scenario::Scenario& base, const CapacityOptions& o, const Axis& axis,
                   const std::vector<const Probe*>& by_value, const Search& s, const Answer& a) {
  std::string out;
  char buf[512];
  auto line = [&](const char* fmt, auto... args) {
    std::snprintf(buf, sizeof buf, fmt, args...);
    out += buf;
  };
  // The key's last part names the column and the answer ("rate_scale", "instances").
  const std::string& key = axis.field->key;
  const std::string name = key.substr(key.find('.') + 1);
  auto text = [&](const Probe& p) { return value_text(axis, p.value); };
  line("kvtwin capacity: %s (the %s %.60s that holds)\n", base.run.name.c_str(),
       axis.more_helps ? "least" : "most", key.c_str());
  line(
      "target      %.1f%% of finished requests with TTFT <= %.6g ms and TPOT <= %.6g ms; a queue\n"
      "            that does not grow through the run\n",
      100 * o.slo_attainment, base.slo.ttft_ms, base.slo.tpot_ms);
  const int width = static_cast<int>(std::max<size_t>(12, std::min<size_t>(name.size(), 40)));
  line("%*.40s %12s %11s %11s %13s %12s   %s\n", width, name.c_str(), "offered/s", "served/s",
       "meet SLOs", "TTFT p99 ms", "queue q4 s", "verdict");
  for (const Probe* p : by_value) {
    const report::Summary& m = p->summary;
    line("%*s %12.3f %11.3f %10.1f%% %13.1f %12.1f   %s\n", width, text(*p).c_str(),
         m.load.offered_rate, m.request_throughput, 100 * m.slo_attainment, m.ttft.p99,
         m.load.queue_ms_by_arrival_quarter[3] / 1e3, verdict(*p, o.slo_attainment).c_str());
  }
  if (a.ok && a.bad) {
    const Probe& ok = s.at(*a.ok);
    const Probe& bad = s.at(*a.bad);
    line("capacity    %.30s %s holds: %.3f req/s offered, %.1f%% meet the SLOs\n", name.c_str(),
         text(ok).c_str(), ok.summary.load.offered_rate, 100 * ok.summary.slo_attainment);
    line("            %.30s %s %s (%.3f req/s offered)\n", name.c_str(), text(bad).c_str(),
         verdict(bad, o.slo_attainment).c_str(), bad.summary.load.offered_rate);
  } else if (a.ok) {
    line("capacity    every value probed holds, %s to %.30s %s (the field's bound)\n",
         axis.more_helps ? "down" : "up", name.c_str(), text(s.at(*a.ok)).c_str());
  } else {
    line("capacity    no value probed holds, %s to %.30s %s (the field's bound)\n",
         axis.more_helps ? "up" : "down", name.c_str(), text(s.at(*a.bad)).c_str());
  }
  // A window in scaled time holds other requests at each rate.
  if (!axis.more_helps && (base.workload.start_s > 0 || base.workload.max_duration_s > 0))
    line(
        "note        workload.start_s and max_duration_s are in scaled time: each rate probed\n"
        "            replays another part of the trace (workload.max_requests keeps the same "
        "ones)\n");
  // Probes on the wrong side of the answer: the verdict was not monotone along the key. Values
  // are compared as "toward failing": the rate rising, a resource falling.
  const double sign = axis.more_helps ? -1 : 1;
  const double answer = s.at(a.ok ? *a.ok : *a.bad).value;
  for (const Probe* p : by_value) {
    const bool past_bad = a.bad && sign * (p->value - s.at(*a.bad).value) > 0;
    const bool before_ok = a.ok && sign * (p->value - s.at(*a.ok).value) < 0;
    if ((past_bad && p->holds) || (before_ok && !p->holds))
      line("note        %.30s %s, %s the answer, %s: the verdict is not monotone in the key\n",
           name.c_str(), text(*p).c_str(), p->value > answer ? "above" : "below",
           p->holds ? "held" : "failed");
  }
  return out;
}

Axis axis_of(const std::string& key) {
  const scenario::FieldSpec* f = scenario::find_field(key);
  if (f == nullptr)
    throw InputError("--for", 0, key,
                     "unknown key" + scenario::did_you_mean(scenario::suggest_keys(key)));
  if (f->type != scenario::FieldType::kInt && f->type != scenario::FieldType::kDouble)
    throw InputError("--for", 0, key, "expected a numeric key");
  return Axis{f, f->type == scenario::FieldType::kInt, key != kRateKey};
}

}  // namespace

int run_capacity(const CapacityOptions& o) {
  if (!(o.slo_attainment > 0 && o.slo_attainment <= 1))
    throw InputError("--slo-attainment", 0, option_text(o.slo_attainment),
                     "expected a share in (0, 1]");
  if (!(o.precision >= 0.001 && o.precision <= 1))
    throw InputError("--precision", 0, option_text(o.precision), "expected 0.001 .. 1");
  if (o.probes < 1 || o.probes > 64)
    throw InputError("--probes", 0, std::to_string(o.probes), "expected 1 .. 64");
  const Axis axis = axis_of(o.key);
  scenario::Scenario base = load_scenario(o.scenario, o.sets);
  const std::string start = axis.field->get(base);
  const double x0 = round_value(axis, std::strtod(start.c_str(), nullptr));
  if (!(x0 > 0))
    throw InputError("--for", 0, o.key,
                     "the scenario's value is " + start +
                         "; the search doubles and halves it: give a start above 0 with --set");
  Search s(o, axis, base);
  const Answer a = search(&s, axis, x0, o.probes, o.precision);
  std::vector<const Probe*> by_value;
  for (const Probe& p : s.probes()) by_value.push_back(&p);
  std::stable_sort(by_value.begin(), by_value.end(),
                   [](const Probe* x, const Probe* y) { return x->value < y->value; });
  if (!o.quiet) std::fputs(screen(base, o, axis, by_value, s, a).c_str(), stdout);
  if (!o.out.empty()) io::write_output(o.out + "/capacity.csv", csv(axis, by_value));
  return 0;
}

}  // namespace kvtwin::sim::cli
