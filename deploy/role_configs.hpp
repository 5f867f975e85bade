// The narrow settings each role takes, read from a manifest: roles never see the manifest.
// (The supervisor fills the per-instance configs of the roles it spawns the same way.)
#pragma once

#include "actors/router.hpp"
#include "config/manifest.hpp"

namespace brigade::deploy {

/// The router's settings for a deployment of `manifest`.
actors::router_config router_config_for(const config::manifest& manifest);

}  // namespace brigade::deploy
