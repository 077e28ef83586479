#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace lumen {

/// What went wrong, for callers that branch on it: compare `error::code()`,
/// never the message or the exception's type. The codes travel between
/// processes unchanged. Each code has one exception class it arrives as
/// from another process or the control plane (its row in the table of
/// src/core/errors.cpp), named in brackets below; a subsystem's own class
/// (`channel_error`, `collective::collective_error`, `ml::data_error`) may
/// carry any code.
enum class errc : uint8_t {
  unspecified = 1,
  /// Misuse of the API, a bad flag or value (`usage_error`).
  usage,
  /// A remote function or method threw (`task_error`).
  task_failed,
  /// The actor a call was for is gone (`actor_died`).
  actor_died,
  /// `get` gave up waiting (`get_timeout`).
  timeout,
  /// A peer (the head, a node) cannot be reached or went silent.
  unreachable,
  /// The head is gone: what needs its directory fails until it is back.
  head_unreachable,
  /// A peer refused this process's cluster token.
  wrong_token,
  /// The token file is missing, empty, or readable by others
  /// (`usage_error`).
  bad_token_file,
  /// No node of that id in the cluster.
  no_such_node,
  /// The node is dead.
  node_dead,
  /// A node does not know the class or function (wrong --code-path;
  /// `usage_error`).
  not_registered,
  /// The actor name is taken in the cluster (`usage_error`).
  name_taken,
  /// This process and the peer disagree on TLS (one uses it, one does
  /// not, or their keys differ); a TLS certificate or key file that cannot
  /// be used is this code on a `usage_error`.
  tls_mismatch,
  /// The other end of a channel closed it, or its process died
  /// (`channel_error`).
  channel_closed,
  /// The process that owns an object (made it with `put` or ran the task
  /// that returned it) is gone, and the value with it (`owner_died`).
  owner_died,
  /// `lumen::cancel` stopped the task or call (`task_cancelled`).
  task_cancelled,
  /// No node (or not the one named) has as much of a resource as a task
  /// or actor asks for (`usage_error`).
  infeasible,
  /// A member of a collective group (or a process it needed) died, left or
  /// lost its link in the middle of an operation.
  peer_lost,
  /// The members of a group disagree: world size, lengths, element types,
  /// a rank claimed twice.
  mismatch,
  /// A file or data set is not where it was asked for.
  missing_file,
  /// A file is malformed, damaged (a checksum fails), of another format,
  /// or holds NaN or infinity where numbers are expected.
  bad_file,
  /// A file could not be written whole (a full disk, no permission).
  write_failed,
};

/// The code's name, e.g. "wrong_token".
const char* to_string(errc code) noexcept;

/// Base of every error Lumen throws at the API edge.
class error : public std::runtime_error {
public:
  explicit error(const std::string& what, errc code = errc::unspecified)
    : std::runtime_error(what)
    , code_(code) {}

  errc code() const noexcept {
    return code_;
  }

private:
  errc code_;
};

/// Misuse of the API: an empty ObjectRef, a bad flag, a name clash. The
/// message says what was wrong and how to fix it.
class usage_error : public error {
public:
  explicit usage_error(const std::string& what, errc code = errc::usage)
    : error(what, code) {}
};

/// A remote function or actor method threw. Carries the function's name, the
/// original exception's type and message, and the node it ran on.
class task_error : public error {
public:
  task_error(std::string function, std::string exception_type,
             std::string message, std::string node);

  const std::string& function() const noexcept {
    return function_;
  }
  const std::string& exception_type() const noexcept {
    return type_;
  }
  const std::string& message() const noexcept {
    return message_;
  }
  const std::string& node() const noexcept {
    return node_;
  }

protected:
  /// For a subclass that words its own `what()`.
  task_error(std::string what, std::string function, std::string exception_type,
             std::string message, std::string node);

private:
  std::string function_;
  std::string type_;
  std::string message_;
  std::string node_;
};

/// The actor a call was addressed to is gone: killed, exited, failed to
/// construct, or restarted while the call was queued.
class actor_died : public error {
public:
  explicit actor_died(const std::string& what, errc code = errc::actor_died)
    : error(what, code) {}
};

/// The object behind a ref that crossed processes is lost with the process
/// that owned it, as Ray's OwnerDiedError.
class owner_died : public error {
public:
  explicit owner_died(const std::string& what)
    : error(what, errc::owner_died) {}
};

/// The task or actor call was cancelled with `lumen::cancel` before it
/// finished, as Ray's TaskCancelledError.
class task_cancelled : public error {
public:
  explicit task_cancelled(const std::string& what)
    : error(what, errc::task_cancelled) {}
};

/// `get` gave up waiting before the object was ready.
class get_timeout : public error {
public:
  explicit get_timeout(const std::string& what)
    : error(what, errc::timeout) {}
};

/// Thrown from an actor's constructor or method to take the actor down as a
/// failure: an actor with restarts left is rebuilt, pending calls fail with
/// `actor_died`. Any other exception only fails the call that threw it.
class actor_fatal_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Ends the calling actor from inside one of its methods or its constructor,
/// like `ray.actor.exit_actor()`. The current call and queued calls fail with
/// `actor_died`; an actor with restarts left is rebuilt. Must be called from
/// an actor's own thread, otherwise throws `usage_error`.
[[noreturn]] void exit_actor();

/// The id (`ActorHandle::id`) of the actor whose constructor or method
/// runs on the calling thread, like Ray's
/// `get_runtime_context().get_actor_id()`; empty outside an actor.
std::string current_actor_id();

namespace detail {

/// What `exit_actor()` throws; caught only by the actor host.
struct actor_exit_request {};

/// A readable type name from a mangled one.
std::string demangle(const char* mangled);

/// The demangled name of the exception currently being handled.
std::string current_exception_type();

/// The message of the exception currently being handled: its what(), or
/// a note that it is not a std::exception.
std::string current_exception_message();

} // namespace detail

} // namespace lumen
