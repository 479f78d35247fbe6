/* SPDX-License-Identifier: BSD-3-Clause */
// p2pkit._c10d: the backend's Python face. ProcessGroupP2PKit derives
// from torch's Backend class (torch._C._distributed_c10d.Backend) and its
// Options from Backend.Options, so torch takes them where it takes
// ProcessGroupNCCL's; p2pkit/torch_backend.py registers the backend.
#include <torch/csrc/utils/pybind.h>

#include "backend.hpp"

namespace py = pybind11;

namespace {

// The holder of a backend object: a reference it drops with the GIL
// released (dropping the last one ends the group's CUDA objects), as torch
// holds its own backends. Its base's holder is torch's own such holder:
// pybind11 asks only that both be custom holders.
template <typename T>
class GilFreeHolder {
 public:
  GilFreeHolder() = default;
  GilFreeHolder(const GilFreeHolder&) = default;
  GilFreeHolder(GilFreeHolder&&) noexcept = default;
  GilFreeHolder& operator=(const GilFreeHolder&) = default;
  GilFreeHolder& operator=(GilFreeHolder&&) noexcept = default;
  /* implicit */ GilFreeHolder(c10::intrusive_ptr<T> p) : p_(std::move(p)) {}
  // pybind11 builds a holder from a raw pointer it was handed to own.
  explicit GilFreeHolder(T* raw) : p_(c10::intrusive_ptr<T>::unsafe_steal_from_new(raw)) {}
  ~GilFreeHolder() {
    if (!p_) return;
    if (PyGILState_Check()) {
      py::gil_scoped_release released;
      p_.reset();
    } else {
      p_.reset();
    }
  }
  T* get() const noexcept { return p_.get(); }
  T& operator*() const noexcept { return *p_; }
  T* operator->() const noexcept { return p_.get(); }

 private:
  c10::intrusive_ptr<T> p_;
};

}  // namespace

PYBIND11_DECLARE_HOLDER_TYPE(T, GilFreeHolder<T>, true)

namespace {

using p2pkit_torch::ProcessGroupP2PKit;
using Options = ProcessGroupP2PKit::Options;

// The creator torch calls (extended API): its DistributedBackendOptions as
// plain values, and pg_options (an Options, copied: the caller's stays as
// it was).
GilFreeHolder<ProcessGroupP2PKit> make(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, double timeout_s,
                                       const std::vector<int64_t>& global_ranks,
                                       const std::string& group_name,
                                       const c10::intrusive_ptr<Options>& options) {
  auto o = options ? c10::make_intrusive<Options>(*options) : c10::make_intrusive<Options>();
  o->timeout = p2pkit_torch::group_timeout(
      std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0)));
  o->group_name = group_name;
  std::vector<uint64_t> g(global_ranks.begin(), global_ranks.end());
  o->global_ranks_in_group = g;
  return ProcessGroupP2PKit::create(store, rank, size, o, global_ranks);
}

}  // namespace

PYBIND11_MODULE(_c10d, m) {
  m.doc() = "p2pkit's torch.distributed backend (a c10d::Backend over libp2pkit)";
  auto backend = py::module_::import("torch._C._distributed_c10d").attr("Backend");
  (void)backend;  // torch's classes registered before ours derive from them

  auto pg = py::class_<ProcessGroupP2PKit, c10d::Backend, GilFreeHolder<ProcessGroupP2PKit>>(
      m, "ProcessGroupP2PKit",
      "One group of the torch.distributed backend \"p2pkit\" (docs/pytorch.md).");

  py::class_<Options, c10d::Backend::Options, c10::intrusive_ptr<Options>>(
      pg, "Options",
      "pg_options of a p2pkit group: max_blocks (the grid cap of its collective kernels, -1: "
      "P2PKIT_MAX_BLOCKS) and is_high_priority_stream (its streams at the highest priority), "
      "as ProcessGroupNCCL.Options; _timeout comes from the group's timeout=.")
      .def(py::init([](int max_blocks, bool high) {
             auto o = c10::make_intrusive<Options>();
             o->max_blocks = max_blocks;
             o->is_high_priority_stream = high;
             return o;
           }),
           py::arg("max_blocks") = -1, py::arg("is_high_priority_stream") = false)
      .def_readwrite("max_blocks", &Options::max_blocks)
      .def_readwrite("is_high_priority_stream", &Options::is_high_priority_stream)
      .def("__copy__", [](const Options& o) { return c10::make_intrusive<Options>(o); })
      .def("__deepcopy__",
           [](const Options& o, const py::dict&) { return c10::make_intrusive<Options>(o); });

  pg.def(py::init(&make), py::arg("store"), py::arg("rank"), py::arg("size"),
         py::arg("timeout_s"), py::arg("global_ranks"), py::arg("group_name"),
         py::arg("options"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("options", &ProcessGroupP2PKit::options)
      .def("perform_nocolor_split", &ProcessGroupP2PKit::performNocolorSplit,
           py::call_guard<py::gil_scoped_release>())
      .def("comm_split_count", &ProcessGroupP2PKit::commSplitCount)
      .def("_async_error", &ProcessGroupP2PKit::asyncError,
           py::call_guard<py::gil_scoped_release>(),
           "The communicator's asynchronous error now, as a line (\"\" when none).")
      .def_property_readonly("_device", &ProcessGroupP2PKit::device,
                             "The group's GPU (-1 before its communicator is made).");
}
