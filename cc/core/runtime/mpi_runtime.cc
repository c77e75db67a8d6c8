#include "cc/core/runtime/mpi_runtime.h"

#include <utility>

#include "cc/core/runtime/calibration.h"
#include "cc/core/runtime/settings_agreement.h"
#include "cc/core/transport/mpi_allreduce.h"
#include "cc/core/transport/mpi_control_plane.h"
#include "cc/core/transport/mpi_transport.h"

namespace tfdist {

namespace {

// What the runtime talks through, kept alive by it (RuntimeLinks::owner).
struct MpiLinks {
  std::unique_ptr<MpiTransport> transport;
  std::unique_ptr<MpiControlPlane> control_plane;
};

}  // namespace

Status CreateMpiRuntime(MPI_Comm comm, const RuntimeConfig& config,
                        std::unique_ptr<Runtime>* out) {
  auto mpi = std::make_shared<MpiLinks>();
  TFDIST_RETURN_IF_ERROR(MpiTransport::Create(comm, &mpi->transport));
  TFDIST_RETURN_IF_ERROR(MpiControlPlane::Create(comm, &mpi->control_plane));
  // Before anything collective that depends on them (the calibration does).
  TFDIST_RETURN_IF_ERROR(CheckSettingsAgreeAcross(*mpi->control_plane, config));
  LinkCost link_cost{};
  TFDIST_RETURN_IF_ERROR(CalibrateLinkCost(*mpi->transport, config, &link_cost));
  RuntimeLinks links;
  links.transport = mpi->transport.get();
  links.control_plane = mpi->control_plane.get();
  const MPI_Comm data_comm = mpi->transport->comm();
  links.reference_allreduce = [data_comm](void* buffer, size_t count, DataType dtype,
                                          ReduceOp op) {
    return MpiNativeAllreduce(data_comm, buffer, count, dtype, op);
  };
  links.owner = std::move(mpi);
  return Runtime::Start(config, std::move(links), link_cost, out);
}

}  // namespace tfdist
