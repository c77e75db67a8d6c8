#include "cc/core/transport/transport.h"

namespace tfdist {

Status Transport::Send(int peer, const void* data, size_t bytes, int tag) {
  return StartSend(peer, data, bytes, tag)->Wait();
}

Status Transport::Recv(int peer, void* data, size_t bytes, int tag) {
  return StartRecv(peer, data, bytes, tag)->Wait();
}

Status Transport::SendRecv(int send_peer, const void* send_data,
                           size_t send_bytes, int recv_peer, void* recv_data,
                           size_t recv_bytes, int tag) {
  auto recv = StartRecv(recv_peer, recv_data, recv_bytes, tag);
  auto send = StartSend(send_peer, send_data, send_bytes, tag);
  Status recv_status = recv->Wait();
  Status send_status = send->Wait();
  return recv_status.ok() ? send_status : recv_status;
}

}  // namespace tfdist
