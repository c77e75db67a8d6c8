// Runs the registered tests and prints "N passed, N failed" as the last line;
// exits non-zero when a test failed. `tfdist_core_tests SUBSTRING` runs only
// the tests whose name contains SUBSTRING.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

struct RegisteredTest {
  const char* name;
  TestFunction function;
};

std::vector<RegisteredTest>& Registry() {
  static std::vector<RegisteredTest> tests;
  return tests;
}

constexpr int kMaxPrintedFailuresPerTest = 10;

std::mutex failure_mutex;
int failures_in_current_test = 0;  // guarded by failure_mutex

}  // namespace

TestRegistrar::TestRegistrar(const char* name, TestFunction function) {
  Registry().push_back({name, function});
}

void RecordFailure(const char* file, int line, const std::string& message) {
  std::lock_guard<std::mutex> lock(failure_mutex);
  ++failures_in_current_test;
  if (failures_in_current_test <= kMaxPrintedFailuresPerTest) {
    std::printf("  FAILED %s:%d: %s\n", file, line, message.c_str());
  } else if (failures_in_current_test == kMaxPrintedFailuresPerTest + 1) {
    std::printf("  (further failures of this test not printed)\n");
  }
  std::fflush(stdout);
}

std::string DescribeStatus(const tfdist::Status& status) {
  static const char* const kCodeNames[] = {"OK", "InvalidArgument",
                                           "FailedPrecondition", "Internal",
                                           "Aborted"};
  const int code = static_cast<int>(status.code());
  std::string text = (code >= 0 && code < 5) ? kCodeNames[code] : "Unknown";
  if (!status.message().empty()) text += ": " + status.message();
  return text;
}

}  // namespace tfdist_test

int main(int argc, char** argv) {
  using tfdist_test::Registry;
  const char* filter = argc > 1 ? argv[1] : nullptr;
  int passed = 0;
  int failed = 0;
  const auto suite_start = std::chrono::steady_clock::now();
  for (const auto& test : Registry()) {
    if (filter != nullptr && std::strstr(test.name, filter) == nullptr) continue;
    {
      std::lock_guard<std::mutex> lock(tfdist_test::failure_mutex);
      tfdist_test::failures_in_current_test = 0;
    }
    std::printf("[ RUN  ] %s\n", test.name);
    std::fflush(stdout);
    const auto start = std::chrono::steady_clock::now();
    test.function();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    int failures;
    {
      std::lock_guard<std::mutex> lock(tfdist_test::failure_mutex);
      failures = tfdist_test::failures_in_current_test;
    }
    if (failures == 0) {
      ++passed;
      std::printf("[  OK  ] %s (%.2f s)\n", test.name, seconds);
    } else {
      ++failed;
      std::printf("[ FAIL ] %s: %d failed checks (%.2f s)\n", test.name, failures,
                  seconds);
    }
  }
  const double total = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - suite_start)
                           .count();
  std::printf("total %.1f s\n", total);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
