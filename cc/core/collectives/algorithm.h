// Names of the allreduce algorithms. The numeric values cross the C control
// API, so never renumber them.
#ifndef TFDIST_CORE_COLLECTIVES_ALGORITHM_H_
#define TFDIST_CORE_COLLECTIVES_ALGORITHM_H_

#include <string>

namespace tfdist {

enum class AllreduceAlgorithm : int {
  kAuto = 0,          // chosen per call by the cost model (cost_model.h)
  kTree = 1,          // tree_allreduce.h
  kButterfly = 2,     // butterfly_allreduce.h
  kRing = 3,          // ring_allreduce.h
  kRabenseifner = 4,  // rabenseifner_allreduce.h
  kMpi = 5,           // MPI_Allreduce itself: the reference, not a Transport algorithm
  kHierarchical = 6,  // hierarchical_allreduce.h: two levels, for ranks on several hosts
  kSharedMemory = 7,  // shared_memory_allreduce.h: ranks on one host, through shared memory
  // hierarchical_allreduce.h: two levels, each host's phases on its own
  // shared segment (HierarchicalAllreduceOverSharedMemory)
  kHierarchicalSharedMemory = 8,
};

// How many values AllreduceAlgorithm has (arrays indexed by it).
constexpr int kAllreduceAlgorithmCount =
    static_cast<int>(AllreduceAlgorithm::kHierarchicalSharedMemory) + 1;

const char* AllreduceAlgorithmName(AllreduceAlgorithm algorithm);
// Parses "auto", "tree", "butterfly", "ring", "rabenseifner", "mpi",
// "hierarchical", "shm", "hierarchical_shm"; false if the name is none of them.
bool ParseAllreduceAlgorithm(const std::string& name, AllreduceAlgorithm* out);

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_ALGORITHM_H_
