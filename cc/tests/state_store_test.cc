// The compression state store: zero-filled on first use, reset when a name
// changes shape, and exported/imported byte for byte.
#include <cstring>
#include <vector>

#include "cc/core/compression/state_store.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::DataType;
using tfdist::StateStore;

TFDIST_TEST(StateStoreCreatesZerosAndResetsOnNewShape) {
  StateStore store;
  bool created = false;
  auto a = store.GetOrCreate("r/w", DataType::kFloat32, {2, 3}, &created);
  CHECK(created);
  CHECK_EQ(a->elements(), size_t{6});
  for (size_t i = 0; i < 6; ++i) CHECK_EQ(a->floats()[i], 0.0f);
  a->floats()[1] = 4.0f;
  auto again = store.GetOrCreate("r/w", DataType::kFloat32, {2, 3}, &created);
  CHECK(!created);
  CHECK_EQ(again->floats()[1], 4.0f);
  auto reshaped = store.GetOrCreate("r/w", DataType::kFloat32, {6}, &created);
  CHECK(created);
  CHECK_EQ(reshaped->floats()[1], 0.0f);
}

TFDIST_TEST(StateStorePutFindEraseClear) {
  StateStore store;
  const std::vector<int64_t> counter = {7};
  CHECK_OK(store.Put("step/x", DataType::kInt64, {}, counter.data(), 8));
  CHECK(!store.Put("bad", DataType::kFloat32, {3}, counter.data(), 8).ok());
  const float values[] = {1.5f, -2.0f};
  CHECK_OK(store.Put("q/x", DataType::kFloat32, {2, 1}, values, sizeof values));
  const std::vector<std::string> names = store.Names();
  CHECK_EQ(names.size(), size_t{2});
  CHECK_EQ(names[0], std::string("q/x"));
  auto q = store.Find("q/x");
  CHECK(q != nullptr);
  CHECK_EQ(std::memcmp(q->data.data(), values, sizeof values), 0);
  const auto step = store.Find("step/x");
  CHECK_EQ(step->int64s()[0], int64_t{7});
  store.Erase("q/x");
  CHECK(store.Find("q/x") == nullptr);
  store.Clear();
  CHECK(store.Names().empty());
}

}  // namespace
}  // namespace tfdist_test
