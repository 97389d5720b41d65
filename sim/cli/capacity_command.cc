#include "sim/cli/capacity_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "model/check.h"
#include "sim/cli/common.h"
#include "sim/cli/grid.h"
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
  bool more_helps;  // find the least that holds (a resource); else the most (the rate, a latency)
  bool rate;        // the key is workload.rate_scale: its notes, its cost per request served
  bool chosen;      // --most or --least was given
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

// `base` with the key at `x` as probed, valid and one vLLM starts with; else throws the InputError
// of the scenario's validation (a tensor-parallel size that does not divide the heads, a CPU pool
// below one byte) or of check_vllm_starts, as a plain run would.
scenario::Scenario scenario_at(const Axis& a, const scenario::Scenario& base, double x) {
  // Keys whose 0 is not an amount but a default or "no limit": a search must not walk into it.
  static const std::map<std::string, std::string> kZeroMeans = {
      {"vllm.num_gpu_blocks", "the pool derived from memory"},
      {"vllm.max_num_seqs", "vLLM's default"},
      {"vllm.long_prefill_token_threshold", "no cap"},
      {"workload.max_requests", "every request"},
      {"workload.max_duration_s", "the whole trace"},
  };
  if (x == 0) {
    auto it = kZeroMeans.find(a.field->key);
    if (it != kZeroMeans.end())
      throw InputError("--for", 0, a.field->key, "0 is not an amount here: it means " + it->second);
  }
  scenario::Scenario s = base;
  scenario::apply_override(&s, a.field->key + "=" + value_text(a, x), "--for");
  scenario::validate(s);
  check_vllm_starts(s);
  return s;
}

struct Probe {
  size_t order = 0;  // the order simulated: points/<order>/
  double value = 0;  // of the key searched
  report::Summary summary;
  bool holds = false;
};

using report::window_attainment;

class Search {
 public:
  // Probes write under `out` (none when empty) and run on `jobs` threads; `quiet`: no bar.
  // `on_probe`, when given, is called after each probe's simulation (from the thread that ran
  // it): a grid's bar follows each point's search with it.
  Search(const CapacityOptions& o, const Axis& axis, scenario::Scenario base, std::string out,
         int jobs, bool quiet, std::function<void()> on_probe = {})
      : o_(o),
        axis_(axis),
        base_(std::move(base)),
        out_(std::move(out)),
        jobs_(jobs),
        quiet_(quiet),
        on_probe_(std::move(on_probe)) {}

  // scenario_at(x), or nullopt when it refuses the value; `why`, when given, then gets the
  // reason. The search treats refused values as beyond the key's range while bracketing and
  // skips them while narrowing.
  std::optional<scenario::Scenario> at_value(double x, std::string* why = nullptr) const {
    try {
      return scenario_at(axis_, base_, x);
    } catch (const InputError& e) {
      if (why) *why = e.what();
      return std::nullopt;
    }
  }
  bool accepts(double x, std::string* why = nullptr) const { return at_value(x, why).has_value(); }

  // Simulates the values (in parallel), each one the scenario accepts; returns their indices in
  // probes(), in the order given.
  std::vector<size_t> run(const std::vector<double>& values) {
    const size_t first = probes_.size();
    std::vector<scenario::Scenario> scenarios;
    for (double x : values) {
      std::optional<scenario::Scenario> s = at_value(x);
      KVTWIN_CHECK(s.has_value()) << "probe of a refused value " << value_text(axis_, x);
      probes_.push_back(Probe{probes_.size(), x, {}, false});
      scenarios.push_back(std::move(*s));
    }
    PointsProgress progress("kvtwin capacity", quiet_, values.size());
    parallel_for(values.size(), jobs_, [&](size_t i) {
      Probe& p = probes_[first + i];
      scenario::Scenario& s = scenarios[i];
      std::string dir = out_.empty() ? "" : out_ + "/points/" + std::to_string(p.order);
      if (!dir.empty()) {  // each probe's summary and scenario; not the heavy outputs
        s.output.chrome_trace = false;
        s.output.plots = false;
      }
      p.summary = simulate(s, o_.trace, dir, true, nullptr, {}, progress.reporter(i));
      p.holds = window_attainment(p.summary) >= o_.slo_attainment && !p.summary.load.saturated;
      progress.point(i, 1.0);
      if (on_probe_) on_probe_();
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
  const std::string out_;
  const int jobs_;
  const bool quiet_;
  const std::function<void()> on_probe_;
  std::vector<Probe> probes_;
};

// The search's answer: `ok` holds and `bad` fails, neighbours on the axis among the values the
// scenario accepts (both set); or only one of them when every value to the bound held (ok) or
// none did (bad); indices into probes. `at_refusal`: the bound is the last value the scenario
// accepts, not the field's, and `bound_refusal` says why the next was refused. `skipped`: values
// between ok and bad it refused, and `skipped_refusal` the first one's reason.
struct Answer {
  std::optional<size_t> ok, bad;
  bool at_refusal = false;
  std::string bound_refusal;
  std::vector<double> skipped;
  std::string skipped_refusal;
  // Bracketing upward stopped because two neighbouring probes gave the same run (doubling the
  // key no longer changed it): indices of the two.
  std::optional<std::pair<size_t, size_t>> same_run;
};

// Whether two probes ran the same: every figure the search or its outputs read is equal.
bool same_run(const Probe& x, const Probe& y) {
  const report::Summary& a = x.summary;
  const report::Summary& b = y.summary;
  return a.finished == b.finished && a.requests == b.requests &&
         a.slo_attainment == b.slo_attainment && a.load.offered_rate == b.load.offered_rate &&
         a.load.saturated == b.load.saturated && a.request_throughput == b.request_throughput &&
         a.ttft.p50 == b.ttft.p50 && a.ttft.p99 == b.ttft.p99 && a.tpot.p50 == b.tpot.p50 &&
         a.e2e.p50 == b.e2e.p50 && a.gpu_hit_rate == b.gpu_hit_rate &&
         a.lmcache_hit_rate == b.lmcache_hit_rate && a.tier_bytes_peak == b.tier_bytes_peak;
}

// Accepted integers strictly between a and b (either order), at most `n`, spaced evenly by rank
// from a toward b; for an integer key whose log-spaced candidates were all refused.
std::vector<double> accepted_integers_between(const Search* s, double a, double b, int n) {
  constexpr double kMaxScan = 4096;  // integers examined at most
  std::vector<double> all;
  const double step = a < b ? 1 : -1;
  for (double v = a + step; (a < b ? v < b : v > b) && std::abs(v - a) <= kMaxScan; v += step)
    if (s->accepts(v)) all.push_back(v);
  std::vector<double> out;
  const size_t k = std::min<size_t>(all.size(), static_cast<size_t>(n));
  for (size_t i = 0; i < k; ++i) out.push_back(all[(i + 1) * all.size() / (k + 1)]);
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The accepted value nearest `bad` between `good` (which the scenario accepts) and `bad` (which it
// refuses), found by halving the interval on acceptance alone (no run): within a factor
// 1 + precision of the last refused one (a number key) or its neighbour (an integer key). `why`
// gets the last refused value's reason. A bracket that meets a refusal probes this edge before it
// ends: with 24 GB the scenario refuses a max_model_len of 32,768, but one of 29,000 fits and
// holds where the 16,384 before it did not.
double accepted_edge(const Search* s, const Axis& axis, double good, double bad, double precision,
                     std::string* why) {
  for (int i = 0; i < 200; ++i) {
    if (axis.integer ? std::abs(bad - good) <= 1
                     : std::max(good, bad) / std::min(good, bad) <= 1 + precision)
      break;
    const double mid =
        round_value(axis, good > 0 && bad > 0 ? std::sqrt(good * bad) : (good + bad) / 2);
    if (mid == good || mid == bad) break;
    std::string w;
    if (s->accepts(mid, &w)) {
      good = mid;
    } else {
      bad = mid;
      *why = w;
    }
  }
  return good;
}

// Halvings of a number key before the next probe is its lower bound (2^-20: a millionth).
constexpr int kMaxHalvings = 20;

Answer search(Search* s, const Axis& axis, double x0, int n, double precision) {
  Answer a;
  const size_t start = s->run({x0})[0];
  const bool held = s->at(start).holds;
  (held ? a.ok : a.bad) = start;
  // Bracket: doublings or halvings from x0, n per round, away from the side x0 is on: toward
  // less help while it holds, toward more while it fails. An integer key halves to its floor.
  const bool up = held != axis.more_helps;  // a most search rises while it holds; a least falls
  double last = x0;
  bool refused = false;  // a value the scenario refuses ends the bracket after its round
  std::string why;
  size_t previous = start;  // the bracket's last probe
  for (int k = 1; !(a.ok && a.bad); k += n) {
    std::vector<double> values;
    for (int j = k; j < k + n; ++j) {
      const double step = std::ldexp(1.0, j);
      double v =
          round_value(axis, up ? x0 * step : (axis.integer ? std::floor(x0 / step) : x0 / step));
      // A number key halved past a millionth of x0 goes to its bound at once, when the scenario
      // accepts it: halving toward a bound of 0 would never reach it (a disk size whose every
      // value holds took 1,025 probes, down through the denormals).
      if (!up && !axis.integer && j > kMaxHalvings && v > axis.field->min &&
          s->accepts(axis.field->min))
        v = axis.field->min;
      // A step past a bound probes the bound itself, when the scenario accepts it, so that a
      // search which never changed its verdict ends there ("up to 1", not 0.64, for a share).
      if (v > axis.field->max || v < axis.field->min) {
        const double bound = v > axis.field->max ? axis.field->max : axis.field->min;
        if (last == bound || !s->accepts(bound)) break;
        v = bound;
      }
      if (v == last) break;
      if (!s->accepts(v, &why)) {  // beyond what the scenario accepts: a bound as well
        refused = true;
        const double edge = accepted_edge(s, axis, last, v, precision, &why);
        if (edge != last) values.push_back(last = edge);
        break;
      }
      values.push_back(last = v);
    }
    if (values.empty()) {  // the bound: every (or no) value held
      a.at_refusal = refused;
      a.bound_refusal = why;
      return a;
    }
    for (size_t i : s->run(values)) {
      if (s->at(i).holds == held) {
        (held ? a.ok : a.bad) = i;
        // A doubling that changed nothing: neither will the next ones, in all likelihood (more
        // instances than the trace keeps busy, more requests than it holds). Only upward: runs
        // that more of a key leaves alike can still differ with less of it.
        if (up && !a.same_run && same_run(s->at(previous), s->at(i)))
          a.same_run = std::make_pair(previous, i);
        previous = i;
        continue;
      }
      (held ? a.bad : a.ok) = i;
      a.same_run.reset();  // the verdict changed after all: narrow as usual
      break;
    }
    if (a.same_run) return a;
    if (refused && !(a.ok && a.bad)) {
      a.at_refusal = true;
      a.bound_refusal = why;
      return a;
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
      if (!inside || !onward) continue;
      if (s->accepts(v, &why)) {
        values.push_back(v);
      } else if (std::find(a.skipped.begin(), a.skipped.end(), v) == a.skipped.end()) {
        if (a.skipped.empty()) a.skipped_refusal = why;
        a.skipped.push_back(v);
      }
    }
    if (values.empty() && axis.integer) values = accepted_integers_between(s, ok, bad, n);
    if (values.empty()) break;  // ok and bad are neighbours among the accepted values
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

// "holds", or why not: the finished requests missed the SLOs, or they met them and the rejected
// or failed ones pulled the share below the target, or the queue grew.
std::string verdict(const Probe& p, double target) {
  if (p.holds) return "holds";
  std::string why;
  const report::Summary& s = p.summary;
  if (window_attainment(s) < target) {
    if (s.slo_attainment < target || (!s.rejected && !s.failed))
      why = "SLOs";
    else
      why = s.rejected && s.failed ? "rejected, failed" : s.rejected ? "rejected" : "failed";
  }
  if (s.load.saturated) why += why.empty() ? "saturated" : ", saturated";
  return "fails: " + why;
}

std::string csv(const Axis& axis, const std::vector<const Probe*>& by_value) {
  std::string out = "probe," + axis.field->key +
                    ",offered_requests_per_s,requests_per_s,finished,rejected,failed,"
                    "slo_attainment,window_attainment,ttft_p50_ms,ttft_p99_ms,tpot_p50_ms,"
                    "queue_q1_ms,queue_q4_ms,saturated,holds,total_hit_rate" +
                    resource_header() + "\n";
  char buf[512];
  for (const Probe* p : by_value) {
    const report::Summary& s = p->summary;
    std::snprintf(buf, sizeof buf,
                  "%zu,%s,%.6f,%.6f,%llu,%llu,%llu,%.6f,%.6f,%.3f,%.3f,%.3f,%.3f,%.3f,%d,%d,%.6f",
                  p->order, value_text(axis, p->value).c_str(), s.load.offered_rate,
                  s.request_throughput, static_cast<unsigned long long>(s.finished),
                  static_cast<unsigned long long>(s.rejected),
                  static_cast<unsigned long long>(s.failed), s.slo_attainment, window_attainment(s),
                  s.ttft.p50, s.ttft.p99, s.tpot.p50, s.load.queue_ms_by_arrival_quarter[0],
                  s.load.queue_ms_by_arrival_quarter[3], s.load.saturated ? 1 : 0, p->holds ? 1 : 0,
                  s.gpu_hit_rate + s.lmcache_hit_rate);
    out += buf + resource_columns(s) + "\n";
  }
  return out;
}

// printf onto a string.
class Lines {
 public:
  template <typename... Args>
  void operator()(const char* fmt, Args... args) {
    char buf[512];
    std::snprintf(buf, sizeof buf, fmt, args...);
    out += buf;
  }
  std::string out;
};

// The key's last part names the column and the answer ("rate_scale", "instances").
std::string short_name(const Axis& axis) {
  const std::string& key = axis.field->key;
  return key.substr(key.find('.') + 1);
}

// One search: every probe by value, and the answer.
struct Outcome {
  std::unique_ptr<Search> search;
  std::vector<const Probe*> by_value;
  Answer answer;
  const Probe* ok() const { return answer.ok ? &search->at(*answer.ok) : nullptr; }
  const Probe* bad() const { return answer.bad ? &search->at(*answer.bad) : nullptr; }
};

// The scenario's value of the key searched, as probed: the search's start. Throws InputError
// unless it is above 0 and scenario_at accepts it (then scenario_at's error as it is).
double start_of(const Axis& axis, const scenario::Scenario& s) {
  const std::string start = axis.field->get(s);
  const double x0 = round_value(axis, std::strtod(start.c_str(), nullptr));
  if (!(x0 > 0))
    throw InputError("--for", 0, axis.field->key,
                     "the scenario's value is " + start +
                         "; the search doubles and halves it: give a start above 0 with --set");
  scenario_at(axis, s, x0);
  return x0;
}

// A search whose verdict never changed: "every value probed holds, down to instances 1 (the
// field's bound)", or "no value probed holds, ...", with where it stopped.
std::string bound_sentence(const Axis& axis, const Outcome& r) {
  const char* where = r.answer.same_run     ? "where the key stopped changing the run"
                      : r.answer.at_refusal ? "the scenario's limit"
                                            : "the field's bound";
  const bool all = r.ok() != nullptr;
  return std::string(all ? "every" : "no") + " value probed holds, " +
         (all == axis.more_helps ? "down" : "up") + " to " + short_name(axis).substr(0, 30) + " " +
         value_text(axis, (all ? r.ok() : r.bad())->value) + " (" + where + ")";
}

Outcome run_search(const CapacityOptions& o, const Axis& axis, const scenario::Scenario& base,
                   const std::string& out, int jobs, bool quiet,
                   std::function<void()> on_probe = {}) {
  const double x0 = start_of(axis, base);
  Outcome r;
  r.search = std::make_unique<Search>(o, axis, base, out, jobs, quiet, std::move(on_probe));
  r.answer = search(r.search.get(), axis, x0, o.probes, o.precision);
  for (const Probe& p : r.search->probes()) r.by_value.push_back(&p);
  std::stable_sort(r.by_value.begin(), r.by_value.end(),
                   [](const Probe* x, const Probe* y) { return x->value < y->value; });
  if (!out.empty()) io::write_output(out + "/capacity.csv", csv(axis, r.by_value));
  return r;
}

// The title and the target; `slo_varies`: a grid varies an slo.* key, so the SLOs are each
// point's.
void title(Lines& line, const scenario::Scenario& base, const CapacityOptions& o, const Axis& axis,
           const char* where, bool slo_varies = false) {
  line("kvtwin capacity: %s (the %s %.60s that holds%s)\n", base.run.name.c_str(),
       axis.more_helps ? "least" : "most", axis.field->key.c_str(), where);
  if (slo_varies)
    line(
        "target      %.1f%% of requests finished within each point's slo.ttft_ms and "
        "slo.tpot_ms (a\n"
        "            rejected or failed one misses); a queue that does not grow through the run\n",
        100 * o.slo_attainment);
  else
    line(
        "target      %.1f%% of requests finished with TTFT <= %.6g ms and TPOT <= %.6g ms (a "
        "rejected\n"
        "            or failed one misses); a queue that does not grow through the run\n",
        100 * o.slo_attainment, base.slo.ttft_ms, base.slo.tpot_ms);
}

// The probes on the wrong side of the answer, by value: beyond the failing neighbour and held, or
// before the holding one and failed. Any means the verdict was not monotone along the key.
std::vector<const Probe*> wrong_side(const Axis& axis, const Outcome& r) {
  // Values are compared as "toward failing": rising in a most search, falling in a least one.
  const double sign = axis.more_helps ? -1 : 1;
  std::vector<const Probe*> wrong;
  for (const Probe* p : r.by_value) {
    const bool past_bad = r.bad() && sign * (p->value - r.bad()->value) > 0;
    const bool before_ok = r.ok() && sign * (p->value - r.ok()->value) < 0;
    if ((past_bad && p->holds) || (before_ok && !p->holds)) wrong.push_back(p);
  }
  return wrong;
}

// The notes under an answer: a window in scaled time, and each probe on the wrong side of the
// answer. `who` starts each probe's note ("" or "point 2: ").
void notes(Lines& line, const scenario::Scenario& base, const Axis& axis, const Outcome& r,
           const std::string& who, double target) {
  const std::string name = short_name(axis);
  if (axis.rate && (base.workload.start_s > 0 || base.workload.max_duration_s > 0))
    line(
        "note        %sworkload.start_s and max_duration_s are in scaled time: each rate probed\n"
        "            replays another part of the trace (workload.max_requests keeps the same "
        "ones)\n",
        who.c_str());
  // The answer held on a window so short that most of its requests were still in the system
  // when the last one arrived (a system that keeps up holds about rate x E2E, a small share of a
  // long window): it served one burst, which says little about the rate it can sustain.
  if (r.ok()) {
    const report::Summary& m = r.ok()->summary;
    if (m.finished >= 4 && 2 * m.load.in_system_at_last_arrival > m.finished)
      line(
          "note        %sat %s %s, %llu of the %llu finished requests were still in the system "
          "at\n"
          "            the last arrival: the window is one burst, not a sustained load; replay "
          "more\n"
          "            requests (workload.max_requests) before trusting the answer\n",
          who.c_str(), name.c_str(), value_text(axis, r.ok()->value).c_str(),
          static_cast<unsigned long long>(m.load.in_system_at_last_arrival),
          static_cast<unsigned long long>(m.finished));
  }
  // At every probe the rejected requests alone left too few to reach the target (prompts over
  // vllm.max_model_len, say): the key searched was not what stood in the way. (Then no value
  // held: a holding probe finished a share >= target of its requests.)
  const auto too_many_rejected = [&](const Probe* p) {
    const report::Summary& m = p->summary;
    return m.requests > 0 &&
           static_cast<double>(m.requests - m.rejected) < target * static_cast<double>(m.requests);
  };
  const bool rejected_everywhere =
      std::all_of(r.by_value.begin(), r.by_value.end(), too_many_rejected);
  // No rate held: arrivals that share an instant stay together at any rate_scale (unless the
  // rejected requests were what kept it from holding).
  if (axis.rate && !r.ok() && !rejected_everywhere &&
      r.bad()->summary.load.largest_arrival_group >= report::kBurstHint)
    line(
        "note        %sup to %llu requests arrive at one instant at every rate; "
        "workload.arrivals =\n"
        "            \"spread\" spreads them over the gap to the next\n",
        who.c_str(), static_cast<unsigned long long>(r.bad()->summary.load.largest_arrival_group));
  // Values the scenario refused, a bound short of the field's or skipped between the answer's
  // neighbours: each note gives its refusal, without the "--for: " lead, in lines of at most 100
  // columns.
  auto reason = [&](std::string why) {
    if (why.starts_with("--for: ")) why.erase(0, 7);
    while (!why.empty()) {
      size_t cut = why.size();
      if (cut > 88) {
        cut = why.rfind(' ', 88);
        if (cut == std::string::npos || cut == 0) cut = 88;
      }
      line("            %s\n", why.substr(0, cut).c_str());
      why.erase(0, cut < why.size() && why[cut] == ' ' ? cut + 1 : cut);
    }
  };
  if (rejected_everywhere)
    line(
        "note        %severy probe rejected more than %.1f%% of the requests (prompts over\n"
        "            vllm.max_model_len or the GPU pool): the target was out of reach there\n",
        who.c_str(), 100 * (1 - target));
  // A least search of another key than the rate whose verdict never changed, holding all the way
  // down or failing all the way up: the key may be one more of which hurts.
  if (axis.more_helps && !axis.chosen && !axis.rate && !(r.ok() && r.bad()) &&
      !r.answer.at_refusal && !r.answer.same_run && !rejected_everywhere)
    line(
        "note        %sif more %.30s hurts (a latency, an overhead), --most finds the most that\n"
        "            holds\n",
        who.c_str(), name.c_str());
  if (r.answer.same_run)
    line("note        %s%.30s %s and %s gave the same run: the search stopped there\n", who.c_str(),
         name.c_str(), value_text(axis, r.search->at(r.answer.same_run->first).value).c_str(),
         value_text(axis, r.search->at(r.answer.same_run->second).value).c_str());
  if (r.answer.at_refusal) {
    line("note        %sthe scenario refuses %.30s beyond that value:\n", who.c_str(),
         name.c_str());
    reason(r.answer.bound_refusal);
  }
  if (!r.answer.skipped.empty()) {
    std::vector<double> sorted = r.answer.skipped;
    std::sort(sorted.begin(), sorted.end());
    std::string list;
    for (double v : sorted) list += (list.empty() ? "" : ", ") + value_text(axis, v);
    line("note        %s%.30s %.60s skipped: the scenario refuses them, as in\n", who.c_str(),
         name.c_str(), list.c_str());
    reason(r.answer.skipped_refusal);
  }
  const double answer = (r.ok() ? r.ok() : r.bad())->value;
  for (const Probe* p : wrong_side(axis, r))
    line("note        %s%.30s %s, %s the answer, %s: the verdict is not monotone%s in the key\n",
         who.c_str(), name.c_str(), value_text(axis, p->value).c_str(),
         p->value > answer ? "above" : "below", p->holds ? "held" : "failed",
         who.empty() ? "" : "\n           ");  // a point's note takes two lines
}

// What the holding value costs (scenario [cost]): per hour, and per unit served there.
void cost_line(Lines& line, const report::Cost& c) {
  line("cost        %.2f per hour there\n", c.per_hour);
  if (c.per_thousand_good_requests && c.per_million_output_tokens)
    line("            %s per 1k requests within the SLOs, %s per 1M output tokens\n",
         report::price_text(*c.per_thousand_good_requests).c_str(),
         report::price_text(*c.per_million_output_tokens).c_str());
}

std::string screen(const scenario::Scenario& base, const CapacityOptions& o, const Axis& axis,
                   const Outcome& r) {
  Lines line;
  title(line, base, o, axis, "");
  const std::string name = short_name(axis);
  auto text = [&](const Probe& p) { return value_text(axis, p.value); };
  const int width = static_cast<int>(std::max<size_t>(12, std::min<size_t>(name.size(), 40)));
  line("%*.40s %12s %11s %11s %13s %12s   %s\n", width, name.c_str(), "offered/s", "served/s",
       "meet SLOs", "TTFT p99 ms", "queue q4 s", "verdict");
  for (const Probe* p : r.by_value) {
    const report::Summary& m = p->summary;
    line("%*s %12.3f %11.3f %10.1f%% %13.1f %12.1f   %s\n", width, text(*p).c_str(),
         m.load.offered_rate, m.request_throughput, 100 * window_attainment(m), m.ttft.p99,
         m.load.queue_ms_by_arrival_quarter[3] / 1e3, verdict(*p, o.slo_attainment).c_str());
  }
  if (r.ok() && r.bad()) {
    line("capacity    %.30s %s holds: %.3f req/s offered, %.1f%% meet the SLOs\n", name.c_str(),
         text(*r.ok()).c_str(), r.ok()->summary.load.offered_rate,
         100 * window_attainment(r.ok()->summary));
    line("            %.30s %s %s (%.3f req/s offered)\n", name.c_str(), text(*r.bad()).c_str(),
         verdict(*r.bad(), o.slo_attainment).c_str(), r.bad()->summary.load.offered_rate);
  } else {
    line("capacity    %s\n", bound_sentence(axis, r).c_str());
  }
  if (r.ok() && r.ok()->summary.cost.priced) cost_line(line, r.ok()->summary.cost);
  notes(line, base, axis, r, "", o.slo_attainment);
  return line.out;
}

// --vary: one search per point of the grid.
struct GridSearch {
  std::vector<GridAxis> axes;
  std::vector<std::vector<std::string>> points;
  std::vector<scenario::Scenario> scenarios;
  std::vector<Outcome> outcomes;
};

// A frontier.csv line without its leading `point` column (columns in sim/report/README.md):
// point i's, or with nullptr the header's. The plot reads these, the grid's keys first.
std::string frontier_fields(const Axis& axis, const GridSearch& g, const size_t* i) {
  if (i == nullptr) {
    std::string out;
    for (const std::string& key : grid_keys(g.axes)) out += key + ",";
    return out +
           "holds,fails,offered_requests_per_s,requests_per_s,slo_attainment,window_attainment,"
           "ttft_p99_ms,total_hit_rate" +
           resource_header() + ",probes,not_monotone\n";
  }
  const Outcome& r = g.outcomes[*i];
  std::string out;
  for (const std::string& v : g.points[*i]) out += v + ",";
  out += (r.ok() ? value_text(axis, r.ok()->value) : "") + ",";
  out += (r.bad() ? value_text(axis, r.bad()->value) : "") + ",";
  char buf[256];
  if (r.ok()) {
    const report::Summary& m = r.ok()->summary;
    std::snprintf(buf, sizeof buf, "%.6f,%.6f,%.6f,%.6f,%.3f,%.6f", m.load.offered_rate,
                  m.request_throughput, m.slo_attainment, window_attainment(m), m.ttft.p99,
                  m.gpu_hit_rate + m.lmcache_hit_rate);
    out += buf + resource_columns(m) + ",";
  } else {  // no holding probe: its columns empty
    const std::string header = resource_header();
    out += ",,,,," + std::string(std::count(header.begin(), header.end(), ','), ',') + ",";
  }
  std::snprintf(buf, sizeof buf, "%zu,%d\n", r.by_value.size(),
                wrong_side(axis, r).empty() ? 0 : 1);
  return out + buf;
}

// The point whose answer costs least: for a search of another key than the rate (each point at
// its scenario's rate) the least per hour, for a rate search the least per thousand requests
// within the SLOs at the rate found; the first on a tie. None when no holding probe is priced
// (with a figure to rank).
std::optional<size_t> cheapest_point(const Axis& axis, const GridSearch& g) {
  std::optional<size_t> best;
  double least = 0;
  for (size_t i = 0; i < g.outcomes.size(); ++i) {
    const Probe* ok = g.outcomes[i].ok();
    if (ok == nullptr || !ok->summary.cost.priced) continue;
    const report::Cost& c = ok->summary.cost;
    if (axis.rate && !c.per_thousand_good_requests) continue;
    const double v = axis.rate ? *c.per_thousand_good_requests : c.per_hour;
    if (!best || v < least) {
      best = i;
      least = v;
    }
  }
  return best;
}

std::string frontier_screen(const scenario::Scenario& base, const CapacityOptions& o,
                            const Axis& axis, const GridSearch& g) {
  Lines line;
  const std::vector<std::string> keys = grid_keys(g.axes);
  const bool slo_varies = std::any_of(keys.begin(), keys.end(),
                                      [](const std::string& k) { return k.starts_with("slo."); });
  title(line, base, o, axis, " at each point", slo_varies);
  const std::vector<int> width = grid_widths(keys, g.points);
  // With prices, what each answer costs, and the cheapest point: for another key than the rate
  // (the rate fixed) the least per hour, for the rate the least per request within the SLOs.
  const std::optional<size_t> cheapest = cheapest_point(axis, g);
  const bool priced = cheapest.has_value();
  line("point  ");
  for (size_t k = 0; k < keys.size(); ++k) line("%-*s  ", width[k], keys[k].c_str());
  line("%10s %10s %10s %10s %12s", "holds", "fails", "offered/s", "meet SLOs", "TTFT p99 ms");
  line(priced ? " %10s %10s\n" : "\n", "cost/h", "/1k good");
  for (size_t i = 0; i < g.points.size(); ++i) {
    const Outcome& r = g.outcomes[i];
    line("%5zu  ", i);
    for (size_t k = 0; k < keys.size(); ++k) line("%-*s  ", width[k], g.points[i][k].c_str());
    line("%10s %10s", r.ok() ? value_text(axis, r.ok()->value).c_str() : "-",
         r.bad() ? value_text(axis, r.bad()->value).c_str() : "-");
    if (r.ok())
      line(" %10.3f %9.1f%% %12.1f", r.ok()->summary.load.offered_rate,
           100 * window_attainment(r.ok()->summary), r.ok()->summary.ttft.p99);
    else
      line(" %10s %10s %12s", "-", "-", "-");
    if (!priced) {
      line("\n");
      continue;
    }
    // The holding probe's cost; "-" where there is none.
    static const report::Cost kNone;
    const report::Cost& c = r.ok() ? r.ok()->summary.cost : kNone;
    line(" %10s %10s\n", report::hourly_cell(c).c_str(),
         report::unit_cell(c.per_thousand_good_requests).c_str());
  }
  line("holds       the %s %.40s found to hold; fails: its neighbour that failed\n",
       axis.more_helps ? "least" : "most", short_name(axis).c_str());
  if (priced) {
    const report::Cost& c = g.outcomes[*cheapest].ok()->summary.cost;
    char head[128];
    if (!axis.rate)
      std::snprintf(head, sizeof head, "cheapest    point %zu, at %.2f per hour:", *cheapest,
                    c.per_hour);
    else
      std::snprintf(head, sizeof head,
                    "cheapest    point %zu, at %s per 1k requests within the SLOs:", *cheapest,
                    report::price_text(*c.per_thousand_good_requests).c_str());
    std::vector<std::string> values;  // the point's, after it
    for (size_t k = 0; k < keys.size(); ++k)
      values.push_back(keys[k] + "=" + g.points[*cheapest][k]);
    line.out += report::screen_list(head, values);
  }
  for (size_t i = 0; i < g.points.size(); ++i) {
    const Outcome& r = g.outcomes[i];
    if (!r.ok() || !r.bad())
      line("note        point %zu: %s\n", i, bound_sentence(axis, r).c_str());
    notes(line, g.scenarios[i], axis, r, "point " + std::to_string(i) + ": ", o.slo_attainment);
  }
  return line.out;
}

void write_frontier(const std::string& dir, const scenario::Scenario& base, const Axis& axis,
                    const GridSearch& g) {
  const std::string header = frontier_fields(axis, g, nullptr);
  std::string csv = "point," + header, data;
  for (size_t i = 0; i < g.points.size(); ++i) {
    const std::string fields = frontier_fields(axis, g, &i);
    csv += std::to_string(i) + "," + fields;
    data += fields;
  }
  io::write_output(dir + "/frontier.csv", csv);
  if (!base.output.plots) return;
  std::vector<GridPlotPanel> panels = {
      {std::string(axis.more_helps ? "least " : "most ") + axis.field->key + " that holds",
       "holds"},
      // The rate found, in requests/s; another key's search holds the rate, so its hit rate.
      axis.rate ? GridPlotPanel{"offered requests/s there", "offered_requests_per_s"}
                : GridPlotPanel{"hit rate (GPU + LMCache) there", "total_hit_rate"}};
  // With prices, what the screen ranks the points by.
  if (cheapest_point(axis, g))
    panels.push_back(axis.rate ? GridPlotPanel{"cost per 1k requests within the SLOs there",
                                               "cost_per_k_good_requests"}
                               : GridPlotPanel{"cost per hour there", "cost_per_hour"});
  write_grid_plots(dir, "frontier", "kvtwin capacity", g.axes, g.points, header, data, panels);
}

Axis axis_of(const std::string& key, bool most, bool least) {
  if (most && least) throw InputError("--most", 0, key, "give --most or --least, not both");
  const scenario::FieldSpec* f = scenario::find_field(key);
  if (f == nullptr)
    throw InputError("--for", 0, key,
                     "unknown key" + scenario::did_you_mean(scenario::suggest_keys(key)));
  if (f->type != scenario::FieldType::kInt && f->type != scenario::FieldType::kDouble)
    throw InputError("--for", 0, key, "expected a numeric key");
  if (key.starts_with("cost."))  // every probe would be the same run
    throw InputError("--for", 0, key,
                     "a price changes no run; search a resource (cluster.instances, a tier's "
                     "size) and read what its answer costs, or --vary prices");
  const bool rate = key == kRateKey;
  const bool more_helps = least || (!most && !rate);
  return Axis{f, f->type == scenario::FieldType::kInt, more_helps, rate, most || least};
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
  const Axis axis = axis_of(o.key, o.most, o.least);
  const scenario::Scenario base = load_scenario(o.scenario, o.sets);
  if (o.vary.empty()) {
    const Outcome r = run_search(o, axis, base, o.out, o.jobs, o.quiet);
    if (!o.quiet) std::fputs(screen(base, o, axis, r).c_str(), stdout);
    return 0;
  }
  // The grid: every point validated (and its start checked) before anything runs.
  GridSearch g;
  g.axes = parse_grid(o.vary, "--vary");
  for (const std::string& key : grid_keys(g.axes))
    if (key == axis.field->key)
      throw InputError("--vary", 0, key, "is the key searched (--for); vary other keys");
  g.points = grid_points(g.axes);
  for (const std::vector<std::string>& p : g.points) {
    g.scenarios.push_back(grid_scenario(base, g.axes, p, "--vary"));
    start_of(axis, g.scenarios.back());
  }
  // Points run side by side, each search on its share of the threads: a search's probes depend
  // on its point alone, so the split changes no byte.
  const size_t n = g.points.size();
  const int outer = static_cast<int>(std::min<size_t>(n, static_cast<size_t>(std::max(o.jobs, 1))));
  const int inner = std::max(1, o.jobs / outer);
  g.outcomes.resize(n);
  // The bar follows each point's search probe by probe. How many probes a search takes is not
  // known before it ends (those of the stop-33 report's frontiers took 3 to 10), so a point that
  // has run d shows d / (d + 3): rising with each probe, short of done until the search returns.
  PointsProgress progress("kvtwin capacity", o.quiet, n);
  std::vector<int> probes_done(n, 0);
  std::mutex probes_mu;
  parallel_for(n, outer, [&](size_t i) {
    const std::string dir = o.out.empty() ? "" : o.out + "/points/" + std::to_string(i);
    auto on_probe = [&, i] {  // under the lock, so that a point's share never goes back
      std::lock_guard<std::mutex> lock(probes_mu);
      const double d = ++probes_done[i];
      progress.point(i, d / (d + 3));
    };
    g.outcomes[i] = run_search(o, axis, g.scenarios[i], dir, inner, true,
                               progress.enabled() ? std::function<void()>(on_probe) : nullptr);
    progress.point(i, 1.0);
  });
  progress.finish();
  if (!o.quiet) std::fputs(frontier_screen(base, o, axis, g).c_str(), stdout);
  if (!o.out.empty()) write_frontier(o.out, base, axis, g);
  return 0;
}

}  // namespace kvtwin::sim::cli
