// How every collective splits `count` elements into `parts` near-equal
// chunks. All ranks must agree on the boundaries to the element, so this is
// the one place that computes them: the first count % parts chunks get one
// element more than the others; with count < parts the trailing chunks are
// empty.
#ifndef TFDIST_CORE_COLLECTIVES_CHUNK_LAYOUT_H_
#define TFDIST_CORE_COLLECTIVES_CHUNK_LAYOUT_H_

#include <algorithm>
#include <cstddef>

namespace tfdist {

// First element of chunk `index`, for 0 <= index <= parts (index == parts
// gives `count`, the end of the last chunk).
inline size_t ChunkBegin(size_t count, int parts, int index) {
  const size_t n = static_cast<size_t>(parts);
  const size_t i = static_cast<size_t>(index);
  return i * (count / n) + std::min(i, count % n);
}

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_CHUNK_LAYOUT_H_
