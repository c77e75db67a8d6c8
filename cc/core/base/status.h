// Errors inside the core are values, never exceptions: every fallible call
// returns a Status, and only the TensorFlow boundary (cc/tf) turns it into a
// tensorflow::Status so that the user sees a typed TF error.
#ifndef TFDIST_CORE_BASE_STATUS_H_
#define TFDIST_CORE_BASE_STATUS_H_

#include <string>
#include <utility>

namespace tfdist {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // local misuse: bad dtype, bad root, bad shape
  kFailedPrecondition,  // ranks disagree, or the runtime is not running
  kInternal,            // the transport or MPI failed
  kAborted,             // the runtime was shut down while the op waited
};

// The code's name, as the C control API exports it (Python maps each name to
// a TensorFlow error class); nullptr for a value that is no StatusCode.
// No default case: -Wswitch flags a code added above and not named here.
inline const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kFailedPrecondition: return "failed_precondition";
    case StatusCode::kInternal: return "internal";
    case StatusCode::kAborted: return "aborted";
  }
  return nullptr;
}

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return Status(StatusCode::kInvalidArgument, std::move(m));
  }
  static Status FailedPrecondition(std::string m) {
    return Status(StatusCode::kFailedPrecondition, std::move(m));
  }
  static Status Internal(std::string m) {
    return Status(StatusCode::kInternal, std::move(m));
  }
  static Status Aborted(std::string m) {
    return Status(StatusCode::kAborted, std::move(m));
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace tfdist

// Propagates a non-OK Status to the caller.
#define TFDIST_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::tfdist::Status tfdist_status_ = (expr); \
    if (!tfdist_status_.ok()) return tfdist_status_; \
  } while (0)

#endif  // TFDIST_CORE_BASE_STATUS_H_
