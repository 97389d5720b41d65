// FluidLinks: bandwidth sharing among concurrent transfers, as a fluid max-min fair model.
//
// A flow moves `bytes` across a set of links after a fixed `latency`. While flows are active,
// rates follow max-min fairness (progressive filling): every flow gets an equal share of its
// bottleneck link, and capacity a flow cannot use on one link goes to the others. Each arrival or
// departure re-computes all rates and re-schedules the one pending completion event through
// Simulator::cancel / schedule_at.
//
//   time ─────────────────────────────────────────────▶
//   flow A  |lat|====== rate C ======|== C/2 ==|== C ==|done
//   flow B               |lat|       |== C/2 ==|done
//
// Completion times are rounded up to whole ns; a flow whose remaining work is under one ns at its
// rate completes with the flow that triggered the event. Callbacks of flows completing at the same
// instant run in flow-creation order. Zero-byte flows complete after their latency.
//
// Invariants: Σ rates of the flows on a link ≤ its capacity (checked); a flow's remaining bytes
// never grow. Threading: single-threaded, owned by one Simulator.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/simulator.h"

namespace kvtwin::sim::hw {

class FluidLinks {
 public:
  using LinkId = int32_t;
  using Done = std::function<void()>;

  explicit FluidLinks(Simulator* sim) : sim_(sim) {}
  FluidLinks(const FluidLinks&) = delete;
  FluidLinks& operator=(const FluidLinks&) = delete;

  // REQUIRES: bytes_per_s > 0.
  LinkId add_link(std::string name, double bytes_per_s);

  // Starts a flow now. REQUIRES: links non-empty and distinct, bytes >= 0, latency >= 0.
  void start_flow(std::vector<LinkId> links, double bytes, SimDuration latency, Done done);

  struct LinkStats {
    std::string name;
    double capacity = 0;  // bytes/s
    // Bytes moved across the link: every finished flow's bytes, and the whole bytes (rounded
    // down) each active flow has moved so far. Exact while flows' sizes are whole numbers: it
    // sums sizes, not rate × time.
    double bytes = 0;
    SimDuration busy_ns = 0;  // time with at least one active flow
    int max_flows = 0;        // most concurrent active flows
  };
  // Statistics, brought up to now().
  const std::vector<LinkStats>& stats();
  // Per link, the bytes moved so far: every finished flow's bytes and each active flow's progress
  // to now() (LinkStats::bytes without its rounding down, so that the difference of two readings
  // is what the link carried in between, not up to a byte per active flow more). Computed
  // without bringing the flows up to now: the simulation's arithmetic (and so its every
  // completion time) is the same whether or not, and how often, this is called. `out` is resized
  // to the number of links.
  void moved_bytes(std::vector<double>* out) const;
  size_t num_active() const { return active_.size(); }
  // Current rate of the active flows on a link (bytes/s), for tests.
  double link_rate(LinkId link) const;

 private:
  struct Flow {
    uint64_t id;
    std::vector<LinkId> links;
    double bytes;  // the flow's size
    double remaining;
    double rate = 0;
    Done done;
    // Its remaining bytes `secs` seconds after the last update, at its current rate: advance()
    // stores it, moved_bytes() only reads it.
    double remaining_after(double secs) const {
      return remaining - std::min(remaining, rate * secs);
    }
  };
  void activate(Flow flow);
  void advance();          // progresses every active flow to now()
  void recompute_rates();  // max-min fair rates
  void reschedule();       // the next completion event
  void on_completion();

  Simulator* sim_;
  std::vector<LinkStats> links_;
  std::vector<double> finished_bytes_;  // per link: Σ sizes of the flows that finished on it
  std::vector<int> flows_on_link_;      // as of the last recompute_rates; nonzero only on used_
  std::vector<LinkId> used_;            // links with flows_on_link_ > 0, in first-use order
  std::vector<Flow> active_;            // in creation order
  std::vector<Flow> in_latency_;        // started, still in their latency phase (few at a time)
  // Scratch of recompute_rates / on_completion, kept to spare an allocation per event.
  std::vector<double> spare_;
  std::vector<int> unfrozen_on_;
  std::vector<uint8_t> frozen_;
  std::vector<Flow> still_;
  std::vector<Done> finished_spare_;  // on_completion's list of callbacks, between events
  uint64_t next_flow_id_ = 0;
  SimTime last_update_ = 0;
  bool event_pending_ = false;
  Simulator::EventId event_ = 0;
};

}  // namespace kvtwin::sim::hw
