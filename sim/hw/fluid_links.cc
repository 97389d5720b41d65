#include "sim/hw/fluid_links.h"

#include <algorithm>
#include <cmath>

#include "model/check.h"

namespace kvtwin::sim::hw {

FluidLinks::LinkId FluidLinks::add_link(std::string name, double bytes_per_s) {
  KVTWIN_CHECK_LT(0.0, bytes_per_s) << name;
  links_.push_back(LinkStats{std::move(name), bytes_per_s, 0, 0, 0});
  flows_on_link_.push_back(0);
  finished_bytes_.push_back(0);
  return static_cast<LinkId>(links_.size() - 1);
}

void FluidLinks::start_flow(std::vector<LinkId> links, double bytes, SimDuration latency,
                            Done done) {
  KVTWIN_CHECK(!links.empty());
  KVTWIN_CHECK_GE(bytes, 0.0);
  KVTWIN_CHECK_GE(latency, 0);
  for (LinkId l : links) KVTWIN_CHECK(l >= 0 && static_cast<size_t>(l) < links_.size());
  Flow flow{next_flow_id_++, std::move(links), bytes, bytes, 0, std::move(done)};
  if (latency == 0 && bytes > 0) {
    activate(std::move(flow));
    return;
  }
  // The latency phase does not share bandwidth; the flow joins the links afterwards (or, with
  // no bytes, completes). It waits in in_latency_, so that the event captures only its id.
  const uint64_t id = flow.id;
  in_latency_.push_back(std::move(flow));
  sim_->schedule_after(latency, [this, id] {
    auto it = std::find_if(in_latency_.begin(), in_latency_.end(),
                           [id](const Flow& f) { return f.id == id; });
    KVTWIN_CHECK(it != in_latency_.end()) << "flow " << id << " lost in its latency phase";
    Flow f = std::move(*it);
    in_latency_.erase(it);
    if (f.remaining <= 0) {
      f.done();
      return;
    }
    activate(std::move(f));
  });
}

void FluidLinks::activate(Flow flow) {
  advance();
  active_.push_back(std::move(flow));
  recompute_rates();
  reschedule();
}

void FluidLinks::advance() {
  SimTime now = sim_->now();
  SimDuration dt = now - last_update_;
  if (dt > 0) {
    double secs = to_seconds(dt);
    for (Flow& f : active_) f.remaining = f.remaining_after(secs);
    for (LinkId l : used_) links_[static_cast<size_t>(l)].busy_ns += dt;
  }
  last_update_ = now;
}

void FluidLinks::recompute_rates() {
  // Only the links some active flow crosses take part; the others keep zero flows, full spare.
  for (LinkId l : used_) flows_on_link_[static_cast<size_t>(l)] = 0;
  used_.clear();
  for (const Flow& f : active_)
    for (LinkId l : f.links)
      if (flows_on_link_[static_cast<size_t>(l)]++ == 0) used_.push_back(l);
  for (LinkId l : used_) {
    LinkStats& link = links_[static_cast<size_t>(l)];
    link.max_flows = std::max(link.max_flows, flows_on_link_[static_cast<size_t>(l)]);
  }

  // Progressive filling: raise every unfrozen flow's rate together until a link saturates, then
  // freeze the flows crossing it; repeat.
  std::vector<double>& spare = spare_;
  spare.resize(links_.size());
  std::vector<int>& unfrozen_on = unfrozen_on_;
  unfrozen_on.resize(links_.size());
  for (LinkId l : used_) {
    spare[static_cast<size_t>(l)] = links_[static_cast<size_t>(l)].capacity;
    unfrozen_on[static_cast<size_t>(l)] = flows_on_link_[static_cast<size_t>(l)];
  }
  std::vector<uint8_t>& frozen = frozen_;
  frozen.assign(active_.size(), 0);
  for (Flow& f : active_) f.rate = 0;
  size_t left = active_.size();
  while (left > 0) {
    double inc = INFINITY;
    for (LinkId l : used_) {
      const size_t u = static_cast<size_t>(l);
      if (unfrozen_on[u] > 0) inc = std::min(inc, spare[u] / unfrozen_on[u]);
    }
    KVTWIN_CHECK(std::isfinite(inc));
    for (size_t i = 0; i < active_.size(); ++i) {
      if (frozen[i]) continue;
      active_[i].rate += inc;
      for (LinkId l : active_[i].links) spare[static_cast<size_t>(l)] -= inc;
    }
    for (size_t i = 0; i < active_.size(); ++i) {
      if (frozen[i]) continue;
      bool saturated = false;
      for (LinkId l : active_[i].links)
        saturated |=
            spare[static_cast<size_t>(l)] <= 1e-9 * links_[static_cast<size_t>(l)].capacity;
      if (saturated) {
        frozen[i] = 1;
        --left;
        for (LinkId l : active_[i].links) --unfrozen_on[static_cast<size_t>(l)];
      }
    }
  }
  for (LinkId l : used_)
    KVTWIN_CHECK_GE(spare[static_cast<size_t>(l)], -1e-6 * links_[static_cast<size_t>(l)].capacity)
        << "link over capacity";
}

void FluidLinks::reschedule() {
  if (event_pending_) {
    sim_->cancel(event_);
    event_pending_ = false;
  }
  if (active_.empty()) return;
  double soonest = INFINITY;
  for (const Flow& f : active_) soonest = std::min(soonest, f.remaining / f.rate);
  SimDuration dt = static_cast<SimDuration>(std::ceil(soonest * 1e9));
  event_ = sim_->schedule_after(std::max<SimDuration>(dt, 0), [this] { on_completion(); });
  event_pending_ = true;
}

void FluidLinks::on_completion() {
  event_pending_ = false;
  advance();
  // The last event's list, for its capacity (empty, if a callback's event is still using it).
  std::vector<Done> finished = std::move(finished_spare_);
  finished.clear();
  std::vector<Flow>& still = still_;
  still.clear();
  for (Flow& f : active_) {
    if (f.remaining <= f.rate * 1e-9 + 1e-9) {
      for (LinkId l : f.links) finished_bytes_[static_cast<size_t>(l)] += f.bytes;
      finished.push_back(std::move(f.done));
    } else {
      still.push_back(std::move(f));
    }
  }
  active_.swap(still);
  still.clear();
  recompute_rates();
  reschedule();
  for (Done& d : finished) d();
  finished.clear();
  finished_spare_ = std::move(finished);
}

const std::vector<FluidLinks::LinkStats>& FluidLinks::stats() {
  advance();
  for (size_t l = 0; l < links_.size(); ++l) links_[l].bytes = finished_bytes_[l];
  for (const Flow& f : active_) {
    const double moved = std::floor(f.bytes - f.remaining);
    for (LinkId l : f.links) links_[static_cast<size_t>(l)].bytes += moved;
  }
  return links_;
}

void FluidLinks::moved_bytes(std::vector<double>* out) const {
  out->assign(finished_bytes_.begin(), finished_bytes_.end());
  const double secs = to_seconds(sim_->now() - last_update_);
  for (const Flow& f : active_) {
    const double moved = f.bytes - f.remaining_after(secs);  // advance()'s step, not stored
    for (LinkId l : f.links) (*out)[static_cast<size_t>(l)] += moved;
  }
}

double FluidLinks::link_rate(LinkId link) const {
  double r = 0;
  for (const Flow& f : active_)
    for (LinkId l : f.links)
      if (l == link) r += f.rate;
  return r;
}

}  // namespace kvtwin::sim::hw
