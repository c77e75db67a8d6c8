// PowerSGD (Vogels, Karimireddy & Jaggi 2019): the bookkeeping around one
// step of rank-r power iteration on a gradient viewed as an n x m matrix.
//
//   M  = G + E                        (E: this rank's residual; 0 without EF)
//   P  = M Q                          (Q: m x r, last step's Q: warm start)
//   P  = allreduce(P);  P-hat = OrthonormalizeColumns(P)
//   Q' = M^T P-hat                    (this rank's share)
//   Q  = allreduce(Q')                (kept for the next step's warm start)
//   output = P-hat Q^T;  E = M - P-hat Q'^T
//
// The matrix products M Q and M^T P-hat run in TensorFlow; what is here is
// the part that touches the per-rank state. E is this rank's own
// approximation error, so the residuals of all ranks add up to
// sum(M) - P-hat P-hat^T sum(M): what the step did not deliver.
// Bytes on the wire per step: (n + m) * r elements instead of n * m.
#ifndef TFDIST_CORE_COMPRESSION_POWERSGD_H_
#define TFDIST_CORE_COMPRESSION_POWERSGD_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace tfdist {

// True when rank-r factors of an n x m matrix are fewer bytes than the
// matrix: (n + m) * r * 2 < n * m (the factor 2 leaves room for the two
// rounds' latency); otherwise PowerSGD sends the matrix dense.
bool PowerSgdCompresses(int64_t n, int64_t m, int64_t rank);

// The first Q (m x rank, row-major) for the tensor called `name`: standard
// normal entries from a generator seeded by the name, so every rank starts
// from the same Q without communicating.
void PowerSgdInitialQ(const std::string& name, size_t m, size_t rank, float* q);

// Refills the columns of the warm-start Q (m x rank, row-major) that are
// zero, not finite, or linearly dependent on the columns before them (the
// same test as OrthonormalizeColumns), with columns of the name's initial Q
// (or, should one of those be dependent too, of further generators seeded
// by the name). An all-zero gradient makes P, P-hat and so the next Q zero,
// and a Q column that is zero stays zero forever (P = M Q): without this a
// tensor whose gradient was zero once would never be sent again, while its
// residual grew. Q is the allreduced one, identical on every rank, and the
// refill depends only on Q and the name, so every rank refills alike.
// Columns that pass are left bit for bit. Returns how many were refilled.
size_t PowerSgdRefillQ(const std::string& name, size_t m, size_t rank, float* q);

// output = p_hat q_reduced^T (n x m). When `residual` is not null it
// receives accumulated - p_hat q_local^T. Sums over r run in double.
void PowerSgdFinish(const float* accumulated, const float* p_hat, const float* q_local,
                    const float* q_reduced, size_t n, size_t m, size_t rank, float* output,
                    float* residual);

}  // namespace tfdist

#endif  // TFDIST_CORE_COMPRESSION_POWERSGD_H_
