#include "engine/executor.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>

#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/huge_pages.h"
#include "engine/liveness.h"
#include "engine/rng.h"

namespace rl {

namespace {

// Every kernel computes in float32: a network planned in bf16 or f16 runs as its f32 copy.
void require_executable_dtype(const Graph& g) {
    const DType t = g.float_dtype();
    if (t != DType::F32)
        throw Error("network '" + g.name() + "' has " + std::string(dtype_name(t)) +
                    " activations, but the kernels compute in float32: execute the copy "
                    "Graph::with_float_dtype(DType::F32) with the same schedule (rematlab-cli "
                    "and the lab do this, and report both byte counts)");
}

}  // namespace

RunData RunData::seeded(const Graph& g, const std::vector<GivenInput>& given) {
    require_executable_dtype(g);
    // Check what was given before drawing anything.
    for (const GivenInput& in : given) {
        const auto v = g.find_value(in.name);
        if (!v || !g.value(*v).is_input())
            throw Error("given input '" + in.name + "': the network has no input of that name");
        const Value& val = g.value(*v);
        const DType given_type = in.is_indices ? DType::I32 : DType::F32;
        if (val.dtype != given_type)
            throw Error("given input '" + in.name + "': the network's input is " +
                        format_type(val.dtype, val.shape) + " but the file holds " +
                        (in.is_indices ? "integer indices" : "float32 values") +
                        (val.dtype == DType::I32
                             ? "; give integer indices (an int64 or int32 .npy)"
                             : "; give float32 values (array.astype(np.float32))"));
        const size_t count = in.is_indices ? in.indices.size() : in.values.size();
        if (in.shape != val.shape || count * dtype_size(val.dtype) != val.bytes)
            throw Error("given input '" + in.name + "' has shape " + format_dims(in.shape) +
                        " but the network's input is " + format_type(val.dtype, val.shape));
        if (in.is_indices) {
            for (size_t k = 0; k < in.indices.size(); ++k) {
                const int64_t x = in.indices[k];
                if (x >= 0 && x < val.label_classes) continue;
                std::string at;
                int64_t rest = static_cast<int64_t>(k);
                for (int a = val.shape.rank() - 1; a >= 0; --a) {
                    at = std::to_string(rest % val.shape[a]) + (at.empty() ? "" : ",") + at;
                    rest /= val.shape[a];
                }
                throw Error("given input '" + in.name + "': index " + std::to_string(x) + " at [" +
                            at + "] is out of range; its values must lie in [0, " +
                            std::to_string(val.label_classes) +
                            ") (the rows of the table it indexes, or the classes)");
            }
        }
    }
    RunData d;
    d.params.resize(static_cast<size_t>(g.num_params()));
    for (ParamId p = 0; p < g.num_params(); ++p) {
        const Param& par = g.param(p);
        if (par.init == ParamInit::Given) {
            d.params[static_cast<size_t>(p)] = par.values;
            continue;
        }
        auto buf = std::make_shared<std::vector<float>>(par.bytes / sizeof(float));
        switch (par.init) {
            case ParamInit::Ones:
                std::fill(buf->begin(), buf->end(), 1.0f);
                break;
            case ParamInit::Zeros:
                std::fill(buf->begin(), buf->end(), 0.0f);
                break;
            case ParamInit::Given:
                break;
            case ParamInit::FanInUniform: {
                SplitMix64 rng(g.seed() ^ stable_hash(par.name));
                const float scale = 1.0f / std::sqrt(static_cast<float>(par.fan_in));
                for (float& x : *buf) x = rng.symmetric() * scale;
                break;
            }
        }
        d.params[static_cast<size_t>(p)] = std::move(buf);
    }
    d.inputs.resize(g.inputs().size());
    for (size_t i = 0; i < g.inputs().size(); ++i) {
        const Value& v = g.value(g.inputs()[i]);
        auto& buf = d.inputs[i];
        buf.resize(v.bytes);
        SplitMix64 rng(g.seed() ^ stable_hash(v.name) ^ 0x5eedull);
        const size_t n = v.bytes / dtype_size(v.dtype);
        if (v.dtype == DType::F32) {
            auto* f = reinterpret_cast<float*>(buf.data());
            for (size_t k = 0; k < n; ++k) f[k] = rng.symmetric();
        } else {
            auto* l = reinterpret_cast<int32_t*>(buf.data());
            for (size_t k = 0; k < n; ++k)
                l[k] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(v.label_classes)));
        }
    }
    for (const GivenInput& in : given) {
        const ValueId id = *g.find_value(in.name);
        for (size_t i = 0; i < g.inputs().size(); ++i)
            if (g.inputs()[i] == id) {
                if (in.is_indices) {
                    auto* l = reinterpret_cast<int32_t*>(d.inputs[i].data());
                    for (size_t k = 0; k < in.indices.size(); ++k)
                        l[k] = static_cast<int32_t>(in.indices[k]);  // checked above
                } else {
                    std::memcpy(d.inputs[i].data(), in.values.data(),
                                in.values.size() * sizeof(float));
                }
            }
    }
    return d;
}

namespace {

double process_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

// Holds the buffers of a run; on an error midway its destructor returns what is still held.
class RunVisitor final : public MemoryVisitor {
  public:
    RunVisitor(const Graph& g, Backend& backend, TrackingAllocator& alloc,
               TrackingAllocator& host_alloc, const RunData& data, const Liveness& live,
               const ExecuteOptions& opt, Execution& result)
        : g_(g),
          backend_(backend),
          alloc_(alloc),
          host_alloc_(host_alloc),
          data_(data),
          live_(live),
          opt_(opt),
          result_(result) {
        act_.assign(static_cast<size_t>(g.num_values()), nullptr);
        host_.assign(static_cast<size_t>(g.num_values()), nullptr);
        ticket_.assign(static_cast<size_t>(g.num_values()), 0);
        grad_.assign(static_cast<size_t>(g.num_values()), nullptr);
        par_.assign(static_cast<size_t>(g.num_params()), nullptr);
        pgrad_.assign(static_cast<size_t>(g.num_params()), nullptr);
        size_t max_in = 0, max_par = 0;
        for (const Node& n : g.nodes()) {
            max_in = std::max(max_in, n.inputs.size());
            max_par = std::max(max_par, n.params.size());
        }
        in_ptrs_.resize(max_in);
        gin_ptrs_.resize(max_in);
        acc_.resize(max_in);
        par_ptrs_.resize(max_par);
        pgrad_ptrs_.resize(max_par);
        input_index_.assign(static_cast<size_t>(g.num_values()), -1);
        for (size_t i = 0; i < g.inputs().size(); ++i)
            input_index_[static_cast<size_t>(g.inputs()[i])] = static_cast<int>(i);
        if (opt.keep_gradients) result.param_grads.resize(static_cast<size_t>(g.num_params()));
        if (!opt.keep_outputs.empty()) {
            if (opt.keep_outputs.size() != static_cast<size_t>(g.num_nodes()))
                throw Error("keep_outputs has " + std::to_string(opt.keep_outputs.size()) +
                            " entries but the network has " + std::to_string(g.num_nodes()) +
                            " nodes");
            result.outputs.resize(static_cast<size_t>(g.num_nodes()));
        }
    }

    ~RunVisitor() override {
        // A copy still in flight (an error midway) must finish before its buffers go.
        for (uint64_t t : ticket_)
            if (t) backend_.wait_copy(t);
        for (void* p : host_)
            if (p) backend_.release_host(p);
        for (auto* table : {&act_, &grad_, &par_, &pgrad_})
            for (void* p : *table)
                if (p) backend_.release(p);
        if (workspace_) backend_.release(workspace_);
    }

    int32_t instruction = -1;
    const std::vector<uint8_t>* residual_output = nullptr;
    const std::vector<uint32_t>* residual_inputs = nullptr;
    const std::vector<uint64_t>* bwd_op_workspace = nullptr;

    void allocate(BufferRef b, uint64_t bytes) override {
        void*& slot = slot_of(b);
        const std::string& what =
            b.category == Category::Parameters || b.category == Category::ParamGrads
                ? g_.param(b.id).name
            : b.category == Category::Workspace ? g_.node(b.id).name
                                                : g_.value(b.id).name;
        slot = alloc_.allocate(bytes, b.category, instruction, what);
        if (!opt_.run_kernels) return;
        if (b.category == Category::Parameters)
            backend_.copy_from_host(slot, data_.params[static_cast<size_t>(b.id)]->data(), bytes);
        else if (b.category == Category::Inputs)
            backend_.copy_from_host(
                slot,
                data_.inputs[static_cast<size_t>(input_index_[static_cast<size_t>(b.id)])].data(),
                bytes);
        else if (b.category == Category::ActivationGrads &&
                 b.id == g_.node(g_.loss_node()).output) {
            const float one = 1.0f;
            backend_.copy_from_host(slot, &one, sizeof(float));
        }
    }

    void release(BufferRef b, uint64_t bytes) override {
        void*& slot = slot_of(b);
        if (b.category == Category::ParamGrads && opt_.run_kernels &&
            (opt_.keep_gradients || opt_.on_gradient)) {
            // Kept: into the result; only shown: through one scratch buffer, the largest
            // parameter's size.
            std::vector<float>& out = opt_.keep_gradients
                                          ? result_.param_grads[static_cast<size_t>(b.id)]
                                          : grad_scratch_;
            resize_on_huge_pages(out, bytes / sizeof(float));
            backend_.copy_to_host(out.data(), slot, bytes);
            if (opt_.on_gradient) opt_.on_gradient(b.id, out.data(), out.size());
        }
        alloc_.release(slot, bytes, b.category, instruction);
        slot = nullptr;
    }

    void host_allocate(ValueId v, uint64_t bytes) override {
        host_[static_cast<size_t>(v)] =
            host_alloc_.allocate(bytes, Category::Activations, instruction, g_.value(v).name);
    }
    void host_release(ValueId v, uint64_t bytes) override {
        void*& slot = host_[static_cast<size_t>(v)];
        host_alloc_.release(slot, bytes, Category::Activations, instruction);
        slot = nullptr;
    }
    void begin_copy(const Instruction& ins, ValueId v, uint64_t bytes) override {
        const auto vi = static_cast<size_t>(v);
        const bool to_host = ins.kind == InstrKind::Offload;
        result_.count(ins.kind, bytes);
        if (!opt_.run_kernels) return;
        ticket_[vi] = to_host ? backend_.copy_async(host_[vi], act_[vi], bytes, true)
                              : backend_.copy_async(act_[vi], host_[vi], bytes, false);
    }
    void wait_copy(const Instruction&, ValueId v) override {
        uint64_t& t = ticket_[static_cast<size_t>(v)];
        if (!t) return;
        const auto t0 = std::chrono::steady_clock::now();
        backend_.wait_copy(t);
        result_.stall_ms +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        result_.transfer_ms += backend_.take_copy_ms(t);
        t = 0;
    }

    // The output takes over the input's buffer; run_kernel finds the input there
    // (Liveness::in_place_input), and the tracking allocator releases it once, as the output.
    void hand_over(BufferRef from, BufferRef to, uint64_t) override {
        alloc_.mark(instruction);
        void*& src = slot_of(from);
        slot_of(to) = src;
        src = nullptr;
    }

    void run_kernel(const Instruction& ins, bool recompute) override {
        if (!opt_.run_kernels) return;
        const Node& n = g_.node(ins.target);
        const auto ni = static_cast<size_t>(ins.target);
        for (size_t k = 0; k < n.params.size(); ++k)
            par_ptrs_[k] = static_cast<float*>(par_[static_cast<size_t>(n.params[k])]);
        if (ins.kind == InstrKind::Compute) {
            const int in_place = live_.in_place_input();
            const ValueId moved = in_place >= 0 ? n.inputs[static_cast<size_t>(in_place)] : -1;
            for (size_t k = 0; k < n.inputs.size(); ++k)
                in_ptrs_[k] = n.inputs[k] == moved ? act_[static_cast<size_t>(n.output)]
                                                   : act_[static_cast<size_t>(n.inputs[k])];
            backend_.forward(ForwardCall{g_, n, in_ptrs_.data(), par_ptrs_.data(),
                                         act_[static_cast<size_t>(n.output)], workspace_});
            if (ins.target == g_.loss_node() && !recompute) {
                float loss = 0;
                backend_.copy_to_host(&loss, act_[static_cast<size_t>(n.output)], sizeof(float));
                result_.loss = loss;
            }
            if (!recompute && !opt_.keep_outputs.empty() && opt_.keep_outputs[ni]) {
                auto& out = result_.outputs[ni];
                out.resize(g_.value(n.output).bytes);
                backend_.copy_to_host(out.data(), act_[static_cast<size_t>(n.output)], out.size());
            }
            return;
        }
        const uint32_t mask = (*residual_inputs)[ni];
        const auto& acc = live_.accumulate_flags();
        for (size_t k = 0; k < n.inputs.size(); ++k) {
            const auto v = static_cast<size_t>(n.inputs[k]);
            in_ptrs_[k] = ((mask >> k) & 1u) ? act_[v] : nullptr;
            gin_ptrs_[k] =
                g_.value(n.inputs[k]).requires_grad ? static_cast<float*>(grad_[v]) : nullptr;
            acc_[k] = acc[k] != 0;
        }
        // A tied parameter's earlier reader writes its share into scratch (liveness.h).
        const TiedScratch tied = tied_scratch(g_, ins.target, (*bwd_op_workspace)[ni]);
        for (size_t k = 0; k < n.params.size(); ++k)
            pgrad_ptrs_[k] =
                tied.offset[k] < 0
                    ? static_cast<float*>(pgrad_[static_cast<size_t>(n.params[k])])
                    : reinterpret_cast<float*>(static_cast<char*>(workspace_) + tied.offset[k]);
        const void* out = (*residual_output)[ni] ? act_[static_cast<size_t>(n.output)] : nullptr;
        backend_.backward(BackwardCall{
            g_, n, in_ptrs_.data(), out, par_ptrs_.data(),
            static_cast<const float*>(grad_[static_cast<size_t>(n.output)]), gin_ptrs_.data(),
            reinterpret_cast<const bool*>(acc_.data()), pgrad_ptrs_.data(), workspace_});
        for (size_t k = 0; k < n.params.size(); ++k)
            if (tied.offset[k] >= 0) {
                const Param& p = g_.param(n.params[k]);
                backend_.add_into(static_cast<float*>(pgrad_[static_cast<size_t>(n.params[k])]),
                                  pgrad_ptrs_[k], p.shape.numel());
            }
    }

  private:
    void*& slot_of(BufferRef b) {
        switch (b.category) {
            case Category::Parameters:
                return par_[static_cast<size_t>(b.id)];
            case Category::ParamGrads:
                return pgrad_[static_cast<size_t>(b.id)];
            case Category::Inputs:
            case Category::Activations:
                return act_[static_cast<size_t>(b.id)];
            case Category::ActivationGrads:
                return grad_[static_cast<size_t>(b.id)];
            case Category::Workspace:
            case Category::Count:
                break;
        }
        return workspace_;
    }

    const Graph& g_;
    Backend& backend_;
    TrackingAllocator& alloc_;
    TrackingAllocator& host_alloc_;  // the host pool of offloaded values
    const RunData& data_;
    const Liveness& live_;
    const ExecuteOptions& opt_;
    Execution& result_;
    std::vector<void*> act_, grad_, par_, pgrad_;
    std::vector<float> grad_scratch_;  // a gradient on its way to on_gradient
    std::vector<void*> host_;          // per value: its host buffer while offloaded
    std::vector<uint64_t> ticket_;     // per value: its copy in flight (0: none)
    void* workspace_ = nullptr;
    std::vector<const void*> in_ptrs_;
    std::vector<float*> gin_ptrs_, par_ptrs_, pgrad_ptrs_;
    std::vector<unsigned char> acc_;  // bool-sized flags (not vector<bool>)
    std::vector<int> input_index_;
};

}  // namespace

Execution execute(const Graph& g, const Schedule& s, Backend& backend, const RunData& data,
                  const ExecuteOptions& opt) {
    static_assert(sizeof(bool) == sizeof(unsigned char));
    require_executable_dtype(g);
    if (opt.run_kernels && (data.params.size() != static_cast<size_t>(g.num_params()) ||
                            data.inputs.size() != g.inputs().size()))
        throw Error("run data does not match the network: expected " +
                    std::to_string(g.num_params()) + " parameters and " +
                    std::to_string(g.inputs().size()) + " inputs");
    const LivenessTables t(g);
    Execution result;
    TrackingAllocator alloc(backend, opt.cap);
    alloc.set_record_timeline(opt.record_timeline);
    TrackingAllocator host_alloc(backend, 0, /*host=*/true);
    host_alloc.set_record_timeline(false);
    Liveness live(g, t, s);
    RunVisitor v(g, backend, alloc, host_alloc, data, live, opt, result);
    v.residual_inputs = &t.residual_inputs;
    v.residual_output = &t.residual_output;
    v.bwd_op_workspace = &t.bwd_op_workspace;
    result.instruction_ms.resize(s.size());

    auto cap_context = [&](long i, const CapExceeded& e) {
        CapExceeded::Details d = e.details() ? *e.details() : CapExceeded::Details{};
        d.instruction = i;
        d.cap = opt.cap;
        d.timeline = alloc.timeline();
        if (i < 0)
            for (TimelinePoint& p : d.timeline) p.time_ms = 0;  // set-up events sit at time 0
        return CapExceeded("memory cap exceeded " +
                               (i >= 0 && static_cast<size_t>(i) < s.size()
                                    ? "at instruction " + std::to_string(i) + " (" +
                                          describe(g, s.code[static_cast<size_t>(i)]) + ")"
                                    : std::string("before the first instruction, while loading the "
                                                  "parameters and inputs")) +
                               ": " + e.what() +
                               "; raise the cap or choose a strategy with a lower peak",
                           std::move(d));
    };
    try {
        live.begin(v);
    } catch (const CapExceeded& e) {
        throw cap_context(-1, e);
    }
    backend.synchronize();
    const double cpu0 = process_cpu_ms();
    const auto t0 = std::chrono::steady_clock::now();
    alloc.reset_epoch(t0);  // the timeline's clock is the step's: every event within total_ms
    auto last = t0;
    for (size_t i = 0; i < s.size(); ++i) {
        if (opt.cancel && opt.cancel->load(std::memory_order_relaxed)) throw Cancelled();
        const Instruction& ins = s.code[i];
        const bool recompute = ins.kind == InstrKind::Compute && live.compute_count(ins.target) > 0;
        v.instruction = static_cast<int32_t>(i);
        backend.begin_instruction();
        try {
            live.step(static_cast<long>(i), v);
        } catch (const CapExceeded& e) {
            throw cap_context(static_cast<long>(i), e);
        }
        // Waits for the instruction; a device backend returns its time on the device (CUDA
        // events), which then replaces the host clock's.
        const double device_ms = backend.end_instruction();
        const auto now = std::chrono::steady_clock::now();
        const double ms = device_ms >= 0
                              ? device_ms
                              : std::chrono::duration<double, std::milli>(now - last).count();
        last = now;
        result.instruction_ms[i] = ms;
        if (ins.kind == InstrKind::Compute)
            (recompute ? result.recompute_ms : result.forward_ms) += ms;
        else if (ins.kind == InstrKind::Backward)
            result.backward_ms += ms;
        if (opt.observer)
            opt.observer->on_instruction(
                static_cast<long>(i), alloc.live_bytes(),
                std::chrono::duration<double, std::milli>(now - t0).count());
    }
    result.total_ms = std::chrono::duration<double, std::milli>(last - t0).count();
    result.cpu_ms = process_cpu_ms() - cpu0;
    v.instruction = -1;
    alloc.stop_clock_at(result.total_ms);
    live.end(static_cast<long>(s.size()), v);
    result.peak_bytes = alloc.peak_bytes();
    result.host_peak_bytes = host_alloc.peak_bytes();
    result.peak_instruction = alloc.peak_instruction();
    for (int c = 0; c < kNumCategories; ++c)
        result.peak_by_category[static_cast<size_t>(c)] =
            alloc.peak_bytes(static_cast<Category>(c));
    result.timeline = alloc.timeline();
    return result;
}

}  // namespace rl
