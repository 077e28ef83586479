#pragma once

// Certificates for TLS tests, made fresh by the openssl tool.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <boost/test/unit_test.hpp>

#include <lumen/init.hpp>

namespace lumen::test {

/// A self-signed certificate for `name` and its key, in a folder of this
/// process; as TLS options, the certificate is its own CA.
inline lumen::tls_options self_signed(const std::string& name) {
  auto dir = "/tmp/lumen-certs-" + std::to_string(::getpid());
  ::mkdir(dir.c_str(), 0700);
  lumen::tls_options o;
  o.cert_file = dir + "/" + name + ".pem";
  o.key_file = dir + "/" + name + ".key";
  auto cmd = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
             "-nodes -days 2 -subj /CN=" +
             name + " -keyout " + o.key_file + " -out " + o.cert_file +
             " 2>/dev/null";
  BOOST_REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0,
                        "openssl could not make a certificate");
  return o;
}

} // namespace lumen::test
