// A core Status as TensorFlow's: each code as the matching TensorFlow
// error, so that Python raises the same exception class for it whichever
// op (collective or compression step) failed.
#ifndef TFDIST_TF_TF_STATUS_H_
#define TFDIST_TF_TF_STATUS_H_

#include "absl/status/status.h"

#include "cc/core/base/status.h"

namespace tfdist {

inline absl::Status ToTfStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return absl::OkStatus();
    case StatusCode::kInvalidArgument: return absl::InvalidArgumentError(s.message());
    case StatusCode::kFailedPrecondition: return absl::FailedPreconditionError(s.message());
    case StatusCode::kAborted: return absl::AbortedError(s.message());
    case StatusCode::kInternal: return absl::InternalError(s.message());
  }
  return absl::UnknownError(s.message());
}

}  // namespace tfdist

#endif  // TFDIST_TF_TF_STATUS_H_
