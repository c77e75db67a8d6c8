// The runtime end to end with threads as ranks: one Runtime per rank over an
// InProcessFabric and a TransportControlPlane, each with its own background
// thread, exactly as in production but without MPI. Results are checked
// against sums computed here; every wait for a result has a deadline, so a
// hang fails the test instead of stopping the suite.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <fstream>
#include <future>
#include <sstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cc/core/runtime/runtime.h"
#include "cc/testing/in_process_transport.h"
#include "cc/core/control/transport_control_plane.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::CollectiveType;
using tfdist::DataType;
using tfdist::Request;
using tfdist::Runtime;
using tfdist::RuntimeConfig;
using tfdist::Status;
using tfdist::StatusCode;

constexpr auto kDeadline = std::chrono::seconds(20);

RuntimeConfig TestConfig() {
  RuntimeConfig config;
  config.stall_check_seconds = 600;  // no stall reports unless a test asks
  return config;
}

// P runtimes over one fabric. Stall reports of rank r go to reports[r], a
// temporary file the test can read back.
class Cluster {
 public:
  explicit Cluster(int size, const RuntimeConfig& config = TestConfig())
      : fabric_(size, Options()), left_(size) {
    for (int r = 0; r < size; ++r) {
      planes_.push_back(std::make_unique<tfdist::TransportControlPlane>(
          fabric_.transport(r), [this](const std::string& reason) {
            {
              // Several ranks may abort at once (a stall every rank sees).
              std::lock_guard<std::mutex> lock(left_mutex_);
              aborted_with_ = reason;
            }
            fabric_.Abort(reason);
          }));
      reports_.push_back(std::tmpfile());
      tfdist::RuntimeLinks links;
      links.transport = &fabric_.transport(r);
      links.control_plane = planes_.back().get();
      links.stall_reports = reports_.back();
      // An evicted rank "exits": the others' waits fail, as a dead process's
      // peers' do under ULFM.
      links.leave = [this, r](const std::string& why) {
        {
          std::lock_guard<std::mutex> lock(left_mutex_);
          left_[r] = why;
        }
        fabric_.Abort(why);
      };
      std::unique_ptr<Runtime> runtime;
      CHECK_OK(Runtime::Start(config, std::move(links), tfdist::HostLayout(size),
                              tfdist::UniformNetwork(tfdist::kDefaultLinkCost), &runtime));
      runtimes_.push_back(std::move(runtime));
    }
  }
  ~Cluster() {
    for (auto& runtime : runtimes_) runtime->Shutdown();
    runtimes_.clear();
    for (std::FILE* f : reports_) std::fclose(f);
  }

  int size() const { return static_cast<int>(runtimes_.size()); }
  Runtime& operator[](int rank) { return *runtimes_[rank]; }
  std::string Reports(int rank) {
    std::FILE* f = reports_[rank];
    std::fflush(f);
    const long length = std::ftell(f);
    std::string text(static_cast<size_t>(std::max(length, 0L)), '\0');
    std::rewind(f);
    if (length > 0 && std::fread(&text[0], 1, text.size(), f) != text.size()) text.clear();
    return text;
  }
  // Set by a control plane's Abort (written by any rank's round thread).
  std::string aborted_with() {
    std::lock_guard<std::mutex> lock(left_mutex_);
    return aborted_with_;
  }
  // Why rank r was evicted (its leave action's argument), or "".
  std::string left(int r) {
    std::lock_guard<std::mutex> lock(left_mutex_);
    return left_[r];
  }

 private:
  static tfdist::InProcessFabricOptions Options() {
    tfdist::InProcessFabricOptions options;
    options.wait_timeout = std::chrono::milliseconds(30000);
    return options;
  }

  tfdist::InProcessFabric fabric_;
  std::vector<std::unique_ptr<tfdist::TransportControlPlane>> planes_;
  std::vector<std::FILE*> reports_;
  std::vector<std::unique_ptr<Runtime>> runtimes_;
  std::string aborted_with_;
  std::mutex left_mutex_;
  std::vector<std::string> left_;
};

// A request whose completion can be waited for, with its buffers.
struct Pending {
  std::vector<float> input;
  std::vector<float> output;
  std::vector<int64_t> output_shape;
  // Shared with the request's done callback, so that a runtime failing a
  // request late (at shutdown, after a test gave up on it) finds it alive.
  std::shared_ptr<std::promise<Status>> promise = std::make_shared<std::promise<Status>>();
  std::future<Status> done = promise->get_future();

  // The status, or Internal("hang") when it did not complete in time.
  Status Wait() {
    if (done.wait_for(kDeadline) != std::future_status::ready) {
      return Status::Internal("the request did not complete: a hang");
    }
    return done.get();
  }
};

// Rank r's input for tensor `salt`: small integers, so sums are exact.
std::vector<float> InputOf(int rank, int salt, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>((rank + 1) * ((i + salt) % 5 + 1));
  return v;
}

std::vector<float> SumOver(const std::vector<int>& ranks, int salt, size_t count) {
  std::vector<float> sum(count, 0.0f);
  for (int r : ranks) {
    const std::vector<float> in = InputOf(r, salt, count);
    for (size_t i = 0; i < count; ++i) sum[i] += in[i];
  }
  return sum;
}

std::vector<int> AllRanks(int size) {
  std::vector<int> ranks(size);
  for (int r = 0; r < size; ++r) ranks[r] = r;
  return ranks;
}

Request Describe(const std::string& name, CollectiveType type, DataType dtype,
                 std::vector<int64_t> shape, Pending& pending) {
  Request request;
  request.name = name;
  request.description.type = type;
  request.description.dtype = dtype;
  request.description.shape = std::move(shape);
  request.input = pending.input.data();
  request.output = pending.output.data();
  request.allocate_output = [&pending](const std::vector<int64_t>& shape, void** data) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    pending.output.assign(static_cast<size_t>(n), 0.0f);
    pending.output_shape = shape;
    *data = pending.output.data();
    return Status::OK();
  };
  request.done = [promise = pending.promise](const Status& status) { promise->set_value(status); };
  return request;
}

// Enqueues an allreduce (sum, float32) of rank `rank`'s input for `salt`.
std::unique_ptr<Pending> SubmitAllreduce(Runtime& runtime, const std::string& name, int salt,
                                         size_t count, DataType dtype = DataType::kFloat32) {
  auto pending = std::make_unique<Pending>();
  pending->input = InputOf(runtime.rank(), salt, count);
  pending->output.assign(count, -1.0f);
  Status status = runtime.Enqueue(Describe(name, CollectiveType::kAllreduce, dtype,
                                           {static_cast<int64_t>(count)}, *pending));
  if (!status.ok()) pending->promise->set_value(status);
  return pending;
}

uint64_t FullRounds(const Runtime& runtime) {
  return runtime.stats().negotiation_rounds.load() - runtime.stats().cached_rounds.load();
}

// Every rank allreduces each of `names` (the i-th with salt i) and waits;
// checks the sums.
void AllreduceEverywhere(Cluster& cluster, const std::vector<std::string>& names,
                         size_t count) {
  std::vector<std::vector<std::unique_ptr<Pending>>> pending(cluster.size());
  for (int r = 0; r < cluster.size(); ++r) {
    for (size_t i = 0; i < names.size(); ++i) {
      pending[r].push_back(SubmitAllreduce(cluster[r], names[i], static_cast<int>(i), count));
    }
  }
  for (int r = 0; r < cluster.size(); ++r) {
    for (size_t i = 0; i < names.size(); ++i) {
      CHECK_OK(pending[r][i]->Wait());
      CHECK_EQ_MSG(pending[r][i]->output == SumOver(AllRanks(cluster.size()), i, count), true,
                   names[i] << " on rank " << r);
    }
  }
}

}  // namespace

TFDIST_TEST(RuntimeRunsTensorsSubmittedInDifferentOrdersOnEachRank) {
  constexpr int kSize = 3;
  Cluster cluster(kSize);
  const std::vector<std::string> names = {"a", "b", "c", "d", "e"};
  // Rank r submits them rotated by r, one at a time from its own thread,
  // with a pause in between so that they land in different rounds.
  std::vector<std::vector<std::unique_ptr<Pending>>> pending(kSize);
  std::vector<std::unique_ptr<Pending>> gathered(kSize);
  std::vector<std::thread> threads;
  for (int r = 0; r < kSize; ++r) {
    pending[r].resize(names.size());
    threads.emplace_back([&, r] {
      for (size_t k = 0; k < names.size(); ++k) {
        const size_t i = (k + r) % names.size();
        pending[r][i] = SubmitAllreduce(cluster[r], names[i], static_cast<int>(i), 10 + 7 * i);
        std::this_thread::sleep_for(std::chrono::milliseconds(2 * r));
      }
      // And an allgather whose first dimension differs per rank.
      gathered[r] = std::make_unique<Pending>();
      gathered[r]->input = InputOf(r, 9, 2 * (r + 1));
      CHECK_OK(cluster[r].Enqueue(Describe("g", CollectiveType::kAllgather, DataType::kFloat32,
                                           {r + 1, 2}, *gathered[r])));
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<float> gathered_expected;
  for (int r = 0; r < kSize; ++r) {
    const std::vector<float> in = InputOf(r, 9, 2 * (r + 1));
    gathered_expected.insert(gathered_expected.end(), in.begin(), in.end());
  }
  for (int r = 0; r < kSize; ++r) {
    for (size_t i = 0; i < names.size(); ++i) {
      CHECK_OK(pending[r][i]->Wait());
      CHECK_EQ_MSG(pending[r][i]->output == SumOver(AllRanks(kSize), i, 10 + 7 * i), true,
                   names[i] << " on rank " << r);
    }
    CHECK_OK(gathered[r]->Wait());
    CHECK_EQ_MSG(gathered[r]->output == gathered_expected, true, "allgather on rank " << r);
    CHECK_EQ_MSG(gathered[r]->output_shape == std::vector<int64_t>({6, 2}), true, "rank " << r);
  }
}

TFDIST_TEST(RuntimeResponseCacheHitsAndEvicts) {
  RuntimeConfig config = TestConfig();
  config.cache_capacity = 2;
  Cluster cluster(2, config);
  // Rounds in which some rank had something to say in full. A tensor found
  // in every rank's cache needs none: it is announced by its bit alone.
  auto full_rounds_for = [&](const std::vector<std::string>& names) {
    const uint64_t before = FullRounds(cluster[0]);
    AllreduceEverywhere(cluster, names, 33);
    return FullRounds(cluster[0]) - before;
  };
  CHECK(full_rounds_for({"a"}) > 0);           // new: said in full, then cached
  CHECK_EQ(full_rounds_for({"a"}), uint64_t{0});  // a hit
  CHECK(full_rounds_for({"b"}) > 0);           // fills the second slot
  CHECK(full_rounds_for({"c"}) > 0);           // evicts the least recently used: a
  CHECK(full_rounds_for({"a"}) > 0);           // a miss again (and evicts b)
  CHECK_EQ(full_rounds_for({"c"}), uint64_t{0});  // c stayed
  CHECK_EQ(full_rounds_for({"a"}), uint64_t{0});
}

TFDIST_TEST(RuntimeReportsAMismatchIdenticallyOnEveryRank) {
  constexpr int kSize = 3;
  Cluster cluster(kSize);
  std::vector<std::unique_ptr<Pending>> dtype(kSize), shape(kSize);
  for (int r = 0; r < kSize; ++r) {
    // Rank 2 sends float64 under the same name, and one element more.
    dtype[r] = SubmitAllreduce(cluster[r], "w", 0, 4,
                               r == 2 ? DataType::kFloat64 : DataType::kFloat32);
    shape[r] = SubmitAllreduce(cluster[r], "v", 0, r == 1 ? 5 : 4);
  }
  std::vector<Status> dtype_status(kSize), shape_status(kSize);
  for (int r = 0; r < kSize; ++r) {
    dtype_status[r] = dtype[r]->Wait();
    shape_status[r] = shape[r]->Wait();
  }
  for (int r = 0; r < kSize; ++r) {
    CHECK(dtype_status[r].code() == StatusCode::kFailedPrecondition);
    CHECK_EQ_MSG(dtype_status[r].message(), dtype_status[0].message(), "rank " << r);
    CHECK(shape_status[r].code() == StatusCode::kFailedPrecondition);
    CHECK_EQ_MSG(shape_status[r].message(), shape_status[0].message(), "rank " << r);
  }
  CHECK_EQ(dtype_status[0].message(),
           std::string("tfdist: ranks disagree on the dtype of tensor 'w' (allreduce): "
                       "rank 0 has float32, rank 2 has float64"));
  CHECK_EQ(shape_status[0].message(),
           std::string("tfdist: ranks disagree on the shape of tensor 'v' (allreduce): "
                       "rank 0 has [4], rank 1 has [5]"));
  // The runtime goes on: a good collective still works afterwards.
  AllreduceEverywhere(cluster, {"after"}, 8);
}

TFDIST_TEST(RuntimeJoinedRankStandsInForTheOthers) {
  constexpr int kSize = 3;
  constexpr int kJoiner = 2;
  Cluster cluster(kSize);
  std::vector<std::unique_ptr<Pending>> joins(kSize);
  std::vector<int32_t> last_joined(kSize, -7);
  auto submit_join = [&](int r) {
    joins[r] = std::make_unique<Pending>();
    Request request = Describe("tfdist.join", CollectiveType::kJoin, DataType::kInt32, {},
                               *joins[r]);
    request.output = &last_joined[r];
    CHECK_OK(cluster[r].Enqueue(std::move(request)));
  };
  submit_join(kJoiner);
  // The others go on: an allreduce, to which the joined rank adds nothing
  // (the sum's identity), an allgather, to which it adds no rows, and the
  // same allreduce again (a response-cache hit, with a stand-in).
  for (int step = 0; step < 2; ++step) {
    std::vector<std::unique_ptr<Pending>> sums(kSize), rows(kSize);
    for (int r = 0; r < kSize; ++r) {
      if (r == kJoiner) continue;
      sums[r] = SubmitAllreduce(cluster[r], "grad", 3, 300);
      rows[r] = std::make_unique<Pending>();
      rows[r]->input = InputOf(r, 4, 3);
      CHECK_OK(cluster[r].Enqueue(Describe("rows", CollectiveType::kAllgather,
                                           DataType::kFloat32, {1, 3}, *rows[r])));
    }
    std::vector<float> rows_expected = InputOf(0, 4, 3);
    const std::vector<float> rows_of_1 = InputOf(1, 4, 3);
    rows_expected.insert(rows_expected.end(), rows_of_1.begin(), rows_of_1.end());
    for (int r = 0; r < kSize; ++r) {
      if (r == kJoiner) continue;
      CHECK_OK(sums[r]->Wait());
      CHECK_EQ_MSG(sums[r]->output == SumOver({0, 1}, 3, 300), true, "step " << step << " rank " << r);
      CHECK_OK(rows[r]->Wait());
      CHECK_EQ_MSG(rows[r]->output == rows_expected, true, "step " << step << " rank " << r);
    }
  }
  // The joined rank's join has not completed: the others still train.
  CHECK(joins[kJoiner]->done.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready);
  submit_join(0);
  submit_join(1);
  for (int r = 0; r < kSize; ++r) CHECK_OK(joins[r]->Wait());
  // Every rank returns the same rank, one of the two that joined last.
  for (int r = 0; r < kSize; ++r) CHECK_EQ_MSG(last_joined[r], last_joined[0], "rank " << r);
  CHECK(last_joined[0] == 0 || last_joined[0] == 1);
  // After the join every rank trains again, with every rank's input.
  AllreduceEverywhere(cluster, {"grad"}, 300);
}

TFDIST_TEST(RuntimeReportsAStallNamingTheTensorAndTheMissingRank) {
  constexpr int kSize = 3;
  RuntimeConfig config = TestConfig();
  config.stall_check_seconds = 0.2;
  Cluster cluster(kSize, config);
  std::vector<std::unique_ptr<Pending>> pending(kSize);
  pending[0] = SubmitAllreduce(cluster[0], "late", 0, 16);
  pending[1] = SubmitAllreduce(cluster[1], "late", 0, 16);
  // The inspector looks once a second: give it a look (with a margin for a
  // loaded machine) while rank 2 is late.
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
  pending[2] = SubmitAllreduce(cluster[2], "late", 0, 16);
  for (int r = 0; r < kSize; ++r) {
    CHECK_OK(pending[r]->Wait());
    CHECK_EQ_MSG(pending[r]->output == SumOver(AllRanks(kSize), 0, 16), true, "rank " << r);
  }
  for (int r = 0; r < 2; ++r) {
    const std::string report = cluster.Reports(r);
    CHECK_EQ_MSG(report.find("tfdist stall (rank " + std::to_string(r) + "): 'late' has waited") !=
                     std::string::npos,
                 true, report);
    CHECK_EQ_MSG(report.find("ranks that have not submitted it: 2\n") != std::string::npos, true,
                 report);
  }
  CHECK_EQ_MSG(cluster.Reports(2), std::string(), "rank 2 waited for nobody");
}

TFDIST_TEST(RuntimeStallShutdownAbortsTheJob) {
  constexpr int kSize = 2;
  RuntimeConfig config = TestConfig();
  config.stall_check_seconds = 0.5;
  config.stall_shutdown_seconds = 1.0;
  Cluster cluster(kSize, config);
  // Rank 1 never submits it.
  std::unique_ptr<Pending> stuck = SubmitAllreduce(cluster[0], "never", 0, 4);
  const Status status = stuck->Wait();
  CHECK(status.code() == StatusCode::kAborted);
  CHECK_EQ_MSG(cluster.aborted_with().find("TFDIST_STALL_SHUTDOWN_TIME") != std::string::npos,
               true, cluster.aborted_with());
  CHECK_EQ_MSG(cluster.Reports(0).find("aborting the job") != std::string::npos, true,
               cluster.Reports(0));
  // Rank 1's runtime stops too (the abort fails its waits): work handed to
  // it fails, refused at once if it already stopped, or with the abort if it
  // was between rounds; it never waits.
  std::unique_ptr<Pending> refused = SubmitAllreduce(cluster[1], "after", 0, 4);
  const Status after = refused->Wait();
  CHECK_EQ_MSG(after.code() == StatusCode::kFailedPrecondition ||
                   after.code() == StatusCode::kAborted,
               true, after.message());
}

TFDIST_TEST(RuntimeStallEvictionEvictsOnlyTheRankThatWaitsOnNothing) {
  constexpr int kSize = 3;
  RuntimeConfig config = TestConfig();
  config.stall_check_seconds = 0.3;
  config.stall_shutdown_seconds = 1.0;
  config.stall_eviction = true;
  Cluster cluster(kSize, config);
  // A cached tensor first, so that the stalled one waits by cache bit and
  // the verdict needs the full announcements.
  AllreduceEverywhere(cluster, {"stuck"}, 7);
  // Ranks 0 and 1 wait; rank 2 never submits it (stuck outside tfdist).
  std::unique_ptr<Pending> a = SubmitAllreduce(cluster[0], "stuck", 0, 7);
  std::unique_ptr<Pending> b = SubmitAllreduce(cluster[1], "stuck", 0, 7);
  const Status status_a = a->Wait();
  const Status status_b = b->Wait();
  // Rank 2 left; the others' waits failed when it did (the fabric's abort
  // stands in for ULFM's failure notice), not with a hang.
  CHECK_EQ_MSG(cluster.left(2).find("evicted by the other ranks") != std::string::npos &&
                   cluster.left(2).find("'stuck'") != std::string::npos,
               true, cluster.left(2));
  CHECK_EQ_MSG(cluster.left(0) + cluster.left(1), std::string(), "only rank 2 leaves");
  CHECK(!status_a.ok() && !status_b.ok());
  CHECK_EQ_MSG(cluster.aborted_with(), std::string(), "the job was not aborted");
  for (int r = 0; r < 2; ++r) {
    const std::string report = cluster.Reports(r);
    CHECK_EQ_MSG(report.find("are evicted (they exit)") != std::string::npos &&
                     report.find("aborting the job") == std::string::npos,
                 true, report);
  }
}

TFDIST_TEST(RuntimeStallEvictionAbortsWhenRanksWaitOnEachOther) {
  constexpr int kSize = 2;
  RuntimeConfig config = TestConfig();
  config.stall_check_seconds = 0.3;
  config.stall_shutdown_seconds = 1.0;
  config.stall_eviction = true;
  Cluster cluster(kSize, config);
  // Each rank waits on a collective the other never submits: a mismatch,
  // not a stuck rank. Nobody is evicted; the job aborts as without eviction.
  std::unique_ptr<Pending> a = SubmitAllreduce(cluster[0], "mine", 0, 4);
  std::unique_ptr<Pending> b = SubmitAllreduce(cluster[1], "yours", 0, 4);
  CHECK(a->Wait().code() == StatusCode::kAborted);
  CHECK(b->Wait().code() == StatusCode::kAborted);
  CHECK_EQ_MSG(cluster.left(0) + cluster.left(1), std::string(), "nobody is evicted");
  CHECK_EQ_MSG(cluster.aborted_with().find("TFDIST_STALL_SHUTDOWN_TIME") != std::string::npos,
               true, cluster.aborted_with());
  const std::string reports = cluster.Reports(0) + cluster.Reports(1);
  CHECK_EQ_MSG(reports.find("no rank can be evicted") != std::string::npos, true, reports);
}

TFDIST_TEST(RuntimeShutdownFailsWaitingCollectivesWithoutHanging) {
  constexpr int kSize = 3;
  Cluster cluster(kSize);
  // Ranks 0 and 1 wait for rank 2, which shuts down instead.
  std::unique_ptr<Pending> a = SubmitAllreduce(cluster[0], "x", 0, 64);
  std::unique_ptr<Pending> b = SubmitAllreduce(cluster[1], "x", 0, 64);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto shutdown = std::async(std::launch::async, [&] { cluster[2].Shutdown(); });
  CHECK(shutdown.wait_for(kDeadline) == std::future_status::ready);
  const Status status_a = a->Wait();
  const Status status_b = b->Wait();
  CHECK(status_a.code() == StatusCode::kAborted);
  CHECK(status_b.code() == StatusCode::kAborted);
  // The survivors are told who stopped and why, and that they stop because of it.
  for (const Status* status : {&status_a, &status_b}) {
    CHECK_EQ_MSG(status->message().find("rank 2 called tfdist.shutdown()") != std::string::npos &&
                     status->message().find("stops too") != std::string::npos,
                 true, status->message());
  }
  CHECK_EQ_MSG(status_a.message().find("this rank (0)") != std::string::npos, true,
               status_a.message());
  // Every rank stopped, and says why when asked for more.
  for (int r = 0; r < kSize; ++r) {
    std::unique_ptr<Pending> late = SubmitAllreduce(cluster[r], "y", 0, 4);
    const Status refused = late->Wait();
    CHECK_EQ_MSG(refused.code() == StatusCode::kFailedPrecondition, true,
                 "rank " << r << ": " << refused.message());
  }
}

TFDIST_TEST(RuntimeBarrierAndTheMpiAlgorithmWithoutMpi) {
  constexpr int kSize = 2;
  Cluster cluster(kSize);
  std::vector<std::unique_ptr<Pending>> barriers(kSize), reference(kSize);
  for (int r = 0; r < kSize; ++r) {
    barriers[r] = std::make_unique<Pending>();
    CHECK_OK(cluster[r].Enqueue(
        Describe("barrier", CollectiveType::kBarrier, DataType::kFloat32, {}, *barriers[r])));
  }
  for (int r = 0; r < kSize; ++r) CHECK_OK(barriers[r]->Wait());
  // MPI_Allreduce as the reference needs MPI: without it, a clear error on
  // every rank (not a hang, not a wrong answer).
  for (int r = 0; r < kSize; ++r) {
    reference[r] = std::make_unique<Pending>();
    reference[r]->input = InputOf(r, 0, 4);
    reference[r]->output.assign(4, 0.0f);
    Request request = Describe("ref", CollectiveType::kAllreduce, DataType::kFloat32, {4},
                               *reference[r]);
    request.description.algorithm = tfdist::AllreduceAlgorithm::kMpi;
    CHECK_OK(cluster[r].Enqueue(std::move(request)));
  }
  for (int r = 0; r < kSize; ++r) {
    const Status status = reference[r]->Wait();
    CHECK(status.code() == StatusCode::kFailedPrecondition);
    CHECK(status.message().find("'mpi'") != std::string::npos);
  }
  AllreduceEverywhere(cluster, {"still fine"}, 5);
}

TFDIST_TEST(RuntimePhaseCountersTimeEachPartOfARound) {
  // Rank 1 submits kLate after rank 0, and every completion callback sleeps
  // kCallback: rank 0's negotiation and both ranks' completion counters must
  // hold those waits, and the collectives counter must not include the
  // callbacks. Lower bounds only, each a sleep that cannot come out shorter.
  constexpr auto kLate = std::chrono::milliseconds(60);
  constexpr auto kCallback = std::chrono::milliseconds(40);
  constexpr size_t kCount = 64;
  Cluster cluster(2);
  auto ns = [](std::chrono::milliseconds d) {
    return static_cast<uint64_t>(std::chrono::nanoseconds(d).count());
  };
  std::vector<std::unique_ptr<Pending>> pending(2);
  for (int r = 0; r < 2; ++r) {
    if (r == 1) std::this_thread::sleep_for(kLate);
    pending[r] = std::make_unique<Pending>();
    pending[r]->input = InputOf(r, 0, kCount);
    pending[r]->output.assign(kCount, -1.0f);
    Request request = Describe("timed", CollectiveType::kAllreduce, DataType::kFloat32,
                               {static_cast<int64_t>(kCount)}, *pending[r]);
    request.done = [promise = pending[r]->promise, kCallback](const Status& status) {
      std::this_thread::sleep_for(kCallback);
      promise->set_value(status);
    };
    CHECK_OK(cluster[r].Enqueue(std::move(request)));
  }
  for (int r = 0; r < 2; ++r) {
    CHECK_OK(pending[r]->Wait());
    CHECK_EQ_MSG(pending[r]->output == SumOver(AllRanks(2), 0, kCount), true, "rank " << r);
  }
  // The background thread adds a round's completion and collective times
  // after the callbacks return, so a callback's waiter can look before they
  // are in: wait (boundedly) until both are.
  for (int r = 0; r < 2; ++r) {
    const tfdist::Stats& stats = cluster[r].stats();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((stats.collectives_ns.load() == 0 || stats.completion_ns.load() < ns(kCallback)) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (int r = 0; r < 2; ++r) {
    const tfdist::Stats& stats = cluster[r].stats();
    CHECK_MSG(stats.pickup_ns.load() > 0, "rank " << r);
    CHECK_MSG(stats.completion_ns.load() >= ns(kCallback), "rank " << r << ": "
            << stats.completion_ns.load());
    CHECK_MSG(stats.collectives_ns.load() > 0, "rank " << r);
    CHECK_MSG(stats.collectives_ns.load() < ns(kCallback), "rank " << r << ": "
            << stats.collectives_ns.load() << " ns counts the completion callback");
  }
  // Rank 0's rounds block in the negotiation until rank 1 joins one; between
  // them it waits at most a cycle time (1 ms) a round, for a few rounds.
  CHECK_MSG(cluster[0].stats().negotiation_ns.load() >= ns(kLate) / 2,
          cluster[0].stats().negotiation_ns.load());
}

TFDIST_TEST(RuntimeAutotuneSwitchesEveryRankInTheSameRound) {
  // Training-like steps with autotuning on: every rank must apply the same
  // parameters at the same round (else fusion would differ between ranks
  // and the sums would be wrong or hang), log the same trials, and end on
  // the same algorithm choices.
  constexpr int kSize = 2;
  constexpr int kSteps = 150;
  const std::string log = "/tmp/tfdist_autotune_runtime_test_" + std::to_string(::getpid());
  RuntimeConfig config = TestConfig();
  config.autotune = true;
  config.autotune_log_path = log;
  const std::vector<size_t> counts = {1000, 5000, 70000};
  {
    Cluster cluster(kSize, config);
    std::vector<std::thread> threads;
    for (int r = 0; r < kSize; ++r) {
      threads.emplace_back([&, r] {
        for (int step = 0; step < kSteps; ++step) {
          std::vector<std::unique_ptr<Pending>> pending;
          for (size_t i = 0; i < counts.size(); ++i) {
            pending.push_back(SubmitAllreduce(cluster[r], "grad" + std::to_string(i),
                                              static_cast<int>(i) + step, counts[i]));
          }
          for (size_t i = 0; i < counts.size(); ++i) {
            CHECK_OK(pending[i]->Wait());
            CHECK_EQ_MSG(pending[i]->output ==
                             SumOver(AllRanks(kSize), static_cast<int>(i) + step, counts[i]),
                         true, "grad" << i << " step " << step << " rank " << r);
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (size_t bytes : {size_t{64}, size_t{4} << 10, size_t{280} << 10, size_t{4} << 20}) {
      CHECK(cluster[0].ResolveAlgorithm(tfdist::AllreduceAlgorithm::kAuto, bytes) ==
            cluster[1].ResolveAlgorithm(tfdist::AllreduceAlgorithm::kAuto, bytes));
    }
  }
  std::vector<std::string> logs;
  for (int r = 0; r < kSize; ++r) {
    std::ifstream file(log + "." + std::to_string(r));
    std::stringstream text;
    text << file.rdbuf();
    logs.push_back(text.str());
    std::remove((log + "." + std::to_string(r)).c_str());
  }
  CHECK_EQ_MSG(logs[0] == logs[1], true, "rank 0:\n" << logs[0] << "rank 1:\n" << logs[1]);
  CHECK_EQ_MSG(logs[0].find("generation,round,step,phase,") == 0, true, logs[0]);
  CHECK_EQ_MSG(logs[0].find(",baseline,") != std::string::npos, true, logs[0]);
  // 150 steps are enough to finish: the search is final by step 50 (its
  // budget, autotuner.h), which the final row's `step` column shows.
  const size_t final_row = logs[0].find(",final,");
  CHECK_EQ_MSG(final_row != std::string::npos, true, logs[0]);
  const size_t step_at = logs[0].rfind(',', final_row - 1) + 1;
  const int final_step = std::stoi(logs[0].substr(step_at, final_row - step_at));
  CHECK_EQ_MSG(final_step > 0 && final_step <= 50, true, "final at step " << final_step << "\n"
                                                                          << logs[0]);
}

}  // namespace tfdist_test
