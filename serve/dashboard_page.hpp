// The dashboard at GET /dashboard: one self-contained page (serve/dashboard.html, compiled into
// the binary) that polls /metrics, /v1/experts and /v1/status and follows /v1/events, so that
// users watch rebalancing, cache hits and speculation live in a browser.
#pragma once

#include <string_view>

namespace brigade::serve {

/// The page's HTML, with its CSS and script inline.
std::string_view dashboard_html();

}  // namespace brigade::serve
