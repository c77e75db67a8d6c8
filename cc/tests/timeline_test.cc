// Timeline spans: each recorded once, when its scope ends, whichever way
// the scope is left; nothing written when the timeline is disabled.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "cc/core/runtime/timeline.h"
#include "cc/tests/test_harness.h"

namespace tfdist {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

Status FailsInsideASpan(Timeline& timeline, const std::string& tensor) {
  TimelineSpan span(timeline, tensor, "ALLREDUCE", 2, 64, "ring");
  return Status::Internal("the transport failed");
}

TFDIST_TEST(TimelineSpansAreRecordedWhenTheirScopeEnds) {
  char path[] = "/tmp/tfdist_timeline_test_XXXXXX";
  const int fd = mkstemp(path);
  CHECK(fd >= 0);
  std::fclose(fdopen(fd, "w"));
  const std::string tensor = "grads/dense.kernel";
  {
    Timeline timeline;
    CHECK(timeline.Open(path, 0, 1).ok());
    { TimelineSpan span(timeline, tensor, "FUSION_COPY_IN", 3, 96); }
    CHECK(!FailsInsideASpan(timeline, tensor).ok());
    timeline.Close();
  }
  const std::string text = ReadFile(path);
  std::remove(path);
  CHECK(Count(text, "\"name\":\"FUSION_COPY_IN\",\"ph\":\"X\"") == 1);
  CHECK(Count(text, "\"tensors\":3,\"bytes\":96,\"algorithm\":\"\"") == 1);
  // Left through an error return, the span is still recorded, with its algorithm.
  CHECK(Count(text, "\"name\":\"ALLREDUCE\",\"ph\":\"X\"") == 1);
  CHECK(Count(text, "\"tensors\":2,\"bytes\":64,\"algorithm\":\"ring\"") == 1);
  // One row for the tensor, named once.
  CHECK(Count(text, "\"name\":\"grads/dense.kernel\"") == 1);
}

TFDIST_TEST(SpansOfADisabledTimelineWriteNothing) {
  Timeline timeline;  // never opened
  CHECK(!timeline.enabled());
  const std::string tensor = "x";
  { TimelineSpan span(timeline, tensor, "ALLREDUCE", 1, 4, "tree"); }
  CHECK(timeline.NowMicros() == 0);
}

}  // namespace
}  // namespace tfdist
