// Where this process sits: its rank among the processes on its host (local)
// and the rank of its host among the hosts (cross), as Horovod reports them.
#ifndef TFDIST_CORE_RUNTIME_TOPOLOGY_H_
#define TFDIST_CORE_RUNTIME_TOPOLOGY_H_

#include <mpi.h>

#include "cc/core/status.h"

namespace tfdist {

struct Topology {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
};

// Collective over `comm`.
Status DiscoverTopology(MPI_Comm comm, Topology* out);

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_TOPOLOGY_H_
