// Names of unnamed eager collectives: "<op type>.eager.<n>", with one
// sequence per process shared by the eager kernels and the eager fast path,
// so that the n-th unnamed eager call has the same name on every rank
// whichever way it went.
#ifndef TFDIST_TF_EAGER_NAMES_H_
#define TFDIST_TF_EAGER_NAMES_H_

#include <string>

namespace tfdist {

std::string NextEagerName(const std::string& op_type);

// Starts the sequence again at 0. Called when a join completes: ranks that
// ran out of data made fewer unnamed calls than the others, and at a join
// no rank has a collective in flight, so every rank can start over alike.
void RestartEagerNames();

}  // namespace tfdist

#endif  // TFDIST_TF_EAGER_NAMES_H_
