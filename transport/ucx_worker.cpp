#include "transport/ucx_worker.hpp"

#include "transport/ucx_error.hpp"

namespace brigade::transport {
namespace {

/// Owns a ucp_config_t for the span of context creation.
struct config_guard {
  ucp_config_t* config = nullptr;
  ~config_guard() {
    if (config) ucp_config_release(config);
  }
};

status modify(ucp_config_t* config, const char* name, const std::string& value) {
  if (value.empty()) return ok_status();
  const ucs_status_t s = ucp_config_modify(config, name, value.c_str());
  if (s != UCS_OK) {
    return ucx_error(errc::invalid_argument,
                     std::string("transport: cannot set UCX_") + name + "='" + value + "'", s);
  }
  return ok_status();
}

}  // namespace

result<std::unique_ptr<ucx_worker>> ucx_worker::create(const transport_config& config) {
  std::unique_ptr<ucx_worker> w(new ucx_worker());
  if (status s = w->init_context(config); !s) return s.err();
  if (status s = w->init_worker(); !s) return s.err();
  return w;
}

status ucx_worker::init_context(const transport_config& config) {
  config_guard guard;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &guard.config);
  if (s != UCS_OK) return ucx_error(errc::internal, "transport: cannot read UCX configuration", s);
  if (status m = modify(guard.config, "TLS", config.tls); !m) return m;
  if (status m = modify(guard.config, "NET_DEVICES", config.net_devices); !m) return m;

  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.name = "brigade";
  s = ucp_init(&params, guard.config, &context_);
  if (s != UCS_OK) {
    return ucx_error(errc::unavailable,
                     "transport: UCX could not start with UCX_TLS='" + config.tls +
                         "' UCX_NET_DEVICES='" + config.net_devices +
                         "' (check the names against `ucx_info -d`)",
                     s);
  }
  return ok_status();
}

status ucx_worker::init_worker() {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucs_status_t s = ucp_worker_create(context_, &params, &worker_);
  if (s != UCS_OK) return ucx_error(errc::unavailable, "transport: cannot create UCX worker", s);

  s = ucp_worker_get_efd(worker_, &event_fd_);
  if (s != UCS_OK) {
    return ucx_error(errc::unavailable, "transport: UCX worker has no event fd to sleep on", s);
  }

  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS | UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  s = ucp_worker_query(worker_, &attr);
  if (s != UCS_OK) return ucx_error(errc::internal, "transport: cannot query UCX worker", s);
  const auto* bytes = reinterpret_cast<const std::byte*>(attr.address);
  address_.assign(bytes, bytes + attr.address_length);
  ucp_worker_release_address(worker_, attr.address);
  max_am_header_bytes_ = attr.max_am_header;
  return ok_status();
}

void ucx_worker::destroy_worker() {
  if (worker_) ucp_worker_destroy(worker_);
  worker_ = nullptr;
  event_fd_ = -1;
}

ucx_worker::~ucx_worker() {
  destroy_worker();
  if (context_) ucp_cleanup(context_);
}

}  // namespace brigade::transport
