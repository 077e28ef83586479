#pragma once

// What a process shows to be let into another: the cluster token, and the
// TLS setup when links are encrypted. Both ends of every link use the same.

#include <memory>
#include <string>

#include "lumen/init.hpp"

#include "security/tls.hpp"

namespace lumen::detail {

struct credentials {
  std::string token;
  std::shared_ptr<tls_context> tls; // null: plain TCP
};

/// `opts` completed from $LUMEN_TLS, $LUMEN_TLS_CERT, $LUMEN_TLS_KEY and
/// $LUMEN_TLS_CA; throws `usage_error` if $LUMEN_TLS is neither on nor off,
/// or (`errc::tls_mismatch`) if the setting is incomplete (a certificate
/// without its key, say).
tls_options resolve_tls(tls_options opts);

/// The token, with TLS set up as `opts` (resolved) say.
credentials make_credentials(std::string token, const tls_options& opts);

} // namespace lumen::detail
