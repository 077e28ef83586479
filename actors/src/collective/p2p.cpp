#include "lumen/collective/collective.hpp"

#include "collective/algorithms/algorithms.hpp"
#include "collective/groups.hpp"

// send and recv: one member hands a buffer to another.

namespace lumen::collective {

using detail::membership;
using detail::settled;

namespace {

/// Rank `peer` exists and is not the caller: a message needs two ends.
void check_peer(const membership& m, int peer, const char* what) {
  if (peer < 0 || peer >= m.world() || peer == m.rank)
    throw collective_error(
      "group '" + m.name() + "': rank " + std::to_string(m.rank) + " cannot " +
        what + " rank " + std::to_string(peer) +
        ": name another member, 0 to " + std::to_string(m.world() - 1),
      errc::usage);
}

void send_from(const membership& m, const char* data, ml::dtype type,
               size_t numel, int dst, const call_site& site) {
  check_peer(m, dst, "send to");
  detail::op_span span{"send", m, numel * ml::size_of(type), site};
  detail::run_send(*m.over, data, type, numel, dst);
}

void recv_into(const membership& m, char* data, ml::dtype type, size_t numel,
               int src, const call_site& site) {
  check_peer(m, src, "receive from");
  detail::op_span span{"recv", m, numel * ml::size_of(type), site};
  detail::run_recv(*m.over, data, type, numel, src);
}

} // namespace

void send(const ml::tensor& buf, int dst_rank, const std::string& group,
          call_site site) {
  send_from(settled(group), buf.raw(), buf.type(), buf.numel(), dst_rank, site);
}

void send(const std::vector<float>& buf, int dst_rank, const std::string& group,
          call_site site) {
  send_from(settled(group), reinterpret_cast<const char*>(buf.data()),
            ml::dtype::float32, buf.size(), dst_rank, site);
}

void recv(ml::tensor& buf, int src_rank, const std::string& group,
          call_site site) {
  recv_into(settled(group), buf.raw(), buf.type(), buf.numel(), src_rank, site);
}

void recv(std::vector<float>& buf, int src_rank, const std::string& group,
          call_site site) {
  recv_into(settled(group), reinterpret_cast<char*>(buf.data()),
            ml::dtype::float32, buf.size(), src_rank, site);
}

} // namespace lumen::collective
