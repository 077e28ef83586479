#pragma once

// ObjectRefs as values that cross processes, as Ray's nested refs do. The
// process that made an object owns it and serves its value to whoever
// holds a ref; a ref decoded in another process is a *borrow*, which
// fetches the value from the owner only when someone waits for it.
//
// Reference counting: whoever encodes a ref for another process *holds* it
// for the receiver (one count in its table, keeping the object alive), and
// the receiver gives that count back to the encoder when its last copy of
// the ref is gone. A process passing on a ref it borrowed holds its own
// borrow for the next one, so counts never travel ahead of the refs they
// count: when every count is back, the owner lets go of the object.

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "lumen/detail/codec.hpp"
#include "lumen/detail/object_state.hpp"
#include "lumen/object_ref.hpp"

namespace lumen::detail {

/// A ref on the wire.
struct ref_wire {
  std::string owner;   // the owner's data address, HOST:PORT
  std::string node;    // the owner's name, for errors
  uint64_t object = 0; // the object's id at the owner
  std::string holder;  // the data address of the process holding it for us
  uint64_t hold = 0;   // the count to give back to it
  uint64_t type = 0;   // the value type's tag, checked at the owner
};

/// A stable tag of T, the same in every process built from the same code.
template <class T>
uint64_t type_tag() {
  // FNV-1a over the mangled name: type_info::hash_code is not promised to
  // agree across binaries.
  uint64_t h = 1469598103934665603ull;
  for (const char* p = typeid(T).name(); *p != '\0'; ++p)
    h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
  return h;
}

/// A value as the owner sends it: `head`, then `body`, which points into
/// the value itself (a large tensor is sent from where it lies, not
/// copied first). The two are what `encode` would write.
struct encoded_value {
  bytes head;
  byte_span body{nullptr, 0};
};

/// Encodes the value of a ready state as the owner sends it.
using value_encoder = encoded_value (*)(const object_state&);

template <class T>
encoded_value encode_value(const object_state& st) {
  if constexpr (std::is_void<T>::value) {
    return {};
  } else {
    const auto& x = static_cast<const value_state<T>&>(st).value();
    if constexpr (is_seq<T>::value) {
      using elem = typename T::value_type;
      if constexpr (is_raw_element<elem> &&
                    std::is_same<T, std::vector<elem>>::value)
        return {
          encode(uint64_t{x.size()}),
          {reinterpret_cast<const char*>(x.data()), x.size() * sizeof(elem)}};
    }
    return {encode(x)};
  }
}

/// Holds `st` for the process that receives the returned wire; throws
/// `usage_error` outside a cluster.
ref_wire export_object(const std::shared_ptr<object_state>& st, uint64_t type,
                       value_encoder encoder);

/// What a received wire stands for here: the object itself if this
/// process owns it, otherwise a lease to build a borrowed state on.
struct imported_object {
  std::shared_ptr<object_state> local;
  std::shared_ptr<borrow> lease;
};

/// Throws `codec_error` for a local object of another type.
imported_object import_object(const ref_wire& wire);

/// Asks the owner for the value behind `lease`; `done` gets the encoded
/// value, or the error (`owner_died` if the owner is gone), on some thread.
void fetch_object(const std::shared_ptr<borrow>& lease,
                  std::function<void(std::exception_ptr, const bytes&)> done);

/// Publishes an encoded result into `st`: decodes R (nothing for void).
template <class R>
void publish_encoded(value_state<R>& st, const bytes& out) {
  if constexpr (std::is_void<R>::value) {
    decode<>(out);
    st.set_value();
  } else {
    st.set_value(std::move(std::get<0>(decode<R>(out))));
  }
}

/// The state behind a ref borrowed from another process.
template <class T>
class borrowed_value final : public value_state<T> {
public:
  static std::shared_ptr<borrowed_value> make(std::shared_ptr<borrow> lease) {
    auto st = std::make_shared<borrowed_value>(std::move(lease));
    st->self_ = st;
    return st;
  }

  explicit borrowed_value(std::shared_ptr<borrow> lease)
    : lease_(std::move(lease)) {}

  const std::shared_ptr<borrow>* lease() const noexcept override {
    return &lease_;
  }

protected:
  void demand() override {
    if (asked_.exchange(true))
      return;
    fetch_object(lease_,
                 [weak = self_](std::exception_ptr err, const bytes& out) {
                   auto st = weak.lock();
                   if (!st)
                     return;
                   if (err) {
                     st->set_error(std::move(err));
                     return;
                   }
                   try {
                     publish_encoded<T>(*st, out);
                   } catch (...) {
                     st->set_error(std::current_exception());
                   }
                 });
  }

private:
  std::shared_ptr<borrow> lease_;
  std::weak_ptr<borrowed_value> self_;
  std::atomic<bool> asked_{false};
};

} // namespace lumen::detail

namespace lumen {

/// An ObjectRef crosses processes as the place of its object, never its
/// value: see the comment at the top of this file.
template <class T>
void inspect(detail::writer& f, ObjectRef<T>& x) {
  if (!x.valid())
    throw usage_error("an empty ObjectRef cannot be sent to another process");
  auto w = detail::export_object(x.state(), detail::type_tag<T>(),
                                 &detail::encode_value<T>);
  f(w.owner, w.node, w.object, w.holder, w.hold, w.type);
}

template <class T>
void inspect(detail::reader& f, ObjectRef<T>& x) {
  detail::ref_wire w;
  f(w.owner, w.node, w.object, w.holder, w.hold, w.type);
  // Taken in before the check, so that a refused ref's count goes back.
  auto got = detail::import_object(w);
  if (w.type != detail::type_tag<T>())
    throw codec_error("an ObjectRef arrived for another value type than the "
                      "parameter's");
  if (got.local)
    x = ObjectRef<T>{
      std::static_pointer_cast<detail::value_state<T>>(std::move(got.local))};
  else
    x = ObjectRef<T>{detail::borrowed_value<T>::make(std::move(got.lease))};
}

} // namespace lumen
