// The grid of scenario overrides that `kvtwin sweep` and `kvtwin capacity --vary` walk: each
// `--vary key=v1,v2,...` is an axis, and the grid is their cartesian product with the first axis
// outermost (point index = Σ value index · the product of the later axes' sizes):
//
//   --vary a=1,2 --vary b=x,y,z   →   points (1,x) (1,y) (1,z) (2,x) (2,y) (2,z)
//
// An axis may vary several keys together, its keys and each value's parts joined by '/' (so such
// an axis's values cannot hold a '/'): --vary gpu.memory_gb/gpu.hbm_tbps=80/3.35,141/4.8 is one
// axis of two values, each setting both keys. The grid's columns are every axis's keys in order,
// and a point holds one value per column:
//
//   --vary a/b=1/p,2/q --vary c=x,y   →   columns a b c; points (1,p,x) (1,p,y) (2,q,x) (2,q,y)
//
// A plot of the grid puts the first column on x and draws one series per combination of the
// other axes: series s is the points s, s + S, s + 2S, ... where S = points / |first axis|.
#pragma once

#include <string>
#include <vector>

#include "sim/report/run_recorder.h"
#include "sim/scenario/scenario.h"

namespace kvtwin::sim::cli {

struct GridAxis {
  std::vector<std::string> keys;                 // one, or several varied together
  std::vector<std::vector<std::string>> values;  // never empty; each one part per key, as given
};

// Parses every "key=v1,v2,..." (or "k1/k2=a1/b1,a2/b2,...") of `vary` in order. Throws InputError
// (naming `option`) for a malformed item, an empty value, a value with another number of parts
// than the axis has keys, or a key varied twice.
std::vector<GridAxis> parse_grid(const std::vector<std::string>& vary, const char* option);

// The grid's columns: every axis's keys, in order.
std::vector<std::string> grid_keys(const std::vector<GridAxis>& axes);

// The grid's points in order: each one value per column.
std::vector<std::vector<std::string>> grid_points(const std::vector<GridAxis>& axes);

// For a table: each column's width, the widest of its key and its values at `points`.
std::vector<int> grid_widths(const std::vector<std::string>& keys,
                             const std::vector<std::vector<std::string>>& points);

// `base` with a point's values applied in column order, then validated and put through vLLM's
// start-up check (check_vllm_starts). Throws InputError (naming `option`) for an unknown key, a
// value out of range, or one vLLM would not start with.
scenario::Scenario grid_scenario(const scenario::Scenario& base, const std::vector<GridAxis>& axes,
                                 const std::vector<std::string>& point, const char* option);

// What a run needed, as CSV columns each led by a comma: the fullest instance's KV usage, each
// LMCache tier's peak (GiB, every rank and instance), how busy the busiest instance's links
// were, then the most any link of each kind moved over a sampling interval (GB/s; each in
// report::kLinkKinds order, 0 for a link kind that moved nothing), and what it cost (per hour, per
// million output tokens, per thousand requests within the SLOs; empty when the scenario sets no
// price). resource_header() names them.
std::string resource_columns(const report::Summary& s);
std::string resource_header();

// The link kind of report::kLinkKinds whose busiest instance was busy the largest share of the
// window, as "disk_write 45%" (the first in column order on a tie), or "-" when no link moved
// bytes.
std::string busiest_link(const report::Summary& s);

// One panel of a grid plot: a column of the data, with its axis label.
struct GridPlotPanel {
  std::string label;
  std::string column;  // a column of `header`
};

// Writes DIR/plots/<name>.dat (`rows`: CSV lines without their header, one per point in grid
// order), DIR/plots/<name>.gp and, when gnuplot runs, DIR/plots/<name>.svg: one panel per entry
// of `panels`, the first column on x (by value when every value is a number, else as labels),
// one series per combination of the other axes. A gnuplot failure is a warning on stderr.
void write_grid_plots(const std::string& dir, const std::string& name, const std::string& title,
                      const std::vector<GridAxis>& axes,
                      const std::vector<std::vector<std::string>>& points,
                      const std::string& header, const std::string& rows,
                      const std::vector<GridPlotPanel>& panels);

}  // namespace kvtwin::sim::cli
