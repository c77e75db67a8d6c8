// CheckSettingsAgree: equal settings pass; the first differing one is named
// with the rank and both values.
#include <string>
#include <vector>

#include "cc/core/runtime/settings_agreement.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {

TFDIST_TEST(SettingsThatAgreePass) {
  tfdist::RuntimeConfig config;
  const tfdist::SharedSettings s = tfdist::SharedSettingsOf(config);
  CHECK_OK(tfdist::CheckSettingsAgree({s, s, s}));
  CHECK_OK(tfdist::CheckSettingsAgree({s}));
}

TFDIST_TEST(TheFirstDifferingSettingIsNamed) {
  tfdist::RuntimeConfig config;
  std::vector<tfdist::SharedSettings> per_rank(3, tfdist::SharedSettingsOf(config));
  per_rank[2].fusion_threshold_bytes = 0;
  per_rank[1].default_algorithm = static_cast<int32_t>(tfdist::AllreduceAlgorithm::kRing);
  const tfdist::Status status = tfdist::CheckSettingsAgree(per_rank);
  CHECK(status.code() == tfdist::StatusCode::kFailedPrecondition);
  CHECK(status.message().find("TFDIST_FUSION_THRESHOLD: rank 0 has 67108864, rank 2 has 0") !=
        std::string::npos);

  per_rank[2] = per_rank[0];
  const tfdist::Status algorithm = tfdist::CheckSettingsAgree(per_rank);
  CHECK(algorithm.message().find("TFDIST_ALLREDUCE_ALGORITHM: rank 0 has auto, rank 1 has ring") !=
        std::string::npos);
}

TFDIST_TEST(EmulationOnOneRankOnlyIsNamed) {
  tfdist::RuntimeConfig config;
  std::vector<tfdist::SharedSettings> per_rank(2, tfdist::SharedSettingsOf(config));
  per_rank[1].emulated_bandwidth = 1.25e9;
  CHECK(tfdist::CheckSettingsAgree(per_rank).message().find(
            "TFDIST_EMULATED_BANDWIDTH: rank 0 has unset, rank 1 has 1250000000") !=
        std::string::npos);
  per_rank[1] = per_rank[0];
  per_rank[1].virtual_hosts = 2;
  CHECK(tfdist::CheckSettingsAgree(per_rank).message().find(
            "TFDIST_VIRTUAL_HOSTS: rank 0 has unset, rank 1 has 2") != std::string::npos);
  per_rank[1] = per_rank[0];
  per_rank[1].inter_host_seconds_per_byte = 1e-9;
  CHECK(tfdist::CheckSettingsAgree(per_rank).message().find(
            "TFDIST_INTER_HOST_SECONDS_PER_BYTE") != std::string::npos);
}

TFDIST_TEST(AutotuneOnOneRankOnlyIsNamed) {
  // The negotiation carries the tuner's words only with autotuning on: a
  // rank without it would exchange bit vectors of another length.
  tfdist::RuntimeConfig config;
  std::vector<tfdist::SharedSettings> per_rank(2, tfdist::SharedSettingsOf(config));
  config.autotune = true;
  per_rank[1] = tfdist::SharedSettingsOf(config);
  CHECK(tfdist::CheckSettingsAgree(per_rank).message().find(
            "TFDIST_AUTOTUNE: rank 0 has 0, rank 1 has 1") != std::string::npos);
}

}  // namespace tfdist_test
