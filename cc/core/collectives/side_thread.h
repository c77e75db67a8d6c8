// A second thread that runs tasks one after another, in the order they were
// submitted, for an algorithm that overlaps two independent message streams
// (hierarchical_allreduce.cc: the cross-host allreduce of one segment while
// the calling thread works within its host on the next).
//
// Each calling thread has its own, started on first use and kept until the
// caller ends (like ThreadScratch), so a collective pays no thread start-up,
// and the side thread's scratch memory and polling budgets stay warm from
// one call to the next.
#ifndef TFDIST_CORE_COLLECTIVES_SIDE_THREAD_H_
#define TFDIST_CORE_COLLECTIVES_SIDE_THREAD_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "cc/core/base/status.h"

namespace tfdist {

class SideThread {
 public:
  SideThread();
  // Runs the tasks still queued, then joins.
  ~SideThread();
  SideThread(const SideThread&) = delete;
  SideThread& operator=(const SideThread&) = delete;

  // Queues `task`; the future yields its Status once it has run. A caller
  // must wait on every future whose task touches its buffers before freeing
  // them.
  std::future<Status> Submit(std::function<Status()> task);

 private:
  void Loop();

  std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<std::packaged_task<Status()>> tasks_;  // guarded by mutex_
  bool stopping_ = false;                           // guarded by mutex_
  std::thread thread_;  // last: starts after the members it uses exist
};

// The calling thread's side thread.
SideThread& CallersSideThread();

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_SIDE_THREAD_H_
