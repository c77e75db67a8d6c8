// Turning an MPI return code into a Status that a user can act on.
//
// tfdist's communicators return errors (MPI_ERRORS_RETURN, mpi_comm.h), so
// a failed MPI call reaches this as a code rather than aborting the job.
// The Status names the MPI function, what tfdist was doing with it (which
// collective, which peer), MPI's own error string, and, when a process died
// under ULFM (`mpirun --with-ft ulfm`: MPI_ERR_PROC_FAILED), which ranks of
// the communicator MPI knows to have failed.
#ifndef TFDIST_MPI_MPI_ERROR_H_
#define TFDIST_MPI_MPI_ERROR_H_

#include <mpi.h>

#include <string>
#include <vector>

#include "cc/core/base/status.h"

namespace tfdist {

// What every message of a process failure (or a revoked communicator)
// contains, so that Python recognises a membership change whatever the
// error went through (a TF op's error, "tfdist has stopped on this rank
// ... because: ...") and turns it into tfdist.elastic.RanksChangedError.
// tfdist/elastic/errors.py holds the same text; docs/elastic.md documents it.
inline constexpr const char kRanksChangedMarker[] = "[tfdist: ranks changed]";

// Internal: "tfdist: <call> failed during <during>: <MPI's error string>",
// followed by the failed ranks of `comm` when the error is a process
// failure and `comm` is not MPI_COMM_NULL. A process failure also revokes
// every communicator of tfdist in this process (RevokeOwnedComms,
// mpi_comm.h), so that every rank's runtime stops promptly, and its message
// carries kRanksChangedMarker and says what to do.
Status MpiError(int code, const char* call, const std::string& during,
                MPI_Comm comm = MPI_COMM_NULL);

// MPI's text for `code` (MPI_Error_string), and for its class when that
// says more (a code may be more specific than its class).
std::string MpiErrorText(int code);

// Whether `code` says that a peer process failed or the communicator was
// revoked (ULFM); false where the MPI has no such error classes.
bool IsProcessFailure(int code);

// The ranks of `comm` that MPI knows to have failed (ULFM); empty when
// none are known or the MPI cannot say.
std::vector<int> FailedRanks(MPI_Comm comm);

// Whether any MPI call of this process has reported a failed peer
// (MPI_ERR_PROC_FAILED or MPI_ERR_REVOKED, through MpiError).
bool PeerFailureSeen();

}  // namespace tfdist

#endif  // TFDIST_MPI_MPI_ERROR_H_
