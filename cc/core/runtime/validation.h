// Cross-rank validation of one negotiated tensor. Every rank runs it on the
// same per-rank descriptions, so every rank reaches the same verdict and a
// mismatch becomes the same FailedPrecondition everywhere, never a hang.
#ifndef TFDIST_CORE_RUNTIME_VALIDATION_H_
#define TFDIST_CORE_RUNTIME_VALIDATION_H_

#include <string>
#include <vector>

#include "cc/core/runtime/request.h"
#include "cc/core/base/status.h"

namespace tfdist {

Status ValidateAcrossRanks(const std::string& name,
                           const std::vector<TensorDescription>& per_rank);

// "0, 2, 3": ranks as the messages name them.
std::string RankList(const std::vector<int>& ranks);

// What a joined rank cannot stand in for (join_state.h): a broadcast from it,
// and an alltoall, whose rows for it would be lost.
Status ValidateStandIns(const std::string& name, const TensorDescription& description,
                        const std::vector<int>& stand_ins);

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_VALIDATION_H_
