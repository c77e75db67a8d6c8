#include "cc/core/control/shared_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace tfdist {

namespace {

constexpr size_t kPage = 4096;

std::string Errno(const char* call, int code) {
  return std::string(call) + ": " + std::strerror(code);
}

// Maps the object `name` of `bytes`, creating and reserving it where
// `create`; null with the reason in *why where it cannot, and then an object
// it created is gone again.
char* MapObject(const std::string& name, size_t bytes, bool create, std::string* why) {
  const int fd = shm_open(name.c_str(), create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
  if (fd < 0) {
    *why = Errno("shm_open", errno);
    return nullptr;
  }
  void* base = MAP_FAILED;
  const int rc = create ? posix_fallocate(fd, 0, static_cast<off_t>(bytes)) : 0;
  if (rc != 0) {
    *why = Errno("posix_fallocate", rc) + " (" + std::to_string(bytes >> 20) +
           " MiB in /dev/shm)";
  } else {
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) *why = Errno("mmap", errno);
  }
  close(fd);  // a mapping keeps the object
  if (base == MAP_FAILED) {
    if (create) shm_unlink(name.c_str());
    return nullptr;
  }
  return static_cast<char*>(base);
}

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string String(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

}  // namespace

Status SharedSegment::Create(ControlPlane& control_plane, size_t region_bytes,
                             std::unique_ptr<SharedSegment>* out, std::string* why_not) {
  out->reset();
  why_not->clear();
  const int ranks = control_plane.size();
  const size_t stride = (region_bytes + kPage - 1) / kPage * kPage;
  const size_t bytes = stride * static_cast<size_t>(ranks);
  // Rank 0 sends "1<name>" or "0<reason>". kIdle: waits at init say nothing
  // about the waits of the job's collectives (settings_agreement.cc).
  static std::atomic<int> created{0};
  std::string name;
  std::string why;
  char* base = nullptr;
  std::vector<uint8_t> offer;
  if (control_plane.rank() == 0) {
    name = "/tfdist-" + std::to_string(getpid()) + "-" + std::to_string(created++);
    base = MapObject(name, bytes, /*create=*/true, &why);
    offer = Bytes(base != nullptr ? "1" + name : "0rank 0: " + why);
  }
  std::vector<std::vector<uint8_t>> offers;
  TFDIST_RETURN_IF_ERROR(control_plane.Allgatherv(offer, WaitKind::kIdle, &offers));
  const std::string offered = String(offers[0]);
  if (offered.empty() || offered[0] != '1') {  // every rank learns it here, alike
    *why_not = offered.empty() ? "rank 0 offered no segment" : offered.substr(1);
    return Status::OK();
  }
  if (control_plane.rank() != 0) {
    name = offered.substr(1);
    base = MapObject(name, bytes, /*create=*/false, &why);
    if (base == nullptr) why = "rank " + std::to_string(control_plane.rank()) + ": " + why;
  }
  // Every rank's outcome: "" where it mapped the segment, its reason where not.
  std::vector<std::vector<uint8_t>> outcomes;
  TFDIST_RETURN_IF_ERROR(control_plane.Allgatherv(Bytes(base != nullptr ? "" : why),
                                                  WaitKind::kIdle, &outcomes));
  if (control_plane.rank() == 0) shm_unlink(name.c_str());
  for (const std::vector<uint8_t>& outcome : outcomes) {
    if (!outcome.empty()) {
      *why_not = String(outcome);
      break;
    }
  }
  if (!why_not->empty()) {
    if (base != nullptr) munmap(base, bytes);
    return Status::OK();
  }
  *out = std::make_unique<SharedSegment>(base, bytes, stride, ranks);
  return Status::OK();
}

SharedSegment::~SharedSegment() { munmap(base_, mapped_bytes_); }

std::vector<char*> SharedSegment::regions() const {
  std::vector<char*> out;
  for (int q = 0; q < ranks_; ++q) out.push_back(base_ + static_cast<size_t>(q) * region_stride_);
  return out;
}

}  // namespace tfdist
