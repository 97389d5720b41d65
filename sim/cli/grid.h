// The grid of scenario overrides that `kvtwin sweep` and `kvtwin capacity --vary` walk: each
// `--vary key=v1,v2,...` is an axis, and the grid is their cartesian product with the first axis
// outermost (point index = Σ value index · the product of the later axes' sizes):
//
//   --vary a=1,2 --vary b=x,y,z   →   points (1,x) (1,y) (1,z) (2,x) (2,y) (2,z)
//
// A plot of the grid puts the first axis on x and draws one series per combination of the
// others: series s is the points s, s + S, s + 2S, ... where S = points / |first axis|.
#pragma once

#include <string>
#include <vector>

#include "sim/report/run_recorder.h"
#include "sim/scenario/scenario.h"

namespace kvtwin::sim::cli {

struct GridAxis {
  std::string key;
  std::vector<std::string> values;  // as given, never empty
};

// Parses every "key=v1,v2,..." of `vary` in order. Throws InputError (naming `option`) for a
// malformed item, an empty value or a key varied twice.
std::vector<GridAxis> parse_grid(const std::vector<std::string>& vary, const char* option);

// The grid's points in order: each the values of the axes, one per axis.
std::vector<std::vector<std::string>> grid_points(const std::vector<GridAxis>& axes);

// `base` with a point's values applied in axis order, then validated. Throws InputError (naming
// `option`) for an unknown key or a value out of range.
scenario::Scenario grid_scenario(const scenario::Scenario& base, const std::vector<GridAxis>& axes,
                                 const std::vector<std::string>& point, const char* option);

// The links whose busiest-instance busy fraction sweep.csv and frontier.csv give, in column
// order (a point without the link, e.g. no disk tier, gives 0).
inline constexpr const char* kBusyLinks[] = {"pcie_h2d", "pcie_d2h", "disk_read", "disk_write",
                                             "nic_rx",   "nic_tx",   "remote_rx", "remote_tx"};

// What a run needed, as CSV columns each led by a comma: the fullest instance's KV usage, each
// LMCache tier's peak (GiB, every rank and instance) and how busy the busiest instance's links
// were (kBusyLinks in order). resource_header() names them.
std::string resource_columns(const report::Summary& s);
std::string resource_header();

// The link kind of kBusyLinks whose busiest instance was busy the largest share of the window,
// as "disk_write 45%" (the first in column order on a tie), or "-" when no link moved bytes.
std::string busiest_link(const report::Summary& s);

// One panel of a grid plot: a column of the data, with its axis label.
struct GridPlotPanel {
  std::string label;
  std::string column;  // a column of `header`
};

// Writes DIR/plots/<name>.dat (`rows`: CSV lines without their header, one per point in grid
// order), DIR/plots/<name>.gp and, when gnuplot runs, DIR/plots/<name>.svg: one panel per entry
// of `panels`, the first axis on x (by value when every value is a number, else as labels), one
// series per combination of the other axes. A gnuplot failure is a warning on stderr.
void write_grid_plots(const std::string& dir, const std::string& name, const std::string& title,
                      const std::vector<GridAxis>& axes,
                      const std::vector<std::vector<std::string>>& points,
                      const std::string& header, const std::string& rows,
                      const std::vector<GridPlotPanel>& panels);

}  // namespace kvtwin::sim::cli
