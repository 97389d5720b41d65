#include "sim/cli/grid.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "sim/cli/common.h"
#include "sim/io/input_error.h"
#include "sim/io/output_file.h"
#include "sim/io/parse.h"
#include "sim/report/run_recorder.h"
#include "sim/scenario/scenario_loader.h"

namespace kvtwin::sim::cli {
namespace {

GridAxis parse_axis(const std::string& vary, const char* option) {
  const size_t eq = vary.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == vary.size())
    throw InputError(option, 0, vary, "expected key=v1,v2,...");
  GridAxis a;
  const std::string keys = vary.substr(0, eq);
  for (std::string_view k : io::split(keys, '/')) {
    if (k.empty()) throw InputError(option, 0, keys, "empty key in k1/k2/...");
    a.keys.emplace_back(k);
  }
  const bool linked = a.keys.size() > 1;
  for (std::string_view v : io::split(std::string_view(vary).substr(eq + 1), ',')) {
    if (v.empty()) throw InputError(option, 0, keys, "empty value in the list");
    std::vector<std::string> parts;
    if (linked) {
      for (std::string_view part : io::split(v, '/')) parts.emplace_back(part);
    } else {
      parts.emplace_back(v);
    }
    if (parts.size() != a.keys.size())
      throw InputError(option, 0, keys,
                       "value " + std::string(v) + " has " + std::to_string(parts.size()) +
                           " parts for " + std::to_string(a.keys.size()) + " keys");
    for (const std::string& part : parts)
      if (part.empty()) throw InputError(option, 0, keys, "empty part in value " + std::string(v));
    a.values.push_back(std::move(parts));
  }
  return a;
}

// Every value of a column is a finite number.
bool numeric(const GridAxis& a, size_t column) {
  return std::all_of(a.values.begin(), a.values.end(), [&](const std::vector<std::string>& v) {
    return io::parse_double(v[column]).has_value();
  });
}

}  // namespace

std::vector<GridAxis> parse_grid(const std::vector<std::string>& vary, const char* option) {
  std::vector<GridAxis> axes;
  std::vector<std::string> seen;
  for (const std::string& v : vary) {
    axes.push_back(parse_axis(v, option));
    for (const std::string& key : axes.back().keys) {
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        throw InputError(option, 0, key, "varied twice (list its values once)");
      seen.push_back(key);
    }
  }
  return axes;
}

std::vector<std::string> grid_keys(const std::vector<GridAxis>& axes) {
  std::vector<std::string> keys;
  for (const GridAxis& a : axes) keys.insert(keys.end(), a.keys.begin(), a.keys.end());
  return keys;
}

std::vector<std::vector<std::string>> grid_points(const std::vector<GridAxis>& axes) {
  std::vector<std::vector<std::string>> points(1);
  for (const GridAxis& a : axes) {
    std::vector<std::vector<std::string>> next;
    for (const std::vector<std::string>& p : points)
      for (const std::vector<std::string>& v : a.values) {
        next.push_back(p);
        next.back().insert(next.back().end(), v.begin(), v.end());
      }
    points = std::move(next);
  }
  return points;
}

std::vector<int> grid_widths(const std::vector<std::string>& keys,
                             const std::vector<std::vector<std::string>>& points) {
  std::vector<int> width;
  for (size_t c = 0; c < keys.size(); ++c) {
    size_t w = keys[c].size();
    for (const std::vector<std::string>& p : points) w = std::max(w, p[c].size());
    width.push_back(static_cast<int>(w));
  }
  return width;
}

scenario::Scenario grid_scenario(const scenario::Scenario& base, const std::vector<GridAxis>& axes,
                                 const std::vector<std::string>& point, const char* option) {
  scenario::Scenario s = base;
  const std::vector<std::string> keys = grid_keys(axes);
  for (size_t c = 0; c < keys.size(); ++c)
    scenario::apply_override(&s, keys[c] + "=" + point[c], option);
  scenario::validate(s);
  check_vllm_starts(s);
  return s;
}

std::string resource_columns(const report::Summary& s) {
  using scenario::kGiB;
  char buf[128];
  std::snprintf(buf, sizeof buf, ",%.4f,%.3f,%.3f,%.3f", s.gpu_kv_usage_peak,
                s.tier_bytes_peak[report::kTierCpu] / kGiB,
                s.tier_bytes_peak[report::kTierDisk] / kGiB,
                s.tier_bytes_peak[report::kTierRemote] / kGiB);
  std::string out = buf;
  for (const char* link : report::kLinkKinds) {
    std::snprintf(buf, sizeof buf, ",%.6f", s.busy_fraction(link));
    out += buf;
  }
  for (const char* link : report::kLinkKinds) {
    std::snprintf(buf, sizeof buf, ",%.3f", s.peak_gbps(link));
    out += buf;
  }
  // The cost: empty where not priced, or where nothing was served to divide by.
  auto cost = [&](std::optional<double> v) {
    if (!s.cost.priced || !v) return out.push_back(',');
    std::snprintf(buf, sizeof buf, ",%.6f", *v);
    out += buf;
  };
  cost(s.cost.per_hour);
  cost(s.cost.per_million_output_tokens);
  cost(s.cost.per_thousand_good_requests);
  return out;
}

std::string resource_header() {
  std::string out = ",kv_usage_peak,cpu_peak_gib,disk_peak_gib,remote_peak_gib";
  for (const char* link : report::kLinkKinds) out += std::string(",") + link + "_busy";
  for (const char* link : report::kLinkKinds) out += std::string(",") + link + "_peak_gbps";
  return out + ",cost_per_hour,cost_per_m_output_tokens,cost_per_k_good_requests";
}

std::string busiest_link(const report::Summary& s) {
  const char* name = nullptr;
  double busiest = 0;
  for (const char* link : report::kLinkKinds) {
    const double share = s.busy_fraction(link);
    if (share > busiest) {
      busiest = share;
      name = link;
    }
  }
  if (name == nullptr) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s %.0f%%", name, 100 * busiest);
  return buf;
}

void write_grid_plots(const std::string& dir, const std::string& name, const std::string& title,
                      const std::vector<GridAxis>& axes,
                      const std::vector<std::vector<std::string>>& points,
                      const std::string& header, const std::string& rows,
                      const std::vector<GridPlotPanel>& panels) {
  const GridAxis& x = axes[0];  // its first key on the plot's x
  const size_t series = points.size() / x.values.size();
  const std::string dat = "plots/" + name + ".dat";
  std::filesystem::create_directories(dir + "/plots");
  io::write_output(dir + "/" + dat, rows);
  std::string gp = "set terminal svg size " + std::to_string(500 * panels.size()) +
                   ",420 dynamic font 'sans,11'\n"
                   "set datafile separator ','\n"
                   "set termoption noenhanced\n"
                   "set grid\nset key below\n"
                   "set output 'plots/" +
                   name + ".svg'\n" + "set multiplot layout 1," + std::to_string(panels.size()) +
                   " title '" + report::gnuplot_text(title) + "'\n" + "set xlabel '" +
                   report::gnuplot_text(x.keys[0]) + "'\n";
  const std::string xspec = numeric(x, 0) ? "1" : "0";
  const std::string xtic = numeric(x, 0) ? "" : ":xtic(1)";
  const std::vector<std::string> keys = grid_keys(axes);
  for (const GridPlotPanel& panel : panels) {
    const int col = report::csv_column(header, panel.column);
    gp += "set ylabel '" + report::gnuplot_text(panel.label) + "'\nplot ";
    for (size_t s = 0; s < series; ++s) {
      std::string t;  // the other axes' columns
      for (size_t c = x.keys.size(); c < keys.size(); ++c)
        t += (c > x.keys.size() ? ", " : "") + keys[c] + "=" + points[s][c];
      if (t.empty()) t = panel.label;
      gp += std::string(s ? ", " : "") + "'" + dat + "' every " + std::to_string(series) +
            "::" + std::to_string(s) + " using " + xspec + ":" + std::to_string(col) + xtic +
            " with linespoints lw 2 title '" + report::gnuplot_text(t) + "'";
    }
    gp += "\n";
  }
  gp += "unset multiplot\n";
  const std::string script = "plots/" + name + ".gp";
  io::write_output(dir + "/" + script, gp);
  const int rc = report::run_gnuplot(dir, script);
  if (rc != 0 && rc != 127)
    std::fprintf(stderr, "kvtwin: warning: gnuplot failed; see %s/%s\n", dir.c_str(),
                 script.c_str());
}

}  // namespace kvtwin::sim::cli
