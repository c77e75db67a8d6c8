#include "cc/tf/eager_names.h"

#include <cstdint>
#include <map>
#include <mutex>

#include "cc/core/runtime/request.h"

namespace tfdist {

namespace {

struct Sequences {
  std::mutex mutex;
  std::map<int, uint64_t> next;  // by process set id
};

Sequences& TheSequences() {
  static Sequences sequences;
  return sequences;
}

}  // namespace

std::string NextEagerName(const std::string& op_type, int process_set) {
  Sequences& sequences = TheSequences();
  uint64_t n = 0;
  {
    std::lock_guard<std::mutex> lock(sequences.mutex);
    n = sequences.next[process_set]++;
  }
  return SequenceName(op_type, n);
}

void RestartEagerNames(int process_set) {
  Sequences& sequences = TheSequences();
  std::lock_guard<std::mutex> lock(sequences.mutex);
  sequences.next[process_set] = 0;
}

}  // namespace tfdist
