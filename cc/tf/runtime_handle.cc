#include "cc/tf/runtime_handle.h"

#include <map>
#include <mutex>
#include <utility>

namespace tfdist {

namespace {

struct ProcessSetEntry {
  std::vector<int> ranks;
  RuntimeHandle handle;  // empty runtime on a rank that is not a member
};

struct Table {
  std::mutex mutex;
  RuntimeHandle global;
  std::map<int, ProcessSetEntry> sets;
};

Table& TheTable() {
  static Table table;
  return table;
}

std::string RankList(const std::vector<int>& ranks) {
  std::string text = "[";
  for (size_t i = 0; i < ranks.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return text + "]";
}

}  // namespace

RuntimeHandle CurrentRuntime() {
  Table& table = TheTable();
  std::lock_guard<std::mutex> lock(table.mutex);
  return table.global;
}

Status NotInitializedError(const std::string& what) {
  return Status::FailedPrecondition(
      "tfdist is not initialized: call tfdist.init() before using tfdist collectives (" +
      what + ")");
}

void SetCurrentRuntime(RuntimeHandle handle) {
  if (handle.runtime && !handle.compression_state) {
    handle.compression_state = std::make_shared<StateStore>();
  }
  Table& table = TheTable();
  std::lock_guard<std::mutex> lock(table.mutex);
  table.global = std::move(handle);
}

namespace {

// The handle of set `id` in `table`, whose mutex the caller holds; the
// errors as ProcessSetRuntime documents them.
Status FindLocked(const Table& table, int id, const std::string& what,
                  const RuntimeHandle** out) {
  if (!table.global.runtime) return NotInitializedError(what);
  if (id == kGlobalProcessSet) {
    *out = &table.global;
    return Status::OK();
  }
  auto it = table.sets.find(id);
  if (it == table.sets.end()) {
    return Status::FailedPrecondition(
        what + ": process set " + std::to_string(id) +
        " is not registered: it was removed, or tfdist was re-initialized after a "
        "membership change (add process sets again after tfdist.init())");
  }
  if (!it->second.handle.runtime) {
    return Status::FailedPrecondition(
        what + ": rank " + std::to_string(table.global.topology.rank) +
        " is not in process set " + std::to_string(id) + " (ranks " +
        RankList(it->second.ranks) + "); only its members may call its collectives");
  }
  *out = &it->second.handle;
  return Status::OK();
}

}  // namespace

Status ProcessSetRuntime(int id, const std::string& what, RuntimeHandle* out) {
  Table& table = TheTable();
  std::lock_guard<std::mutex> lock(table.mutex);
  const RuntimeHandle* found = nullptr;
  TFDIST_RETURN_IF_ERROR(FindLocked(table, id, what, &found));
  *out = *found;
  return Status::OK();
}

Status ProcessSetRuntimeOnly(int id, const std::string& what, std::shared_ptr<Runtime>* out) {
  Table& table = TheTable();
  std::lock_guard<std::mutex> lock(table.mutex);
  const RuntimeHandle* found = nullptr;
  TFDIST_RETURN_IF_ERROR(FindLocked(table, id, what, &found));
  *out = found->runtime;
  return Status::OK();
}

Status AddProcessSet(int id, std::vector<int> ranks, RuntimeHandle handle) {
  if (handle.runtime && !handle.compression_state) {
    handle.compression_state = std::make_shared<StateStore>();
  }
  Table& table = TheTable();
  std::lock_guard<std::mutex> lock(table.mutex);
  if (id == kGlobalProcessSet || table.sets.count(id)) {
    return Status::InvalidArgument("process set id " + std::to_string(id) +
                                   " is already registered");
  }
  table.sets[id] = ProcessSetEntry{std::move(ranks), std::move(handle)};
  return Status::OK();
}

Status TakeProcessSet(int id, RuntimeHandle* out) {
  Table& table = TheTable();
  std::lock_guard<std::mutex> lock(table.mutex);
  auto it = table.sets.find(id);
  if (it == table.sets.end()) {
    return Status::FailedPrecondition("process set " + std::to_string(id) +
                                      " is not registered");
  }
  *out = std::move(it->second.handle);
  table.sets.erase(it);
  return Status::OK();
}

std::vector<RuntimeHandle> TakeAllProcessSets() {
  Table& table = TheTable();
  std::lock_guard<std::mutex> lock(table.mutex);
  std::vector<RuntimeHandle> handles;
  for (auto& entry : table.sets) handles.push_back(std::move(entry.second.handle));
  table.sets.clear();
  return handles;
}

std::vector<int> ProcessSetIds() {
  Table& table = TheTable();
  std::lock_guard<std::mutex> lock(table.mutex);
  std::vector<int> ids;
  if (table.global.runtime) ids.push_back(kGlobalProcessSet);
  for (const auto& entry : table.sets) ids.push_back(entry.first);
  return ids;
}

}  // namespace tfdist
