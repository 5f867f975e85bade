#include "transport/memory_registration.hpp"

#include "transport/ucx_error.hpp"

namespace brigade::transport {

result<std::shared_ptr<memory_registration>> memory_registration::map(ucp_context_h context,
                                                                      void* address,
                                                                      std::size_t length) {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = address;
  params.length = length;
  ucp_mem_h memh = nullptr;
  const ucs_status_t s = ucp_mem_map(context, &params, &memh);
  if (s != UCS_OK) {
    return ucx_error(errc::resource_exhausted,
                     "transport: cannot register " + std::to_string(length) +
                         " bytes with UCX (locked-memory limit? see `ulimit -l`)",
                     s);
  }
  return std::shared_ptr<memory_registration>(
      new memory_registration(context, memh, static_cast<const std::byte*>(address), length));
}

memory_registration::~memory_registration() {
  ucp_mem_unmap(context_, memh_);
}

}  // namespace brigade::transport
