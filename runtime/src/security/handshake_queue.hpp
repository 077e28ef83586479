#pragma once

// Which handshake a full gate drops to make room (gate.hpp).
//
// A stranger can always send a byte, so bytes alone earn no rank: every
// handshake the gate could not yet check waits in one line, ordered by
// when the gate last heard from its peer, and the one silent for longest
// goes first. A peer that keeps sending moves to the back each time, ahead
// of every stranger gone quiet before its last bytes, so a crowd that sent
// a few bytes and stopped, or nothing, drains from the front. Above that
// line, a TLS peer whose hello the gate answered (a whole hello; the gate
// waits for the peer's reply to its own flight) goes only when no one
// below is left, and a peer that proved the cluster's secret is never
// dropped for another.
//
// Every operation is constant time: a gate under a flood runs one per
// accept and per read.

#include <cstddef>
#include <initializer_list>
#include <list>
#include <optional>

namespace lumen::detail {

template <class T>
class handshake_queue {
public:
  /// How far a handshake got, in the order a gate drops them.
  enum class stage { waiting, answered, proven };

  /// Where an entry is, for the calls below; valid until `remove`.
  struct place {
    stage at;
    typename std::list<T>::iterator it;
  };

  /// Adds `x` as just heard from, waiting.
  place add(T x) {
    auto& line = lines_[index(stage::waiting)];
    return {stage::waiting, line.insert(line.end(), std::move(x))};
  }

  /// The peer at `p` sent bytes: it goes to the back of its line.
  void heard(const place& p) {
    auto& line = lines_[index(p.at)];
    line.splice(line.end(), line, p.it);
  }

  /// Moves `p` up to `to` (never down), as just heard from.
  void advance(place& p, stage to) {
    if (to <= p.at)
      return heard(p);
    auto& line = lines_[index(to)];
    line.splice(line.end(), lines_[index(p.at)], p.it);
    p.at = to;
  }

  void remove(const place& p) {
    lines_[index(p.at)].erase(p.it);
  }

  size_t size() const noexcept {
    return lines_[0].size() + lines_[1].size() + lines_[2].size();
  }

  /// Where the entry to drop to make room is; none if all proved the
  /// secret.
  std::optional<place> victim() noexcept {
    return first_of({stage::waiting, stage::answered});
  }

  /// Where some entry is, if any: for closing them all.
  std::optional<place> any() noexcept {
    return first_of({stage::waiting, stage::answered, stage::proven});
  }

private:
  std::optional<place> first_of(std::initializer_list<stage> stages) {
    for (auto s : stages)
      if (auto& line = lines_[index(s)]; !line.empty())
        return place{s, line.begin()};
    return std::nullopt;
  }

  static size_t index(stage s) noexcept {
    return static_cast<size_t>(s);
  }

  std::list<T> lines_[3];
};

} // namespace lumen::detail
