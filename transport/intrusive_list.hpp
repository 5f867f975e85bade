// A doubly linked list threaded through its elements (which derive from intrusive_list_hook),
// so tracking an in-flight operation costs no allocation. Each element is in at most one list.
#pragma once

#include <cassert>
#include <cstddef>

namespace brigade::transport {

template <class T>
class intrusive_list;

template <class T>
class intrusive_list_hook {
 public:
  /// The list this element is in, or nullptr.
  intrusive_list<T>* list() const { return list_; }

 private:
  friend class intrusive_list<T>;
  T* prev_ = nullptr;
  T* next_ = nullptr;
  intrusive_list<T>* list_ = nullptr;
};

template <class T>
class intrusive_list {
 public:
  intrusive_list() = default;
  intrusive_list(const intrusive_list&) = delete;
  intrusive_list& operator=(const intrusive_list&) = delete;

  bool empty() const { return head_ == nullptr; }
  std::size_t size() const { return size_; }
  T* front() const { return head_; }
  /// The element after `item`, or nullptr.
  static T* next(T* item) { return hook(item).next_; }

  void push_back(T* item) {
    hook(item).list_ = this;
    hook(item).prev_ = tail_;
    hook(item).next_ = nullptr;
    if (tail_) {
      hook(tail_).next_ = item;
    } else {
      head_ = item;
    }
    tail_ = item;
    ++size_;
  }

  void remove(T* item) {
    assert(hook(item).list_ == this);
    T* prev = hook(item).prev_;
    T* next = hook(item).next_;
    (prev ? hook(prev).next_ : head_) = next;
    (next ? hook(next).prev_ : tail_) = prev;
    hook(item).prev_ = hook(item).next_ = nullptr;
    hook(item).list_ = nullptr;
    --size_;
  }

  /// Removes and returns the first element, or nullptr when empty.
  T* pop_front() {
    T* item = head_;
    if (item) remove(item);
    return item;
  }

 private:
  static intrusive_list_hook<T>& hook(T* item) { return *item; }

  T* head_ = nullptr;
  T* tail_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace brigade::transport
