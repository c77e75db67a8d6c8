// Names of unnamed eager collectives: "<op type>.eager.<n>", with one
// sequence per process set, shared by the eager kernels and the eager fast
// path, so that the n-th unnamed eager call on a set has the same name on
// each of its ranks whichever way it went (ranks outside a set make none of
// its calls, so the sets cannot share one sequence).
#ifndef TFDIST_TF_EAGER_NAMES_H_
#define TFDIST_TF_EAGER_NAMES_H_

#include <string>

namespace tfdist {

std::string NextEagerName(const std::string& op_type, int process_set);

// Starts process set `process_set`'s sequence again at 0. Called when a join
// on it completes: ranks that ran out of data made fewer unnamed calls than
// the others, and at a join no rank has a collective of the set in flight,
// so every rank can start over alike.
void RestartEagerNames(int process_set);

}  // namespace tfdist

#endif  // TFDIST_TF_EAGER_NAMES_H_
