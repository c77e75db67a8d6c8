// SharedSegment over threads as ranks (each maps the object itself, as a
// process would): every rank sees the others' writes, nothing is left in
// /dev/shm, and a segment that cannot be made leaves every rank without one
// and with the same reason, instead of failing or killing the process.
#include <dirent.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cc/core/control/shared_segment.h"
#include "cc/core/control/transport_control_plane.h"
#include "cc/testing/in_process_transport.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::ControlPlane;
using tfdist::RunOnThreads;
using tfdist::SharedSegment;
using tfdist::Status;
using tfdist::Transport;
using tfdist::TransportControlPlane;

// The names in /dev/shm that this process's segments would have.
std::vector<std::string> OurObjects() {
  std::vector<std::string> found;
  const std::string prefix = "tfdist-" + std::to_string(getpid()) + "-";
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* entry = readdir(dir)) {
      if (std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0) {
        found.emplace_back(entry->d_name);
      }
    }
    closedir(dir);
  }
  return found;
}

// SharedSegment::Create on `ranks` threads: each rank's status, segment and reason.
struct Created {
  std::vector<Status> statuses;
  std::vector<std::unique_ptr<SharedSegment>> segments;
  std::vector<std::string> reasons;
};

Created CreateOnThreads(int ranks, size_t region_bytes) {
  Created out;
  out.segments.resize(ranks);
  out.reasons.resize(ranks);
  out.statuses = RunOnThreads(ranks, [&](Transport& transport) {
    TransportControlPlane plane(transport);
    return SharedSegment::Create(plane, region_bytes, &out.segments[transport.rank()],
                                 &out.reasons[transport.rank()]);
  });
  return out;
}

TFDIST_TEST(SharedSegmentIsSharedByEveryRankAndLeavesNothingBehind) {
  constexpr int kRanks = 3;
  constexpr size_t kRegionBytes = 10000;  // not a page multiple
  const Created created = CreateOnThreads(kRanks, kRegionBytes);
  for (int rank = 0; rank < kRanks; ++rank) {
    CHECK_EQ(DescribeStatus(created.statuses[rank]), std::string("OK"));
    if (created.segments[rank] == nullptr) {
      CHECK_MSG(false, "rank " << rank << " has no segment: " << created.reasons[rank]);
      return;
    }
  }
  CHECK(OurObjects().empty());
  // Each rank writes the whole of its own region; every mapping sees every region.
  for (int rank = 0; rank < kRanks; ++rank) {
    const std::vector<char*> regions = created.segments[rank]->regions();
    CHECK_EQ(regions.size(), static_cast<size_t>(kRanks));
    CHECK_EQ(reinterpret_cast<uintptr_t>(regions[rank]) % 64, 0u);
    std::memset(regions[rank], 'a' + rank, kRegionBytes);
  }
  for (int viewer = 0; viewer < kRanks; ++viewer) {
    const std::vector<char*> regions = created.segments[viewer]->regions();
    for (int owner = 0; owner < kRanks; ++owner) {
      CHECK_MSG(regions[owner][0] == 'a' + owner && regions[owner][kRegionBytes - 1] == 'a' + owner,
                "rank " << viewer << " reading rank " << owner << "'s region");
    }
  }
}

TFDIST_TEST(SharedSegmentThatCannotBeMadeLeavesEveryRankWithoutOne) {
  // More than /dev/shm can hold: posix_fallocate refuses on rank 0.
  constexpr int kRanks = 2;
  constexpr size_t kRegionBytes = size_t{1} << 50;
  const Created created = CreateOnThreads(kRanks, kRegionBytes);
  for (int rank = 0; rank < kRanks; ++rank) {
    CHECK_EQ(DescribeStatus(created.statuses[rank]), std::string("OK"));
    CHECK(created.segments[rank] == nullptr);
    CHECK_MSG(created.reasons[rank].find("rank 0: posix_fallocate") == 0, created.reasons[rank]);
    CHECK_EQ(created.reasons[rank], created.reasons[0]);
  }
  CHECK(OurObjects().empty());
}

}  // namespace
}  // namespace tfdist_test
