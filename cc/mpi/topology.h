// Where this process sits: its rank among the processes on its host (local)
// and the rank of its host among the hosts (cross), as Horovod reports them.
// Hosts are the real machines, or, with TFDIST_VIRTUAL_HOSTS=H, H virtual
// hosts of P/H consecutive ranks each, so that one machine can stand in for
// several.
#ifndef TFDIST_CORE_RUNTIME_TOPOLOGY_H_
#define TFDIST_CORE_RUNTIME_TOPOLOGY_H_

#include <mpi.h>

#include <vector>

#include "cc/core/transport/host_layout.h"
#include "cc/core/base/status.h"

namespace tfdist {

struct Topology {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
  HostLayout hosts;  // every rank's host
};

// Collective over `comm`. `virtual_hosts` 0 uses the real hosts; otherwise it
// must divide the number of ranks (InvalidArgument naming
// TFDIST_VIRTUAL_HOSTS if not).
Status DiscoverTopology(MPI_Comm comm, int virtual_hosts, Topology* out);

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_TOPOLOGY_H_
