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

// restore_rank_state's contract: a bad entry anywhere leaves the old state
// whole; a good set replaces it entirely.
TFDIST_TEST(StateStoreReplaceAllIsAllOrNothing) {
  StateStore store;
  const float old_values[] = {1.0f, 2.0f};
  CHECK_OK(store.Put("old", DataType::kFloat32, {2}, old_values, sizeof old_values));
  const float values[] = {3.0f, 4.0f, 5.0f};
  using Entry = StateStore::Entry;
  const std::vector<std::vector<Entry>> bad = {
      {{"a", DataType::kFloat32, {3}, values, sizeof values},
       {"b", DataType::kFloat32, {2}, values, sizeof values}},   // wrong byte count
      {{"a", DataType::kFloat32, {3}, values, sizeof values},
       {"a", DataType::kFloat32, {3}, values, sizeof values}},   // twice
      {{"a", DataType::kFloat32, {3}, values, sizeof values},
       {"", DataType::kFloat32, {3}, values, sizeof values}},    // no name
      {{"a", DataType::kFloat32, {3}, values, sizeof values},
       {"c", static_cast<DataType>(42), {3}, values, sizeof values}},  // unknown dtype
      {{"a", DataType::kFloat32, {-3}, values, sizeof values}},  // negative dimension
  };
  for (const std::vector<Entry>& entries : bad) {
    const tfdist::Status status = store.ReplaceAll(entries);
    CHECK(status.code() == tfdist::StatusCode::kInvalidArgument);
    const std::vector<std::string> names = store.Names();
    CHECK_EQ(names.size(), size_t{1});
    CHECK_EQ(names[0], std::string("old"));
    CHECK_EQ(std::memcmp(store.Find("old")->data.data(), old_values, sizeof old_values), 0);
  }
  // Nine dimensions and more travel whole.
  const std::vector<int64_t> nine(9, 1);
  CHECK_OK(store.ReplaceAll({{"a", DataType::kFloat32, {3}, values, sizeof values},
                             {"nine", DataType::kFloat32, nine, values, sizeof(float)}}));
  const std::vector<std::string> names = store.Names();
  CHECK_EQ(names.size(), size_t{2});
  CHECK_EQ(names[0], std::string("a"));
  CHECK(store.Find("old") == nullptr);
  CHECK(store.Find("nine")->shape == nine);
  CHECK_EQ(store.Find("a")->floats()[2], 5.0f);
  CHECK_OK(store.ReplaceAll({}));
  CHECK(store.Names().empty());
}

}  // namespace
}  // namespace tfdist_test
