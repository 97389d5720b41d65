#include "sim/validate/report.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "sim/calibrate/link_model.h"

namespace kvtwin::sim::validate {
namespace {

constexpr uint64_t kMiB = 1 << 20;

double rel_error(const TransferSample& s) {
  return (static_cast<double>(s.predicted_ns) - static_cast<double>(s.measured_ns)) /
         static_cast<double>(s.measured_ns);
}

std::string class_of(const TransferSample& s) {
  auto c = calibrate::link_class(s.src, s.dst);
  return c ? std::string(*c)
           : std::string(location_name(s.src)) + "_" + std::string(location_name(s.dst));
}

uint64_t object_size(const TransferSample& s) {
  return s.num_objects == 0 ? 0 : s.bytes / s.num_objects;
}

// Bucket order key: the lower bound of the bucket.
uint64_t bucket_floor(uint64_t object_bytes) {
  if (object_bytes < (64 << 10)) return 0;
  uint64_t lo = 64 << 10;
  while (lo < 64 * kMiB && object_bytes >= lo * 4) lo *= 4;
  return lo;
}

std::string human(uint64_t bytes) {
  if (bytes >= kMiB) return std::to_string(bytes / kMiB) + "M";
  return std::to_string(bytes >> 10) + "K";
}

ErrorStats stats_of(std::string cls, std::string bucket,
                    const std::vector<const TransferSample*>& v) {
  ErrorStats st;
  st.transfer_class = std::move(cls);
  st.bucket = std::move(bucket);
  st.count = v.size();
  if (v.empty()) return st;
  std::vector<double> abs_errors;
  for (const TransferSample* s : v) {
    const double e = rel_error(*s);
    st.bias_pct += 100 * e;
    abs_errors.push_back(100 * std::abs(e));
    st.mean_measured_ms += static_cast<double>(s->measured_ns) * 1e-6;
    st.mean_predicted_ms += static_cast<double>(s->predicted_ns) * 1e-6;
  }
  const double n = static_cast<double>(v.size());
  for (double a : abs_errors) st.mape_pct += a;
  st.mape_pct /= n;
  st.bias_pct /= n;
  st.mean_measured_ms /= n;
  st.mean_predicted_ms /= n;
  std::sort(abs_errors.begin(), abs_errors.end());
  st.max_abs_pct = abs_errors.back();
  st.p90_abs_pct = abs_errors[static_cast<size_t>(std::ceil(0.9 * n)) - 1];
  return st;
}

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string size_bucket(uint64_t object_bytes) {
  const uint64_t lo = bucket_floor(object_bytes);
  if (lo == 0) return "<64K";
  if (lo >= 64 * kMiB) return ">=64M";
  return human(lo) + "-" + human(lo * 4);
}

ValidationSummary summarize(const std::vector<TransferSample>& samples, size_t num_worst) {
  ValidationSummary out;
  std::map<std::pair<std::string, uint64_t>, std::vector<const TransferSample*>> by_bucket;
  std::map<std::string, std::vector<const TransferSample*>> large;
  std::vector<const TransferSample*> good;
  for (const TransferSample& s : samples) {
    if (s.num_failed > 0 || s.measured_ns <= 0) {
      ++out.num_failed;
      continue;
    }
    good.push_back(&s);
    by_bucket[{class_of(s), bucket_floor(object_size(s))}].push_back(&s);
    if (object_size(s) >= kMiB) large[class_of(s)].push_back(&s);
  }
  for (const auto& [key, v] : by_bucket)
    out.buckets.push_back(stats_of(key.first, size_bucket(key.second), v));
  for (const auto& [cls, v] : large) out.large.push_back(stats_of(cls, ">=1M", v));
  // Repeated points: one sample each, the medians (the lower one for an even count).
  std::map<std::tuple<std::string, uint64_t, uint64_t>, std::vector<const TransferSample*>> points;
  for (const TransferSample* s : good)
    if (object_size(*s) >= kMiB) points[{class_of(*s), s->num_objects, s->bytes}].push_back(s);
  std::vector<TransferSample> medians;
  for (const auto& [key, v] : points) {
    if (v.size() < 2) continue;
    std::vector<SimDuration> m, p;
    for (const TransferSample* s : v) {
      m.push_back(s->measured_ns);
      p.push_back(s->predicted_ns);
    }
    std::sort(m.begin(), m.end());
    std::sort(p.begin(), p.end());
    TransferSample x = *v.front();
    x.measured_ns = m[(m.size() - 1) / 2];
    x.predicted_ns = p[(p.size() - 1) / 2];
    medians.push_back(x);
  }
  std::map<std::string, std::vector<const TransferSample*>> by_class;
  for (const TransferSample& x : medians) by_class[class_of(x)].push_back(&x);
  for (const auto& [cls, v] : by_class) out.large_medians.push_back(stats_of(cls, ">=1M", v));
  std::stable_sort(good.begin(), good.end(), [](const TransferSample* a, const TransferSample* b) {
    return std::abs(rel_error(*a)) > std::abs(rel_error(*b));
  });
  for (size_t i = 0; i < good.size() && i < num_worst; ++i) out.worst.push_back(*good[i]);
  return out;
}

std::string format_summary(const ValidationSummary& s) {
  std::ostringstream out;
  auto table = [&](const std::vector<ErrorStats>& rows) {
    out << "| class | object size | transfers | MAPE % | bias % | p90 |e| % | max |e| % | "
           "measured ms | predicted ms |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const ErrorStats& r : rows)
      out << "| " << r.transfer_class << " | " << r.bucket << " | " << r.count << " | "
          << fixed(r.mape_pct, 1) << " | " << fixed(r.bias_pct, 1) << " | "
          << fixed(r.p90_abs_pct, 1) << " | " << fixed(r.max_abs_pct, 1) << " | "
          << fixed(r.mean_measured_ms, 3) << " | " << fixed(r.mean_predicted_ms, 3) << " |\n";
  };
  out << "Per class, objects >= 1 MiB (target: MAPE <= 10%):\n\n";
  table(s.large);
  if (!s.large_medians.empty()) {
    out << "\nPer class, objects >= 1 MiB, one row per repeated point (median measured vs median "
           "predicted; transfers = points):\n\n";
    table(s.large_medians);
  }
  out << "\nPer class and object size:\n\n";
  table(s.buckets);
  out << "\nWorst transfers:\n\n| class | kind | objects | bytes | measured ms | predicted ms | "
         "error % |\n|---|---|---:|---:|---:|---:|---:|\n";
  for (const TransferSample& w : s.worst)
    out << "| " << class_of(w) << " | " << w.kind << " | " << w.num_objects << " | " << w.bytes
        << " | " << fixed(static_cast<double>(w.measured_ns) * 1e-6, 3) << " | "
        << fixed(static_cast<double>(w.predicted_ns) * 1e-6, 3) << " | "
        << fixed(100 * rel_error(w), 1) << " |\n";
  if (s.num_failed > 0)
    out << "\n" << s.num_failed << " transfer(s) with failed objects left out of the statistics.\n";
  return out.str();
}

int validation_exit_code(uint64_t wrong_bytes, const ValidationSummary& summary,
                         double max_mape_pct) {
  int exit_code = 0;
  if (wrong_bytes > 0) {
    std::fprintf(stderr, "kvtwin validate: %llu object(s) came back with wrong bytes\n",
                 static_cast<unsigned long long>(wrong_bytes));
    exit_code = 1;
  }
  if (max_mape_pct > 0)
    for (const ErrorStats& s : summary.large)
      if (s.mape_pct > max_mape_pct) {
        std::fprintf(stderr, "kvtwin validate: %s MAPE %.1f%% exceeds %.1f%%\n",
                     s.transfer_class.c_str(), s.mape_pct, max_mape_pct);
        exit_code = 1;
      }
  return exit_code;
}

std::string write_report(const std::string& dir, const std::vector<std::string>& header,
                         const std::vector<TransferSample>& samples,
                         const ValidationSummary& summary) {
  std::filesystem::create_directories(dir);
  {
    std::ofstream csv(dir + "/samples.csv");
    csv << "start_us,class,kind,objects,bytes,failed,measured_ns,predicted_ns,error_pct\n";
    for (const TransferSample& s : samples)
      csv << s.start / 1000 << "," << class_of(s) << "," << s.kind << "," << s.num_objects << ","
          << s.bytes << "," << s.num_failed << "," << s.measured_ns << "," << s.predicted_ns << ","
          << (s.measured_ns > 0 ? fixed(100 * rel_error(s), 2) : "nan") << "\n";
  }
  {
    std::ofstream tsv(dir + "/summary.tsv");
    tsv << "class\tbucket\tcount\tmape_pct\tbias_pct\tp90_abs_pct\tmax_abs_pct\n";
    for (const auto* rows : {&summary.large, &summary.large_medians, &summary.buckets})
      for (const ErrorStats& r : *rows)
        tsv << r.transfer_class << "\t" << r.bucket
            << (rows == &summary.large_medians ? " medians" : "") << "\t" << r.count << "\t"
            << fixed(r.mape_pct, 2) << "\t" << fixed(r.bias_pct, 2) << "\t"
            << fixed(r.p90_abs_pct, 2) << "\t" << fixed(r.max_abs_pct, 2) << "\n";
  }
  std::string note;
  {
    // One data block per class: predicted_ms measured_ms.
    std::map<std::string, std::vector<const TransferSample*>> by_class;
    for (const TransferSample& s : samples)
      if (s.num_failed == 0 && s.measured_ns > 0 && s.predicted_ns > 0)
        by_class[class_of(s)].push_back(&s);
    std::ofstream gp(dir + "/predicted_vs_measured.gp");
    gp << "set terminal svg size 800,600 dynamic noenhanced\n"
          "set output 'predicted_vs_measured.svg'\n"
          "set logscale xy\nset xlabel 'predicted (ms)'\nset ylabel 'measured (ms)'\n"
          "set key top left\nset grid\nset title 'kvtwin validate: predicted vs measured'\n";
    gp << "plot x title 'y = x' with lines lc rgb 'gray', x / 1.1 title '+/- 10 %' with lines "
          "dt 2 lc rgb 'gray', x / 0.9 notitle with lines dt 2 lc rgb 'gray'";
    for (const auto& [cls, v] : by_class)
      gp << ", '-' title '" << cls << "' with points pt 7 ps 0.6";
    gp << "\n";
    for (const auto& [cls, v] : by_class) {
      for (const TransferSample* s : v)
        gp << static_cast<double>(s->predicted_ns) * 1e-6 << " "
           << static_cast<double>(s->measured_ns) * 1e-6 << "\n";
      gp << "e\n";
    }
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(dir.c_str()) == 0) {
      std::freopen("/dev/null", "w", stderr);
      ::execlp("gnuplot", "gnuplot", "predicted_vs_measured.gp", static_cast<char*>(nullptr));
    }
    ::_exit(127);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    note = "plot not drawn (gnuplot missing or failed); data in predicted_vs_measured.gp";
  {
    std::ofstream md(dir + "/report.md");
    md << "# kvtwin validate\n\n";
    for (const std::string& h : header) md << "- " << h << "\n";
    md << "\n" << format_summary(summary);
    md << "\n"
       << (note.empty() ? "![predicted vs measured](predicted_vs_measured.svg)" : note) << "\n";
  }
  return note;
}

}  // namespace kvtwin::sim::validate
