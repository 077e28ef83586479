#pragma once

/// Everything a Lumen program needs: init/shutdown, remote functions and
/// actors, ObjectRef futures with get/wait/put, spans of a trace, and the
/// utilities Ray users reach for (an actor pool, a queue). Typed CAF
/// actors are in "lumen/caf_interop.hpp", kept apart because it pulls in
/// CAF's headers.

#include "lumen/actor.hpp"
#include "lumen/channel.hpp"
#include "lumen/errors.hpp"
#include "lumen/init.hpp"
#include "lumen/kv.hpp"
#include "lumen/node_shared.hpp"
#include "lumen/object_ref.hpp"
#include "lumen/object_store.hpp"
#include "lumen/placement_group.hpp"
#include "lumen/remote.hpp"
#include "lumen/task.hpp"
#include "lumen/time.hpp"
#include "lumen/trace.hpp"
#include "lumen/util/actor_pool.hpp"
#include "lumen/util/queue.hpp"
