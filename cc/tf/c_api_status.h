// How the ctypes C API reports a Status: the code as the return value and
// the message copied into the caller's buffer.
#ifndef TFDIST_TF_C_API_STATUS_H_
#define TFDIST_TF_C_API_STATUS_H_

#include <cstring>

#include "cc/core/base/status.h"

namespace tfdist {

inline int ReportStatus(const Status& status, char* error, int error_length) {
  if (!status.ok() && error != nullptr && error_length > 0) {
    std::strncpy(error, status.message().c_str(), error_length - 1);
    error[error_length - 1] = '\0';
  }
  return static_cast<int>(status.code());
}

}  // namespace tfdist

#endif  // TFDIST_TF_C_API_STATUS_H_
