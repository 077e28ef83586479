#pragma once

// CAF's middleman carries the control plane (join, directory, spawn,
// monitors), but never listens or connects by itself: sockets pass the
// gate first (gate.hpp) and are then handed to CAF's BASP broker, which
// speaks BASP on them as on a connection it had made.

#include <chrono>
#include <cstdint>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "security/credentials.hpp"
#include "security/gate.hpp"
#include "transport/address.hpp"

namespace lumen::detail {

/// Makes `published` the actor that peers admitted by `g` reach, as
/// `middleman::publish` would on the gate's port.
void serve_control(caf::actor_system& sys, caf::actor published, gate& g);

/// Says hello to the node manager `peer` as `role` ("driver", "client");
/// returns the id it gives this process. Throws `error` naming `what`.
std::string say_hello(caf::actor_system& sys, const caf::actor& peer,
                      const std::string& role, const std::string& what);

/// Passes the gate at `where` with `creds` and returns the actor served
/// there, each of the two handshakes (the gate's, CAF's) within `timeout`;
/// throws `error` (see `pass_gate`) naming `what`.
caf::actor
connect_control(caf::actor_system& sys, const address& where,
                const credentials& creds, const std::string& what,
                std::chrono::milliseconds timeout = std::chrono::seconds(5));

} // namespace lumen::detail
