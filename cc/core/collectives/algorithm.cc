#include "cc/core/collectives/algorithm.h"

namespace tfdist {
namespace {

struct AlgorithmName {
  AllreduceAlgorithm algorithm;
  const char* name;
};

constexpr AlgorithmName kAlgorithmNames[] = {
    {AllreduceAlgorithm::kAuto, "auto"},
    {AllreduceAlgorithm::kTree, "tree"},
    {AllreduceAlgorithm::kButterfly, "butterfly"},
    {AllreduceAlgorithm::kRing, "ring"},
    {AllreduceAlgorithm::kRabenseifner, "rabenseifner"},
    {AllreduceAlgorithm::kMpi, "mpi"},
    {AllreduceAlgorithm::kHierarchical, "hierarchical"},
    {AllreduceAlgorithm::kSharedMemory, "shm"},
    {AllreduceAlgorithm::kHierarchicalSharedMemory, "hierarchical_shm"},
};

}  // namespace

const char* AllreduceAlgorithmName(AllreduceAlgorithm algorithm) {
  for (const AlgorithmName& entry : kAlgorithmNames) {
    if (entry.algorithm == algorithm) return entry.name;
  }
  return "unknown";
}

bool ParseAllreduceAlgorithm(const std::string& name, AllreduceAlgorithm* out) {
  for (const AlgorithmName& entry : kAlgorithmNames) {
    if (name == entry.name) {
      *out = entry.algorithm;
      return true;
    }
  }
  return false;
}

}  // namespace tfdist
