// The collectives of a C runtime plug-in (the xccl_* group of custom_runtime.h), for dicl's
// dipu.distributed.xccl.XcclCommunicator.
//
// Note [Collectives on a plug-in's streams]
// Each communicator owns one stream of its device's pool (Note [Stream ids]), as ProcessGroupNCCL
// owns an NCCL stream: a collective makes that stream wait for an event recorded on the caller's
// current stream (so it reads its inputs after the kernels that wrote them), is queued on it, and
// is followed by an event of its own, which the returned XcclEvent wraps. The tensors are recorded
// as used on the communicator's stream, so the caching allocator does not hand their memory out
// again before the collective is done, whatever becomes of the work. Finishing is the caller's
// choice: the current stream waits for the event (the outputs are then ready for anything queued
// after), or the host polls it until a deadline, which is how dicl bounds a collective by the
// group's timeout on an ABI whose calls take none. A plug-in reports an asynchronous failure the
// only way the ABI lets it, through the event: synchronize_event or query_event then return an
// error status (refc fails the stream, as CUDA does).
#include "vendor_plugin.h"

#include <chrono>
#include <thread>

namespace dipu {

namespace {

bool ok(C_Status status) { return status == C_SUCCESS || status == C_WARNING; }

template <typename F>
C_Status without_gil(F call) {
  if (PyGILState_Check()) {
    py::gil_scoped_release release;
    return call();
  }
  return call();
}

class XcclEvent;

class XcclComm : public std::enable_shared_from_this<XcclComm> {
 public:
  XcclComm(const py::object& plugin, int index, size_t ranks, size_t rank, const py::bytes& unique_id)
      : p_(plugin_table(plugin)), index_(index) {
    ensure_initialized();
    TORCH_CHECK(index >= 0 && static_cast<size_t>(index) < p_.ids.size(), "dipu xccl: no device ", index);
    device_ = C_Device_st{p_.ids[static_cast<size_t>(index)]};
    set_device(static_cast<c10::DeviceIndex>(index));  // the plug-in may tie the communicator to it
    stream_ = pool_stream(c10::Device(kDipu, static_cast<c10::DeviceIndex>(index)), 0);
    handle_ = static_cast<C_Stream>(stream_native_handle(stream_));
    std::string id = unique_id;
    C_CCLRootId root{id.size(), id.data()};
    check(without_gil([&] { return p_.table->xccl_comm_init_rank(ranks, &root, rank, &comm_); }),
          "xccl_comm_init_rank");
    if (p_.table->create_event && p_.table->stream_wait_event)
      check(p_.table->create_event(&device_, &ready_), "create_event");
  }
  ~XcclComm() { destroy(); }

  static py::bytes unique_id(const py::object& plugin) {
    PluginTable p = plugin_table(plugin);
    size_t size = 0;
    check_static(p, p.table->xccl_get_unique_id_size(&size), "xccl_get_unique_id_size");
    std::string id(size, '\0');
    C_CCLRootId root{size, id.data()};
    check_static(p, p.table->xccl_get_unique_id(&root), "xccl_get_unique_id");
    return py::bytes(id);
  }

  // Releases the plug-in's communicator; one whose collective is still running is aborted.
  void destroy() {
    if (!comm_ || g_shutdown.load()) return;
    C_CCLComm comm = comm_;
    comm_ = nullptr;
    without_gil([&] { return p_.table->xccl_destroy_comm(comm); });
    if (ready_) p_.table->destroy_event(&device_, ready_);
    ready_ = nullptr;
  }

  // Queues `call` on the communicator's stream after the current stream's work; the tensors are
  // kept from reuse until it is done.
  template <typename Call>
  std::shared_ptr<XcclEvent> launch(const char* function, const std::vector<at::Tensor>& tensors, Call call);

  void check(C_Status status, const char* function) const {
    TORCH_CHECK(ok(status), "dipu: vendor '", p_.vendor, "' failed in ", function, ": it returned ",
                status_name(status));
  }
  static void check_static(const PluginTable& p, C_Status status, const char* function) {
    TORCH_CHECK(ok(status), "dipu: vendor '", p.vendor, "' failed in ", function, ": it returned ",
                status_name(status));
  }
  C_CCLComm comm() const {
    TORCH_CHECK(comm_, "dipu xccl: the communicator was destroyed");
    return comm_;
  }

  PluginTable p_;
  int index_;
  C_Device_st device_{};
  c10::Stream stream_{c10::Stream::DEFAULT, c10::Device(kDipu, 0)};
  C_Stream handle_ = nullptr;
  C_CCLComm comm_ = nullptr;
  C_Event ready_ = nullptr;
};

class XcclEvent {
 public:
  XcclEvent(std::shared_ptr<XcclComm> comm, const char* function, C_Event event)
      : comm_(std::move(comm)), function_(function), event_(event) {}
  ~XcclEvent() {
    if (event_ && !g_shutdown.load()) comm_->p_.table->destroy_event(&comm_->device_, event_);
  }

  // True once the collective is done; raises if it failed.
  bool query() {
    if (done_) return true;
    C_Status status = comm_->p_.table->query_event(&comm_->device_, event_);
    if (status == C_FAILED) return false;  // not yet
    fail_unless(status);
    return done_ = true;
  }

  // Blocks the host until the collective is done (true) or `timeout_s` has passed (false).
  bool wait_host(double timeout_s) {
    if (done_) return true;
    if (!comm_->p_.table->query_event) {  // only a blocking wait is possible
      fail_unless(without_gil([&] { return comm_->p_.table->synchronize_event(&comm_->device_, event_); }));
      return done_ = true;
    }
    py::gil_scoped_release release;
    auto start = std::chrono::steady_clock::now();
    auto pause = std::chrono::microseconds(1);
    for (int polls = 0;; ++polls) {
      C_Status status = comm_->p_.table->query_event(&comm_->device_, event_);
      if (status != C_FAILED) {
        py::gil_scoped_acquire gil;
        fail_unless(status);
        return done_ = true;
      }
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout_s) return false;
      if (polls < 200) {
        std::this_thread::yield();  // most collectives end within microseconds
      } else {
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(1000));
      }
    }
  }

  // Makes the current stream of the communicator's device wait for the collective.
  void wait_stream() {
    if (done_) return;
    auto& p = comm_->p_;
    C_Stream current = static_cast<C_Stream>(stream_native_handle(current_stream(comm_->index_)));
    if (p.table->stream_wait_event && current != comm_->handle_) {
      comm_->check(p.table->stream_wait_event(&comm_->device_, current, event_), "stream_wait_event");
    } else if (!p.table->stream_wait_event) {
      fail_unless(without_gil([&] { return p.table->synchronize_event(&comm_->device_, event_); }));
      done_ = true;
    }
  }

 private:
  void fail_unless(C_Status status) {
    TORCH_CHECK(ok(status), "dipu: vendor '", comm_->p_.vendor, "' reports that ", function_,
                " failed (its completion event returned ", status_name(status),
                "); the plug-in may have said why on stderr");
  }

  std::shared_ptr<XcclComm> comm_;
  const char* function_;
  C_Event event_;
  bool done_ = false;
};

template <typename Call>
std::shared_ptr<XcclEvent> XcclComm::launch(const char* function, const std::vector<at::Tensor>& tensors, Call call) {
  C_CCLComm comm = this->comm();
  const C_DeviceInterface& t = *p_.table;
  auto index = static_cast<c10::DeviceIndex>(index_);
  C_Stream current = static_cast<C_Stream>(stream_native_handle(current_stream(index)));
  if (current != handle_) {
    if (ready_) {
      check(t.record_event(&device_, current, ready_), "record_event");
      check(t.stream_wait_event(&device_, handle_, ready_), "stream_wait_event");
    } else {  // no stream_wait_event: the current stream's work must be done before queuing
      runtime().synchronize_stream(index_, current);
    }
  }
  for (const auto& tensor : tensors)
    if (tensor.defined() && tensor.has_storage()) record_stream(tensor.storage().data_ptr(), stream_);
  check(without_gil([&] { return call(comm, handle_); }), function);
  C_Event done = nullptr;
  check(t.create_event(&device_, &done), "create_event");
  auto event = std::make_shared<XcclEvent>(shared_from_this(), function, done);
  check(t.record_event(&device_, handle_, done), "record_event");
  return event;
}

C_DataType data_type(int value) {
  TORCH_CHECK(value > UNDEFINED && value <= COMPLEX128, "dipu xccl: no C_DataType ", value);
  return static_cast<C_DataType>(value);
}

C_CCLReduceOp reduce_op(int value) {
  TORCH_CHECK(value >= SUM && value <= PRODUCT, "dipu xccl: no C_CCLReduceOp ", value);
  return static_cast<C_CCLReduceOp>(value);
}

void* ptr(const at::Tensor& t) { return t.numel() ? t.data_ptr() : nullptr; }

}  // namespace

void register_xccl_python(py::module& m) {
  py::class_<XcclEvent, std::shared_ptr<XcclEvent>>(m, "XcclEvent",
                                                    "A queued collective (Note [Collectives on a plug-in's streams]).")
      .def("query", &XcclEvent::query)
      .def("wait_host", &XcclEvent::wait_host, py::arg("timeout_s"))
      .def("wait_stream", &XcclEvent::wait_stream);
  using Comm = std::shared_ptr<XcclComm>;
  py::class_<XcclComm, Comm>(m, "XcclComm", "A plug-in's communicator (Note [Collectives on a plug-in's streams]).")
      .def(py::init<const py::object&, int, size_t, size_t, const py::bytes&>(), py::arg("plugin"),
           py::arg("device_index"), py::arg("ranks"), py::arg("rank"), py::arg("unique_id"))
      .def_static("unique_id", &XcclComm::unique_id)
      .def("destroy", &XcclComm::destroy)
      .def("all_reduce",
           [](const Comm& c, const at::Tensor& send, const at::Tensor& recv, size_t count, int type, int op) {
             return c->launch("xccl_all_reduce", {send, recv}, [&](C_CCLComm comm, C_Stream stream) {
               return c->p_.table->xccl_all_reduce(ptr(send), ptr(recv), count, data_type(type), reduce_op(op), comm,
                                                   stream);
             });
           })
      .def("reduce",
           [](const Comm& c, const at::Tensor& send, const at::Tensor& recv, size_t count, int type, int op,
              size_t root) {
             return c->launch("xccl_reduce", {send, recv}, [&](C_CCLComm comm, C_Stream stream) {
               return c->p_.table->xccl_reduce(ptr(send), ptr(recv), count, data_type(type), reduce_op(op), root, comm,
                                               stream);
             });
           })
      .def("broadcast",
           [](const Comm& c, const at::Tensor& buf, size_t count, int type, size_t root) {
             return c->launch("xccl_broadcast", {buf}, [&](C_CCLComm comm, C_Stream stream) {
               return c->p_.table->xccl_broadcast(ptr(buf), count, data_type(type), root, comm, stream);
             });
           })
      .def("all_gather",
           [](const Comm& c, const at::Tensor& send, const at::Tensor& recv, size_t count, int type) {
             return c->launch("xccl_all_gather", {send, recv}, [&](C_CCLComm comm, C_Stream stream) {
               return c->p_.table->xccl_all_gather(ptr(send), ptr(recv), count, data_type(type), comm, stream);
             });
           })
      .def("reduce_scatter",
           [](const Comm& c, const at::Tensor& send, const at::Tensor& recv, size_t count, int type, int op) {
             return c->launch("xccl_reduce_scatter", {send, recv}, [&](C_CCLComm comm, C_Stream stream) {
               return c->p_.table->xccl_reduce_scatter(ptr(send), ptr(recv), count, data_type(type), reduce_op(op),
                                                       comm, stream);
             });
           })
      .def("send",
           [](const Comm& c, const at::Tensor& buf, size_t count, int type, size_t peer) {
             return c->launch("xccl_send", {buf}, [&](C_CCLComm comm, C_Stream stream) {
               return c->p_.table->xccl_send(ptr(buf), count, data_type(type), peer, comm, stream);
             });
           })
      .def("recv",
           [](const Comm& c, const at::Tensor& buf, size_t count, int type, size_t peer) {
             return c->launch("xccl_recv", {buf}, [&](C_CCLComm comm, C_Stream stream) {
               return c->p_.table->xccl_recv(ptr(buf), count, data_type(type), peer, comm, stream);
             });
           })
      // Chunk j of `send` (elements [send_offsets[j], +send_counts[j])) goes to rank j, and so on.
      .def("all_to_all",
           [](const Comm& c, const at::Tensor& send, const std::vector<size_t>& send_offsets,
              const std::vector<size_t>& send_counts, const at::Tensor& recv, const std::vector<size_t>& recv_offsets,
              const std::vector<size_t>& recv_counts, int type, size_t rank) {
             size_t ranks = send_counts.size(), size = send.element_size();
             std::vector<const void*> sends(ranks);
             std::vector<void*> recvs(ranks);
             std::vector<C_DataType> types(ranks, data_type(type));
             for (size_t j = 0; j < ranks; ++j) {
               sends[j] = static_cast<const char*>(send.data_ptr()) + send_offsets[j] * size;
               recvs[j] = static_cast<char*>(recv.data_ptr()) + recv_offsets[j] * size;
             }
             return c->launch("xccl_all_to_all", {send, recv}, [&](C_CCLComm comm, C_Stream stream) {
               return c->p_.table->xccl_all_to_all(sends.data(), send_counts.data(), types.data(), recvs.data(),
                                                   recv_counts.data(), types.data(), rank, ranks, comm, stream);
             });
           });
  m.def("xccl_unique_id", &XcclComm::unique_id, py::arg("plugin"));
}

}  // namespace dipu
