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

  per_rank[1] = per_rank[0];
  per_rank[1].calibration_cached = 1;
  CHECK(tfdist::CheckSettingsAgree(per_rank).message().find("TFDIST_CALIBRATION_CACHE_DIR") !=
        std::string::npos);
}

}  // namespace tfdist_test
