// A minimal unit-test harness (no gtest in this project's toolchain).
//
//   TFDIST_TEST(SomethingWorks) { CHECK_EQ(1 + 1, 2); CHECK_OK(DoIt()); }
//
// Tests register themselves at static-initialisation time; test_main.cc runs
// them (optionally only those whose name contains argv[1]) and prints
// "N passed, N failed". A failed CHECK records the failure and the test goes
// on, so one run shows every broken case. CHECKs may be used from rank
// threads: failures are recorded under a lock.
#ifndef TFDIST_CC_TESTS_TEST_HARNESS_H_
#define TFDIST_CC_TESTS_TEST_HARNESS_H_

#include <cstddef>
#include <sstream>
#include <string>

#include "cc/core/base/status.h"

namespace tfdist_test {

// Built with -fsanitize=thread (make tsan), every memory access is checked
// and the tests run about ten times slower. Races need threads to meet, not
// large buffers, so there the largest inputs shrink (LargeTestCount) and
// group sizes are swept more sparsely (SweepGroupSizes): the step stays
// within a couple of minutes while every test still runs.
#if defined(__SANITIZE_THREAD__)
constexpr bool kUnderThreadSanitizer = true;
#else
constexpr bool kUnderThreadSanitizer = false;
#endif

// Built with -fsanitize=address (make sanitize), copies are checked too and
// timing bounds need room.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAddressSanitizer = true;
#else
constexpr bool kUnderAddressSanitizer = false;
#endif

// `count` in a normal build, about a tenth of it under ThreadSanitizer.
constexpr size_t LargeTestCount(size_t count) {
  return kUnderThreadSanitizer ? count / 10 + 1 : count;
}

using TestFunction = void (*)();

// Adds a test to the registry; used by TFDIST_TEST.
struct TestRegistrar {
  TestRegistrar(const char* name, TestFunction function);
};

// Records a failed check in the running test (prints the first few).
void RecordFailure(const char* file, int line, const std::string& message);

template <typename A, typename B>
std::string DescribeMismatch(const char* a_text, const char* b_text,
                             const A& a, const B& b) {
  std::ostringstream out;
  out << a_text << " == " << b_text << " failed: " << a << " vs " << b;
  return out.str();
}

std::string DescribeStatus(const tfdist::Status& status);

}  // namespace tfdist_test

#define TFDIST_TEST(name)                                             \
  static void name();                                                 \
  static const ::tfdist_test::TestRegistrar name##_registrar(#name, &name); \
  static void name()

#define CHECK(condition)                                                   \
  do {                                                                     \
    if (!(condition)) {                                                    \
      ::tfdist_test::RecordFailure(__FILE__, __LINE__, "CHECK(" #condition ")"); \
    }                                                                      \
  } while (0)

// CHECK with extra context streamed in `context`, printed when it fails.
#define CHECK_MSG(condition, context)                                      \
  do {                                                                     \
    if (!(condition)) {                                                    \
      std::ostringstream check_context_;                                   \
      check_context_ << context;                                           \
      ::tfdist_test::RecordFailure(__FILE__, __LINE__,                     \
                                   "CHECK(" #condition ") " + check_context_.str()); \
    }                                                                      \
  } while (0)

// Evaluates both sides once. Extra context may be streamed in `context`
// through CHECK_EQ_MSG.
#define CHECK_EQ_MSG(a, b, context)                                        \
  do {                                                                     \
    const auto& check_a_ = (a);                                            \
    const auto& check_b_ = (b);                                            \
    if (!(check_a_ == check_b_)) {                                         \
      std::ostringstream check_context_;                                   \
      check_context_ << context;                                           \
      ::tfdist_test::RecordFailure(                                        \
          __FILE__, __LINE__,                                              \
          ::tfdist_test::DescribeMismatch(#a, #b, check_a_, check_b_) +    \
              " " + check_context_.str());                                 \
    }                                                                      \
  } while (0)

#define CHECK_EQ(a, b) CHECK_EQ_MSG(a, b, "")

#define CHECK_OK(expression)                                               \
  do {                                                                     \
    const ::tfdist::Status check_status_ = (expression);                   \
    if (!check_status_.ok()) {                                             \
      ::tfdist_test::RecordFailure(                                        \
          __FILE__, __LINE__,                                              \
          std::string(#expression) + " returned " +                        \
              ::tfdist_test::DescribeStatus(check_status_));               \
    }                                                                      \
  } while (0)

#endif  // TFDIST_CC_TESTS_TEST_HARNESS_H_
