#include "cc/mpi/mpi_allreduce.h"

#include <algorithm>
#include <climits>

#include "cc/mpi/mpi_error.h"

namespace tfdist {

namespace {

bool ToMpiType(DataType dtype, MPI_Datatype* out) {
  switch (dtype) {
    case DataType::kUInt8: *out = MPI_UINT8_T; return true;
    case DataType::kInt8: *out = MPI_INT8_T; return true;
    case DataType::kInt32: *out = MPI_INT32_T; return true;
    case DataType::kInt64: *out = MPI_INT64_T; return true;
    case DataType::kFloat32: *out = MPI_FLOAT; return true;
    case DataType::kFloat64: *out = MPI_DOUBLE; return true;
    default: return false;
  }
}

MPI_Op ToMpiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kProduct: return MPI_PROD;
  }
  return MPI_SUM;
}

}  // namespace

bool MpiCanReduce(DataType dtype) {
  MPI_Datatype unused;
  return ToMpiType(dtype, &unused);
}

Status MpiNativeAllreduce(MPI_Comm comm, const void* input, void* output, size_t count,
                          DataType dtype, ReduceOp op) {
  MPI_Datatype mpi_type;
  if (!ToMpiType(dtype, &mpi_type)) {
    return Status::InvalidArgument(std::string("MPI allreduce cannot reduce ") +
                                   DataTypeName(dtype));
  }
  const char* from = static_cast<const char*>(input);
  char* into = static_cast<char*>(output);
  const bool in_place = input == output;
  const size_t element = DataTypeSize(dtype);
  size_t done = 0;
  do {
    const size_t piece = std::min(count - done, static_cast<size_t>(INT_MAX));
    const size_t offset = done * element;
    const int rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : from + offset, into + offset,
                                 static_cast<int>(piece), mpi_type, ToMpiOp(op), comm);
    if (rc != MPI_SUCCESS) {
      return MpiError(rc, "MPI_Allreduce", "the \"mpi\" allreduce algorithm", comm);
    }
    done += piece;
  } while (done < count);
  return Status::OK();
}

}  // namespace tfdist
