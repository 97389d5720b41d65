// Simulator: the discrete-event loop. One object per simulation run; no globals.
//
// Events are ordered by (time, seq) where seq is the insertion counter, so two events at the
// same instant run in the order they were scheduled — never in pointer or hash-map order. That
// total order is what makes a run byte-identical for the same inputs and seed.
//
// Invariants: time never runs backwards (an event may not be scheduled before now()); a run that
// finishes with run() leaves no event behind.
//
// Threading: single-threaded. Parallel sweeps run one Simulator per thread or process.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/time.h"
#include "sim/u64_set.h"

namespace kvtwin::sim {

// An event later than the int64 nanosecond clock can hold (292 years): what the run models takes
// absurdly long (a step of 10^8 s from a tiny peak_tflops, a link of bytes per hour).
class SimTimeOverflow : public std::runtime_error {
 public:
  SimTimeOverflow(SimTime now, SimDuration delay)
      : std::runtime_error("simulated time overflows the 292-year clock: an event " +
                           std::to_string(to_seconds(delay)) +
                           " s after t = " + std::to_string(to_seconds(now)) +
                           " s (a step or transfer takes absurdly long: check gpu.peak_tflops, "
                           "the efficiencies, link bandwidths or the step profile)") {}
};

class Simulator {
 public:
  using Action = std::function<void()>;
  using EventId = uint64_t;

  SimTime now() const { return now_; }

  // Schedules `action` at absolute time `at`. REQUIRES: at >= now(). Returns an id for cancel().
  EventId schedule_at(SimTime at, Action action);
  // Throws SimTimeOverflow when now() + delay reaches kSimTimeMax (where from_seconds saturates).
  EventId schedule_after(SimDuration delay, Action action) {
    if (delay >= kSimTimeMax - now_) throw SimTimeOverflow(now_, delay);
    return schedule_at(now_ + delay, std::move(action));
  }

  // Cancels a pending event. REQUIRES: the event has neither run nor been cancelled (the owner
  // of a cancellable event clears its handle when the event runs).
  void cancel(EventId id);

  // Runs events in (time, seq) order until none is left or stop() was called.
  void run();
  // Runs events with time <= until, then sets now() to `until` (if larger).
  void run_until(SimTime until);
  void stop() { stopped_ = true; }

  size_t num_pending() const { return heap_.size() - cancelled_.size(); }
  // Time of the earliest pending event, kSimTimeMax when none. A lower bound when that event was
  // cancelled (cancelled events leave the queue only when their time comes).
  SimTime next_event_time() const { return heap_.empty() ? kSimTimeMax : heap_.front().time; }
  uint64_t num_executed() const { return num_executed_; }

 private:
  // The heap holds small trivially copyable entries; actions stay put in actions_[slot] (a slot
  // is free, and its Action empty, once its event was popped).
  struct Entry {
    SimTime time;
    uint64_t seq;
    uint32_t slot;
  };
  // Heap order for std::push_heap/pop_heap: the top is the smallest (time, seq).
  static bool later(const Entry& a, const Entry& b) {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
  }
  bool step(SimTime limit);

  SimTime now_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t num_executed_ = 0;
  bool stopped_ = false;
  std::vector<Entry> heap_;           // memory follows pending events, not history
  std::vector<Action> actions_;       // by Entry::slot
  std::vector<uint32_t> free_slots_;  // slots of actions_ not held by a pending event
  U64Set cancelled_;                  // pending events that were cancelled
};

}  // namespace kvtwin::sim
