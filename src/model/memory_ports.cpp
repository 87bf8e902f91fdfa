#include "model/memory_ports.h"

#include <algorithm>

namespace tpu::model {

MemoryTargetBase::MemoryTargetBase(sc_core::sc_module_name name, unsigned char* bytes, std::uint64_t size,
                                   bool writable, bool grants_dmi)
    : sc_module(name), socket("socket"), bytes_(bytes), size_(size), writable_(writable),
      grants_dmi_(grants_dmi) {
  socket.bind(*this);
}

tlm::tlm_command MemoryTargetBase::check(tlm::tlm_generic_payload& trans, bool* moves_data) const {
  const std::uint64_t address = trans.get_address(), length = trans.get_data_length();
  const tlm::tlm_command command = RowLandings::timed_command(trans, moves_data);
  tlm::tlm_response_status status = tlm::TLM_OK_RESPONSE;
  if (command == tlm::TLM_WRITE_COMMAND && !writable_) status = tlm::TLM_COMMAND_ERROR_RESPONSE;
  else if (trans.get_byte_enable_ptr() != nullptr) status = tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE;
  else if (trans.get_streaming_width() < length) status = tlm::TLM_BURST_ERROR_RESPONSE;
  else if (address > size_ || length > size_ - address) status = tlm::TLM_ADDRESS_ERROR_RESPONSE;
  if (status != tlm::TLM_OK_RESPONSE || command == tlm::TLM_IGNORE_COMMAND) {
    trans.set_response_status(status);
    return tlm::TLM_IGNORE_COMMAND;
  }
  return command;
}

bool MemoryTargetBase::get_direct_mem_ptr(tlm::tlm_generic_payload&, tlm::tlm_dmi& dmi) {
  dmi.init();  // nothing granted: the whole address space, no access
  if (!grants_dmi_ || size_ == 0) return false;
  dmi.set_dmi_ptr(bytes_);
  dmi.set_start_address(0);
  dmi.set_end_address(size_ - 1);
  if (writable_) dmi.allow_read_write();
  else dmi.allow_read();
  return true;
}

bool PortClient::covers(tlm::tlm_command command, std::uint64_t address, std::uint64_t bytes) const {
  if (!dmi_valid_ || bytes == 0) return false;
  const bool allowed = command == tlm::TLM_READ_COMMAND ? dmi_.is_read_allowed() : dmi_.is_write_allowed();
  return allowed && address >= dmi_.get_start_address() && address + bytes - 1 <= dmi_.get_end_address();
}

PortClient::Sent PortClient::send(tlm::tlm_fw_transport_if<>& target, tlm::tlm_command command,
                                  std::uint64_t address, const std::function<unsigned char*()>& data,
                                  std::uint64_t rows, std::uint64_t row_bytes, Cycle* lands, Cycle now) {
  const std::uint64_t bytes = rows * row_bytes;
  const Cycle start = now + 1;
  auto prepare = [&](tlm::tlm_command c, unsigned char* ptr) {
    trans_.set_command(c);
    trans_.set_address(address);
    trans_.set_data_ptr(ptr);
    trans_.set_data_length(static_cast<unsigned>(bytes));
    trans_.set_streaming_width(static_cast<unsigned>(bytes));
    trans_.set_byte_enable_ptr(nullptr);
    trans_.set_byte_enable_length(0);
    trans_.set_dmi_allowed(false);
    trans_.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    ext_.rows = rows;
    ext_.row_bytes = row_bytes;
    ext_.lands = lands;
    ext_.filled = false;
  };

  // Ask once for a DMI pointer (again only after the target withdraws one).
  if (!dmi_valid_ && !dmi_refused_ && !queries_unanswered_) {
    prepare(command, nullptr);
    ext_.lands = nullptr;
    dmi_.init();
    dmi_valid_ = target.get_direct_mem_ptr(trans_, dmi_);
    dmi_refused_ = !dmi_valid_;
  }

  Sent sent;
  sc_core::sc_time delay = kClockPeriod;  // requested at the start of `start`
  if (!queries_unanswered_ && covers(command, address, bytes)) {
    prepare(tlm::TLM_IGNORE_COMMAND, nullptr);
    ext_.query = command;
    target.b_transport(trans_, delay);
    ext_.query = tlm::TLM_IGNORE_COMMAND;
    if (trans_.is_response_error()) {
      sent.refused = trans_.get_response_string();
    } else if (ext_.filled) {
      sent.direct = true;
    } else {
      queries_unanswered_ = true;
      delay = kClockPeriod;
    }
  }
  if (!sent.direct && sent.refused.empty()) {
    prepare(command, data());
    target.b_transport(trans_, delay);
    if (trans_.is_response_error()) sent.refused = trans_.get_response_string();
  }
  const bool per_row = ext_.filled;
  ext_.lands = nullptr;
  if (!sent.refused.empty()) return sent;

  // Rows land in order, none before the start nor after the last byte.
  sent.last = arrival_cycle(now, delay, start);
  // Without the target's answer every row lands with the last byte.
  Cycle landed = start;
  for (std::uint64_t r = 0; r < rows; ++r) {
    landed = per_row ? std::max(landed, std::min(lands[r], sent.last)) : sent.last;
    lands[r] = r + 1 == rows ? sent.last : landed;
  }
  return sent;
}

}  // namespace tpu::model
