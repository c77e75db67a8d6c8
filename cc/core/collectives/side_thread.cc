#include "cc/core/collectives/side_thread.h"

#include <utility>

namespace tfdist {

SideThread::SideThread() : thread_([this] { Loop(); }) {}

SideThread::~SideThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_one();
  thread_.join();
}

std::future<Status> SideThread::Submit(std::function<Status()> task) {
  std::packaged_task<Status()> packaged(std::move(task));
  std::future<Status> done = packaged.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(packaged));
  }
  queued_.notify_one();
  return done;
}

void SideThread::Loop() {
  while (true) {
    std::packaged_task<Status()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queued_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

SideThread& CallersSideThread() {
  thread_local SideThread side;
  return side;
}

}  // namespace tfdist
