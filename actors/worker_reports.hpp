// What prefill and decode workers send about the requests they run, and to whom: a narrow
// handle, so that a worker knows its router only as the receiver of these messages (the router's
// handle includes them; tests can stand in for it with any actor that takes them).
#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <vector>

#include "actors/cache_report.hpp"
#include "actors/payloads.hpp"

namespace brigade::actors {

/// Tokens produced (in order, per request) and requests a worker could not finish.
using generation_report_actor =
    caf::typed_actor<caf::reacts_to<std::vector<token_update>>, caf::reacts_to<job_failed>>;

/// A prefill worker also reports its prefix cache's changes and hits.
using prefill_report_actor = generation_report_actor::extend<caf::reacts_to<prefill_cache_report>>;

}  // namespace brigade::actors
