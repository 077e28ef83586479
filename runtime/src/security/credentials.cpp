#include "security/credentials.hpp"

#include <cstdlib>

#include "lumen/errors.hpp"

namespace lumen::detail {

namespace {

void default_from(std::string& value, const char* variable) {
  if (!value.empty())
    return;
  if (auto env = std::getenv(variable); env && *env)
    value = env;
}

} // namespace

tls_options resolve_tls(tls_options opts) {
  if (auto env = std::getenv("LUMEN_TLS"); env && *env) {
    std::string v = env;
    if (v == "1" || v == "true" || v == "yes" || v == "on")
      opts.enabled = true;
    else if (v != "0" && v != "false" && v != "no" && v != "off")
      throw usage_error("LUMEN_TLS must be 1 (or true, yes, on) or 0 (or "
                        "false, no, off); it is '" +
                        v + "'");
  }
  default_from(opts.cert_file, "LUMEN_TLS_CERT");
  default_from(opts.key_file, "LUMEN_TLS_KEY");
  default_from(opts.ca_file, "LUMEN_TLS_CA");
  if (opts.cert_file.empty() != opts.key_file.empty())
    throw usage_error("--tls-cert and --tls-key go together: give the "
                      "certificate this process shows and its private key",
                      errc::tls_mismatch);
  if (!opts.ca_file.empty() && opts.cert_file.empty())
    throw usage_error("--tls-ca needs --tls-cert and --tls-key: a process "
                      "that checks its peers' certificates shows its own",
                      errc::tls_mismatch);
  if (!opts.cert_file.empty()) {
    opts.enabled = true;
    if (opts.ca_file.empty())
      opts.ca_file = opts.cert_file;
  }
  return opts;
}

credentials make_credentials(std::string token, const tls_options& opts) {
  credentials c;
  if (opts.enabled)
    c.tls = std::make_shared<tls_context>(opts, token);
  c.token = std::move(token);
  return c;
}

} // namespace lumen::detail
