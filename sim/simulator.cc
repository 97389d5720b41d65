#include "sim/simulator.h"

#include <algorithm>

#include "model/check.h"

namespace kvtwin::sim {

Simulator::EventId Simulator::schedule_at(SimTime at, Action action) {
  KVTWIN_CHECK_GE(at, now_) << "event scheduled in the past";
  uint64_t seq = next_seq_++;
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
    actions_[slot] = std::move(action);
  } else {
    slot = static_cast<uint32_t>(actions_.size());
    actions_.push_back(std::move(action));
  }
  heap_.push_back(Entry{at, seq, slot});
  std::push_heap(heap_.begin(), heap_.end(), later);
  return seq;
}

void Simulator::cancel(EventId id) {
  KVTWIN_CHECK_LT(id, next_seq_) << "unknown event";
  bool inserted = cancelled_.insert(id);
  KVTWIN_CHECK(inserted) << "event " << id << " cancelled twice";
}

bool Simulator::step(SimTime limit) {
  while (!heap_.empty()) {
    if (heap_.front().time > limit) return false;
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const Entry e = heap_.back();
    heap_.pop_back();
    // Taken out before it runs: the action may schedule events that reuse its slot.
    Action action = std::move(actions_[e.slot]);
    actions_[e.slot] = nullptr;
    free_slots_.push_back(e.slot);
    if (cancelled_.size() != 0 && cancelled_.erase(e.seq)) continue;
    KVTWIN_CHECK_GE(e.time, now_) << "time ran backwards";
    now_ = e.time;
    ++num_executed_;
    action();
    return true;
  }
  return false;
}

void Simulator::run() {
  stopped_ = false;
  while (!stopped_ && step(kSimTimeMax)) {
  }
  if (!stopped_) KVTWIN_CHECK_EQ(num_pending(), 0u) << "events left after run()";
}

void Simulator::run_until(SimTime until) {
  stopped_ = false;
  while (!stopped_ && step(until)) {
  }
  if (!stopped_ && until > now_) now_ = until;
}

}  // namespace kvtwin::sim
