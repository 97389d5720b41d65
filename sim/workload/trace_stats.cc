#include "sim/workload/trace_stats.h"

#include <algorithm>
#include <cstdio>
#include <unordered_set>

namespace kvtwin::sim::workload {

Percentiles percentiles(std::vector<double>* values, PercentileMethod method) {
  Percentiles p;
  if (values->empty()) return p;
  std::sort(values->begin(), values->end());
  double sum = 0;
  for (double v : *values) sum += v;
  const size_t n = values->size();
  auto rank = [&](double percent) {
    if (method == PercentileMethod::kLinear) {
      const double index = percent / 100 * static_cast<double>(n - 1);
      const size_t lo = static_cast<size_t>(std::floor(index));
      const size_t hi = std::min(lo + 1, n - 1);
      const double t = index - static_cast<double>(lo);
      const double a = (*values)[lo], b = (*values)[hi];
      const double diff = b - a;
      return t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
    }
    size_t k = static_cast<size_t>(std::ceil(percent / 100 * static_cast<double>(n)));
    return (*values)[std::min(n, std::max<size_t>(k, 1)) - 1];
  };
  p.mean = sum / static_cast<double>(n);
  p.p50 = rank(50);
  p.p90 = rank(90);
  p.p99 = rank(99);
  p.max = values->back();
  return p;
}

TraceStats compute_trace_stats(Workload* workload, double window_s) {
  TraceStats s;
  s.window_s = window_s;
  std::vector<double> prompts, outputs;
  std::unordered_set<uint64_t> seen, sessions, window;
  SimTime window_len = window_s > 0 ? from_seconds(window_s) : 0;
  int64_t window_index = -1, busiest_index = -1;
  uint64_t window_tokens = 0;
  TraceRequest r;
  ArrivalGroups groups;  // every request read, as the other figures count them
  while (workload->next(&r)) {
    if (s.requests == 0) s.first_arrival = r.arrival;
    groups.add(r.arrival);
    s.last_arrival = r.arrival;
    ++s.requests;
    prompts.push_back(static_cast<double>(r.prompt_tokens));
    outputs.push_back(static_cast<double>(r.output_tokens));
    s.total_prompt_tokens += static_cast<uint64_t>(r.prompt_tokens);
    s.total_output_tokens += static_cast<uint64_t>(r.output_tokens);
    if (r.has_session) sessions.insert(r.session_id);
    if (window_len > 0 && r.arrival / window_len != window_index) {
      window.clear();
      window_tokens = 0;
      window_index = r.arrival / window_len;
    }
    const uint64_t uncovered = static_cast<uint64_t>(std::max<int64_t>(
        0, r.prompt_tokens - static_cast<int64_t>(r.block_ids.size()) * r.block_size));
    s.uncovered_tokens += uncovered;
    window_tokens += uncovered;
    if (!r.block_ids.empty()) {
      ++s.requests_with_ids;
      if (s.block_size == 0) s.block_size = r.block_size;
      s.tokens_with_ids += static_cast<uint64_t>(r.prompt_tokens);
      s.block_refs += r.block_ids.size();
      bool hitting = true;
      for (size_t i = 0; i < r.block_ids.size(); ++i) {
        bool known = seen.count(r.block_ids[i]) > 0;
        if (hitting && known) {
          ++s.prefix_hit_blocks;
          int64_t start = static_cast<int64_t>(i) * r.block_size;
          s.prefix_hit_tokens +=
              static_cast<uint64_t>(std::min<int64_t>(r.block_size, r.prompt_tokens - start));
        } else {
          hitting = false;
        }
      }
      for (size_t i = 0; i < r.block_ids.size(); ++i) {
        uint64_t tokens = static_cast<uint64_t>(std::min<int64_t>(
            r.block_size, r.prompt_tokens - static_cast<int64_t>(i) * r.block_size));
        if (seen.insert(r.block_ids[i]).second) s.unique_block_tokens += tokens;
        if (window_len > 0 && window.insert(r.block_ids[i]).second) window_tokens += tokens;
      }
    }
    // The busiest window is the first to reach the most distinct ids; its tokens keep growing
    // with the requests that arrive in it later.
    if (window_len > 0 && window.size() > s.max_window_unique_blocks) {
      s.max_window_unique_blocks = window.size();
      s.max_window_tokens = window_tokens;
      s.max_window_start_s = to_seconds(window_index * window_len);
      busiest_index = window_index;
    } else if (window_len > 0 && window_index == busiest_index) {
      s.max_window_tokens = window_tokens;
    }
  }
  s.arrival_instants = groups.instants;
  s.largest_arrival_group = groups.largest;
  s.requests_sharing_an_arrival = groups.sharing;
  s.unique_blocks = seen.size();
  s.sessions = sessions.size();
  s.prompt_tokens = percentiles(&prompts);
  s.output_tokens = percentiles(&outputs);
  return s;
}

namespace {

double ratio(uint64_t a, uint64_t b) {
  return b == 0 ? 0.0 : static_cast<double>(a) / b;
}
double span_s(const TraceStats& s) {
  return to_seconds(s.last_arrival - s.first_arrival);
}

}  // namespace

std::string format_trace_stats(const TraceStats& s, const std::string& name,
                               double kv_bytes_per_token) {
  std::string out;
  char buf[512];
  auto line = [&](const char* fmt, auto... args) {
    std::snprintf(buf, sizeof buf, fmt, args...);
    out += buf;
  };
  double span = span_s(s);
  line("trace                 %s\n", name.c_str());
  line("requests              %llu\n", static_cast<unsigned long long>(s.requests));
  line("span                  %.3f s (%.1f min), mean rate %.3f req/s\n", span, span / 60,
       span > 0 ? static_cast<double>(s.requests) / span : 0.0);
  line(
      "arrival instants      %llu distinct times, up to %llu request%s at one; %llu share theirs\n",
      static_cast<unsigned long long>(s.arrival_instants),
      static_cast<unsigned long long>(s.largest_arrival_group),
      s.largest_arrival_group == 1 ? "" : "s",
      static_cast<unsigned long long>(s.requests_sharing_an_arrival));
  line("prompt tokens         mean %.1f  p50 %.0f  p90 %.0f  p99 %.0f  max %.0f\n",
       s.prompt_tokens.mean, s.prompt_tokens.p50, s.prompt_tokens.p90, s.prompt_tokens.p99,
       s.prompt_tokens.max);
  line("output tokens         mean %.1f  p50 %.0f  p90 %.0f  p99 %.0f  max %.0f\n",
       s.output_tokens.mean, s.output_tokens.p50, s.output_tokens.p90, s.output_tokens.p99,
       s.output_tokens.max);
  if (s.sessions > 0)
    line("sessions              %llu\n", static_cast<unsigned long long>(s.sessions));
  if (s.requests_with_ids == 0) {
    out += "prefix information    none (block ids absent; see workload.prefix_groups)\n";
    return out;
  }
  line("block size            %d tokens per id\n", s.block_size);
  line("block references      %llu (%llu requests with ids)\n",
       static_cast<unsigned long long>(s.block_refs),
       static_cast<unsigned long long>(s.requests_with_ids));
  line("unique blocks         %llu\n", static_cast<unsigned long long>(s.unique_blocks));
  line("prefix reuse ratio    %.2f%% of blocks, %.2f%% of prompt tokens (infinite cache)\n",
       100 * ratio(s.prefix_hit_blocks, s.block_refs),
       100 * ratio(s.prefix_hit_tokens, s.tokens_with_ids));
  double ws_tokens = static_cast<double>(s.working_set_tokens());
  line("working set           %.0f tokens", ws_tokens);
  if (kv_bytes_per_token > 0) line(" = %.1f GiB of KV", ws_tokens * kv_bytes_per_token / (1 << 30));
  out += "\n";
  if (s.window_s > 0) {
    double wt = static_cast<double>(s.max_window_tokens);
    line("busiest window        %llu unique blocks in %.0f s from %.0f s = %.0f tokens",
         static_cast<unsigned long long>(s.max_window_unique_blocks), s.window_s,
         s.max_window_start_s, wt);
    if (kv_bytes_per_token > 0) line(" = %.1f GiB of KV", wt * kv_bytes_per_token / (1 << 30));
    out += "\n";
  }
  return out;
}

}  // namespace kvtwin::sim::workload
