// Scratch memory for the algorithms' receive buffers, owned by the calling
// thread and reused across calls. The runtime reduces on one background
// thread, so after the first few steps no allocation (and no page-faulting
// of freshly zeroed pages, which costs about as much as copying them) happens
// on the hot path.
#ifndef TFDIST_CORE_COLLECTIVES_THREAD_SCRATCH_H_
#define TFDIST_CORE_COLLECTIVES_THREAD_SCRATCH_H_

#include <cstddef>

namespace tfdist {

// Returns at least `bytes` bytes, contents unspecified, aligned for any
// element type. Valid until the next ThreadScratch call on the same thread,
// so an algorithm calls it once, at its start, for everything it needs, and
// must not call another collective that uses it while holding the pointer.
// The memory grows to the largest request and is kept until the thread ends.
unsigned char* ThreadScratch(size_t bytes);

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_THREAD_SCRATCH_H_
