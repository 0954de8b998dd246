// The Python side's way into a C op library: a call frame that turns one call's Python arguments
// into the C arguments of a DIOPI function (dipu/diopi/c_library.py makes the call itself with
// ctypes, whose libffi knows the platform's calling convention) and owns everything those
// arguments point to until the call's results are taken. See Note [The Python trampoline].
#include "diopi_rt.h"

#include "python.h"

#include <torch/csrc/Dtype.h>
#include <torch/csrc/MemoryFormat.h>
#include <torch/csrc/autograd/python_variable.h>

#include <deque>

namespace dipu::diopi {
namespace {

// One C parameter's form, as c_library.py spells it (one letter per C parameter, from the proto's
// C form: Note [The C form of a proto function] in dipu/diopi/c_form.py).
//   T/O tensor read/written (None: null)   A allocated output (a one-element list to fill)
//   L/M tensor list read/written           n the length of the run of lists before it (no Python argument)
//   S/R Scalar (None: null) / Scalar list  i/I int / optional int (by pointer)
//   f/F double / optional double           b/B bool / optional bool
//   z/Z size list by value / by pointer    s string (None: null)
//   d/D dtype / optional dtype             g generator (None: the device's default)
//   r reduction  m rounding mode  e memory format
//   P allocated outputs, one per element of the function's lists (the _foreach_ functions' outs;
//     a one-element list to fill with the list of them)
class Frame {
 public:
  explicit Frame(int device) : ctx_(static_cast<c10::DeviceIndex>(device)) {}

  py::list marshal(const std::string& codes, const py::tuple& args) {
    py::list words;
    size_t next = 0;
    // Consecutive lists share one length (Note [The C form of a proto function]): the first list's, as the C++
    // wrappers pass it. A later list of the run may be empty (the fused SGD's momentum buffers without momentum,
    // the fused Adam's max_exp_avg_sqs without amsgrad): it is NULL, and the run keeps its length.
    int64_t run_length = 0;
    bool in_run = false;
    auto list_length = [&](size_t size) {
      if (!in_run) run_length = static_cast<int64_t>(size);
      in_run = true;
    };
    for (char code : codes) {
      if (code == 'n') {
        words.append(run_length);
        in_run = false;
        continue;
      }
      TORCH_CHECK(next < args.size(), "DIOPI call: ", args.size(), " arguments for the C form '", codes, "'");
      py::handle value = args[next++];
      switch (code) {
        case 'T':
        case 'O': words.append(address(tensor_handle(value))); break;
        case 'A': {
          TORCH_CHECK(py::isinstance<py::list>(value), "DIOPI call: an allocated output takes a one-element list");
          slots_.push_back(nullptr);
          words.append(address(&slots_.back()));
          break;
        }
        case 'P': {
          TORCH_CHECK(py::isinstance<py::list>(value), "DIOPI call: allocated outputs take a one-element list");
          pending_lists_.emplace_back(py::len(words), &slot_lists_.emplace_back());
          words.append(0);
          break;
        }
        case 'L':
        case 'M': {
          auto& handles = handle_lists_.emplace_back();
          for (py::handle item : value) handles.push_back(tensor_handle(item));
          list_length(handles.size());
          words.append(handles.empty() ? 0 : address(handles.data()));  // an empty list is NULL, 0 long
          break;
        }
        case 'S': words.append(value.is_none() ? 0 : address(&scalars_.emplace_back(to_scalar(value)))); break;
        case 'R': {
          auto& list = scalar_lists_.emplace_back();
          for (py::handle item : value) list.push_back(to_scalar(item));
          list_length(list.size());
          words.append(list.empty() ? 0 : address(list.data()));
          break;
        }
        case 'i': words.append(value.cast<int64_t>()); break;
        case 'I': words.append(value.is_none() ? 0 : address(&ints_.emplace_back(value.cast<int64_t>()))); break;
        case 'f': words.append(value.cast<double>()); break;
        case 'F': words.append(value.is_none() ? 0 : address(&doubles_.emplace_back(value.cast<double>()))); break;
        case 'b': words.append(value.cast<bool>()); break;
        case 'B': words.append(value.is_none() ? 0 : address(&bools_.emplace_back(value.cast<bool>()))); break;
        case 'z': words.append(address(&sizes_.emplace_back(to_size(value)))); break;
        case 'Z': words.append(value.is_none() ? 0 : address(&sizes_.emplace_back(to_size(value)))); break;
        case 's':
          words.append(value.is_none() ? 0 : address(strings_.emplace_back(value.cast<std::string>()).c_str()));
          break;
        case 'd': words.append(static_cast<int>(to_dtype(value))); break;
        case 'D': words.append(value.is_none() ? 0 : address(&dtypes_.emplace_back(to_dtype(value)))); break;
        case 'g': {
          auto& generator =
              generators_.emplace_back(value.is_none() ? default_generator(ctx_.device) : value.cast<at::Generator>());
          words.append(address(handle(generator)));
          break;
        }
        case 'r': words.append(value.cast<int64_t>()); break;
        case 'm': words.append(static_cast<int>(rounding_mode(value))); break;
        case 'e': words.append(static_cast<int>(memory_format(value))); break;
        default: TORCH_CHECK(false, "DIOPI call: unknown C form letter '", code, "' in '", codes, "'");
      }
    }
    TORCH_CHECK(next == args.size(), "DIOPI call: ", args.size(), " arguments for the C form '", codes, "'");
    // Lists of allocated outputs have the length of the lists, known only now.
    for (auto& [word, outputs] : pending_lists_) {
      outputs->assign(static_cast<size_t>(run_length), nullptr);
      words[word] = address(outputs->data());
    }
    return words;
  }

  uintptr_t context() { return address(handle(ctx_)); }

  // The tensors the library stored in the `index`-th list of allocated outputs.
  std::vector<at::Tensor> allocated_list(size_t index) const {
    TORCH_CHECK(index < slot_lists_.size(), "DIOPI call: no list of allocated outputs ", index);
    std::vector<at::Tensor> result;
    for (diopiTensorHandle_t slot : slot_lists_[index]) {
      TORCH_CHECK(slot, "DIOPI call: the library left an allocated output of a list unset");
      result.push_back(tensor(slot));
    }
    return result;
  }

  // The tensor the library stored in the `index`-th allocated output (None if it stored none).
  std::optional<at::Tensor> allocated(size_t index) const {
    TORCH_CHECK(index < slots_.size(), "DIOPI call: no allocated output ", index);
    if (!slots_[index]) return std::nullopt;
    return tensor(slots_[index]);
  }

 private:
  template <typename T>
  static uintptr_t address(T* pointer) {
    return reinterpret_cast<uintptr_t>(pointer);
  }

  diopiTensorHandle_t tensor_handle(py::handle value) {
    if (value.is_none()) return nullptr;
    TORCH_CHECK_TYPE(THPVariable_Check(value.ptr()), "DIOPI call: expected a Tensor, got ",
                     py::str(py::type::of(value)).cast<std::string>());
    return handle(tensors_.emplace_back(THPVariable_Unpack(value.ptr())));
  }

  static diopiScalar_t to_scalar(py::handle value) {
    if (THPVariable_Check(value.ptr())) return scalar(THPVariable_Unpack(value.ptr()).item());
    if (py::isinstance<py::bool_>(value)) return scalar(at::Scalar(value.cast<bool>()));
    if (py::isinstance<py::int_>(value)) return scalar(at::Scalar(value.cast<int64_t>()));
    return scalar(at::Scalar(value.cast<double>()));
  }

  diopiSize_t to_size(py::handle value) {
    auto& values = int_lists_.emplace_back();
    if (!value.is_none())
      for (py::handle item : value) values.push_back(item.cast<int64_t>());
    return value.is_none() ? diopiSize_t{nullptr, 0} : dipu::diopi::size(values);
  }

  static diopiDtype_t to_dtype(py::handle value) {
    TORCH_CHECK_TYPE(THPDtype_Check(value.ptr()), "DIOPI call: expected a torch.dtype");
    return diopi_dtype(reinterpret_cast<THPDtype*>(value.ptr())->scalar_type);
  }

  static diopiRoundMode_t rounding_mode(py::handle value) {
    if (value.is_none()) return RoundModeNone;
    auto mode = value.cast<std::string>();
    if (mode == "trunc") return RoundModeTrunc;
    TORCH_CHECK(mode == "floor", "DIOPI call: unknown rounding mode '", mode, "'");
    return RoundModeFloor;
  }

  static diopiMemoryFormat_t memory_format(py::handle value) {
    if (value.is_none()) return Preserve;
    TORCH_CHECK_TYPE(THPMemoryFormat_Check(value.ptr()), "DIOPI call: expected a torch.memory_format");
    switch (reinterpret_cast<THPMemoryFormat*>(value.ptr())->memory_format) {
      case at::MemoryFormat::Contiguous: return Contiguous;
      case at::MemoryFormat::ChannelsLast: return ChannelsLast;
      case at::MemoryFormat::ChannelsLast3d: return ChannelsLast3d;
      default: return Preserve;
    }
  }

  Context ctx_;
  // Deques throughout: what a C argument points to never moves while the frame grows.
  std::deque<at::Tensor> tensors_;
  std::deque<diopiTensorHandle_t> slots_;
  std::deque<std::vector<diopiTensorHandle_t>> slot_lists_;
  std::vector<std::pair<size_t, std::vector<diopiTensorHandle_t>*>> pending_lists_;  // (word, list)
  std::deque<std::vector<diopiTensorHandle_t>> handle_lists_;
  std::deque<diopiScalar_t> scalars_;
  std::deque<std::vector<diopiScalar_t>> scalar_lists_;
  std::deque<int64_t> ints_;
  std::deque<double> doubles_;
  std::deque<bool> bools_;
  std::deque<std::vector<int64_t>> int_lists_;
  std::deque<diopiSize_t> sizes_;
  std::deque<std::string> strings_;
  std::deque<diopiDtype_t> dtypes_;
  std::deque<at::Generator> generators_;
};

}  // namespace

void register_diopi_python(py::module& m) {
  py::class_<Frame>(m, "DiopiFrame")
      .def(py::init<int>())
      .def("marshal", &Frame::marshal)
      .def("context", &Frame::context)
      .def("allocated", &Frame::allocated)
      .def("allocated_list", &Frame::allocated_list);
  m.def("load_c_library", [](const std::string& path) { return reinterpret_cast<uintptr_t>(load_c_library(path).dl); });
  m.def("c_library_symbol", [](const std::string& name) -> uintptr_t {
    const CLibrary* library = c_library();
    return library ? reinterpret_cast<uintptr_t>(library->find(name.c_str())) : 0;
  });
  m.def("c_library_last_error", [] {
    const CLibrary* library = c_library();
    return library ? library->last_error_text() : std::string();
  });
}

}  // namespace dipu::diopi
