// ModeledMover: the "modeled" implementation of sim::Mover — transfers cost time from the links
// of the hardware model and never touch bytes.
//
// Links (FluidLinks, max-min fair sharing among transfers in flight):
//   per instance i:  pcie_h2d[i], pcie_d2h[i], disk_read[i], disk_write[i], nic_tx[i], nic_rx[i]
//   shared:          remote_rx (the remote store's ingress), remote_tx (its egress)
//
//   src → dst        links crossed                        latency
//   cpu → gpu        pcie_h2d[i]                          pcie_latency
//   gpu → cpu        pcie_d2h[i]                          pcie_latency
//   disk → cpu       disk_read[i]                         disk_latency
//   cpu → disk       disk_write[i]                        disk_latency
//   remote → cpu     remote_tx, nic_rx[i]                 network_latency
//   cpu → remote     nic_tx[i], remote_rx                 network_latency
//   gpu ↔ disk/remote: the PCIe link plus the disk/network links, latencies added
//
// A transfer is one flow of its total bytes. Remote reads fail per object with probability
// links.remote_get_failure_rate (seeded stream "remote_faults", drawn in call order); a failed
// object is reported ok = 0 and moves no bytes.
//
// Threading: the simulation thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/hw/fluid_links.h"
#include "sim/mover.h"
#include "sim/random.h"
#include "sim/scenario/scenario.h"

namespace kvtwin::sim::hw {

class ModeledMover final : public Mover {
 public:
  ModeledMover(Simulator* sim, const scenario::LinksConfig& links, int num_instances,
               uint64_t seed);
  // Frees the transfers still in flight (a run that ended early: an error, a stop).
  ~ModeledMover() override;
  ModeledMover(const ModeledMover&) = delete;
  ModeledMover& operator=(const ModeledMover&) = delete;

  void start(Transfer transfer, Done done) override;
  std::string_view name() const override { return "modeled"; }

  // Called once per finished transfer (reports, traces).
  using Observer = std::function<void(const Transfer&, const TransferResult&)>;
  void set_observer(Observer observer) { observer_ = std::move(observer); }

  struct LinkReport {
    std::string kind;   // "pcie_h2d", ..., "remote_tx"
    int instance = -1;  // -1 for shared links
    double bytes = 0;
    SimDuration busy_ns = 0;
    int max_flows = 0;
  };
  std::vector<LinkReport> link_reports();

  // The links and latency of a transfer (exposed for tests).
  std::vector<FluidLinks::LinkId> path(Location src, Location dst, int instance,
                                       SimDuration* latency) const;

 private:
  struct InstanceLinks {
    FluidLinks::LinkId h2d, d2h, disk_read, disk_write, nic_tx, nic_rx;
  };

  Simulator* sim_;
  scenario::LinksConfig config_;
  FluidLinks links_;
  std::vector<InstanceLinks> instances_;
  FluidLinks::LinkId remote_rx_ = 0, remote_tx_ = 0;
  std::vector<std::pair<std::string, int>> link_names_;  // kind, instance per LinkId
  Rng faults_;
  Observer observer_;
  // Transfers in flight: a doubly linked list, so that completion unlinks in O(1) and the
  // destructor frees what never completed.
  struct InFlight;
  InFlight* in_flight_ = nullptr;
};

}  // namespace kvtwin::sim::hw
